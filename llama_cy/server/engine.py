"""The server's engine: continuous batching over the sequences of its own context.

The engine creates and owns one :class:`~llama_cy.LlamaContext` with a sequence per slot
(``n_seq_max = slots``). Each slot is a :class:`~llama_cy.generation.KVSequence`, the same
generation core that ``Llama`` drives alone. One scheduler thread builds a single batch
per step from every busy slot (the token each generating slot sampled last, then prompt
chunks while room is left), decodes it once with the GIL released, lets each slot sample
from its own row and hands the text to that slot's client. A new request joins at the
next step, in the idle slot whose KV cache holds the longest prefix of its prompt, so a
chat's next turn decodes only what is new.

With speculative decoding (``speculative``: :class:`~llama_cy.Speculator` keywords), each
step first drafts for every generating slot at once (one speculator serves all slots: a
draft model decodes their drafts in one batch), then decodes each slot's token and draft
in the step's batch, and lets each slot keep what its samples confirm (see
:mod:`llama_cy.generation`). A slot's draft is bounded by its share of the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from llama_cy._adapter import LoraAdapter
from llama_cy._backend import available_cpus
from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy._sampler import LlamaSampler
from llama_cy._speculative import Speculator
from llama_cy.completion import CompletionChunk
from llama_cy.errors import LlamaError
from llama_cy.generation import Job, KVSequence
from llama_cy.server.engine_settings import EngineSettings
from llama_cy.server.prompt_cache import PromptCache
from llama_cy.server.rate_window import RateWindow
from llama_cy.server.slot_choice import choose_slot
from llama_cy.server.task import Task, deliver, deliver_then
from llama_cy.speculative import speculator

__all__ = ["Engine", "QueueFullError", "Task"]

_log = logging.getLogger("llama_cy.server")
T = TypeVar("T")


_DEFAULT_SETTINGS = EngineSettings()
#: The longest a step waits for an event loop to send a request's first chunk (a loop's
#: turn that writes one takes 0.1-0.3 ms on a 2-core CPU).
_HAND_OVER_S = 0.002


class QueueFullError(LlamaError, RuntimeError):
    """Every slot is busy and the waiting queue is full (the server answers 503)."""


class Engine:
    """Serves :class:`~llama_cy.generation.Job` s from ``slots`` sequences of a context
    it creates on ``model`` (``context`` holds :class:`~llama_cy.LlamaContext`'s
    keywords; ``n_ctx`` is shared by the slots).

    ``settings`` (:class:`~llama_cy.server.engine_settings.EngineSettings`) say how it
    queues, caches and runs; a context shift keeps a slot's first ``n_keep`` tokens (by
    default the BOS, where the model adds one). ``loras`` are the adapters requests may
    scale. ``speculative`` holds :class:`~llama_cy.Speculator` keywords (``types``,
    ``draft_model``, ``n_max``, ...): speculative decoding for every slot.
    """

    def __init__(
        self,
        model: LlamaModel,
        *,
        slots: int,
        settings: EngineSettings = _DEFAULT_SETTINGS,
        n_keep: int | None = None,
        loras: Sequence[LoraAdapter] = (),
        speculative: dict[str, Any] | None = None,
        **context: Any,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.model = model
        self.ctx = LlamaContext(model, n_seq_max=slots, **context)
        ctx = self.ctx
        self.spec: Speculator | None = None
        try:
            self._batch = LlamaBatch(max(ctx.n_batch, ctx.n_seq_max))
        except BaseException:
            ctx.close()
            raise
        try:
            if speculative is not None:
                self.spec = speculator(ctx, speculative, context)
        except BaseException:
            self._batch.close()
            ctx.close()
            raise
        # As llama-server: a slot never holds more than the model was trained on, nor
        # than --kv-unified-per-slot.
        self.settings = settings
        self.n_ctx_slot = min(ctx.n_ctx_seq, model.n_ctx_train or ctx.n_ctx_seq)
        if settings.kv_unified_per_slot > 0:
            self.n_ctx_slot = min(self.n_ctx_slot, settings.kv_unified_per_slot)
        #: --cache-ram: llama-server's prompt cache in host memory (None: off)
        cache_ram = settings.cache_ram
        self.prompt_cache = PromptCache(cache_ram, ctx.n_ctx) if cache_ram != 0 else None
        if settings.cache_idle_slots and self.prompt_cache is None:
            _log.warning("--cache-idle-slots requires --cache-ram, disabling")
        self.cache_idle_slots = settings.cache_idle_slots and self.prompt_cache is not None
        self._idle_slots_unsaved = False  # a task started: save the idle slots after its step
        self.kv_unified = bool(context.get("kv_unified"))
        if self.cache_idle_slots:  # llama-server's debug lines, which its tests read
            _log.debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__")
        # LoRA: a batch runs under one set of adapter scales, so a step takes only the
        # slots whose request asks for the same set; the sets take turns step by step.
        self.loras = list(loras)
        self._lora_active: tuple[float, ...] = (0.0,) * len(self.loras)
        self._slot_lora = [self._lora_active] * ctx.n_seq_max
        self._lora_turn = 0
        keep = n_keep if n_keep is not None else int(model.add_bos)
        room, spec = self.n_ctx_slot, self.spec
        self.slots = [
            KVSequence(ctx, i, settings.sequence, n_ctx=room, n_keep=keep, spec=spec)
            for i in range(ctx.n_seq_max)
        ]
        self.tasks: list[Task | None] = [None] * len(self.slots)
        self._queue: deque[Task] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._next_id = 0
        self._thread = threading.Thread(target=self._run, name="llama_cy-engine", daemon=True)
        # What a step has for the clients, handed to their event loops in one call per
        # loop: one wake-up (and GIL hand-over) per step instead of one per slot.
        self._outbox: list[tuple[Task, CompletionChunk | BaseException]] = []
        # Where the pool has a thread for each CPU, a worker polling for the next graph
        # (--poll) holds the CPU the event loop needs: a streamed request's first chunk
        # waited milliseconds for the scheduler to preempt it. The step that hands a
        # request its first chunk then waits, its CPU free, until the loop has sent it;
        # the pool sleeps meanwhile, its CPUs free too (the next decode wakes it).
        self._hand_over = _pool_fills_cpus(ctx)
        # Work on one idle slot, run on the engine thread between steps (slot actions).
        self._calls: list[tuple[int, Callable[[KVSequence], Any], Future[Any]]] = []
        # Counters for /metrics, named as llama-server's.
        self.n_prompt_tokens = 0
        self.t_prompt_s = 0.0
        self.n_predicted = 0
        self.t_predicted_s = 0.0
        self.n_decode = 0
        self.n_busy_slots = 0
        self.n_prompt_cached = 0  #: prompt tokens reused from the KV cache
        self.n_tokens_max = 0  #: the longest sequence seen (prompt and generation)
        self.n_draft_tokens = 0  #: tokens drafted
        self.n_draft_accepted = 0  #: drafted tokens the model kept
        self.n_draft_steps = 0  #: verifications of a draft
        self.window = RateWindow()  #: throughputs since the last /metrics scrape
        if settings.warmup:
            self._warmup()

    def _warmup(self) -> None:
        """llama-server's warmup: one decode (BOS, or EOS) so that the first request
        does not pay for the backends' first-use setup; the cache is cleared after."""
        m = self.model
        token = m.token_bos if m.token_bos >= 0 else m.token_eos
        if token < 0:
            return
        self._batch.clear()
        self._batch.add(token, 0, (0,), True)
        try:
            self.ctx.decode(self._batch)
        finally:
            self._batch.clear()
            self.ctx.clear()

    # ---- lifetime --------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler; a second call does nothing."""
        if self._thread.ident is None:
            self._thread.start()

    def stop(self) -> None:
        """Stop the scheduler (waiting and running requests end with an error) and free
        the context."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
        self._batch.close()
        if self.spec is not None:
            self.spec.close()
        self.ctx.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- requests (event-loop side) --------------------------------------------------

    def samplers(self, job: Job) -> tuple[LlamaSampler, LlamaSampler | None]:
        """``job``'s samplers (grammar compiled); bad input, such as a prompt that does
        not fit in a slot, raises here. Any thread."""
        return self.slots[0].samplers(job)

    def submit(
        self,
        job: Job,
        *,
        samplers: tuple[LlamaSampler, LlamaSampler | None] | None = None,
        cache_prompt: bool = True,
        cache_reuse: int = 0,
        id_slot: int = -1,
        lora: tuple[float, ...] | None = None,
    ) -> Task:
        """Queue ``job`` (with its :meth:`samplers`, built here if not given);
        ContextOverflowError if its prompt does not fit in a slot, QueueFullError if the
        queue is full. Call from the event loop.

        ``cache_prompt=False`` decodes the whole prompt even if the slot holds a prefix
        of it (llama-server's option of that name); ``cache_reuse`` > 0 also moves
        cached chunks of at least that many tokens into place. ``id_slot`` asks for one slot (the
        request waits for it); -1 lets the engine choose. ``lora`` gives a scale to each
        of the engine's adapters (default: none applied).
        """
        return self.submit_all(
            [(job, samplers)],
            cache_prompt=cache_prompt,
            cache_reuse=cache_reuse,
            id_slot=id_slot,
            lora=lora,
        )[0]

    def submit_all(
        self,
        jobs: Sequence[tuple[Job, tuple[LlamaSampler, LlamaSampler | None] | None]],
        *,
        cache_prompt: bool = True,
        cache_reuse: int = 0,
        id_slot: int = -1,
        lora: tuple[float, ...] | None = None,
        whole: bool = False,
    ) -> list[Task]:
        """:meth:`submit` each of a request's jobs, queued at once (as llama-server posts
        a request's tasks together): they start in the same step, so their prompts are
        decoded in the same batches, whichever was ready first. ``whole``: each task's
        chunks are handed over together when it ends (:attr:`Task.whole`)."""
        scales = tuple(lora) if lora is not None else (0.0,) * len(self.loras)
        if len(scales) != len(self.loras):
            raise ValueError(f"lora: expected {len(self.loras)} scales, got {len(scales)}")
        if not -1 <= id_slot < len(self.slots):
            raise ValueError(f"id_slot must be -1 or a slot id below {len(self.slots)}")
        built = [(job, self.samplers(job) if s is None else s) for job, s in jobs]
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._stopping or not self._thread.is_alive():
                raise LlamaError("the server's engine is not running")
            if len(self._queue) + len(built) > self.settings.max_queue:
                raise QueueFullError(f"{len(self._queue)} requests are waiting for a slot")
            tasks = []
            for job, samplers in built:
                self._next_id += 1
                task = Task(self._next_id, job, samplers, loop)
                task.cache_prompt = cache_prompt
                task.cache_reuse = cache_reuse
                task.id_slot = id_slot
                task.lora = scales
                task.whole = whole
                tasks.append(task)
            self._queue.extend(tasks)
            self._cond.notify()
        return tasks

    async def results(self, task: Task) -> AsyncGenerator[CompletionChunk, None]:
        """The chunks of ``task``; leaving early (a client gone) cancels it."""
        async for ready in self.ready(task, None):
            for chunk in ready:
                yield chunk

    async def ready(
        self, task: Task, ping: float | None
    ) -> AsyncGenerator[list[CompletionChunk], None]:
        """:meth:`results`, every chunk ready at once in one list (an empty list after
        ``ping`` seconds without any): no suspension per chunk, which counts at GPU token
        rates. Leaving early cancels the task."""
        try:
            async with contextlib.aclosing(task.batches(ping)) as batches:
                async for done in batches:
                    yield done
        finally:
            self.cancel(task)

    def cancel(self, task: Task) -> None:
        """Stop ``task`` at the next step and free its slot (no-op once it has ended)."""
        with self._cond:
            task.cancelled = True
            if task in self._queue:
                self._queue.remove(task)
            self._cond.notify()

    def on_slot(self, slot_id: int, fn: Callable[[KVSequence], T]) -> Future[T]:
        """Run ``fn(slot)`` on the engine thread once slot ``slot_id`` is idle (it waits
        for the request it runs, if any); the future holds its result. Any thread."""
        if not 0 <= slot_id < len(self.slots):
            raise ValueError(f"slot {slot_id} does not exist: there are {len(self.slots)}")
        future: Future[T] = Future()
        with self._cond:
            if self._stopping:
                raise LlamaError("the server's engine is not running")
            self._calls.append((slot_id, fn, future))
            self._cond.notify()
        return future

    def _run_calls(self) -> None:
        """The slot calls whose slot is idle (engine thread)."""
        with self._cond:
            ready = [c for c in self._calls if self.tasks[c[0]] is None]
            self._calls = [c for c in self._calls if c not in ready]
        for slot_id, fn, future in ready:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(self.slots[slot_id]))
                except Exception as exc:  # the caller's to report
                    future.set_exception(exc)

    @property
    def n_waiting(self) -> int:
        return len(self._queue)

    @property
    def n_processing(self) -> int:
        return sum(1 for t in self.tasks if t is not None)

    def slots_info(self) -> list[dict[str, Any]]:
        """What llama-server's /slots shows: each slot's size, state and task."""
        out = []
        for s, task in zip(self.slots, self.tasks, strict=True):
            gen = s.gen
            out.append(
                {
                    "id": s.id,
                    "n_ctx": self.n_ctx_slot,
                    "speculative": self.spec is not None,
                    "is_processing": task is not None,
                    "id_task": task.id if task is not None else -1,
                    "n_prompt_tokens": len(task.job.tokens) if task is not None else 0,
                    "n_decoded": len(gen.generated) if gen is not None and task else 0,
                    "n_cached_tokens": len(s.cache),
                    # this slot's last (or running) request, as its timings count them
                    "draft_n": s.n_draft,
                    "draft_n_accepted": s.n_draft_accepted,
                }
            )
        return out

    # ---- the scheduler (engine thread) -----------------------------------------------

    def _run(self) -> None:
        try:
            while self._wait_for_work():
                try:
                    self._run_calls()
                    self._step()
                    if self._idle_slots_unsaved:
                        self._idle_slots_unsaved = False
                        self._save_idle_slots()
                except Exception as exc:  # a bug: the requests in this step end, not the engine
                    _log.exception("engine step failed")
                    for s in self.slots:
                        if self.tasks[s.id] is not None:
                            s.failed()
                            self._end(s, exc)
                    self._flush()
        finally:  # stopped, or a bug (its traceback goes to stderr): fail what is left
            with self._cond:
                self._stopping = True
                pending = [t for t in self.tasks if t is not None] + list(self._queue)
                self._queue.clear()
                for _, _, future in self._calls:
                    future.cancel()
                self._calls.clear()
            self._outbox += [(task, LlamaError("the server's engine stopped")) for task in pending]
            self._flush()

    def _wait_for_work(self) -> bool:
        """Drop cancelled tasks, start queued ones; False once stopping."""
        with self._cond:
            while not self._stopping:
                for s in self.slots:
                    task = self.tasks[s.id]
                    if task is not None and task.cancelled:
                        self._free(s)
                timeout = self.settings.queue_timeout
                if timeout is not None:
                    now = time.perf_counter()
                    while self._queue and now - self._queue[0].created > timeout:
                        error = QueueFullError(f"no slot became free in {timeout:g} s")
                        self._outbox.append((self._queue.popleft(), error))
                    self._flush(wait=False)  # under the lock: no waiting for a loop
                i = 0
                while i < len(self._queue) and any(t is None for t in self.tasks):
                    task = self._queue[i]
                    try:
                        slot = None if task.cancelled else self._pick_slot(task)
                    except Exception as exc:  # a bug (the prompt cache's): this request only
                        _log.exception("choosing a slot failed")
                        del self._queue[i]
                        self._outbox.append((task, exc))
                        self._flush(wait=False)  # under the lock: no waiting for a loop
                        continue
                    if slot is None and not task.cancelled:  # its slot is busy
                        i += 1
                        continue
                    del self._queue[i]
                    if slot is not None:
                        try:
                            self._start(slot, task)
                        except Exception as exc:  # this request only
                            slot.failed()
                            self._outbox.append((task, exc))
                            self._flush(wait=False)  # under the lock: no waiting for a loop
                if any(t is not None for t in self.tasks):
                    return True
                if any(self.tasks[c[0]] is None for c in self._calls):
                    return True
                self._cond.wait()
        return False

    def _pick_slot(self, task: Task) -> KVSequence | None:
        """The slot the task asks for (None while it is busy), else the one
        :func:`~llama_cy.server.slot_choice.choose_slot` gives; a slot about to lose
        most of its cache swaps it through the prompt cache first."""
        if task.id_slot >= 0:
            return self.slots[task.id_slot] if self.tasks[task.id_slot] is None else None
        idle = [s for s in self.slots if self.tasks[s.id] is None]
        busy = [s.id for s in self.slots if self.tasks[s.id] is not None]
        similarity = self.settings.slot_prompt_similarity
        prompt = task.job.tokens
        slot, swap = choose_slot(idle, busy, prompt, similarity, self.kv_unified)
        if swap and self.prompt_cache is not None:
            self.prompt_cache.swap(slot, prompt)
        return slot

    def _cache_idle_slots(self) -> None:
        """--cache-idle-slots, once a task has started (:meth:`PromptCache.save_idle`).
        Before the task's first step where the KV cache is unified, as llama-server
        does (the idle slots' cells are cleared for it); with a KV stream per slot
        nothing needs the cells, and the saves (a state copy each, 63 after a busy
        spell of 64) wait until the step has handed out its tokens."""
        assert self.prompt_cache is not None
        idle = [s for s in self.slots if self.tasks[s.id] is None]
        self.prompt_cache.save_idle(idle, clear=self.kv_unified)

    def _save_idle_slots(self) -> None:
        """The deferred :meth:`_cache_idle_slots`: a failure loses only what the cache
        would have kept, not the requests of the step that ran before it."""
        try:
            self._cache_idle_slots()
        except Exception:
            _log.exception("saving the idle slots to the prompt cache failed")

    def _start(self, slot: KVSequence, task: Task) -> None:
        if task.lora != self._slot_lora[slot.id]:
            # The cache was computed under other weights: none of it can be reused, in
            # the draft model's context either (forget() clears both).
            slot.forget()
            self._slot_lora[slot.id] = task.lora
        slot.start(
            task.job,
            task.samplers,
            cache_prompt=task.cache_prompt,
            cache_reuse=task.cache_reuse,
            limit=self.settings.n_predict,
        )
        self.tasks[slot.id] = task
        task.slot = slot.id
        if self.cache_idle_slots:
            if self.kv_unified:
                self._cache_idle_slots()
            else:
                self._idle_slots_unsaved = True
        self.n_prompt_cached += slot.n_cached
        if task.job.progress:  # the first report: what the cache already holds
            self._outbox.append((task, slot.progress()))

    def _free(self, slot: KVSequence) -> None:
        slot.release()
        self.tasks[slot.id] = None

    def _step(self) -> None:
        """One batch: every generating slot's last token, then prompt chunks."""
        batch = self._batch
        batch.clear()
        busy = [s for s in self.slots if self.tasks[s.id] is not None]
        if self.loras:
            busy = self._lora_step(busy)
        generating = [s for s in busy if s.token >= 0]
        spec = self.spec
        if spec is not None and generating:
            room = batch.capacity // len(generating)
            asked = [s for s in generating if s.request_draft(room)]
            if asked:
                spec.draft_all()
                for s in asked:
                    s.take_draft()
                    self.n_draft_tokens += len(s.draft)
        n_gen = sum(s.fill(batch, 1) for s in generating)
        n_prompt = 0
        prefilling = []
        failed = []
        for s in busy:
            if s.token < 0:
                try:
                    # An image or clip is encoded and decoded here, for this slot alone.
                    added = s.fill(batch, batch.capacity - batch.n_tokens)
                except LlamaError as exc:  # this request only
                    s.failed()
                    self._end(s, exc)
                    failed.append(s)
                    continue
                n_prompt += added
                if added:
                    prefilling.append(s)
        if failed:
            busy = [s for s in busy if s not in failed]
        if n_gen + n_prompt == 0:
            self._flush()  # a slot ended, or only an image went in
            return
        t0 = time.perf_counter()
        try:
            self.ctx.decode(batch)
            if spec is not None:
                spec.process(batch)
        except LlamaError as exc:
            for s in busy:
                s.failed()
                self._end(s, exc)
            self._flush()
            return
        dt = time.perf_counter() - t0
        self.n_decode += 1
        self.n_busy_slots += len(busy)
        t_prompt = dt * n_prompt / (n_prompt + n_gen)
        self.n_prompt_tokens += n_prompt
        self.t_prompt_s += t_prompt
        self.t_predicted_s += dt - t_prompt
        self.window.add(n_prompt, t_prompt, n_gen, dt - t_prompt)
        for s in busy:
            s.decoded()
            self.n_tokens_max = max(self.n_tokens_max, len(s.cache))
        for s in prefilling:
            task = self.tasks[s.id]
            if task is not None and task.job.progress:
                self._outbox.append((task, s.progress()))
        # Every plain row at once: the GIL is released once for the step's sampling, not
        # once a slot (each release hands it to the event loop, and waits to get it back).
        plain = [(s, chain) for s in busy if (chain := s.plain_chain()) is not None]
        if len(plain) > 1:
            chains, rows = [c for _, c in plain], [s.i_batch for s, _ in plain]
            for (s, _), token in zip(
                plain, LlamaSampler.sample_rows(self.ctx, chains, rows), strict=True
            ):
                s.picked = token
        for s in busy:
            if s.i_batch < 0:
                continue
            task = self.tasks[s.id]
            assert task is not None
            gen = s.gen
            assert gen is not None
            n_before, accepted_before, drafted = len(gen.generated), s.n_draft_accepted, s.draft
            try:
                chunk = s.sample()
            except Exception as exc:  # e.g. a grammar with no way on: this request only
                self._end(s, exc)
                continue
            self.n_predicted += len(gen.generated) - n_before  # the end of a turn is not counted
            if drafted:
                self.n_draft_steps += 1
                self.n_draft_accepted += s.n_draft_accepted - accepted_before
            if chunk is None:
                continue
            if chunk.stop_reason is None and task.whole:
                task.held.append(chunk)
                continue
            if chunk.stop_reason is not None:
                with self._cond:  # free the slot before the client hears that it is done
                    self.tasks[s.id] = None
            if task.held:
                self._outbox += [(task, c) for c in task.held]
                task.held = []
            self._outbox.append((task, chunk))
        self._flush()

    def _lora_step(self, busy: list[KVSequence]) -> list[KVSequence]:
        """The slots of this step: those under the set of LoRA scales whose turn it
        is, with that set applied to the context."""
        sets = list(dict.fromkeys(self._slot_lora[s.id] for s in busy))
        if not sets:
            return busy
        scales = sets[self._lora_turn % len(sets)]
        self._lora_turn += 1
        if scales != self._lora_active:
            self.ctx.clear_loras()
            for adapter, scale in zip(self.loras, scales, strict=True):
                if scale != 0.0:
                    self.ctx.set_lora(adapter, scale)
            self._lora_active = scales
        return [s for s in busy if self._slot_lora[s.id] == scales]

    def _flush(self, *, wait: bool = True) -> None:
        """Hand the outbox to the clients' event loops, one call per loop; with ``wait``
        (where ``_hand_over`` is on), until a streamed request's first chunk is sent."""
        if not self._outbox:
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Task, Any]]] = {}
        first = False  # a streamed request's first chunk
        for task, item in self._outbox:
            by_loop.setdefault(task.loop, []).append((task, item))
            if not task.answered and isinstance(item, CompletionChunk):
                task.answered = True
                first = first or not task.whole
        self._outbox.clear()
        sent: list[threading.Event] = []
        for loop, items in by_loop.items():
            try:
                if first and wait and self._hand_over:
                    sent.append(threading.Event())
                    loop.call_soon_threadsafe(deliver_then, items, sent[-1])
                else:
                    loop.call_soon_threadsafe(deliver, items)
            except RuntimeError:  # the event loop is gone: nobody is listening any more
                for task, _ in items:
                    task.cancelled = True
        # Bounded: a loop busy elsewhere (a large body) costs the step no more than this.
        deadline = time.perf_counter() + _HAND_OVER_S
        if sent:  # the pool's worker would poll on the CPU the loop needs
            self.ctx.pause_threadpools()
        for event in sent:
            event.wait(max(0.0, deadline - time.perf_counter()))

    def _end(self, s: KVSequence, exc: BaseException) -> None:
        """This slot's request ends with ``exc``."""
        task = self.tasks[s.id]
        with self._cond:
            self._free(s)
        if task is not None:
            self._outbox.append((task, exc))


def _pool_fills_cpus(ctx: LlamaContext) -> bool:
    """Whether ``ctx``'s threadpools have a thread for each CPU this process may keep
    busy (its affinity, and a container's CPU quota)."""
    return max(ctx.n_threads, ctx.n_threads_batch) >= available_cpus()
