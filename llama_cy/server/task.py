"""A request in the engine (:class:`Task`) and the way its chunks reach the event loop
that serves it: the engine thread hands each loop what a step produced in one call
(:func:`deliver`), and the request's reader takes everything that arrived at once
(:meth:`Task.batches`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from llama_cy._sampler import LlamaSampler
from llama_cy.completion import CompletionChunk
from llama_cy.generation import Job

__all__ = ["Task", "deliver", "deliver_then"]


@dataclass(eq=False)
class Task:
    """One request: its job, its samplers, and the inbox its chunks go to."""

    id: int
    job: Job
    samplers: tuple[LlamaSampler, LlamaSampler | None]
    loop: asyncio.AbstractEventLoop
    #: what reached the event loop and was not read yet: chunks, or the error that ends
    #: the task (a list and a future, not an asyncio.Queue: at GPU token rates the
    #: queue's and wait_for's machinery cost more than the rest of a streamed token)
    inbox: list[CompletionChunk | BaseException] = field(default_factory=list)
    waiter: asyncio.Future[None] | None = None
    created: float = field(default_factory=time.perf_counter)
    cancelled: bool = False
    cache_prompt: bool = True
    cache_reuse: int = 0  #: --cache-reuse / n_cache_reuse: the least chunk shifted into place
    id_slot: int = -1
    slot: int = -1
    #: the scale of each of the engine's LoRA adapters for this request
    lora: tuple[float, ...] = ()
    #: the chunks go to the inbox all at once when the task ends (an answer sent whole:
    #: its event loop wakes once for it, not once a step)
    whole: bool = False
    held: list[CompletionChunk] = field(default_factory=list)
    #: a chunk of it has been handed to its event loop
    answered: bool = False

    def put(self, item: CompletionChunk | BaseException) -> None:
        """``item`` into the inbox, waking the reader (on the task's event loop)."""
        self.inbox.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def batches(self, ping: float | None) -> AsyncGenerator[list[CompletionChunk], None]:
        """The chunks as they arrive, every one that arrived together in one list (an
        empty list after ``ping`` seconds without any), until the last one; an error
        that arrives is raised after the chunks before it. On the task's event loop."""
        loop = self.loop
        while True:
            if not self.inbox:
                waiter = self.waiter = loop.create_future()
                timer = None if ping is None else loop.call_later(ping, _wake, waiter)
                try:
                    await waiter
                finally:
                    self.waiter = None
                    if timer is not None:
                        timer.cancel()
                if not self.inbox:  # only with a ping
                    yield []
                    continue
            items, self.inbox = self.inbox, []
            done: list[CompletionChunk] = []
            for item in items:
                if isinstance(item, BaseException):
                    if done:
                        yield done
                    raise item
                done.append(item)
                if item.stop_reason is not None:
                    yield done
                    return
            yield done


def deliver(items: list[tuple[Task, Any]]) -> None:
    """Each item into its task's inbox (called on the tasks' event loop)."""
    for task, item in items:
        task.put(item)


def deliver_then(items: list[tuple[Task, Any]], done: threading.Event) -> None:
    """:func:`deliver`, then set ``done`` once the readers it woke have had their turn
    (their callbacks were queued before this one's): what they send at once is written
    (a reader that awaits other work first, such as a worker thread, is not waited for)."""
    deliver(items)
    asyncio.get_running_loop().call_soon(done.set)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
