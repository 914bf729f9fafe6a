"""Where the server prepares a request: a light one on the event loop (a thread trip each
way would cost more than the work), but a chat's render on a native thread while other
requests generate (it would hold their tokens back, and a Python thread would wait for
the GIL and for the loop)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from llama_cy._chat import ChatTemplates
from llama_cy.server.app import create_app
from llama_cy.server.settings import ServerSettings, load_model

CHAT = {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 1}


@pytest.fixture
def client(tiny_model_path: Path) -> Iterator[TestClient]:
    settings = ServerSettings(model=str(tiny_model_path), ctx_size=1024, parallel=2, threads=1)
    model = load_model(settings)
    try:
        with TestClient(create_app(model, settings)) as client:
            yield client
    finally:
        model.close()


class _SpyTemplates(ChatTemplates):
    """The model's templates, recording the Python threads that render with them (a
    native render thread reads them without calling Python)."""

    threads: list[str]

    def apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        return super().apply(request)


def _render_threads(client: TestClient) -> tuple[list[str], list[str]]:
    """Record the thread of each route call (the event loop's) and of each chat render
    done in Python."""
    server: Any = client.app.state.server  # type: ignore[attr-defined]
    loop: list[str] = []
    generating = server.generating

    def on_loop() -> Any:
        loop.append(threading.current_thread().name)
        return generating()

    template = server.preparer.template
    spy = _SpyTemplates(server.model)
    spy.threads = []
    template._tmpls = spy
    server.generating = on_loop
    return loop, spy.threads


@contextlib.contextmanager
def _generating(client: TestClient) -> Iterator[Any]:
    """While a long ``/completion`` generates (on another thread): the engine."""
    engine: Any = client.app.state.server.engine  # type: ignore[attr-defined]
    long = {"prompt": "Once upon a time", "n_predict": 400, "ignore_eos": True}
    other = threading.Thread(target=client.post, args=("/completion",), kwargs={"json": long})
    other.start()
    try:
        deadline = time.monotonic() + 30
        while not engine.n_processing:
            assert time.monotonic() < deadline, "the long request never started"
            time.sleep(0.001)
        yield engine
    finally:
        other.join()


def test_a_lone_chat_is_rendered_on_the_event_loop(client: TestClient) -> None:
    loop, render = _render_threads(client)
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert len(render) == 1
    assert set(loop) == set(render)  # one thread


def test_a_chat_is_rendered_on_a_native_thread_while_another_request_generates(
    client: TestClient,
) -> None:
    server: Any = client.app.state.server  # type: ignore[attr-defined]
    assert server.chat_renders is not None  # this platform has the native threads
    with _generating(client) as engine:
        loop, render = _render_threads(client)
        reply = client.post("/v1/chat/completions", json=CHAT)
        assert reply.status_code == 200
        assert engine.n_processing, "the long request ended first: nothing was generating"
        assert loop  # the route ran
        assert render == []  # rendered, but not by Python
        assert reply.json()["usage"]["prompt_tokens"] > 3  # the rendered chat, tokenized


#: a template that refuses one word, as a model's template refuses a role
_RAISES = (
    "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no booms here') }}"
    "{% endif %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
)


def test_a_render_that_fails_on_a_native_thread_answers_as_on_the_loop(
    tiny_model_path: Path,
) -> None:
    settings = ServerSettings(
        model=str(tiny_model_path), ctx_size=1024, parallel=2, threads=1, chat_template=_RAISES
    )
    model = load_model(settings)
    boom = {"messages": [{"role": "user", "content": "boom"}], "max_tokens": 1}
    try:
        with TestClient(create_app(model, settings)) as client:
            alone = client.post("/v1/chat/completions", json=boom)
            assert alone.status_code == 400
            assert "no booms here" in alone.text
            with _generating(client) as engine:
                busy = client.post("/v1/chat/completions", json=boom)
                assert engine.n_processing, "the long request ended first"
                assert busy.status_code == alone.status_code
                assert busy.json() == alone.json()
                fine = {**boom, "messages": [{"role": "user", "content": "fine"}]}
                assert client.post("/v1/chat/completions", json=fine).status_code == 200
    finally:
        model.close()
