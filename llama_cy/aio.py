"""The async bridge: blocking generators consumed from an asyncio event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

__all__ = ["in_thread"]

_T = TypeVar("_T")


async def in_thread(items: Iterator[_T]) -> AsyncIterator[_T]:
    """Run a blocking generator in a worker thread; its items arrive in the event loop.
    Leaving early stops the generator at its next item (and closes it)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()
    cancel = threading.Event()

    def post(done: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (done, value))
        except RuntimeError:  # the loop has closed: nobody is listening any more
            cancel.set()

    def work() -> None:
        try:
            for item in items:
                post(False, item)
                if cancel.is_set():
                    break
        except BaseException as exc:
            post(True, exc)
        else:
            post(True, None)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=work, name="llama_cy-generate", daemon=True)
    thread.start()
    try:
        while True:
            done, value = await queue.get()
            if done:
                if value is not None:
                    raise value
                return
            yield value
    finally:
        cancel.set()
