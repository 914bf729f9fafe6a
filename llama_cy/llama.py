"""``Llama``: completion, chat, streaming, structured output and embeddings in one object.

The calls and returned dicts are llama-cpp-python's (``create_completion``,
``create_chat_completion``, ``create_embedding``, ``__call__``), so code written for it
runs unchanged; :meth:`Llama.complete` and :meth:`Llama.stream` return typed results.

One generation loop serves every call: the prompt is decoded after the part the KV
cache already holds (prompt cache), each step samples straight from llama.cpp's logits
buffer, and log-probabilities, when asked for, are read from that same buffer before
the next decode: no logits history is kept.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

import numpy as np
import numpy.typing as npt

from llama_cy._adapter import LoraAdapter
from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy._sampler import LlamaSampler
from llama_cy.chat import TOOL_CALL_OPEN, ChatFormatter, tool_call_grammar, tools_system_prompt
from llama_cy.completion import (
    Completion,
    CompletionChunk,
    Timings,
    join_chunks,
)
from llama_cy.errors import BusyError, ClosedError, ContextOverflowError, InvalidTokenError
from llama_cy.grammar import json_schema_to_gbnf
from llama_cy.responses import ChatShaper, CompletionShaper, Shaper
from llama_cy.sampling import LlamaGrammar, LogitsProcessor, SamplingParams, build_sampler
from llama_cy.streaming import Generation

__all__ = ["Llama", "Prepared"]

_log = logging.getLogger("llama_cy")
_T = TypeVar("_T")

#: StoppingCriteria as llama-cpp-python calls them: (tokens so far, last logits) -> stop?
StoppingCriteria = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], bool]

# llama-cpp-python constructor arguments that have no effect here (accepted so that
# code written for it runs unchanged).
_IGNORED_PARAMS = frozenset(
    [
        "numa",
        "logits_all",
        "spm_infill",
        "chat_handler",
        "draft_model",
        "tokenizer",
        "lora_base",
        "no_perf",
    ]
)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked request, ready to generate: what :meth:`Llama.prepare_completion` and
    :meth:`Llama.prepare_chat_completion` return, and what the server's engine runs."""

    tokens: list[int]
    params: SamplingParams
    max_tokens: int | None
    stop: tuple[str, ...]
    n_logprobs: int | None
    stopping_criteria: tuple[StoppingCriteria, ...]
    shaper: Shaper


