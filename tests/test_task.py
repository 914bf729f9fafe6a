"""A request's inbox (:class:`llama_cy.server.task.Task`): what the engine hands over is
read in batches, an empty batch (a stream's ping) after ``ping`` seconds without any,
and never while chunks keep coming."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_cy.completion import CompletionChunk
from llama_cy.server.task import Task, deliver


def _task(loop: asyncio.AbstractEventLoop) -> Task:
    job: Any = None  # the inbox needs neither a job nor samplers
    samplers: Any = (None, None)
    return Task(1, job, samplers, loop)


def _chunk(text: str, last: bool = False) -> CompletionChunk:
    return CompletionChunk(text, [0], stop_reason="stop" if last else None)


def test_pings_come_only_while_nothing_arrives() -> None:
    ping = 0.05

    async def read(gaps: list[float]) -> list[tuple[float, list[str]]]:
        """Chunks handed over after each of ``gaps`` (seconds), the last one ending the
        task: what the reader gets, and when."""
        loop = asyncio.get_running_loop()
        task = _task(loop)

        async def feed() -> None:
            for k, gap in enumerate(gaps):
                await asyncio.sleep(gap)
                deliver([(task, _chunk(str(k), last=k == len(gaps) - 1))])

        feeder = asyncio.create_task(feed())
        t0 = loop.time()
        got = [(loop.time() - t0, [c.text for c in b]) async for b in task.batches(ping)]
        await feeder
        return got

    quiet = asyncio.run(read([0.27]))  # nothing for 0.27 s, then the end
    pings = [t for t, texts in quiet if not texts]
    assert quiet[-1][1] == ["0"]
    assert 3 <= len(pings) <= 5, quiet
    assert all(b - a >= ping * 0.9 for a, b in zip([0.0, *pings], pings, strict=False)), quiet

    busy = asyncio.run(read([0.01] * 25))  # a chunk every 10 ms: never quiet for 50
    assert [texts for _, texts in busy if not texts] == [], busy
    assert [t for _, texts in busy for t in texts] == [str(k) for k in range(25)]
