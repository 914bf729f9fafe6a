"""The server's engine: continuous batching over the slots of one context.

N slots share one :class:`~llama_cy.LlamaContext` (``n_seq_max = N``; slot ``i`` owns
sequence ``i`` of the KV cache). One scheduler thread builds a single batch per step
from every busy slot (the token each generating slot sampled last, then prompt chunks
while room is left), decodes it once with the GIL released, samples each slot with its
own sampler chain and hands the text to that slot's client. A new request joins at the
next step; a slot keeps its tokens in the KV cache after a request, so a later request
that shares a prefix with them (a chat's next turn) decodes only what is new.

Requests are :class:`~llama_cy.llama.Prepared` by the ``Llama`` that owns the context,
so prompts, chat templates, grammars and response shapes are exactly ``Llama``'s.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from llama_cy._batch import LlamaBatch
from llama_cy._sampler import LlamaSampler
from llama_cy.completion import CompletionChunk, Timings
from llama_cy.errors import ContextOverflowError, LlamaError
from llama_cy.llama import Llama, Prepared
from llama_cy.sampling import build_sampler
from llama_cy.streaming import Generation

__all__ = ["Engine", "QueueFullError", "Task"]

_log = logging.getLogger("llama_cy.server")


class QueueFullError(LlamaError, RuntimeError):
    """Every slot is busy and the waiting queue is full (the server answers 503)."""


@dataclass(eq=False)
class Task:
    """One request: its prepared job, its sampler, and the queue its chunks go to."""

    id: int
    job: Prepared
    chain: LlamaSampler
    grammar: LlamaSampler | None
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[CompletionChunk | BaseException] = field(default_factory=asyncio.Queue)
    created: float = field(default_factory=time.perf_counter)
    cancelled: bool = False
    cache_prompt: bool = True
    slot: int = -1


class Slot:
    """One sequence of the context and the request it serves."""

    __slots__ = (
        "cache",
        "gen",
        "i_batch",
        "id",
        "last_used",
        "n_cached",
        "t_prompt",
        "t_start",
        "task",
        "token",
    )

    def __init__(self, id: int) -> None:
        self.id = id
        #: Tokens whose keys and values are in this slot's sequence, in order.
        self.cache: list[int] = []
        self.task: Task | None = None
        self.gen: Generation | None = None
        self.token = -1  # the sampled token that the next step decodes
        self.i_batch = -1  # this slot's output row in the current batch
        self.n_cached = 0
        self.t_start = 0.0
        self.t_prompt = 0.0
        self.last_used = 0.0

    @property
    def prompt_left(self) -> int:
        assert self.task is not None
        return len(self.task.job.tokens) - len(self.cache) if self.token < 0 else 0


class Engine:
    """Serves :class:`Prepared` jobs from the slots of ``llm``'s context.

    ``n_predict`` (> 0) caps every request's tokens; ``max_queue`` bounds the requests
    waiting for a slot and ``queue_timeout`` how long one waits (both end in
    :class:`QueueFullError`). The engine holds ``llm`` while it runs.
    """

    def __init__(
        self,
        llm: Llama,
        *,
        n_predict: int = -1,
        max_queue: int = 256,
        queue_timeout: float | None = None,
    ) -> None:
        self.llm = llm
        ctx = llm.ctx
        self.n_ctx_slot = ctx.n_ctx_seq
        self.slots = [Slot(i) for i in range(ctx.n_seq_max)]
        self.n_predict = n_predict
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self._batch = LlamaBatch(max(ctx.n_batch, ctx.n_seq_max))
        self._queue: deque[Task] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._next_id = 0
        self._thread = threading.Thread(target=self._run, name="llama_cy-engine", daemon=True)
        # What a step has for the clients, handed to their event loops in one call per
        # loop: one wake-up (and GIL hand-over) per step instead of one per slot.
        self._outbox: list[tuple[Task, CompletionChunk | BaseException]] = []
        # Counters for /metrics, named as llama-server's.
        self.n_prompt_tokens = 0
        self.t_prompt_s = 0.0
        self.n_predicted = 0
        self.t_predicted_s = 0.0
        self.n_decode = 0
        self.n_busy_slots = 0

    # ---- lifetime --------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the scheduler; waiting and running requests end with an error."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        self._batch.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- requests (event-loop side) --------------------------------------------------

    def submit(self, job: Prepared, *, cache_prompt: bool = True) -> Task:
        """Queue ``job``; ContextOverflowError if its prompt does not fit in a slot,
        QueueFullError if the queue is full. Call from the event loop.

        ``cache_prompt=False`` decodes the whole prompt even if the slot holds a prefix
        of it (llama-server's option of that name).
        """
        n = len(job.tokens)
        if n >= self.n_ctx_slot:
            raise ContextOverflowError(n, self.n_ctx_slot)
        chain, grammar = build_sampler(self.llm.model, job.params, n_ctx=self.n_ctx_slot)
        with self._cond:
            if self._stopping or not self._thread.is_alive():
                raise LlamaError("the server's engine is not running")
            if len(self._queue) >= self.max_queue:
                raise QueueFullError(f"{len(self._queue)} requests are waiting for a slot")
            self._next_id += 1
            task = Task(self._next_id, job, chain, grammar, asyncio.get_running_loop())
            task.cache_prompt = cache_prompt
            self._queue.append(task)
            self._cond.notify()
        return task

    async def results(self, task: Task) -> AsyncIterator[CompletionChunk]:
        """The chunks of ``task``; leaving early (a client gone) cancels it."""
        try:
            while True:
                item = await task.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.stop_reason is not None:
                    return
        finally:
            self.cancel(task)

    def cancel(self, task: Task) -> None:
        """Stop ``task`` at the next step and free its slot (no-op once it has ended)."""
        with self._cond:
            task.cancelled = True
            if task in self._queue:
                self._queue.remove(task)
            self._cond.notify()

    @property
    def n_waiting(self) -> int:
        return len(self._queue)

    def slots_info(self) -> list[dict[str, Any]]:
        """What llama-server's /slots shows: each slot's size, state and task."""
        out = []
        for s in self.slots:
            task = s.task
            gen = s.gen
            out.append(
                {
                    "id": s.id,
                    "n_ctx": self.n_ctx_slot,
                    "is_processing": task is not None,
                    "id_task": task.id if task is not None else -1,
                    "n_prompt_tokens": len(task.job.tokens) if task is not None else 0,
                    "n_decoded": len(gen.generated) if gen is not None and task else 0,
                    "n_cached_tokens": len(s.cache),
                }
            )
        return out

    # ---- the scheduler (engine thread) -----------------------------------------------

    def _run(self) -> None:
        try:
            with self.llm._hold():
                while self._wait_for_work():
                    try:
                        self._step()
                    except Exception as exc:  # a bug: the requests in this step end, not the engine
                        _log.exception("engine step failed")
                        for s in self.slots:
                            if s.task is not None:
                                self._fail(s, exc)
                        self._flush()
        finally:  # stopped, or a bug (its traceback goes to stderr): fail what is left
            with self._cond:
                self._stopping = True
                pending = [s.task for s in self.slots if s.task is not None] + list(self._queue)
                self._queue.clear()
            self._outbox += [(task, LlamaError("the server's engine stopped")) for task in pending]
            self._flush()

    def _wait_for_work(self) -> bool:
        """Drop cancelled tasks, start queued ones; False once stopping."""
        with self._cond:
            while not self._stopping:
                for s in self.slots:
                    if s.task is not None and s.task.cancelled:
                        self._release(s)
                if self.queue_timeout is not None:
                    now = time.perf_counter()
                    while self._queue and now - self._queue[0].created > self.queue_timeout:
                        error = QueueFullError(f"no slot became free in {self.queue_timeout:g} s")
                        self._outbox.append((self._queue.popleft(), error))
                    self._flush()
                while self._queue and any(s.task is None for s in self.slots):
                    task = self._queue.popleft()
                    if not task.cancelled:
                        slot = self._pick_slot(task)
                        try:
                            self._start(slot, task)
                        except Exception as exc:  # this request only
                            slot.task = task
                            self._fail(slot, exc)
                            self._flush()
                if any(s.task is not None for s in self.slots):
                    return True
                self._cond.wait()
        return False

    def _pick_slot(self, task: Task) -> Slot:
        """The idle slot whose cached tokens share the longest prefix with the prompt
        (the least recently used one if none shares any)."""
        idle = [s for s in self.slots if s.task is None]
        prompt = task.job.tokens
        return max(idle, key=lambda s: (_common_prefix(s.cache, prompt), -s.last_used))

    def _start(self, slot: Slot, task: Task) -> None:
        ctx = self.llm.ctx
        job = task.job
        prompt = job.tokens
        # The last prompt token is always decoded: its logits start the generation.
        n = min(_common_prefix(slot.cache, prompt), len(prompt) - 1) if task.cache_prompt else 0
        if n < len(slot.cache):
            if not ctx.seq_rm(slot.id, n, -1):  # recurrent models cannot drop a suffix
                ctx.seq_rm(slot.id, -1, -1)
                n = 0
            del slot.cache[n:]
        if job.params.uses_history:
            for t in prompt:
                task.chain.accept(t)
        limit = job.max_tokens if job.max_tokens is not None and job.max_tokens > 0 else None
        if self.n_predict > 0:
            limit = min(limit or self.n_predict, self.n_predict)
        slot.task = task
        slot.gen = Generation(self.llm.model, job.stop, limit, job.n_logprobs, len(prompt))
        slot.token = -1
        slot.n_cached = n
        slot.t_start = time.perf_counter()
        task.slot = slot.id

    def _release(self, slot: Slot) -> None:
        slot.task = None
        slot.token = -1
        slot.last_used = time.perf_counter()

    def _step(self) -> None:
        """One batch: every generating slot's last token, then prompt chunks."""
        ctx, batch = self.llm.ctx, self._batch
        batch.clear()
        busy = [s for s in self.slots if s.task is not None]
        added: list[tuple[Slot, list[int]]] = []
        n_gen = 0
        for s in busy:
            s.i_batch = -1
            if s.token >= 0:
                s.i_batch = batch.n_tokens
                batch.add(s.token, len(s.cache), s.id, True)
                added.append((s, [s.token]))
                n_gen += 1
        room = batch.capacity - batch.n_tokens
        n_prompt = 0
        for s in busy:
            left = s.prompt_left
            if left <= 0 or room <= 0:
                continue
            assert s.task is not None
            start = len(s.cache)
            chunk = s.task.job.tokens[start : start + min(room, left)]
            last = len(chunk) == left
            batch.add_sequence(chunk, start, s.id, logits_last=last)
            if last:
                s.i_batch = batch.n_tokens - 1
            added.append((s, chunk))
            room -= len(chunk)
            n_prompt += len(chunk)
        if not added:
            return
        t0 = time.perf_counter()
        try:
            ctx.decode(batch)
        except LlamaError as exc:
            for s, _ in added:
                self._fail(s, exc)
            self._flush()
            return
        dt = time.perf_counter() - t0
        self.n_decode += 1
        self.n_busy_slots += len(busy)
        if n_prompt:
            self.n_prompt_tokens += n_prompt
            self.t_prompt_s += dt * n_prompt / (n_prompt + n_gen)
        self.t_predicted_s += dt * n_gen / (n_prompt + n_gen)
        for s, tokens in added:
            s.cache.extend(tokens)
        for s in busy:
            if s.i_batch >= 0 and s.task is not None:
                try:
                    self._sample(s)
                except Exception as exc:  # e.g. a grammar with no way on: this request only
                    self._fail(s, exc)
        self._flush()

    def _flush(self) -> None:
        """Hand the outbox to the clients' event loops, one call per loop."""
        if not self._outbox:
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Task, Any]]] = {}
        for task, item in self._outbox:
            by_loop.setdefault(task.loop, []).append((task, item))
        self._outbox.clear()
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # the event loop is gone: nobody is listening any more
                for task, _ in items:
                    task.cancelled = True

    def _sample(self, s: Slot) -> None:
        task, gen = s.task, s.gen
        assert task is not None
        assert gen is not None
        now = time.perf_counter()
        if s.token < 0:  # the prompt is in: generation starts
            s.t_prompt = now
        token = task.chain.sample(self.llm.ctx, s.i_batch, grammar=task.grammar)
        out = gen.add(self.llm.ctx, token, s.i_batch)
        if gen.reason != "eog":
            self.n_predicted += 1
        if gen.reason is None and len(s.cache) >= self.n_ctx_slot:
            gen.reason = "length"  # the slot's context is full
        if gen.reason is None:
            s.token = token
            if out:
                self._outbox.append((task, gen.chunk(out)))
            return
        timings = Timings(
            s.n_cached,
            len(task.job.tokens) - s.n_cached,
            (s.t_prompt - s.t_start) * 1e3,
            len(gen.generated),
            (now - s.t_prompt) * 1e3,
        )
        last = gen.finish(out, timings)
        with self._cond:  # free the slot before the client hears that it is done
            self._release(s)
        self._outbox.append((task, last))

    def _fail(self, s: Slot, exc: BaseException) -> None:
        """A decode or a sampler failed: this slot's request ends with the error and its
        sequence is dropped (part of the batch may have reached the KV cache)."""
        self.llm.ctx.seq_rm(s.id, -1, -1)
        s.cache.clear()
        task = s.task
        with self._cond:
            self._release(s)
        if task is not None:
            self._outbox.append((task, exc))


def _deliver(items: list[tuple[Task, Any]]) -> None:
    for task, item in items:
        task.queue.put_nowait(item)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
