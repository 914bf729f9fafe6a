"""``llama_cpp.Llama``: llama-cpp-python's class over llama_cy's :class:`~llama_cy.Llama`.

Everything llama_cy's ``Llama`` does is inherited, guarded as it is there. What this class
adds is llama-cpp-python's own surface: its constructor (integer enum values, its
defaults, the keywords it accepts and ignores), ``model``/``ctx`` as the C addresses
its ctypes layer takes, the token-level loop (``eval``, ``sample``, ``generate``,
``n_tokens``, ``input_ids``, ``scores``), states and prompt caches (``save_state``,
``load_state``, ``set_cache``), its per-call seeds, pickling and ``from_pretrained``.
"""

from __future__ import annotations

import operator
import os
import random
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import llama_cy
import llama_cy.errors
import llama_cy.generation
from llama_cy.generation import common_prefix
from llama_cy.prepare import CHAT_POSITIONAL, positional
from llama_cy.sampling import (
    LlamaGrammar,
    MinTokensLogitsProcessor,
    SamplingParams,
    build_sampler,
)

from . import llama_chat_format, llama_cpp
from ._enums import enum_name, enum_value
from ._internals import LlamaCyContext
from ._scores import reserve
from ._state import LlamaState
from .llama_cache import BaseLlamaCache, LlamaCache, LlamaDiskCache, LlamaRAMCache
from .llama_grammar import LlamaGrammar as _LlamaGrammar
from .llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding
from .llama_tokenizer import BaseLlamaTokenizer, LlamaTokenizer, without_bos_space
from .llama_types import *  # noqa: F403  (llama-cpp-python re-exports its types here)

__all__ = [
    "BaseLlamaCache",
    "BaseLlamaTokenizer",
    "Llama",
    "LlamaCache",
    "LlamaDiskCache",
    "LlamaGrammar",
    "LlamaRAMCache",
    "LlamaState",
    "LlamaTokenizer",
    "LogitsProcessor",
    "LogitsProcessorList",
    "MinTokensLogitsProcessor",
    "StoppingCriteria",
    "StoppingCriteriaList",
]

assert LlamaGrammar is _LlamaGrammar  # one grammar class for both names

LogitsProcessor = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], npt.NDArray[np.single]]
StoppingCriteria = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], bool]


class LogitsProcessorList(list[LogitsProcessor]):
    """Processors applied in order; the list itself is one processor."""

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


class StoppingCriteriaList(list[StoppingCriteria]):
    """Criteria of which any one stops generation; the list itself is one criterion."""

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        return any(criterion(input_ids, logits) for criterion in self)


