"""Chat renders on native threads (``ChatRenderPool``, and the server's ``ChatRenders``
over it): the same results as a render in the caller's thread, errors as ValueError,
templates kept alive while a thread reads them."""

from __future__ import annotations

import asyncio
import gc
import select
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from child import run_python

from llama_cy import LlamaModel
from llama_cy.chat import ChatRenderPool, ChatTemplate
from llama_cy.prepare import Preparer
from llama_cy.server.chat_renders import ChatRenders

#: a template that refuses one word, as a model's template refuses a role
RAISES = (
    "{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no booms here') }}"
    "{% endif %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>"
)


@pytest.fixture(scope="module")
def model(tiny_model_path: Path) -> Iterator[LlamaModel]:
    m = LlamaModel.load(tiny_model_path)
    yield m
    m.close()


def _request(template: ChatTemplate, text: str, **options: Any) -> dict[str, Any]:
    return template.request([{"role": "user", "content": text}], **options)


def _collect_all(pool: ChatRenderPool, n: int) -> dict[int, Any]:
    """Wait on the pool's pipe, as an event loop does, until ``n`` renders are in."""
    out: dict[int, Any] = {}
    while len(out) < n:
        ready, _, _ = select.select([pool.fileno()], [], [], 60)
        assert ready, "no render finished within 60 s"
        out.update(pool.collect())
    return out


def test_a_pooled_render_is_the_callers_render(model: LlamaModel) -> None:
    template = ChatTemplate(model)
    other = ChatTemplate(None, RAISES)
    pool = ChatRenderPool(3)
    requests = [
        (t, _request(t, f"message {i} " * i, add_generation_prompt=i % 2 == 0))
        for i in range(40)
        for t in (template, other)
    ]
    tickets = {pool.submit(t.templates, r): (t, r) for t, r in requests}
    assert len(tickets) == len(requests)  # one ticket each
    done = _collect_all(pool, len(requests))
    assert set(done) == set(tickets)
    for ticket, (t, r) in tickets.items():
        assert done[ticket] == t.templates.apply(r)
        assert t.prompt(r, done[ticket]) == t.apply(r["messages"], **_options(r))
    assert pool.collect() == []  # each render once


def _options(request: dict[str, Any]) -> dict[str, Any]:
    return {"add_generation_prompt": request["add_generation_prompt"]}


def test_a_render_that_fails_comes_back_as_its_error(model: LlamaModel) -> None:
    template = ChatTemplate(None, RAISES)
    pool = ChatRenderPool(1)
    good = pool.submit(template.templates, _request(template, "fine"))
    bad = pool.submit(template.templates, _request(template, "boom"))
    done = _collect_all(pool, 2)
    assert isinstance(done[good], dict)
    assert isinstance(done[bad], ValueError)
    assert "no booms here" in str(done[bad])
    with pytest.raises(ValueError, match="no booms here"):
        template.apply([{"role": "user", "content": "boom"}])


def test_templates_live_while_their_render_runs(model: LlamaModel) -> None:
    pool = ChatRenderPool(2)
    expected = {}
    for i in range(20):
        template = ChatTemplate(model)
        request = _request(template, f"turn {i}")
        expected[pool.submit(template.templates, request)] = template.templates.apply(request)
        del template  # the pool holds its templates until the render is collected
    gc.collect()
    assert _collect_all(pool, 20) == expected


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least 1 thread"):
        ChatRenderPool(0)


def test_a_pool_dropped_with_renders_in_flight_ends_cleanly(tiny_model_path: Path) -> None:
    done = run_python(
        """
        import sys
        from llama_cy import LlamaModel
        from llama_cy._chat import ChatRenderPool
        from llama_cy.chat import ChatTemplate

        model = LlamaModel.load(sys.argv[1])
        template = ChatTemplate(model)
        for round in range(5):
            pool = ChatRenderPool(4)
            for i in range(50):
                request = template.request([{"role": "user", "content": "hello " * i}])
                pool.submit(template.templates, request)
            del pool  # the renders not started are dropped, those running finish
        print("prompt:", template.apply([{"role": "user", "content": "still here"}]).prompt)
        """,
        str(tiny_model_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "still here" in done.stdout


def test_the_servers_renders_prepare_the_same_job_as_the_preparer(model: LlamaModel) -> None:
    preparer = Preparer(model)
    messages = [{"role": "user", "content": "The printing press"}]

    async def main() -> None:
        renders = ChatRenders.start(2)
        assert renders is not None  # a POSIX pipe on this platform
        try:
            job = await renders.run(preparer.chat_steps(messages, max_tokens=7, temperature=0))
            assert job == preparer.chat(messages, max_tokens=7, temperature=0)
            failing = Preparer(model, chat_template=RAISES)
            boom = [{"role": "user", "content": "boom"}]
            with pytest.raises(ValueError, match="no booms here"):
                await renders.run(failing.chat_steps(boom))
            with pytest.raises(ValueError, match="no booms here"):
                failing.chat(boom)
            # Many at once: each caller gets its own render back.
            texts = [f"question {i}" for i in range(24)]
            jobs = await asyncio.gather(
                *(renders.run(preparer.chat_steps([{"role": "user", "content": t}])) for t in texts)
            )
            for t, j in zip(texts, jobs, strict=True):
                assert j.chat is not None
                assert t in j.chat.prompt
        finally:
            renders.close()

    asyncio.run(main())


def test_a_loop_that_cannot_watch_a_pipe_gets_no_native_renders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> ChatRenders | None:
        loop = asyncio.get_running_loop()

        def refuse(*args: Any) -> None:
            raise NotImplementedError("this loop watches no pipes")

        monkeypatch.setattr(loop, "add_reader", refuse)
        return ChatRenders.start(2)

    assert asyncio.run(main()) is None
