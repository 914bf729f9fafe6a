"""Chat templates rendered on native threads for the event loop.

A render takes about a millisecond (llama.cpp's common library analyses the template
again for every request). On the loop it holds every other stream's tokens back; on a
Python worker thread it waited, while others generated, milliseconds for the GIL to
start and as long again for the loop to take the result (8 chat streams on 2 cores:
1.4 ms of work, 8 ms from the route's call to its return). :class:`ChatRenders` runs
each render on a thread of :class:`~llama_cy.chat.ChatRenderPool`, which needs the
GIL for neither, and wakes the loop through the pool's pipe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from typing import Any, TypeVar

from llama_cy.chat import ChatRender, ChatRenderPool

T = TypeVar("T")

_log = logging.getLogger("llama_cy.server")


class ChatRenders:
    """A :class:`ChatRenderPool` whose renders the running event loop awaits."""

    def __init__(self, n_threads: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._pool = ChatRenderPool(n_threads)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        # NotImplementedError on a loop that cannot watch a pipe (Windows' proactor)
        self._loop.add_reader(self._pool.fileno(), self._collect)

    @classmethod
    def start(cls, n_threads: int) -> ChatRenders | None:
        """The renders for the running loop, or None where the platform cannot run them
        (the caller then renders on a Python worker thread)."""
        try:
            return cls(n_threads)
        except (NotImplementedError, RuntimeError, OSError) as exc:
            _log.info("chat templates render on Python worker threads: %s", exc)
            return None

    def close(self) -> None:
        """Stop watching the pipe; the pool's threads end with it (after the renders
        in progress)."""
        self._loop.remove_reader(self._pool.fileno())
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()

    async def render(self, render: ChatRender) -> dict[str, Any]:
        """``render``'s result, rendered on the pool. ValueError as ``apply`` raises it."""
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._waiting[self._pool.submit(render.templates, render.request)] = future
        return await future

    async def run(self, steps: Generator[ChatRender, dict[str, Any], T]) -> T:
        """What ``steps`` returns (:func:`~llama_cy.chat.render_here`'s protocol), each
        render on the pool and the rest on the loop."""
        try:
            render = next(steps)
            while True:
                try:
                    rendered = await self.render(render)
                except ValueError as exc:
                    render = steps.throw(exc)
                else:
                    render = steps.send(rendered)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def _collect(self) -> None:
        for ticket, result in self._pool.collect():
            future = self._waiting.pop(ticket, None)
            if future is None or future.done():
                continue  # its request went away (a client that hung up)
            if isinstance(result, ValueError):
                future.set_exception(result)
            else:
                future.set_result(result)
