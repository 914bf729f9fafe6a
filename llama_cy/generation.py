"""The generation core: one sequence of a context's KV cache, stepped one batch at a time.

A :class:`KVSequence` owns the books of sequence ``id`` of a :class:`~llama_cy.LlamaContext`:
the tokens its KV cache holds, and the request it is generating for. Each step the driver
asks it to :meth:`~KVSequence.fill` part of a batch (its last sampled token, or the next
chunk of its prompt), decodes the batch, tells it :meth:`~KVSequence.decoded` (or
:meth:`~KVSequence.failed`), and lets it :meth:`~KVSequence.sample` from its output row.
Everything between the batch and the text is here, once: prefix reuse, prompt chunks,
the sampler chain, stop strings and UTF-8 assembly (:class:`~llama_cy.streaming.CompletionOutput`),
log-probabilities, ``max_tokens``, ``stopping_criteria``, context shift, timings,
speculative decoding and cleanup after a failed decode.

Speculative decoding (a :class:`~llama_cy.Speculator` given to the sequence): before a
step the sequence asks for a draft after its last sampled token (:meth:`KVSequence.request_draft`,
then the driver drafts for every sequence at once and each :meth:`KVSequence.take_draft`);
the step decodes the token and the draft together, with an output row for each;
:meth:`KVSequence.sample` samples row after row while the samples equal the draft, as
llama-server's ``common_sampler_sample_and_accept_n`` does, and cuts the rest of the
draft out of the KV cache. Each token is sampled from the same logits, in the same
order, as without a draft, so the output is the same.

:func:`run` drives one sequence (``Llama``); the server's engine drives several, with one
batch per step from all of them.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Generator

import numpy as np
import numpy.typing as npt

from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._prefix import common_prefix  # public here: compat and the server use it
from llama_cy._sampler import LlamaSampler
from llama_cy._speculative import Speculator
from llama_cy.cache_reuse import Shiftable, can_reuse, reuse_chunks
from llama_cy.checkpoints import Checkpoints, user_starts
from llama_cy.completion import CompletionChunk, PromptProgress, Timings
from llama_cy.context_shift import shift, shift_plan
from llama_cy.errors import ContextOverflowError
from llama_cy.job import PROMPT_LOGPROB_ROWS, Job, StoppingCriteria, backend_sampling_blocker
from llama_cy.prompt_media import Media, media_token
from llama_cy.rejection import verify
from llama_cy.sampling import build_sampler
from llama_cy.sequence_settings import SequenceSettings
from llama_cy.streaming import CompletionOutput, PromptLogprobs, preserved_tokens

__all__ = [
    "Job",
    "KVSequence",
    "Media",
    "StoppingCriteria",
    "backend_sampling_blocker",
    "common_prefix",
    "media_token",
    "run",
]

_log = logging.getLogger("llama_cy")


_DEFAULT_SETTINGS = SequenceSettings()


class KVSequence:
    """Sequence ``id`` of ``ctx``: the tokens its KV cache holds and the job it runs.

    ``settings`` say how it runs every job. ``n_ctx`` is the room this sequence has (the
    context's per-sequence size); a context shift keeps its first ``n_keep`` tokens.
    ``spec`` drafts tokens for this sequence (shared by the sequences of ``ctx``); every
    cut of this sequence's cache is made in its draft context too.
    """

    __slots__ = (
        "_added",
        "_first_row",
        "cache",
        "chain",
        "checkpoints",
        "ctx",
        "draft",
        "draft_q",
        "draws",
        "gen",
        "grammar",
        "i_batch",
        "id",
        "job",
        "last_used",
        "model",
        "n_cached",
        "n_ctx",
        "n_draft",
        "n_draft_accepted",
        "n_keep",
        "picked",
        "rows",
        "settings",
        "spec",
        "t_prompt",
        "t_start",
        "token",
        "truncated",
    )

    def __init__(
        self,
        ctx: LlamaContext,
        id: int = 0,
        settings: SequenceSettings = _DEFAULT_SETTINGS,
        *,
        n_ctx: int | None = None,
        n_keep: int = 0,
        spec: Speculator | None = None,
    ) -> None:
        self.ctx = ctx
        self.settings = settings
        self.model = ctx.model
        self.id = id
        self.n_ctx = n_ctx if n_ctx is not None else ctx.n_ctx_seq
        self.n_keep = n_keep
        #: Tokens whose keys and values are in this sequence of the KV cache, in order.
        self.cache: list[int] = []
        self.job: Job | None = None
        self.gen: CompletionOutput | None = None
        self.chain: LlamaSampler | None = None
        self.grammar: LlamaSampler | None = None
        self.token = -1  # the sampled token that the next step decodes
        self.i_batch = -1  # this sequence's output row in the current batch
        #: the token a step's LlamaSampler.sample_rows picked from that row (-1: none)
        self.picked = -1
        self.n_cached = 0
        self.t_start = 0.0
        self.t_prompt = 0.0
        self.last_used = 0.0
        self._added: list[int] = []
        self._first_row = 0  #: the batch row of the prompt chunk this step added
        self.spec = spec
        self.draft: list[int] = []  # drafted tokens decoded after self.token this step
        self.rows: list[int] = []  # their output rows in the batch (self.token's first)
        self.n_draft = 0
        self.n_draft_accepted = 0
        #: draws of synthetic acceptance or of rejection sampling (a sampled draft)
        self.draws: random.Random | None = None
        #: each draft token's distribution, where the drafter sampled it (probabilistic)
        self.draft_q: list[tuple[npt.NDArray[np.intc], npt.NDArray[np.float32]]] = []
        self.truncated = False  # the job's context was shifted
        #: llama-server's context checkpoints (of the draft context too)
        self.checkpoints = Checkpoints(
            ctx, id, n_max=settings.ctx_checkpoints, min_step=settings.checkpoint_min_step
        )
        if spec is not None:
            self.checkpoints.draft = spec.draft_context

    # ---- a job's start and end -------------------------------------------------------

    def samplers(self, job: Job) -> tuple[LlamaSampler, LlamaSampler | None]:
        """Check ``job`` against this sequence and build its samplers: bad input raises
        here, before the job is started (or queued)."""
        if len(job.tokens) >= self.n_ctx:
            raise ContextOverflowError(len(job.tokens), self.n_ctx)
        return build_sampler(self.model, job.params, n_ctx=self.n_ctx, budget=job.reasoning_budget)

    def start(
        self,
        job: Job,
        samplers: tuple[LlamaSampler, LlamaSampler | None],
        *,
        cache_prompt: bool = True,
        limit: int | None = None,
        cache_reuse: int = 0,
    ) -> None:
        """Take ``job``: keep the longest prefix of its prompt that the KV cache holds
        (none with ``cache_prompt=False``) and drop the rest. ``limit`` (> 0) is the
        token limit of a job that sets none (the server's ``--n-predict``, which a
        request's own limit overrides, as in llama-server)."""
        prompt = job.tokens
        cache_prompt = cache_prompt and not job.prompt_logprobs  # every row is needed
        n = common_prefix(self.cache, prompt) if cache_prompt else 0
        if cache_prompt and cache_reuse > 0:  # --cache-reuse: repeated chunks moved into place
            ctxs: list[Shiftable] = [self.ctx] if self.spec is None else [self.ctx, self.spec]
            if can_reuse(ctxs, self.cache, job.media is not None, self.checkpoints.enabled):
                n = reuse_chunks(ctxs, self.id, self.cache, prompt, n, cache_reuse)
        # Where the cache no longer holds what decoding past the prefix needs (an SWA
        # window, a recurrent state), a checkpoint is restored, or the prompt decoded again.
        n = self.checkpoints.usable_prefix(n, len(prompt), restore=self.checkpoints.enabled)
        # The last prompt token is always decoded: its logits start the generation.
        n = min(n, len(prompt) - 1)
        if job.media is not None:
            n = job.media.start_of(n)  # an image is kept whole or decoded again whole
            first = job.media.first_mrope
            if first is not None and self.checkpoints.enabled:
                # Checkpoints (SWA, recurrent state) count positions as indices: keep
                # only what precedes the first M-RoPE image, where they are the same.
                n = min(n, first)
        if n < len(self.cache):
            n = self.cut(n, job)
        cp, chat = self.checkpoints, job.chat
        delims = job.message_delimiters or (chat.message_delimiters if chat is not None else ())
        cp.user_starts = ()
        if cp.enabled and delims and job.media is None:
            cp.user_starts = user_starts(self.model, prompt, delims)
        chain, grammar = samplers
        if job.params.uses_history:
            for t in prompt:
                if t >= 0:  # media positions are not tokens
                    chain.accept(t)
        max_tokens = job.max_tokens if job.max_tokens is not None and job.max_tokens > 0 else None
        if max_tokens is None and limit is not None and limit > 0:
            max_tokens = limit
        self.job, self.chain, self.grammar = job, chain, grammar
        self.gen = CompletionOutput(
            self.model,
            job.stop,
            max_tokens,
            job.n_logprobs,
            len(prompt),
            None
            if self.settings.special
            else preserved_tokens(self.model, job.chat) | job.preserved,
            n_indent=job.n_indent,
            t_max_predict_ms=job.t_max_predict_ms,
        )
        if job.prompt_logprobs:
            self.gen.prompt = PromptLogprobs(self.model, prompt, job.n_logprobs or 0)
        self.token = -1
        self.i_batch = -1
        self.picked = -1
        self.n_cached = n
        self.t_start = time.perf_counter()
        self.t_prompt = self.t_start
        self.draft, self.rows = [], []
        self.n_draft = self.n_draft_accepted = 0
        self.truncated = False
        self.draws = None
        self._attach(job, chain, grammar)
        if self.spec is not None and (self.spec.synth_probs or self.spec.probabilistic):
            seed = job.params.seed
            self.draws = random.Random(seed if seed is not None else random.getrandbits(32))

    def _attach(self, job: Job, chain: LlamaSampler, grammar: LlamaSampler | None) -> None:
        """Attach ``chain`` to this sequence of the context (backend sampling) when the job
        asks for it and can have it, else leave none of an earlier job's attached. As
        llama.cpp's common sampler and llama-server, the job falls back to the CPU chain
        with a warning where the graph cannot do its sampling."""
        want = job.backend_sampling
        if want is None:
            want = self.settings.backend_sampling
        reason = backend_sampling_blocker(job, grammar, self.spec) if want else None
        if reason is not None:
            _log.warning("backend sampling is not compatible with %s, disabling", reason)
        attached = self.id in self.ctx.samplers
        if want and reason is None:
            self.ctx.set_sampler(self.id, chain)
        elif attached:
            self.ctx.set_sampler(self.id, None)

    def release(self) -> None:
        """End the job (finished, cancelled or failed); the KV cache keeps its tokens."""
        self.job = None
        self.gen = None
        self.chain = self.grammar = None
        self.token = -1
        self.i_batch = -1
        self.draft, self.rows = [], []
        self.draws = None
        self.last_used = time.perf_counter()

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def prompt_left(self) -> int:
        """Prompt tokens not yet in the KV cache (0 once generating)."""
        job = self.job
        return len(job.tokens) - len(self.cache) if job is not None and self.token < 0 else 0

    # ---- one step --------------------------------------------------------------------

    def request_draft(self, room: int) -> bool:
        """Ask the speculator for a draft after the last sampled token, if this sequence
        is generating and a draft fits: in ``room`` batch entries (the token included),
        in the context (two positions are kept free, as llama-server keeps them for a
        context shift) and within the job's token limit. True if one was asked for;
        the driver then drafts (``Speculator.draft_all``) and calls :meth:`take_draft`."""
        spec, gen = self.spec, self.gen
        self.draft = []
        if spec is None or gen is None or self.token < 0:
            return False
        n = min(room - 1, self.n_ctx - len(self.cache) - 2, spec.n_max)
        if gen.limit is not None:  # the sampled token counts: the draft is what may follow
            n = min(n, gen.limit - len(gen.generated) - 1)
        if n < 1:
            return False
        job = self.job
        assert job is not None
        seed = job.params.seed if job.params.seed is not None else 0xFFFFFFFF
        spec.request(
            self.cache,
            self.token,
            self.id,
            n_max=n,
            pos=self._pos(len(self.cache)),
            temp=job.params.temperature,
            seed=seed,
            distributions=self._rejects(),
        )
        return True

    def _rejects(self) -> bool:
        """Whether this step's draft is verified by rejection sampling: a probabilistic
        drafter, a temperature above 0 (at 0 it is matching), and no grammar (which
        matching keeps to; llama.cpp masks the distributions with it instead)."""
        job, spec = self.job, self.spec
        return (
            spec is not None
            and spec.probabilistic
            and job is not None
            and job.params.temperature > 0
            and self.grammar is None
            and not spec.synth_probs
        )

    def take_draft(self) -> None:
        """Take the draft that ``Speculator.draft_all`` made for this sequence."""
        assert self.spec is not None
        self.draft = self.spec.result(self.id).tolist()
        self.draft_q = self.spec.result_q(self.id) if self._rejects() else []
        self.n_draft += len(self.draft)

    def fill(self, batch: LlamaBatch, room: int) -> int:
        """Add this sequence's part of the next batch, at most ``room`` tokens: its last
        sampled token (and its draft), or the next chunk of its prompt. Returns the
        tokens added."""
        self.i_batch = -1
        if self.token >= 0:
            pos = self._pos(len(self.cache))
            self.i_batch = batch.n_tokens
            batch.add(self.token, pos, self.id, True)
            self.rows = [self.i_batch]
            for k, t in enumerate(self.draft):
                self.rows.append(batch.n_tokens)
                batch.add(t, pos + 1 + k, self.id, True)
            self._added = [self.token, *self.draft]
            return len(self._added)
        job = self.job
        left = self.prompt_left
        if job is None or left <= 0 or room <= 0:
            self._added = []
            return 0
        start = len(self.cache)
        media = job.media
        if media is not None:
            if start in media.spans:
                # One image or clip a step, decoded on its own (mtmd-helper's embedding
                # batches) before this step's batch: other sequences wait one encode.
                chunk_m = media.spans[start]
                embd = media.embeddings(start, self.ctx)
                media.mctx.eval_chunk(self.ctx, chunk_m, media.pos(start), self.id, embd=embd)
                self.cache.extend(job.tokens[start : start + chunk_m.n_tokens])
                start = len(self.cache)
                left = len(job.tokens) - start
            nxt = media.next_start(start)
            if nxt is not None:
                left = nxt - start
            if left <= 0:
                self._added = []
                return 0
        end = start + min(room, left)
        if job.prompt_logprobs:
            end = min(end, start + PROMPT_LOGPROB_ROWS)
        if media is None:
            end = self.checkpoints.chunk_end(start, end, len(job.tokens))
            self.checkpoints.before_chunk(start, end, len(job.tokens), id(job))
        chunk = job.tokens[start:end]
        last = start + len(chunk) == len(job.tokens)
        self._first_row = batch.n_tokens
        batch.add_sequence(chunk, self._pos(start), self.id, logits_last=last)
        if job.prompt_logprobs or (self.spec is not None and self.spec.all_outputs):
            batch.output[batch.n_tokens - len(chunk) : batch.n_tokens] = 1  # every row read
        if last:
            self.i_batch = batch.n_tokens - 1
        self._added = chunk
        return len(chunk)

    def decoded(self) -> None:
        """The batch went into the KV cache: what this sequence added is now cached (and
        a prompt chunk's rows read, for a job that asks for its log-probabilities)."""
        gen, added = self.gen, self._added
        if gen is not None and gen.prompt is not None and self.token < 0 and added:
            gen.prompt.rows(self.ctx, len(self.cache), self._first_row, len(added))
        self.cache.extend(added)
        self._added = []

    def failed(self) -> None:
        """The batch failed: part of it may have reached the KV cache past what
        :attr:`cache` records; drop that part (all of the sequence if it cannot be cut)."""
        self._added = []
        self.draft, self.rows = [], []
        self.cut(len(self.cache))
        self.checkpoints.clear()

    def forget(self) -> None:
        """Empty this sequence's cache, in the context and the draft context."""
        self.ctx.seq_rm(self.id, -1, -1)
        if self.spec is not None:
            self.spec.seq_rm(self.id, -1, -1)
        self.cache = []
        self.checkpoints.clear()

    def restored(self, tokens: list[int], *, draft: bool = False) -> None:
        """The context's sequence was loaded with ``tokens`` (a slot file): a draft
        model's context decodes them too, so that it holds what the context holds
        (unless ``draft``: its state was loaded as well)."""
        self.cache = list(tokens)
        self.checkpoints.clear()
        spec = self.spec
        if spec is None or not spec.has_draft_model or draft:
            return
        spec.seq_rm(self.id, -1, -1)
        n = self.ctx.n_batch
        batch = LlamaBatch(n)
        try:
            for start in range(0, len(tokens), n):
                batch.clear()
                batch.add_sequence(tokens[start : start + n], start, self.id, logits_last=True)
                spec.process(batch)
        except BaseException:
            self.forget()
            raise
        finally:
            batch.close()

    def _pos(self, i: int, job: Job | None = None) -> int:
        """The position of cache index ``i`` under ``job`` (the running one if None):
        the index, unless the job's M-RoPE media take fewer positions than tokens."""
        job = job if job is not None else self.job
        media = job.media if job is not None else None
        return i if media is None else media.pos(i)

    def cut(self, n: int, job: Job | None = None) -> int:
        """Keep the first ``n`` cached tokens, in the context and the draft context; all
        are dropped where a suffix cannot be (recurrent models). The tokens kept. The
        cut is at ``n``'s position under ``job`` (the running one if None), whose
        prompt holds the kept tokens."""
        spec = self.spec
        if not self.ctx.seq_rm(self.id, self._pos(n, job), -1):
            self.ctx.seq_rm(self.id, -1, -1)
            n = 0
        if spec is not None and not spec.seq_rm(self.id, n, -1):
            spec.seq_rm(self.id, -1, -1)
            self.ctx.seq_rm(self.id, -1, -1)
            n = 0
        del self.cache[n:]
        return n

    def sample(self) -> CompletionChunk | None:
        """Sample from this sequence's output rows: its last token's, and the rows of its
        draft while the samples match it. Returns the chunk of text that can be shown now
        (None if there is none yet); the last chunk carries the stop reason, and then the
        job is released."""
        gen, job, chain = self.gen, self.job, self.chain
        assert gen is not None
        assert job is not None
        assert chain is not None
        ctx = self.ctx
        if self.token < 0:  # the prompt is in: generation starts
            self.t_prompt = time.perf_counter()
            if self.spec is not None:
                self.spec.begin(self.cache, self.id)
        draft, rows = self.draft, self.rows if self.draft else [self.i_batch]
        post = job.post_sampling_probs and job.n_logprobs is not None
        out = ""
        k = 0
        token = -1
        for k, row in enumerate(rows):
            if self.picked >= 0:  # picked with the other sequences' rows (one row, no draft)
                token, matched, self.picked = self.picked, False, -1
            else:
                token, matched = self._pick(row, k, post)
            out += gen.add(ctx, token, row, chain.candidates() if post else None)
            if gen.reason is None and job.stopping_criteria:
                ids = np.asarray(job.tokens + gen.generated, dtype=np.intc)
                logits = ctx.logits(row)
                if any(bool(c(ids, logits)) for c in job.stopping_criteria):
                    gen.reason = "stop"
            if gen.reason is not None or not matched:
                break
        if draft:  # the draft's rows after the last sample leave the caches
            self.n_draft_accepted += k
            self.cut(len(self.cache) - len(draft) + k)
            assert self.spec is not None
            self.spec.accept(k, self.id)
            self.draft, self.rows = [], []
        if gen.reason is None and len(self.cache) >= self.n_ctx and not self._shift():
            gen.reason = "length"  # the sequence's context is full
        if gen.reason is None:
            self.token = token
            if not out:
                return None
            chunk = gen.chunk(out)
            if job.timings_per_token:
                chunk.timings = self.timings()
            return chunk
        last = gen.finish(out, self.timings())
        last.truncated = self.truncated
        self.release()
        return last

    def plain_chain(self) -> LlamaSampler | None:
        """The chain that may sample this step's row together with other sequences'
        rows in one call (:meth:`LlamaSampler.sample_rows`): one row, no grammar, no
        post-sampling probabilities to keep; else None."""
        job = self.job
        if (
            self.i_batch < 0
            or self.draft
            or self.grammar is not None
            or job is None
            or (job.post_sampling_probs and job.n_logprobs is not None)
        ):
            return None
        return self.chain

    def _pick(self, row: int, k: int, post: bool) -> tuple[int, bool]:
        """The token at output ``row``, the ``k``-th of this step, and whether it
        accepts draft token ``k`` (so that the next row is sampled too). A sampled draft
        (probabilistic drafting) is verified by rejection sampling. With synthetic
        acceptance (benchmarks only), draft token ``k`` is taken with the speculator's
        probability whatever the model says, as llama-server's
        ``server_sample_and_accept_synth`` does: the chain accepts it, the grammar
        does not see it."""
        chain, draws, draft, spec = self.chain, self.draws, self.draft, self.spec
        assert chain is not None
        if k >= len(draft) or draws is None or spec is None:
            token = chain.sample(self.ctx, row, grammar=self.grammar, candidates=post)
            return token, k < len(draft) and token == draft[k]
        if self.draft_q:  # a sampled draft: rejection sampling (llama-server's order: after synth)
            return verify(chain, self.ctx, row, draft[k], self.draft_q[k], draws)
        if not spec.synth_probs:
            token = chain.sample(self.ctx, row, grammar=self.grammar, candidates=post)
            return token, token == draft[k]
        token = chain.sample(self.ctx, row, accept=False, grammar=self.grammar, candidates=post)
        if draws.random() < spec.synth_probs[k] and not self.model.is_eog(draft[k]):
            chain.accept(draft[k])
            return draft[k], True
        chain.accept(token)
        if self.grammar is not None:
            self.grammar.accept(token)
        return token, False

    def timings(self) -> Timings:
        """The running job's timings so far."""
        job, gen = self.job, self.gen
        assert job is not None
        assert gen is not None
        now = time.perf_counter()
        prompt_end = self.t_prompt if self.token >= 0 or gen.reason is not None else now
        return Timings(
            self.n_cached,
            len(job.tokens) - self.n_cached,
            (prompt_end - self.t_start) * 1e3,
            len(gen.generated),
            (now - prompt_end) * 1e3 if prompt_end < now else 0.0,
            self.n_draft,
            self.n_draft_accepted,
        )

    def progress(self) -> CompletionChunk:
        """A chunk with only the prompt's progress (and, if the job asks, the timings
        so far: nothing decoded yet is 0 ms)."""
        job = self.job
        assert job is not None
        ms = (time.perf_counter() - self.t_start) * 1e3
        done = PromptProgress(len(job.tokens), self.n_cached, len(self.cache), ms)
        chunk = CompletionChunk("", [], progress=done)
        if job.timings_per_token:
            n = len(self.cache) - self.n_cached
            chunk.timings = Timings(self.n_cached, n, ms if n else 0.0, 0, 0.0)
        return chunk

    def _shift(self) -> bool:
        """Context shift (:mod:`llama_cy.context_shift`): make room by dropping tokens
        after the first ``n_keep``; False where it cannot be done."""
        if not self.settings.context_shift or not self.ctx.can_shift:
            return False
        if self.spec is not None and not self.spec.can_shift:
            return False
        if any(t < 0 for t in self.cache):  # an image cut in half means nothing (llama-server)
            return False
        job = self.job
        plan = shift_plan(
            len(self.cache),
            self.n_keep,
            self.n_ctx,
            None if job is None else (len(job.tokens), job.n_keep, job.n_discard),
            self.model.add_bos,
        )
        if plan is None:
            return False
        shift(self.ctx, self.spec, self.id, self.cache, *plan)
        self.checkpoints.clear()  # their positions moved
        self.truncated = True
        return True


def run(
    seq: KVSequence,
    batch: LlamaBatch,
    job: Job,
    samplers: tuple[LlamaSampler, LlamaSampler | None],
) -> Generator[CompletionChunk, None, None]:
    """Drive ``seq`` alone through ``job``, one batch per step; yields its chunks."""
    ctx = seq.ctx
    spec = seq.spec
    seq.start(job, samplers)
    try:
        while True:
            batch.clear()
            if spec is not None and seq.request_draft(batch.capacity):
                spec.draft_all()
                seq.take_draft()
            if seq.fill(batch, batch.capacity) == 0 and seq.token < 0:
                continue  # an image or clip went in alone
            try:
                ctx.decode(batch)
                if spec is not None:
                    spec.process(batch)
            except BaseException:
                seq.failed()
                raise
            seq.decoded()
            if seq.i_batch >= 0:
                chunk = seq.sample()
                if chunk is not None:
                    yield chunk
                    if chunk.stop_reason is not None:
                        return
    finally:
        if seq.busy:  # failed, or the consumer left early
            seq.release()
