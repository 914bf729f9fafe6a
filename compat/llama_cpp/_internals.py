"""llama-cpp-python's ``llama_cpp._internals``: model, context, batch and sampler objects
built from its ctypes parameter structs, over llama_cy's guarded types.

llama-cpp-python keeps these private, but programs and its own tests use them. Each
object shows its C address as llama-cpp-python's does (``LlamaModel.model``,
``LlamaContext.ctx``: ``None`` once closed), while every call goes through llama_cy's
checks: a bad index or a closed object raises instead of crashing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import llama_cy
from llama_cy import LlamaSampler as _Sampler

from . import llama_cpp
from ._enums import enum_name

__all__ = ["LlamaBatch", "LlamaContext", "LlamaCyContext", "LlamaModel", "LlamaSampler"]


class LlamaCyContext(llama_cy.LlamaContext):
    """llama_cy's context with llama-cpp-python's ``ctx`` attribute (its address)."""

    @property
    def ctx(self) -> int | None:
        return None if self.closed else self.address


def _progress(params: llama_cpp.llama_model_params) -> Callable[[float], bool] | None:
    """``params.progress_callback`` (a ctypes function) as llama_cy's ``progress=``:
    called with the fraction loaded and its user data; False cancels the load."""
    callback, data = params.progress_callback, params.progress_callback_user_data
    if not callback:
        return None
    return lambda fraction: bool(callback(fraction, data))


class LlamaModel:
    """A model loaded from ``llama_model_params`` (llama-cpp-python's ``_internals``)."""

    def __init__(
        self,
        *,
        path_model: str,
        params: llama_cpp.llama_model_params,
        verbose: bool = True,
    ) -> None:
        if params.devices or params.tensor_buft_overrides:
            raise NotImplementedError(
                "llama_model_params.devices and tensor_buft_overrides: ggml backend handles "
                "that llama_cpp's ctypes layer cannot make (it binds no ggml-backend "
                "function); pass device and buffer type names to llama_cy.LlamaModel.load "
                "(devices=, tensor_overrides=)"
            )
        mode = params.load_mode
        self._contexts: weakref.WeakSet[LlamaContext] = weakref.WeakSet()
        self.path_model = path_model
        self.params = params
        self.verbose = verbose
        self._model = llama_cy.LlamaModel.load(
            path_model,
            n_gpu_layers=params.n_gpu_layers,
            split_mode=enum_name("LLAMA_SPLIT_MODE_", params.split_mode) or "layer",
            main_gpu=params.main_gpu,
            use_mmap=mode in (llama_cpp.LLAMA_LOAD_MODE_MMAP, llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK)
            or mode == llama_cpp.LLAMA_LOAD_MODE_AUTO,
            use_mlock=mode
            in (llama_cpp.LLAMA_LOAD_MODE_MLOCK, llama_cpp.LLAMA_LOAD_MODE_MMAP_MLOCK),
            vocab_only=params.vocab_only,
            check_tensors=params.check_tensors,
            use_extra_bufts=params.use_extra_bufts,
            progress=_progress(params),
        )

    @property
    def model(self) -> int | None:
        """The ``llama_model *`` address; None once closed."""
        return None if self._model.closed else self._model.address

    @property
    def vocab(self) -> int | None:
        if self._model.closed:
            return None
        return int(llama_cpp.llama_model_get_vocab(self._model.address))

    def close(self) -> None:
        """Free the model and, as llama-cpp-python does, the contexts made on it."""
        for context in list(self._contexts):
            context.close()
        self._model.close()

    def __del__(self) -> None:
        if hasattr(self, "_model"):  # not a load that failed
            self.close()

    def n_vocab(self) -> int:
        return int(self._model.n_vocab)

    def n_ctx_train(self) -> int:
        return int(self._model.n_ctx_train)

    def n_embd(self) -> int:
        return int(self._model.n_embd)

    def desc(self) -> str:
        return str(self._model.desc)

    def size(self) -> int:
        return int(self._model.size)

    def n_params(self) -> int:
        return int(self._model.n_params)

    def token_bos(self) -> int:
        return int(self._model.token_bos)

    def token_eos(self) -> int:
        return int(self._model.token_eos)

    def token_nl(self) -> int:
        return int(self._model.token_nl)

    def add_bos_token(self) -> bool:
        return bool(self._model.add_bos)

    def add_eos_token(self) -> bool:
        return bool(self._model.add_eos)

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        tokens: list[int] = self._model.tokenize(
            text, add_special=add_bos, parse_special=special
        ).tolist()
        return tokens

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        return bytes(self._model.token_to_piece(token, special=special))

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> bytes:
        """As llama-cpp-python's: without SentencePiece's space before the first word
        when ``tokens`` start with BOS."""
        out = b"".join(self._model.token_to_piece(t, special=special) for t in tokens)
        if len(tokens) and tokens[0] == self._model.token_bos and out[:1] == b" ":
            return out[1:]
        return out

    def metadata(self) -> dict[str, str]:
        return dict(self._model.metadata)


class LlamaContext:
    """A context made from ``llama_context_params`` (llama-cpp-python's ``_internals``)."""

    def __init__(
        self,
        *,
        model: LlamaModel,
        params: llama_cpp.llama_context_params,
        verbose: bool = True,
    ) -> None:
        if params.samplers:
            raise NotImplementedError(
                "llama_context_params.samplers: raw llama_sampler handles, which llama.cpp "
                "reads as chains unchecked (a single sampler there is undefined behaviour); "
                "use llama_cy.LlamaContext(samplers=) with LlamaSampler chains "
                "(docs/compat.md)"
            )
        flash = {-1: None, 0: False, 1: True}[params.flash_attn_type]
        self.model = model
        self.params = params
        self.verbose = verbose
        self._ctx = LlamaCyContext(
            model._model,
            n_ctx=params.n_ctx,
            n_batch=params.n_batch,
            n_ubatch=params.n_ubatch,
            n_seq_max=params.n_seq_max,
            n_threads=params.n_threads,
            n_threads_batch=params.n_threads_batch,
            rope_scaling_type=enum_name("LLAMA_ROPE_SCALING_TYPE_", params.rope_scaling_type),
            pooling_type=enum_name("LLAMA_POOLING_TYPE_", params.pooling_type),
            attention_type=enum_name("LLAMA_ATTENTION_TYPE_", params.attention_type),
            flash_attn=flash,
            rope_freq_base=params.rope_freq_base or None,
            rope_freq_scale=params.rope_freq_scale or None,
            yarn_ext_factor=params.yarn_ext_factor,
            yarn_attn_factor=params.yarn_attn_factor,
            yarn_beta_fast=params.yarn_beta_fast,
            yarn_beta_slow=params.yarn_beta_slow,
            yarn_orig_ctx=params.yarn_orig_ctx or None,
            type_k=enum_name("GGML_TYPE_", params.type_k),
            type_v=enum_name("GGML_TYPE_", params.type_v),
            embeddings=params.embeddings,
            offload_kqv=params.offload_kqv,
            no_perf=params.no_perf,
            op_offload=params.op_offload,
            swa_full=params.swa_full,
            kv_unified=params.kv_unified,
            # ctypes functions: a NULL one reads as False.
            cb_eval=params.cb_eval or None,
            cb_eval_user_data=params.cb_eval_user_data,
            abort_callback=params.abort_callback or None,
            abort_callback_data=params.abort_callback_data,
        )
        model._contexts.add(self)

    @property
    def ctx(self) -> int | None:
        """The ``llama_context *`` address; None once closed."""
        return self._ctx.ctx

    def close(self) -> None:
        self._ctx.close()

    def __del__(self) -> None:
        self.close()

    def n_ctx(self) -> int:
        return int(self._ctx.n_ctx)

    def pooling_type(self) -> int:
        return {None: -1, "none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}.get(
            self._ctx.pooling_type, -1
        )

    def kv_cache_clear(self) -> None:
        self._ctx.clear()

    def memory_clear(self, data: bool = True) -> None:
        self._ctx.clear(data)

    def kv_cache_seq_rm(self, seq_id: int, p0: int, p1: int) -> bool:
        return bool(self._ctx.seq_rm(seq_id, p0, p1))

    def decode(self, batch: LlamaBatch) -> None:
        self._ctx.decode(batch._batch)

    def encode(self, batch: LlamaBatch) -> None:
        self._ctx.encode(batch._batch)

    def set_n_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self._ctx.set_n_threads(n_threads, n_threads_batch)

    def get_logits(self) -> Any:
        return self._ctx.logits(-1)

    def get_logits_ith(self, i: int) -> Any:
        return self._ctx.logits(i)

    def get_embeddings(self) -> Any:
        return self._ctx.embeddings(-1)


class LlamaBatch:
    """A batch of up to ``n_tokens`` tokens, or of input embeddings with ``embd > 0``.
    ``batch`` is the ``llama_batch`` struct, as there: a ctypes view of the llama_cy
    batch's own, so a program that fills it field by field decodes what it wrote."""

    def __init__(self, *, n_tokens: int, embd: int, n_seq_max: int, verbose: bool = True) -> None:
        self._n_tokens = n_tokens
        self.embd = embd
        self.n_seq_max = n_seq_max
        self.verbose = verbose
        self._batch = llama_cy.LlamaBatch(n_tokens, n_seq_max=n_seq_max, embd=embd)
        self.batch: llama_cpp.llama_batch | None = llama_cpp.llama_batch.from_address(
            self._batch.address
        )
        self.sampler = None  # as there: cleanup code expects the attribute

    def n_tokens(self) -> int:
        return len(self._batch)

    def reset(self) -> None:
        self._batch.clear()

    def close(self) -> None:
        self.batch = None  # the view would outlive the struct it reads
        self._batch.close()

    def set_batch(self, batch: Sequence[int], n_past: int, logits_all: bool) -> None:
        """The tokens of sequence 0 at positions from ``n_past``; logits for the last
        (every one with ``logits_all``)."""
        self._batch.clear()
        last = len(batch) - 1
        for i, token in enumerate(batch):
            self._batch.add(int(token), n_past + i, (0,), logits_all or i == last)

    def add_sequence(self, batch: Sequence[int], seq_id: int, logits_all: bool) -> None:
        """Append ``batch`` as sequence ``seq_id`` from position 0."""
        last = len(batch) - 1
        for i, token in enumerate(batch):
            self._batch.add(int(token), i, (seq_id,), logits_all or i == last)


class LlamaSampler:
    """A sampler chain built stage by stage (``add_top_k``, ``add_dist``...)."""

    def __init__(self) -> None:
        self._stages: list[Any] = []
        self._chain: _Sampler | None = None

    def _add(self, stage: Any) -> None:
        if self._chain is not None:
            raise RuntimeError("the chain has sampled already: build a new LlamaSampler")
        self._stages.append(stage)

    def add_greedy(self) -> None:
        self._add(_Sampler.greedy())

    def add_dist(self, seed: int) -> None:
        self._add(_Sampler.dist(seed & 0xFFFFFFFF))

    def add_top_k(self, k: int) -> None:
        self._add(_Sampler.top_k(k))

    def add_top_p(self, p: float, min_keep: int) -> None:
        self._add(_Sampler.top_p(p, min_keep))

    def add_min_p(self, p: float, min_keep: int) -> None:
        self._add(_Sampler.min_p(p, min_keep))

    def add_typical(self, p: float, min_keep: int) -> None:
        self._add(_Sampler.typical(p, min_keep))

    def add_temp(self, temp: float) -> None:
        self._add(_Sampler.temp(temp))

    def add_temp_ext(self, t: float, delta: float, exponent: float) -> None:
        self._add(_Sampler.temp_ext(t, delta, exponent))

    def add_mirostat_v2(self, seed: int, tau: float, eta: float) -> None:
        self._add(_Sampler.mirostat_v2(seed & 0xFFFFFFFF, tau, eta))

    def add_grammar(self, model: LlamaModel, grammar: Any) -> None:
        self._add(_Sampler.grammar(model._model, grammar.gbnf, grammar.root))

    def add_penalties(
        self,
        penalty_last_n: int,
        penalty_repeat: float,
        penalty_freq: float,
        penalty_present: float,
    ) -> None:
        def penalties(n_vocab: int) -> _Sampler:
            return _Sampler.penalties(
                n_vocab, penalty_last_n, penalty_repeat, penalty_freq, penalty_present
            )

        self._add(penalties)  # built once the vocabulary is known

    def sample(self, ctx: LlamaContext, idx: int) -> int:
        if self._chain is None:
            n_vocab = ctx.model.n_vocab()
            stages = [s(n_vocab) if callable(s) else s for s in self._stages]
            self._chain = _Sampler.chain(stages)
        return int(self._chain.sample(ctx._ctx, idx))

    def accept(self, token: int) -> None:
        if self._chain is not None:
            self._chain.accept(token)

    def reset(self) -> None:
        if self._chain is not None:
            self._chain.reset()

    def close(self) -> None:
        if self._chain is not None:
            self._chain.close()