class Llama:
    """A model and one context, with llama-cpp-python's API.

    ``n_ctx=0`` takes the model's training context. ``n_gpu_layers=-1`` offloads all
    layers. ``seed`` makes sampling reproducible (each call starts from it); ``None``
    draws a fresh one per call. ``embedding=True`` makes an embedding context (for
    :meth:`embed`, :meth:`create_embedding` and, with ``pooling_type="rank"``,
    :meth:`rerank`). ``context_shift=True`` lets generation run past a full context by
    dropping the older half of it (off by default: generation stops with "length").

    One call runs at a time: a second thread waits for the first. A stream holds the
    object until it is exhausted or closed.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_gpu_layers: int = 0,
        split_mode: Literal["none", "layer", "row", "tensor"] = "layer",
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        vocab_only: bool = False,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: Mapping[str, bool | int | float | str] | None = None,
        lora_path: str | None = None,
        lora_scale: float = 1.0,
        progress: Callable[[float], bool | None] | None = None,
        rpc_servers: str | Sequence[str] | None = None,
        **params: Any,
    ) -> None:
        self._model_owned = True
        self.model = LlamaModel.load(
            model_path,
            n_gpu_layers=n_gpu_layers,
            split_mode=split_mode,
            main_gpu=main_gpu,
            tensor_split=tensor_split,
            use_mmap=use_mmap,
            use_mlock=use_mlock,
            vocab_only=vocab_only,
            kv_overrides=kv_overrides,
            progress=progress,
            rpc_servers=rpc_servers,
        )
        try:
            self._setup(**params)
            if lora_path is not None:
                adapter = LoraAdapter(self.model, lora_path)
                self.ctx.set_lora(adapter, lora_scale)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_model(cls, model: LlamaModel, **params: Any) -> Llama:
        """A ``Llama`` over an already loaded model (which ``close()`` leaves open)."""
        self = cls.__new__(cls)
        self._model_owned = False
        self.model = model
        self._setup(**params)
        return self

    def _setup(
        self,
        *,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int | None = None,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_seq_max: int | None = None,
        seed: int | None = None,
        embedding: bool = False,
        pooling_type: Literal["none", "mean", "cls", "last", "rank"] | None = None,
        flash_attn: bool | None = None,
        offload_kqv: bool | None = None,
        type_k: str | None = None,
        type_v: str | None = None,
        rope_scaling_type: Literal["none", "linear", "yarn", "longrope"] | None = None,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        yarn_ext_factor: float | None = None,
        yarn_attn_factor: float | None = None,
        yarn_beta_fast: float | None = None,
        yarn_beta_slow: float | None = None,
        yarn_orig_ctx: int | None = None,
        last_n_tokens_size: int = 64,
        chat_format: str | None = None,
        chat_template: str | None = None,
        context_shift: bool = False,
        n_keep: int | None = None,
        verbose: bool = False,
        **ignored: Any,
    ) -> None:
        self._closed = False
        self._lock = threading.Lock()
        self._owner: int | None = None
        unknown = set(ignored) - _IGNORED_PARAMS
        if unknown:
            raise TypeError(
                f"Llama() got unexpected keyword argument(s): {', '.join(sorted(unknown))}"
            )
        if verbose:
            _enable_verbose_log()
        if n_ctx < 0 or n_batch <= 0:
            raise ValueError(f"n_ctx must be >= 0 and n_batch > 0 (got {n_ctx}, {n_batch})")
        n_ctx = n_ctx or self.model.n_ctx_train
        self.embedding = embedding
        self.seed = seed
        self.context_shift = context_shift
        self.last_n_tokens_size = last_n_tokens_size
        self.model_path = self.model.path or ""
        self.ctx = LlamaContext(
            self.model,
            n_ctx=n_ctx,
            n_batch=n_batch,
            # Embedding batches hold whole sequences, which must fit in one micro-batch.
            n_ubatch=n_batch if embedding else n_ubatch,
            # Embedding inputs are packed into one batch as separate sequences.
            n_seq_max=n_seq_max or (min(64, n_batch) if embedding else 1),
            kv_unified=True if embedding else None,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            embeddings=embedding,
            pooling_type=pooling_type,
            flash_attn=flash_attn,
            offload_kqv=offload_kqv,
            type_k=type_k,
            type_v=type_v,
            rope_scaling_type=rope_scaling_type,
            rope_freq_base=rope_freq_base or None,
            rope_freq_scale=rope_freq_scale or None,
            yarn_ext_factor=yarn_ext_factor,
            yarn_attn_factor=yarn_attn_factor,
            yarn_beta_fast=yarn_beta_fast,
            yarn_beta_slow=yarn_beta_slow,
            yarn_orig_ctx=yarn_orig_ctx,
        )
        self._batch = LlamaBatch(self.ctx.n_batch)
        self.n_keep = n_keep if n_keep is not None else int(self.model.add_bos)
        # Tokens whose keys and values are in the KV cache (sequence 0), in order.
        self._cache: list[int] = []
        self.chat_format = chat_format
        self._chat_template = chat_template
        self._formatter: ChatFormatter | None = None

    # ---- lifetime -------------------------------------------------------------------

    def close(self) -> None:
        """Free the context (and the model, unless it came from :meth:`from_model`).

        Waits for a call running in another thread; BusyError inside an open stream.
        """
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the context existed
            if getattr(self, "_model_owned", False) and hasattr(self, "model"):
                self.model.close()
            return
        if self._owner == threading.get_ident():
            raise BusyError("close() inside an open stream of this Llama: close the stream first")
        with lock:
            self._closed = True
            for handle in (getattr(self, "_batch", None), getattr(self, "ctx", None)):
                if handle is not None:
                    handle.close()
            if self._model_owned:
                self.model.close()

    def __enter__(self) -> Llama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- llama-cpp-python's small accessors ---------------------------------------

    def n_ctx(self) -> int:
        return self.ctx.n_ctx

    def n_vocab(self) -> int:
        return self.model.n_vocab

    def n_embd(self) -> int:
        return self.model.n_embd

    def token_bos(self) -> int:
        return self.model.token_bos

    def token_eos(self) -> int:
        return self.model.token_eos

    def tokenize(self, text: bytes | str, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of ``text`` (BOS added if the model wants one and ``add_bos``)."""
        tokens: list[int] = self.model.tokenize(
            text, add_special=add_bos, parse_special=special
        ).tolist()
        return tokens

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        """The bytes of ``tokens`` (``prev_tokens`` give the context for leading spaces)."""
        out = b"".join(self.model.token_to_piece(t, special=special) for t in tokens)
        return out

    def reset(self) -> None:
        """Forget the prompt cache (the next call decodes its whole prompt)."""
        with self._hold():
            self.ctx.clear()
            self._cache.clear()

    @property
    def cached_tokens(self) -> list[int]:
        """The tokens the KV cache holds from the last call (the reusable prefix)."""
        return list(self._cache)

    # ---- exclusive use ----------------------------------------------------------------

    def _hold(self) -> _Hold:
        if self._closed:
            raise ClosedError("this Llama is closed")
        if self._owner == threading.get_ident():
            raise BusyError(
                "this Llama is already in use in this thread (an unfinished stream?): "
                "exhaust or close that stream first"
            )
        return _Hold(self)

    # ---- completion ---------------------------------------------------------------------

    def _prompt_tokens(
        self, prompt: str | bytes | Sequence[int], add_bos: bool = True
    ) -> list[int]:
        if isinstance(prompt, (str, bytes)):
            tokens = self.tokenize(prompt, add_bos=add_bos, special=True)
        else:
            tokens = [int(t) for t in prompt]
            n_vocab = self.model.n_vocab
            bad = [t for t in tokens if not 0 <= t < n_vocab]
            if bad:
                raise InvalidTokenError(f"token id(s) {bad[:5]} outside [0, {n_vocab})")
        if not tokens:
            raise ValueError("the prompt is empty (and the model adds no BOS token)")
        return tokens

    def _sampling(self, **kw: Any) -> SamplingParams:
        if kw.get("seed") is None:
            kw["seed"] = self.seed
        kw.setdefault("penalty_last_n", self.last_n_tokens_size)
        kw.pop("tfs_z", None)  # removed from llama.cpp; accepted for compatibility
        if kw.get("logit_bias"):  # JSON gives string keys
            kw["logit_bias"] = {int(k): float(v) for k, v in kw["logit_bias"].items()}
        if kw.get("logits_processor") is not None:
            kw["logits_processor"] = tuple(kw["logits_processor"])
        return SamplingParams(**{k: v for k, v in kw.items() if v is not None})

    def _generate(
        self,
        prompt: list[int],
        *,
        max_tokens: int | None,
        stop: str | Sequence[str] | None,
        params: SamplingParams,
        n_logprobs: int | None = None,
        stopping_criteria: Sequence[StoppingCriteria] = (),
    ) -> Generator[CompletionChunk, None, None]:
        """The one generation loop: yields a chunk whenever text can be shown, and a last
        chunk with the stop reason and timings. Bad input raises here, not at the first
        ``next()``."""
        if self._closed:
            raise ClosedError("this Llama is closed")
        if self.embedding:
            raise ValueError("this Llama was created with embedding=True: it makes embeddings only")
        if len(prompt) >= self.ctx.n_ctx:
            raise ContextOverflowError(len(prompt), self.ctx.n_ctx)
        history: list[int] = []
        samplers = build_sampler(self.model, params, history, n_ctx=self.ctx.n_ctx)  # bad: raises
        stops = [stop] if isinstance(stop, str) else list(stop or ())
        return self._run(prompt, max_tokens, stops, params, samplers, n_logprobs, stopping_criteria)

    def _run(
        self,
        prompt: list[int],
        max_tokens: int | None,
        stop: Sequence[str],
        params: SamplingParams,
        samplers: tuple[LlamaSampler, LlamaSampler | None],
        n_logprobs: int | None,
        stopping_criteria: Sequence[StoppingCriteria],
    ) -> Generator[CompletionChunk, None, None]:
        """Generate while holding this Llama (a stream holds it until closed)."""
        with self._hold():
            ctx, model, batch = self.ctx, self.model, self._batch
            n_ctx = ctx.n_ctx
            chain, grammar = samplers
            t0 = time.perf_counter()
            cached = self._prefill(prompt)
            t1 = time.perf_counter()
            if params.uses_history:
                for t in prompt:
                    chain.accept(t)
            gen = Generation(model, stop, max_tokens, n_logprobs, len(prompt))
            n_past = len(prompt)
            out = ""
            while gen.reason is None:
                token = chain.sample(ctx, -1, grammar=grammar)
                out = gen.add(ctx, token)
                if gen.reason is not None:
                    break
                if stopping_criteria and self._criteria_met(
                    stopping_criteria, prompt, gen.generated
                ):
                    gen.reason = "stop"
                elif n_past >= n_ctx and not self._shift(n_past):
                    gen.reason = "length"
                else:
                    if n_past >= n_ctx:
                        n_past = len(self._cache)
                    batch.clear()
                    batch.add(token, n_past, 0, True)
                    self._decode(batch)
                    self._cache.append(token)
                    n_past += 1
                    if out:
                        yield gen.chunk(out)
            t2 = time.perf_counter()
            n_gen = len(gen.generated)
            timings = Timings(cached, len(prompt) - cached, (t1 - t0) * 1e3, n_gen, (t2 - t1) * 1e3)
            yield gen.finish(out, timings)

    def _criteria_met(
        self, criteria: Sequence[StoppingCriteria], prompt: list[int], generated: list[int]
    ) -> bool:
        ids = np.asarray(prompt + generated, dtype=np.intc)
        logits = self.ctx.logits(-1)
        return any(bool(c(ids, logits)) for c in criteria)

    def _decode(self, batch: LlamaBatch) -> None:
        try:
            self.ctx.decode(batch)
        except BaseException:
            # Whatever part of the batch reached the KV cache is not in _cache: drop it.
            self.ctx.seq_rm(0, len(self._cache), -1)
            raise

    def _prefill(self, prompt: list[int]) -> int:
        """Decode the part of ``prompt`` the KV cache lacks; the number of tokens reused."""
        ctx, batch, cache = self.ctx, self._batch, self._cache
        n = 0
        for a, b in zip(cache, prompt, strict=False):
            if a != b:
                break
            n += 1
        # The last prompt token is always decoded: its logits start the generation.
        n = min(n, len(prompt) - 1)
        if n < len(cache):
            if not ctx.seq_rm(0, n, -1):  # recurrent models cannot drop a suffix
                ctx.clear()
                n = 0
            del cache[n:]
        step = ctx.n_batch
        for start in range(n, len(prompt), step):
            chunk = prompt[start : start + step]
            batch.clear()
            batch.add_sequence(chunk, start, 0, logits_last=start + len(chunk) == len(prompt))
            self._decode(batch)
            cache.extend(chunk)
        return n

    def _shift(self, n_past: int) -> bool:
        """Context shift: drop half of what follows the first ``n_keep`` tokens."""
        if not self.context_shift or not self.ctx.can_shift:
            return False
        keep = min(self.n_keep, n_past - 1)
        n_discard = (n_past - keep) // 2
        self.ctx.seq_rm(0, keep, keep + n_discard)
        self.ctx.seq_add(0, keep + n_discard, n_past, -n_discard)
        del self._cache[keep : keep + n_discard]
        return True

    def stream(
        self,
        prompt: str | bytes | Sequence[int],
        *,
        max_tokens: int | None = 16,
        stop: str | Sequence[str] | None = None,
        logprobs: int | None = None,
        add_bos: bool = True,
        stopping_criteria: Sequence[StoppingCriteria] | None = None,
        **sampling: Any,
    ) -> Generator[CompletionChunk, None, None]:
        """Generate from ``prompt``, yielding text as soon as it is safe to show.

        Sampling keywords are those of :class:`~llama_cy.sampling.SamplingParams`.
        ``logprobs=N`` adds each token's log-probability and the N most likely tokens.
        ``max_tokens=None`` (or <= 0) runs until the model stops or the context is full.
        """
        tokens = self._prompt_tokens(prompt, add_bos)
        params = self._sampling(**sampling)
        return self._generate(
            tokens,
            max_tokens=max_tokens,
            stop=stop,
            params=params,
            n_logprobs=logprobs,
            stopping_criteria=stopping_criteria or (),
        )

    def complete(
        self,
        prompt: str | bytes | Sequence[int],
        *,
        max_tokens: int | None = 16,
        stop: str | Sequence[str] | None = None,
        logprobs: int | None = None,
        add_bos: bool = True,
        stopping_criteria: Sequence[StoppingCriteria] | None = None,
        **sampling: Any,
    ) -> Completion:
        """Generate from ``prompt``; the whole :class:`Completion` (see :meth:`stream`)."""
        return join_chunks(
            self.stream(
                prompt,
                max_tokens=max_tokens,
                stop=stop,
                logprobs=logprobs,
                add_bos=add_bos,
                stopping_criteria=stopping_criteria,
                **sampling,
            )
        )

    # ---- llama-cpp-python's completion API -----------------------------------------

    def prepare_completion(
        self,
        prompt: str | Sequence[int],
        suffix: str | None = None,
        max_tokens: int | None = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: int | None = None,
        echo: bool = False,
        stop: str | Sequence[str] | None = None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        seed: int | None = None,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: str | None = None,
        stopping_criteria: Sequence[StoppingCriteria] | None = None,
        logits_processor: Sequence[LogitsProcessor] | None = None,
        grammar: LlamaGrammar | str | None = None,
        logit_bias: Mapping[int | str, float] | None = None,
        stream_options: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> Prepared:
        """:meth:`create_completion`'s arguments checked and turned into tokens, sampling
        parameters and a response shaper, ready to run (here or in the server's engine)."""
        tokens = self._completion_prompt(prompt, suffix)
        params = self._sampling(
            temperature=temperature,
            top_p=top_p,
            min_p=min_p,
            typical_p=typical_p,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            repeat_penalty=repeat_penalty,
            top_k=top_k,
            seed=seed,
            mirostat_mode=mirostat_mode,
            mirostat_tau=mirostat_tau,
            mirostat_eta=mirostat_eta,
            grammar=grammar,
            logit_bias=logit_bias,
            logits_processor=logits_processor,
            **extra,
        )
        prefix = self.detokenize(tokens, special=False).decode("utf-8", "replace") if echo else ""
        shaper = CompletionShaper(
            model or self.model_path,
            prefix=prefix,
            logprobs=logprobs is not None,
            include_usage=bool((stream_options or {}).get("include_usage")),
        )
        criteria = tuple(stopping_criteria or ())
        return Prepared(tokens, params, max_tokens, _stops(stop), logprobs, criteria, shaper)

    @overload
    def create_completion(
        self, prompt: str | Sequence[int], *, stream: Literal[False] = ..., **kwargs: Any
    ) -> dict[str, Any]: ...
    @overload
    def create_completion(
        self, prompt: str | Sequence[int], *, stream: Literal[True], **kwargs: Any
    ) -> Iterator[dict[str, Any]]: ...
    def create_completion(
        self, prompt: str | Sequence[int], *args: Any, stream: bool = False, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """An OpenAI text completion dict (an iterator of chunk dicts with ``stream=True``).

        The arguments are llama-cpp-python's (see :meth:`prepare_completion`), plus the
        samplers it lacks: ``dry_*``, ``xtc_*``, ``top_n_sigma``, ``dynatemp_*``,
        ``penalty_last_n``.
        """
        return self._respond(self.prepare_completion(prompt, *args, **kwargs), stream)

    def _respond(self, job: Prepared, stream: bool) -> dict[str, Any] | Iterator[dict[str, Any]]:
        chunks = self._generate(
            job.tokens,
            max_tokens=job.max_tokens,
            stop=job.stop,
            params=job.params,
            n_logprobs=job.n_logprobs,
            stopping_criteria=job.stopping_criteria,
        )
        if stream:
            return job.shaper.stream(chunks)
        return job.shaper.whole(join_chunks(chunks))

    __call__ = create_completion

    def _completion_prompt(self, prompt: str | Sequence[int], suffix: str | None) -> list[int]:
        if suffix is None:
            return self._prompt_tokens(prompt)
        m = self.model
        if min(m.token_fim_pre, m.token_fim_suf, m.token_fim_mid) < 0:
            raise ValueError("suffix (fill-in-the-middle) needs a model with FIM tokens")
        pre = self._prompt_tokens(prompt, add_bos=False) if prompt else []
        suf = self.tokenize(suffix, add_bos=False)
        head = [m.token_bos] if m.add_bos else []
        return [*head, m.token_fim_pre, *pre, m.token_fim_suf, *suf, m.token_fim_mid]

    # ---- chat -----------------------------------------------------------------------------

    @property
    def formatter(self) -> ChatFormatter:
        """The chat formatter (the model's template, or ``chat_format``/``chat_template``)."""
        if self._formatter is None:
            self._formatter = ChatFormatter(self.model, self.chat_format, self._chat_template)
        return self._formatter

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text the chat template renders for ``messages``."""
        return self.formatter.render(
            messages, add_generation_prompt=add_generation_prompt, tools=tools, **kwargs
        )

    def _chat_tokens(self, text: str) -> list[int]:
        # The template writes BOS as text; the tokenizer adds it too: keep one.
        bos = self.formatter.bos_token
        if self.model.add_bos and bos and text.startswith(bos):
            text = text[len(bos) :]
        return self.tokenize(text, add_bos=True, special=True)

    def prepare_chat_completion(
        self,
        messages: Sequence[Mapping[str, Any]],
        functions: Sequence[Mapping[str, Any]] | None = None,
        function_call: str | Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: str | None = None,
        logits_processor: Sequence[LogitsProcessor] | None = None,
        grammar: LlamaGrammar | str | None = None,
        logit_bias: Mapping[int | str, float] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        stream_options: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> Prepared:
        """:meth:`create_chat_completion`'s arguments turned into a :class:`Prepared` run.

        ``tools``/``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or a named
        function) give ``message.tool_calls``; a required or named call is enforced by a
        grammar, an automatic one by a grammar that wakes at ``<tool_call>``.
        ``response_format`` ``{"type": "json_object"}`` (optionally with ``"schema"``) or
        ``{"type": "json_schema", "json_schema": {"schema": ...}}`` is enforced likewise.
        """
        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, Mapping):
                tool_choice = {"type": "function", "function": dict(function_call)}
            elif function_call is not None:
                tool_choice = function_call
        _check_tools(tools)
        choice = _tool_choice(tools, tool_choice)
        messages = list(messages)
        render_tools = None
        if choice != "none" and tools:
            if self.formatter.supports_tools:
                render_tools = tools
            else:
                messages = _with_system(messages, tools_system_prompt(tools))
        prompt_text = self.apply_chat_template(
            messages, tools=render_tools, **dict(chat_template_kwargs or {})
        )
        tokens = self._chat_tokens(prompt_text)
        if grammar is None and tools and choice != "none":
            if choice == "auto":
                grammar = LlamaGrammar(
                    tool_call_grammar(tools), triggers=[r"[\s\S]*?(" + TOOL_CALL_OPEN + r")[\s\S]*"]
                )
            else:
                named = None if choice == "required" else choice
                grammar = LlamaGrammar(tool_call_grammar(tools, named, tagged=False))
        elif grammar is None and response_format is not None:
            grammar = _response_format_grammar(response_format)
        params = self._sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            typical_p=typical_p,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            repeat_penalty=repeat_penalty,
            seed=seed,
            mirostat_mode=mirostat_mode,
            mirostat_tau=mirostat_tau,
            mirostat_eta=mirostat_eta,
            grammar=grammar,
            logit_bias=logit_bias,
            logits_processor=logits_processor,
            **extra,
        )
        n_logprobs = (top_logprobs or 0) if logprobs else None
        with_tools = bool(tools) and choice != "none"
        shaper = ChatShaper(
            model or self.model_path,
            tools=with_tools,
            logprobs=n_logprobs is not None,
            include_usage=bool((stream_options or {}).get("include_usage")),
        )
        return Prepared(tokens, params, max_tokens, _stops(stop), n_logprobs, (), shaper)

    @overload
    def create_chat_completion(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        stream: Literal[False] = ...,
        **kwargs: Any,
    ) -> dict[str, Any]: ...
    @overload
    def create_chat_completion(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        stream: Literal[True],
        **kwargs: Any,
    ) -> Iterator[dict[str, Any]]: ...
    def create_chat_completion(
        self, messages: Sequence[Mapping[str, Any]], *args: Any, stream: bool = False, **kwargs: Any
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """An OpenAI chat completion dict (an iterator of chunk dicts with ``stream=True``);
        the arguments are llama-cpp-python's (see :meth:`prepare_chat_completion`)."""
        return self._respond(self.prepare_chat_completion(messages, *args, **kwargs), stream)

    # ---- embeddings -----------------------------------------------------------------------

    def _embed_tokens(
        self, inputs: Sequence[list[int]], normalize: bool
    ) -> list[npt.NDArray[np.float32]]:
        """One embedding per input (a row per token when the pooling is "none"), packing
        as many inputs into each decode as the batch and the sequence limit allow."""
        if not self.embedding:
            raise ValueError("create the Llama with embedding=True to make embeddings")
        ctx, batch = self.ctx, self._batch
        pooled = ctx.pooling_type != "none"
        encoder = self.model.has_encoder and not self.model.has_decoder
        results: list[npt.NDArray[np.float32]] = []
        room = min(batch.capacity, ctx.n_ctx)
        with self._hold():
            i = 0
            while i < len(inputs):
                batch.clear()
                ctx.clear()
                seqs: list[list[int]] = []
                while (
                    i < len(inputs)
                    and len(seqs) < ctx.n_seq_max
                    and batch.n_tokens + len(inputs[i]) <= room
                ):
                    for pos, token in enumerate(inputs[i]):
                        batch.add(token, pos, len(seqs), True)
                    seqs.append(inputs[i])
                    i += 1
                if encoder:
                    ctx.encode(batch)
                else:
                    ctx.decode(batch)
                row = 0
                for s, seq in enumerate(seqs):
                    if pooled:
                        vec = np.array(ctx.sequence_embeddings(s), dtype=np.float32)
                    else:
                        vec = np.array([ctx.embeddings(row + j) for j in range(len(seq))])
                    row += len(seq)
                    results.append(_normalized(vec) if normalize else vec)
            ctx.clear()
            self._cache.clear()
        return results

    def _embedding_inputs(self, input: str | Sequence[str], truncate: bool) -> list[list[int]]:
        texts = [input] if isinstance(input, str) else list(input)
        limit = min(self.ctx.n_ctx, self.ctx.n_batch)
        out = []
        for text in texts:
            tokens = self.tokenize(text, add_bos=True, special=False)
            if self.model.add_eos and (not tokens or tokens[-1] != self.model.token_eos):
                tokens.append(self.model.token_eos)
            if len(tokens) > limit:
                if not truncate:
                    raise ContextOverflowError(len(tokens), limit)
                tokens = tokens[:limit]
            if not tokens:
                raise ValueError("cannot embed an empty input (the model adds no BOS token)")
            out.append(tokens)
        return out

    def embed(
        self,
        input: str | Sequence[str],
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        """Embeddings as lists of floats, as llama-cpp-python's ``embed``.

        One input gives one vector (or a list of per-token vectors when the pooling is
        "none"); a list gives a list of those. ``normalize`` scales to unit L2 norm.
        ``return_count`` also returns the number of tokens embedded.
        """
        inputs = self._embedding_inputs(input, truncate)
        vectors = [v.tolist() for v in self._embed_tokens(inputs, normalize)]
        result: Any = vectors[0] if isinstance(input, str) else vectors
        if return_count:
            return result, sum(len(t) for t in inputs)
        return result

    def create_embedding(
        self, input: str | Sequence[str], model: str | None = None, normalize: bool = True
    ) -> dict[str, Any]:
        """An OpenAI embeddings dict; vectors have unit L2 norm unless ``normalize=False``."""
        inputs = self._embedding_inputs(input, truncate=True)
        vectors = self._embed_tokens(inputs, normalize)
        n = sum(len(t) for t in inputs)
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "embedding": v.tolist(), "index": i}
                for i, v in enumerate(vectors)
            ],
            "model": model or self.model_path,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """A relevance score per document, from a model with a ranking head.

        Needs ``Llama(..., embedding=True, pooling_type="rank")``.
        """
        if self.ctx.pooling_type != "rank":
            raise ValueError('rerank needs Llama(..., embedding=True, pooling_type="rank")')
        m = self.model
        template = m.chat_template("rerank")
        inputs = []
        for doc in documents:
            if template is not None:
                text = template.replace("{query}", query).replace("{document}", doc)
                tokens = self.tokenize(text, add_bos=False, special=True)
            else:
                q = self.tokenize(query, add_bos=False)
                d = self.tokenize(doc, add_bos=False)
                tokens = [m.token_bos, *q, m.token_eos, m.token_sep, *d, m.token_eos]
                tokens = [t for t in tokens if t >= 0]
            inputs.append(tokens[: min(self.ctx.n_ctx, self.ctx.n_batch)])
        return [float(v[0]) for v in self._embed_tokens(inputs, normalize=False)]

    # ---- async ---------------------------------------------------------------------------------

    async def astream(
        self, prompt: str | bytes | Sequence[int], **kwargs: Any
    ) -> AsyncIterator[CompletionChunk]:
        """:meth:`stream` for asyncio: generation runs in a worker thread, never in the
        event loop; leaving the loop early stops generation at the next chunk."""
        chunks = self.stream(prompt, **kwargs)  # bad input raises here, in the caller
        async for chunk in _in_thread(chunks):
            yield chunk

    async def acomplete(self, prompt: str | bytes | Sequence[int], **kwargs: Any) -> Completion:
        """:meth:`complete` for asyncio (the event loop stays free)."""
        chunks = [c async for c in self.astream(prompt, **kwargs)]
        return join_chunks(iter(chunks))

    async def acreate_completion(self, prompt: str | Sequence[int], **kwargs: Any) -> Any:
        """:meth:`create_completion` for asyncio (``stream=True``: an async iterator)."""
        return await self._acall(self.create_completion, prompt, **kwargs)

    async def acreate_chat_completion(
        self, messages: Sequence[Mapping[str, Any]], **kwargs: Any
    ) -> Any:
        """:meth:`create_chat_completion` for asyncio (``stream=True``: an async iterator)."""
        return await self._acall(self.create_chat_completion, messages, **kwargs)

    async def _acall(self, method: Callable[..., Any], arg: Any, **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            chunks = method(arg, **kwargs)  # prompt checks run here; generation is lazy
            return _in_thread(chunks)
        return await asyncio.to_thread(method, arg, **kwargs)


class _Hold:
    """Exclusive use of a Llama for one call (blocks other threads, releases on exit)."""

    __slots__ = ("llm",)

    def __init__(self, llm: Llama) -> None:
        self.llm = llm

    def __enter__(self) -> None:
        self.llm._lock.acquire()
        if self.llm._closed:  # closed by another thread while this one waited
            self.llm._lock.release()
            raise ClosedError("this Llama is closed")
        self.llm._owner = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        self.llm._owner = None
        self.llm._lock.release()


async def _in_thread(items: Iterator[_T]) -> AsyncIterator[_T]:
    """Run a blocking generator in a worker thread; its items arrive in the event loop."""
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


def _stops(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    return (stop,) if isinstance(stop, str) else tuple(stop or ())


def _tool_choice(
    tools: Sequence[Mapping[str, Any]] | None, choice: str | Mapping[str, Any] | None
) -> str:
    """ "none", "auto", "required" or the name of the one function to call."""
    if not tools:
        return "none"
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise ValueError(
                f"tool_choice must be 'none', 'auto', 'required' or a function, not {choice!r}"
            )
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str):
        raise ValueError(
            "tool_choice must name a function: {'type': 'function', 'function': {'name': ...}}"
        )
    return name


def _check_tools(tools: Sequence[Mapping[str, Any]] | None) -> None:
    """OpenAI's tool list shape, checked before templates and grammars see it."""
    if tools is None:
        return
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise ValueError("tools must be an array of {'type': 'function', 'function': {...}}")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("parameters", {}), (Mapping, bool))
        ):
            raise ValueError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': str, "
                "'parameters': a JSON schema}}"
            )