class Llama(llama_cy.Llama):
    """llama-cpp-python's ``Llama``, running on llama_cy.

    ``model`` and ``ctx`` are the ``llama_model *`` and ``llama_context *`` addresses
    that :mod:`llama_cpp.llama_cpp` takes (llama_cy's objects: :attr:`llama_cy_model`,
    :attr:`llama_cy_ctx`). Calls that give no ``seed`` draw one from the previous one,
    as llama-cpp-python does: outputs differ from call to call and repeat from the
    same ``seed`` (or :meth:`set_seed`, or a loaded state).
    """

    context_type = LlamaCyContext

    def __init__(
        self,
        model_path: str,
        *,
        n_gpu_layers: int = 0,
        split_mode: int | str = llama_cpp.LLAMA_SPLIT_MODE_LAYER,
        main_gpu: int = 0,
        tensor_split: list[float] | None = None,
        vocab_only: bool = False,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: dict[str, bool | int | float | str] | None = None,
        seed: int = llama_cpp.LLAMA_DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        rope_scaling_type: int | str | None = llama_cpp.LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED,
        pooling_type: int | str = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED,
        attention_type: int | str = llama_cpp.LLAMA_ATTENTION_TYPE_UNSPECIFIED,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        yarn_ext_factor: float = -1.0,
        yarn_attn_factor: float = 1.0,
        yarn_beta_fast: float = 32.0,
        yarn_beta_slow: float = 1.0,
        yarn_orig_ctx: int = 0,
        logits_all: bool = False,
        embedding: bool = False,
        offload_kqv: bool = True,
        flash_attn: bool = False,
        op_offload: bool | None = None,
        swa_full: bool | None = None,
        no_perf: bool = False,
        last_n_tokens_size: int = 64,
        lora_base: str | None = None,
        lora_scale: float = 1.0,
        lora_path: str | None = None,
        numa: bool | int = False,
        chat_format: str | None = None,
        chat_handler: Any = None,
        draft_model: Any = None,
        tokenizer: BaseLlamaTokenizer | None = None,
        type_k: int | str | None = None,
        type_v: int | str | None = None,
        spm_infill: bool = False,
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        # llama-cpp-python takes **kwargs and ignores what it does not know (LangChain
        # passes device=, n_parts=, f16_kv=...): so does this class, for the keywords
        # that llama_cy's Llama does not take either.
        kwargs = {k: v for k, v in kwargs.items() if k in llama_cy.Llama.keywords()}
        # lora_base: kept as an attribute and passed to nothing, as llama-cpp-python
        # does since llama.cpp dropped it (an adapter applies to the model it is loaded on).
        if spm_infill:
            raise NotImplementedError("spm_infill=True (suffix-prefix-middle order)")
        if chat_format in ("functionary-v1", "functionary-v2"):
            raise NotImplementedError(
                f"chat_format={chat_format!r}: llama-cpp-python's handler drives a Hugging "
                "Face tokenizer's own chat template, which is not built here; "
                "chat_format='functionary' (v0) is, and llama.cpp's chat engine runs the "
                "templates of later functionary models (chat_format=None)"
            )
        if isinstance(draft_model, LlamaDraftModel) and not isinstance(
            draft_model, LlamaPromptLookupDecoding
        ):
            raise NotImplementedError(
                "a Python LlamaDraftModel subclass: drafts come from llama.cpp's "
                "common_speculative here (LlamaPromptLookupDecoding, a draft model path, "
                "or llama-server's --spec-type names)"
            )
        self._init_args = dict(
            model_path=model_path,
            n_gpu_layers=n_gpu_layers,
            split_mode=split_mode,
            main_gpu=main_gpu,
            tensor_split=tensor_split,
            vocab_only=vocab_only,
            use_mmap=use_mmap,
            use_mlock=use_mlock,
            kv_overrides=kv_overrides,
            seed=seed,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            rope_scaling_type=rope_scaling_type,
            pooling_type=pooling_type,
            attention_type=attention_type,
            rope_freq_base=rope_freq_base,
            rope_freq_scale=rope_freq_scale,
            yarn_ext_factor=yarn_ext_factor,
            yarn_attn_factor=yarn_attn_factor,
            yarn_beta_fast=yarn_beta_fast,
            yarn_beta_slow=yarn_beta_slow,
            yarn_orig_ctx=yarn_orig_ctx,
            logits_all=logits_all,
            embedding=embedding,
            offload_kqv=offload_kqv,
            flash_attn=flash_attn,
            op_offload=op_offload,
            swa_full=swa_full,
            no_perf=no_perf,
            last_n_tokens_size=last_n_tokens_size,
            lora_scale=lora_scale,
            lora_path=lora_path,
            numa=numa,
            chat_format=chat_format,
            chat_handler=chat_handler,
            draft_model=draft_model,
            type_k=type_k,
            type_v=type_v,
            verbose=verbose,
            **kwargs,
        )
        self._seed = seed or llama_cpp.LLAMA_DEFAULT_SEED
        self._logits_all = logits_all
        self.cache: BaseLlamaCache | None = None
        self.verbose = verbose
        self.lora_path, self.lora_scale = lora_path, lora_scale
        n_batch = min(n_ctx, n_batch) if n_ctx > 0 else n_batch
        self.n_batch = n_batch
        # A handler function, or a format registered in Python, renders the prompt here;
        # llama_cy's own chat engine takes the rest.
        self._chat_function = _chat_function(chat_format, chat_handler)
        python_format = chat_format if self._chat_function is not None else None
        if self._chat_function is not None:
            chat_format = chat_handler = None
        super().__init__(
            model_path,
            n_gpu_layers=n_gpu_layers,
            split_mode=enum_name("LLAMA_SPLIT_MODE_", split_mode, "split_mode"),
            main_gpu=main_gpu,
            tensor_split=tensor_split,
            vocab_only=vocab_only,
            use_mmap=use_mmap,
            use_mlock=use_mlock,
            kv_overrides=kv_overrides,
            lora_path=lora_path,
            lora_scale=lora_scale,
            numa=numa,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=min(n_batch, n_ubatch),
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            seed=None,
            embedding=embedding,
            rope_scaling_type=enum_name(
                "LLAMA_ROPE_SCALING_TYPE_", rope_scaling_type, "rope_scaling_type"
            ),
            pooling_type=enum_name("LLAMA_POOLING_TYPE_", pooling_type, "pooling_type"),
            attention_type=enum_name("LLAMA_ATTENTION_TYPE_", attention_type, "attention_type"),
            rope_freq_base=rope_freq_base,
            rope_freq_scale=rope_freq_scale,
            yarn_ext_factor=yarn_ext_factor,
            yarn_attn_factor=yarn_attn_factor,
            yarn_beta_fast=yarn_beta_fast,
            yarn_beta_slow=yarn_beta_slow,
            yarn_orig_ctx=yarn_orig_ctx or None,
            offload_kqv=offload_kqv,
            flash_attn=flash_attn,
            op_offload=op_offload,
            swa_full=swa_full,
            no_perf=no_perf,
            last_n_tokens_size=last_n_tokens_size,
            chat_format=chat_format,
            chat_handler=chat_handler,
            draft_model=draft_model,
            type_k=enum_name("GGML_TYPE_", type_k, "type_k"),
            type_v=enum_name("GGML_TYPE_", type_v, "type_v"),
            verbose=verbose,
            **kwargs,
        )
        if python_format is not None:
            self.chat_format = python_format
        if chat_format is None and chat_handler is None and self._chat_function is None:
            # llama-cpp-python's choice: the model's template, else its llama-2 format.
            if self.llama_cy_model.chat_template() is None:
                self.chat_format = "llama-2"
                self._init_args["chat_format"] = "llama-2"
                self._chat_function = llama_chat_format.get_chat_completion_handler("llama-2")
            else:
                self.chat_format = "chat_template.default"
        # llama-cpp-python's tokenizer=: a Python tokenizer (LlamaHFTokenizer) that
        # tokenize(), detokenize() and text prompts go through.
        self.tokenizer_: BaseLlamaTokenizer = tokenizer or LlamaTokenizer(self)
        # llama-cpp-python's attributes: what was asked for, the GGUF metadata (strings,
        # as llama_model_meta_val_str gives them), the threads the context runs
        self.metadata: dict[str, str] = dict(self.llama_cy_model.metadata)
        self.numa, self.tensor_split, self.kv_overrides = numa, tensor_split, kv_overrides
        self.lora_base, self.spm_infill, self.draft_model = lora_base, spm_infill, draft_model
        self.n_threads: int = self.llama_cy_ctx.n_threads
        self.n_threads_batch: int = self.llama_cy_ctx.n_threads_batch
        self._is_recurrent = self.llama_cy_model.is_recurrent
        self._is_hybrid = self.llama_cy_model.is_hybrid
        # The output row of the logits the next sample() reads: the last eval's last
        # token's, or None when the cache holds tokens whose logits are gone.
        self._logits_at: int | None = None
        # llama-cpp-python's buffer of logits by position (row i: after token i), reserved
        # rather than allocated: see _scores.py
        rows = self.llama_cy_ctx.n_ctx if logits_all else self.n_batch
        self.scores: npt.NDArray[np.single] = reserve(rows, self.n_vocab())

    @classmethod
    def from_model(cls, model: llama_cy.LlamaModel, **params: Any) -> Llama:
        """Not here: ``llama_cpp.Llama`` is made from a path, as llama-cpp-python's
        (``llama_cy.Llama.from_model`` shares a loaded model)."""
        raise TypeError(
            "llama_cpp.Llama is made from a model path, as in llama-cpp-python; "
            "llama_cy.Llama.from_model shares a loaded LlamaModel"
        )

    # ---- llama-cpp-python's attributes ---------------------------------------------------

    @property
    def model(self) -> int:  # type: ignore[override]
        """The ``llama_model *`` address, for :mod:`llama_cpp.llama_cpp`."""
        return self.llama_cy_model.address

    @property
    def ctx(self) -> int:  # type: ignore[override]
        """The ``llama_context *`` address, for :mod:`llama_cpp.llama_cpp`."""
        return self.llama_cy_ctx.address

    @property
    def llama_cy_model(self) -> llama_cy.LlamaModel:
        """llama_cy's model object (llama_cy's ``Llama.model``)."""
        return super().model

    @property
    def llama_cy_ctx(self) -> LlamaCyContext:
        """llama_cy's context object (llama_cy's ``Llama.ctx``), of ``context_type``."""
        ctx = super().ctx
        assert isinstance(ctx, LlamaCyContext)
        return ctx

    @property
    def model_params(self) -> llama_cpp.llama_model_params:
        """The ``llama_model_params`` this model was loaded with (a ctypes struct)."""
        p: llama_cpp.llama_model_params = llama_cpp.llama_model_default_params()
        a = self._init_args
        p.n_gpu_layers = a["n_gpu_layers"]
        p.split_mode = enum_value("LLAMA_SPLIT_MODE_", a["split_mode"], 1)
        p.main_gpu = a["main_gpu"]
        p.vocab_only = a["vocab_only"]
        mmap, mlock = a["use_mmap"] and a["lora_path"] is None, a["use_mlock"]
        p.load_mode = (
            llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK
            if mmap and mlock
            else llama_cpp.LLAMA_LOAD_MODE_MLOCK
            if mlock
            else llama_cpp.LLAMA_LOAD_MODE_MMAP
            if mmap
            else llama_cpp.LLAMA_LOAD_MODE_NONE
        )
        return p

    @property
    def context_params(self) -> llama_cpp.llama_context_params:
        """The ``llama_context_params`` of this context, as llama.cpp resolved them."""
        p: llama_cpp.llama_context_params = llama_cpp.llama_context_default_params()
        ctx = self.llama_cy_ctx
        p.n_ctx, p.n_batch, p.n_ubatch = ctx.n_ctx, ctx.n_batch, ctx.n_ubatch
        p.n_seq_max = ctx.n_seq_max
        p.n_threads, p.n_threads_batch = ctx.n_threads, ctx.n_threads_batch
        p.embeddings = self.embedding
        p.pooling_type = enum_value("LLAMA_POOLING_TYPE_", ctx.pooling_type, -1)
        return p

    @property
    def n_tokens(self) -> int:
        """How many tokens the context holds (``input_ids[:n_tokens]``)."""
        return len(self.sequence.cache)

    @n_tokens.setter
    def n_tokens(self, n: int) -> None:
        with self.hold():
            if n < len(self.sequence.cache):
                self.sequence.cut(max(n, 0))
                self._logits_at = None

    @property
    def input_ids(self) -> npt.NDArray[np.intc]:
        """The tokens the context holds, in an array of the context's size."""
        ids = np.zeros(self.llama_cy_ctx.n_ctx, dtype=np.intc)
        ids[: self.n_tokens] = self.sequence.cache
        return ids

    @property
    def _input_ids(self) -> npt.NDArray[np.intc]:
        return np.asarray(self.sequence.cache, dtype=np.intc)

    @property
    def _scores(self) -> npt.NDArray[np.single]:
        """The rows of :attr:`scores` up to ``n_tokens``: with ``logits_all=True`` the
        logits after each token the context holds; without it, only the last evaluated
        token's row is written (where it fits in the ``n_batch`` rows), as the next
        sample reads it."""
        return self.scores[: self.n_tokens, :]

    @property
    def eval_tokens(self) -> deque[int]:
        return deque(self.sequence.cache, maxlen=self.llama_cy_ctx.n_ctx)

    @property
    def eval_logits(self) -> deque[list[float]]:
        rows = self.llama_cy_ctx.n_ctx if self._logits_all else 1
        return deque(self._scores.tolist(), maxlen=rows)

    def _own_tokenizer(self) -> bool:
        return isinstance(self.tokenizer_, LlamaTokenizer)

    def tokenize(self, text: bytes | str, add_bos: bool = True, special: bool = False) -> list[int]:
        """Token ids of ``text``: the model's, or the ``tokenizer=`` given."""
        if self._own_tokenizer():
            return super().tokenize(text, add_bos, special)
        raw = text.encode("utf-8") if isinstance(text, str) else text
        return list(self.tokenizer_.tokenize(raw, add_bos, special))

    def detokenize(
        self, tokens: Sequence[int], prev_tokens: Sequence[int] | None = None, special: bool = False
    ) -> bytes:
        """The bytes of ``tokens`` (through the ``tokenizer=`` given); as
        llama-cpp-python, without the space SentencePiece puts before the first word
        when ``tokens`` start with BOS."""
        if not self._own_tokenizer():
            return self.tokenizer_.detokenize(
                list(tokens), None if prev_tokens is None else list(prev_tokens), special
            )
        out = super().detokenize(tokens, prev_tokens, special)
        return out if prev_tokens else without_bos_space(tokens, out, self.token_bos())

    def token_nl(self) -> int:
        return int(self.llama_cy_model.token_nl)

    def pooling_type(self) -> str:
        return str(self.llama_cy_ctx.pooling_type)

    def tokenizer(self) -> LlamaTokenizer:
        """llama-cpp-python's: a tokenizer over this Llama's tokenize/detokenize."""
        return LlamaTokenizer(self)

    def set_seed(self, seed: int) -> None:
        # checked here: a call's bad seed would otherwise stay, and fail every later call
        self._seed = operator.index(seed)

    def set_cache(self, cache: BaseLlamaCache | None) -> None:
        """Keep each completion's final state in ``cache`` and start from the longest
        cached prefix of a prompt."""
        self.cache = cache

    def reset(self) -> None:
        super().reset()
        self._logits_at = None

    # ---- the token-level loop -------------------------------------------------------------

    def eval(self, tokens: Sequence[int]) -> None:
        """Decode ``tokens`` after the ``n_tokens`` the context holds."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            return
        with self.hold():
            seq, ctx, batch = self.sequence, self.llama_cy_ctx, self.batch
            if self.n_tokens + len(tokens) > ctx.n_ctx:
                raise llama_cy.errors.ContextOverflowError(self.n_tokens + len(tokens), ctx.n_ctx)
            seq.cut(len(seq.cache))  # nothing past n_tokens stays in the KV cache
            for start in range(0, len(tokens), self.n_batch):
                chunk = tokens[start : start + self.n_batch]
                batch.clear()
                n_past = len(seq.cache)
                for i, token in enumerate(chunk):
                    out = self._logits_all or i == len(chunk) - 1
                    batch.add(token, n_past + i, (seq.id,), out)
                try:
                    ctx.decode(batch)
                except BaseException:
                    seq.failed()
                    self._logits_at = None
                    raise
                seq.cache.extend(chunk)
                end = n_past + len(chunk)
                if self._logits_all:
                    self.scores[n_past:end] = ctx.all_logits()
                elif end <= len(self.scores):
                    self.scores[end - 1] = ctx.logits(-1)
            self._logits_at = -1

    def sample(
        self,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_eta: float = 0.1,
        mirostat_tau: float = 5.0,
        penalize_nl: bool = True,
        logits_processor: LogitsProcessor | None = None,
        grammar: LlamaGrammar | None = None,
        idx: int | None = None,
    ) -> int:
        """Sample the token after position ``idx`` (default: the last evaluated) with a
        fresh chain of these settings (``tfs_z`` and ``penalize_nl``: accepted and
        ignored, as llama-cpp-python does since llama.cpp dropped them)."""
        chain, grammar_sampler = self._chain(
            top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
            presence_penalty, mirostat_mode, mirostat_eta, mirostat_tau, logits_processor,
            grammar,
        )  # fmt: skip
        try:
            return self._sample_row(chain, grammar_sampler, idx)
        finally:
            chain.close()
            if grammar_sampler is not None:
                grammar_sampler.close()

    def _row(self, idx: int | None) -> int:
        if self.n_tokens == 0 or self._logits_at is None:
            raise ValueError("sample(): no logits to sample from: eval() tokens first")
        row = -1 if idx is None else idx - self.n_tokens
        if row != -1 and not self._logits_all:
            raise ValueError(
                f"sample(idx={idx}): only the last evaluated position has logits "
                "(create the Llama with logits_all=True for the others)"
            )
        return row

    def _sample_row(self, chain: Any, grammar: Any, idx: int | None) -> int:
        row = self._row(idx)
        with self.hold():
            return int(chain.sample(self.llama_cy_ctx, row, grammar=grammar))

    def _chain(
        self,
        top_k: int,
        top_p: float,
        min_p: float,
        typical_p: float,
        temp: float,
        repeat_penalty: float,
        frequency_penalty: float,
        presence_penalty: float,
        mirostat_mode: int,
        mirostat_eta: float,
        mirostat_tau: float,
        logits_processor: LogitsProcessor | None,
        grammar: LlamaGrammar | None,
    ) -> tuple[Any, Any]:
        params = SamplingParams(
            temperature=temp,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            typical_p=typical_p,
            repeat_penalty=repeat_penalty,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            penalty_last_n=self.last_n_tokens_size,
            mirostat_mode=mirostat_mode,
            mirostat_eta=mirostat_eta,
            mirostat_tau=mirostat_tau,
            seed=self._seed & 0xFFFFFFFF,
            grammar=grammar,
            logits_processor=(logits_processor,) if logits_processor is not None else (),
        )
        history = list(self.sequence.cache)
        return build_sampler(self.llama_cy_model, params, history, n_ctx=self.llama_cy_ctx.n_ctx)

    def generate(  # type: ignore[override]
        self,
        tokens: Sequence[int],
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        reset: bool = True,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        penalize_nl: bool = True,
        logits_processor: LogitsProcessor | None = None,
        stopping_criteria: StoppingCriteria | None = None,
        grammar: LlamaGrammar | None = None,
    ) -> Generator[int, Sequence[int] | None, None]:
        """Yield the tokens that follow ``tokens``, one per ``next()``, without end.

        With ``reset`` the cached prefix of ``tokens`` is kept and only the rest is
        decoded (all of it again where the model cannot cut its cache, as recurrent
        ones); without, ``tokens`` continue what the context holds. ``send()`` a list
        of tokens to decode them after the yielded one."""
        if isinstance(tokens, llama_cy.generation.Job):  # llama_cy's own generate(job)
            return super().generate(tokens)  # type: ignore[return-value]
        chain, grammar_sampler = self._chain(
            top_k, top_p, min_p, typical_p, temp, repeat_penalty, frequency_penalty,
            presence_penalty, mirostat_mode, mirostat_eta, mirostat_tau, logits_processor,
            grammar,
        )  # fmt: skip
        return self._generate(list(tokens), reset, chain, grammar_sampler, stopping_criteria)

    def _generate(
        self,
        tokens: list[int],
        reset: bool,
        chain: Any,
        grammar: Any,
        stopping_criteria: StoppingCriteria | None,
    ) -> Generator[int, Sequence[int] | None, None]:
        try:
            if reset and self.n_tokens > 0:
                cache = self.sequence.cache
                n = common_prefix(cache, tokens)
                if n == len(tokens) == len(cache) and self._logits_at is not None:
                    tokens = []  # all of it cached, with its last logits: sample now
                else:
                    # At least the last prompt token is decoded again for its logits.
                    keep = min(n, len(tokens) - 1)
                    with self.hold():
                        keep = self.sequence.cut(keep)
                    self._logits_at = None
                    tokens = tokens[keep:]
            elif reset:
                self.reset()
            while True:
                self.eval(tokens)
                token = self._sample_row(chain, grammar, None)
                if stopping_criteria is not None and stopping_criteria(
                    self._input_ids, self._last_logits()
                ):
                    return
                more = yield token
                tokens = [token, *(more or ())]
        finally:
            chain.close()
            if grammar is not None:
                grammar.close()

    # ---- completions: llama-cpp-python's seeds and prompt cache ---------------------------

    def create_completion(self, prompt: str | Sequence[int], *args: Any, **kwargs: Any) -> Any:
        kwargs = self._seeded(kwargs)
        if isinstance(prompt, str | bytes) and not self._own_tokenizer():
            # llama-cpp-python tokenizes a text prompt with tokenizer= (special tokens
            # parsed); an empty one is the BOS token alone
            text = prompt.encode("utf-8") if isinstance(prompt, str) else prompt
            prompt = self.tokenize(text, special=True) if text else [self.token_bos()]
        if self.cache is None:
            return super().create_completion(prompt, *args, **kwargs)
        tokens = self._prompt_tokens(prompt, kwargs)
        self._from_cache(tokens)
        result = super().create_completion(prompt, *args, **kwargs)
        if kwargs.get("stream"):
            return self._cache_after(result)
        self.cache[list(self.sequence.cache)] = self.save_state()
        return result

    def __call__(self, prompt: str | Sequence[int], *args: Any, **kwargs: Any) -> Any:
        return self.create_completion(prompt, *args, **kwargs)

    def create_chat_completion(
        self, messages: Sequence[Mapping[str, Any]], *args: Any, **kwargs: Any
    ) -> Any:
        if self._chat_function is not None:
            positional(CHAT_POSITIONAL, args, kwargs)
            kwargs.pop("model", None)
            return self._chat_function(llama=self, messages=messages, **kwargs)
        # OpenAI's legacy function results (role "function", Haystack's) are tool results
        # to llama.cpp's chat engine, which knows no "function" role.
        messages = [_tool_result(m) if m.get("role") == "function" else m for m in messages]
        return super().create_chat_completion(messages, *args, **self._seeded(kwargs))

    def create_embedding(  # type: ignore[override]
        self, input: str | Sequence[str], model: str | None = None
    ) -> Any:
        """An OpenAI embeddings dict of the raw vectors, as llama-cpp-python's (which,
        unlike llama-server's /v1/embeddings, does not normalize them)."""
        return super().create_embedding(input, model, normalize=False)

    def create_chat_completion_openai_v1(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`create_chat_completion` as the ``openai`` package's typed objects
        (``ChatCompletion``, or an iterator of ``ChatCompletionChunk``)."""
        try:
            from openai.types.chat import ChatCompletion, ChatCompletionChunk
        except ImportError as e:
            raise ImportError(
                "create_chat_completion_openai_v1 needs the openai package: pip install openai"
            ) from e
        result = self.create_chat_completion(*args, **kwargs)
        if kwargs.get("stream"):
            return (ChatCompletionChunk(**chunk) for chunk in result)
        return ChatCompletion(**result)

    def _seeded(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """A call's seed: the one given, else one drawn from the last (llama-cpp-python)."""
        seed = kwargs.get("seed")
        if seed is not None:
            self.set_seed(seed)
        else:
            self.set_seed(random.Random(self._seed).randint(0, 2**32))
        return {**kwargs, "seed": self._seed & 0xFFFFFFFF}

    def _prompt_tokens(self, prompt: str | Sequence[int], kwargs: dict[str, Any]) -> list[int]:
        if isinstance(prompt, str | bytes):
            text = prompt.encode() if isinstance(prompt, str) else prompt
            return self.tokenize(text, add_bos=kwargs.get("add_bos", True), special=True)
        return [int(t) for t in prompt]

    def _from_cache(self, tokens: list[int]) -> None:
        assert self.cache is not None
        try:
            state = self.cache[tokens]
        except KeyError:
            return
        cached = common_prefix(state.input_ids[: state.n_tokens].tolist(), tokens)
        if cached > common_prefix(self.sequence.cache, tokens):
            self.load_state(state)

    def _cache_after(self, chunks: Iterator[Any]) -> Iterator[Any]:
        yield from chunks
        assert self.cache is not None
        self.cache[list(self.sequence.cache)] = self.save_state()

    # ---- states --------------------------------------------------------------------------------

    def save_state(self) -> LlamaState:
        with self.hold():
            data = self.llama_cy_ctx.state_get_data()
        return LlamaState(
            input_ids=self.input_ids,
            scores=self._scores.copy(),
            n_tokens=self.n_tokens,
            llama_state=data,
            llama_state_size=len(data),
            seed=self._seed,
        )

    def load_state(self, state: LlamaState) -> None:
        with self.hold():
            self.llama_cy_ctx.state_set_data(state.llama_state)
            self.sequence.restored(state.input_ids[: state.n_tokens].tolist())
        self._seed = state.seed
        # llama.cpp's state holds no logits: the last token is decoded again for them,
        # so that sample() goes on where the state was saved (llama-cpp-python's
        # generate() does the same). A recurrent state cannot drop a token: generate()
        # starts over there.
        self._logits_at = None
        if self.n_tokens and not (self._is_recurrent or self._is_hybrid):
            last = self.sequence.cache[-1]
            self.n_tokens = self.n_tokens - 1
            self.eval([last])
        n = min(state.n_tokens, len(self.scores), len(state.scores))
        self.scores[:n] = state.scores[:n]  # the rows as saved, the last one included

    def _last_logits(self) -> npt.NDArray[np.single]:
        with self.hold():
            return self.llama_cy_ctx.logits(-1).copy()

    def __getstate__(self) -> dict[str, Any]:
        return dict(self._init_args)

    def __setstate__(self, state: dict[str, Any]) -> None:
        args = dict(state)
        self.__init__(args.pop("model_path"), **args)  # type: ignore[misc]

    # ---- the hub -------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: str | None,
        additional_files: list[str] | None = None,
        local_dir: str | os.PathLike[str] | None = None,
        local_dir_use_symlinks: bool | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> Llama:
        """Load ``filename`` (a glob) of the Hugging Face repository ``repo_id``,
        downloaded with ``huggingface_hub`` or found in its cache when offline."""
        from .llama_hub import download

        path = download(repo_id, filename, additional_files, local_dir, cache_dir)
        return cls(model_path=str(path), **kwargs)

    @staticmethod
    def logits_to_logprobs(
        logits: npt.NDArray[np.single] | list[float], axis: int = -1
    ) -> npt.NDArray[np.single]:
        x = np.asarray(logits, dtype=np.single)
        shifted = x - np.max(x, axis=axis, keepdims=True)
        out: npt.NDArray[np.single] = shifted - np.log(
            np.sum(np.exp(shifted), axis=axis, keepdims=True)
        )
        return out

    @staticmethod
    def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
        return common_prefix(list(a), list(b))


def _tool_result(message: Mapping[str, Any]) -> dict[str, Any]:
    """A legacy ``function`` message as the ``tool`` message it stands for."""
    out = {k: v for k, v in message.items() if k != "role"}
    out["role"] = "tool"
    out.setdefault("tool_call_id", message.get("name", ""))
    return out


def _chat_function(chat_format: str | None, chat_handler: Any) -> Any:
    """The Python chat handler for these arguments, if they name one."""
    if chat_handler is not None:
        if isinstance(chat_handler, llama_cy.MtmdChatHandler):
            return None
        if not callable(chat_handler):
            raise TypeError(f"chat_handler must be callable, not {type(chat_handler).__name__}")
        return chat_handler
    if chat_format is None:
        return None
    try:
        return llama_chat_format.get_chat_completion_handler(chat_format)
    except llama_chat_format.LlamaChatCompletionHandlerNotFoundException:
        return None  # llama_cy names it (a llama.cpp template) or refuses it
