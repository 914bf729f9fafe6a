"""Where the server prepares a request: a light one on the event loop (a thread trip each
way would cost more than the work), a chat on a worker thread while other requests
generate (its template's render would hold their tokens back)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

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


def _render_threads(client: TestClient) -> tuple[list[str], list[str]]:
    """Record the thread of each route call (the event loop's) and of each chat render."""
    server: Any = client.app.state.server  # type: ignore[attr-defined]
    loop: list[str] = []
    render: list[str] = []
    generating, chat = server.generating, server.preparer.chat

    def on_loop() -> Any:
        loop.append(threading.current_thread().name)
        return generating()

    def rendered(*args: Any, **kwargs: Any) -> Any:
        render.append(threading.current_thread().name)
        return chat(*args, **kwargs)

    server.generating = on_loop
    server.preparer.chat = rendered
    return loop, render


def test_a_lone_chat_is_rendered_on_the_event_loop(client: TestClient) -> None:
    loop, render = _render_threads(client)
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert len(render) == 1
    assert set(loop) == set(render)  # one thread


def test_a_chat_is_rendered_off_the_loop_while_another_request_generates(
    client: TestClient,
) -> None:
    engine: Any = client.app.state.server.engine  # type: ignore[attr-defined]
    long = {"prompt": "Once upon a time", "n_predict": 400, "ignore_eos": True}
    other = threading.Thread(target=client.post, args=("/completion",), kwargs={"json": long})
    other.start()
    try:
        deadline = time.monotonic() + 30
        while not engine.n_processing:
            assert time.monotonic() < deadline, "the long request never started"
            time.sleep(0.001)
        loop, render = _render_threads(client)
        assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
        assert engine.n_processing, "the long request ended first: nothing was generating"
        assert len(render) == 1
        assert len(set(loop)) == 1
        assert render[0] not in loop
    finally:
        other.join()