def _with_system(messages: list[Mapping[str, Any]], text: str) -> list[Mapping[str, Any]]:
    """``messages`` with ``text`` added to (or as) the system message."""
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}\n\n{text}".strip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _response_format_grammar(fmt: Mapping[str, Any]) -> LlamaGrammar | None:
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return LlamaGrammar(json_schema_to_gbnf(fmt.get("schema")))
    if kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema", fmt.get("schema"))
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
        if isinstance(schema, str):
            schema = json.loads(schema)
        return LlamaGrammar(json_schema_to_gbnf(schema))
    raise ValueError(f"response_format type must be text, json_object or json_schema, not {kind!r}")


def _normalized(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    out: npt.NDArray[np.float32] = (v / np.maximum(norm, 1e-12)).astype(np.float32)
    return out


def _enable_verbose_log() -> None:
    """``verbose=True``: llama.cpp's log (INFO and up) on stderr, as llama-cpp-python prints it."""
    if _log.level > logging.INFO or _log.level == logging.NOTSET:
        _log.setLevel(logging.INFO)
    if not any(getattr(h, "_llama_cy_verbose", False) for h in _log.handlers):
        handler = logging.StreamHandler()
        handler._llama_cy_verbose = True  # type: ignore[attr-defined]
        _log.addHandler(handler)
