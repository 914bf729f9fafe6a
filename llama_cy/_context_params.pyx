"""The ``llama_context_params`` of LlamaContext's keyword arguments, each checked before
llama.cpp sees it: thread counts within ggml's limits and the CPUs this process may use,
the names of RoPE scaling, pooling, attention and KV cache types, and a quantized K cache
whose heads a device cannot compute. Shared by :mod:`llama_cy._context` and
:mod:`llama_cy._fit` (which fits the same parameters to the devices' memory)."""

import logging

from libc.stdint cimport int64_t

from llama_cy._c cimport llama as c
from llama_cy._c.ggml cimport (
    ggml_blck_size, ggml_type, ggml_type_name, GGML_TYPE_COUNT, GGML_MAX_N_THREADS,
)
from llama_cy._backend import available_cpus, default_n_threads
from llama_cy._model cimport LlamaModel

from llama_cy.errors import ContextCreationError

_log = logging.getLogger("llama_cy")


cdef dict _ROPE_SCALING = {
    "none": c.LLAMA_ROPE_SCALING_TYPE_NONE,
    "linear": c.LLAMA_ROPE_SCALING_TYPE_LINEAR,
    "yarn": c.LLAMA_ROPE_SCALING_TYPE_YARN,
    "longrope": c.LLAMA_ROPE_SCALING_TYPE_LONGROPE,
}
cdef dict _POOLING = {
    "none": c.LLAMA_POOLING_TYPE_NONE,
    "mean": c.LLAMA_POOLING_TYPE_MEAN,
    "cls": c.LLAMA_POOLING_TYPE_CLS,
    "last": c.LLAMA_POOLING_TYPE_LAST,
    "rank": c.LLAMA_POOLING_TYPE_RANK,
}
cdef dict _POOLING_NAMES = {v: k for k, v in _POOLING.items()}
cdef dict _ATTENTION = {
    "causal": c.LLAMA_ATTENTION_TYPE_CAUSAL,
    "non_causal": c.LLAMA_ATTENTION_TYPE_NON_CAUSAL,
}
# The KV cache types llama.cpp's tools accept (common/arg.cpp's kv_cache_types; the flag
# table offers these); other ggml types (i32, the k-quants, ...) reach kernels that crash
# on them.
KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
cdef dict _KV_TYPES = {
    ggml_type_name(<ggml_type>t).decode(): t for t in range(GGML_TYPE_COUNT)
    if ggml_type_name(<ggml_type>t) != NULL and ggml_type_name(<ggml_type>t).decode() in KV_CACHE_TYPES
}


cdef str pooling_name(int pooling_type):
    """llama.cpp's pooling type by its name here ("unspecified" for another value)."""
    return _POOLING_NAMES.get(pooling_type, "unspecified")


cdef int _check_threads(str name, n) except -1:
    """``n`` checked, and capped at the CPUs this process may use.

    ggml sizes its thread arrays by GGML_MAX_N_THREADS and divides work by the count: 0,
    negative or huge counts crash inside the CPU backend. And ggml's own thread pool
    (this package builds it without OpenMP) waits at every graph node in a spin barrier:
    with more threads than CPUs a waiting thread spins away the time slice the thread it
    waits for needs (llama.cpp's default build uses OpenMP, whose barrier sleeps).
    Measured on 2 vCPUs (busy with a build) with Gemma 3 270M: 0.2 tokens/s with 4
    threads; capped to 2, 56-72 tokens/s. The extra threads could only wait, so they are
    not started; the log says so.
    """
    if not 1 <= n <= GGML_MAX_N_THREADS:
        raise ValueError(f"{name} must be in [1, {GGML_MAX_N_THREADS}], got {n}")
    cdef int cpus = available_cpus()
    if n > cpus:
        _log.warning("%s=%d is more than the %d CPUs this process may use: running %d threads "
                     "(ggml's spinning thread pool would only wait on the others)", name, n, cpus, cpus)
        return cpus
    return n


cdef object _choice(dict table, value, str what):
    try:
        return table[value]
    except KeyError:
        raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(table)}") from None


cdef int _check_k_blocks(LlamaModel model, c.llama_context_params *p) except -1:
    """Refuse a quantized K cache whose heads are not whole blocks of its type (a head of
    16 values is half a q4_0 block of 32). llama.cpp refuses it itself with flash attention
    on or auto; without, the CPU computes it but ggml-cuda aborts the process at the first
    decode (mmvq.cu: ``GGML_ASSERT(ncols_x % ggml_blck_size(type) == 0)``), so it is
    refused wherever the cache would live on a device other than the host's."""
    cdef int64_t block = ggml_blck_size(p.type_k)
    if block <= 1 or model.vocab_only:
        return 0
    arch = model.meta_val("general.architecture") or ""
    head = model.meta_val(f"{arch}.attention.key_length")
    n_head = c.llama_model_n_head(model.ptr)
    head_k = int(head) if head else (c.llama_model_n_embd(model.ptr) // n_head if n_head else 0)
    if head_k <= 0 or head_k % block == 0:
        return 0
    kind = ggml_type_name(p.type_k).decode()
    split = f"type_k {kind}: the model's K heads of {head_k} values are not whole {kind} blocks of {block}"
    if p.flash_attn_type != c.LLAMA_FLASH_ATTN_TYPE_DISABLED:
        raise ContextCreationError(f"{split}, which flash attention (on or auto) cannot read")
    if not p.offload_kqv:
        return 0
    devices = sorted({
        buf.split("[")[0] for name, buf in model.tensor_buffers.items()
        if name.startswith("blk.") and not buf.startswith(("CPU", "AMX"))
        and not buf.endswith("_Host")
    })
    if devices:
        raise ContextCreationError(
            f"{split}, which the layers' devices ({', '.join(devices)}) cannot compute (ggml "
            "aborts); use f16, bf16 or f32, or keep the KV cache on the host (offload_kqv=False)")
    return 0


cdef c.llama_context_params _context_params(
    n_ctx, n_batch, n_ubatch, n_seq_max, n_threads, n_threads_batch, rope_scaling_type,
    pooling_type, attention_type, flash_attn, rope_freq_base, rope_freq_scale, yarn_ext_factor,
    yarn_attn_factor, yarn_beta_fast, yarn_beta_slow, yarn_orig_ctx, type_k, type_v,
    bint embeddings, offload_kqv, swa_full, kv_unified, bint no_perf, op_offload, n_outputs_max,
    n_outputs_max_per_seq,
) except *:
    """The llama_context_params of LlamaContext's arguments (None: llama.cpp's default)."""
    cdef c.llama_context_params p = c.llama_context_default_params()
    p.n_ctx = n_ctx
    p.n_batch = n_batch
    p.n_ubatch = n_batch if n_ubatch is None else n_ubatch
    if p.n_ubatch > p.n_batch:
        p.n_ubatch = p.n_batch
    if n_seq_max < 1 or n_seq_max > c.llama_max_parallel_sequences():
        raise ValueError(f"n_seq_max must be in [1, {c.llama_max_parallel_sequences()}]")
    p.n_seq_max = n_seq_max
    if n_threads is None:
        n_threads = default_n_threads()
    p.n_threads = _check_threads("n_threads", n_threads)
    p.n_threads_batch = _check_threads(
        "n_threads_batch", n_threads if n_threads_batch is None else n_threads_batch)
    if rope_scaling_type is not None:
        p.rope_scaling_type = _choice(_ROPE_SCALING, rope_scaling_type, "rope_scaling_type")
    if pooling_type is not None:
        p.pooling_type = _choice(_POOLING, pooling_type, "pooling_type")
    if attention_type is not None:
        p.attention_type = _choice(_ATTENTION, attention_type, "attention_type")
    if flash_attn is not None:
        p.flash_attn_type = c.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else c.LLAMA_FLASH_ATTN_TYPE_DISABLED
    if rope_freq_base is not None:
        p.rope_freq_base = rope_freq_base
    if rope_freq_scale is not None:
        p.rope_freq_scale = rope_freq_scale
    if yarn_ext_factor is not None:
        p.yarn_ext_factor = yarn_ext_factor
    if yarn_attn_factor is not None:
        p.yarn_attn_factor = yarn_attn_factor
    if yarn_beta_fast is not None:
        p.yarn_beta_fast = yarn_beta_fast
    if yarn_beta_slow is not None:
        p.yarn_beta_slow = yarn_beta_slow
    if yarn_orig_ctx is not None:
        p.yarn_orig_ctx = yarn_orig_ctx
    if type_k is not None:
        p.type_k = _choice(_KV_TYPES, type_k, "type_k")
    if type_v is not None:
        p.type_v = _choice(_KV_TYPES, type_v, "type_v")
    p.embeddings = embeddings
    if offload_kqv is not None:
        p.offload_kqv = offload_kqv
    if swa_full is not None:
        p.swa_full = swa_full
    if kv_unified is not None:
        p.kv_unified = kv_unified
    p.no_perf = no_perf
    if op_offload is not None:
        p.op_offload = op_offload
    if n_outputs_max is not None:
        if n_outputs_max < 0:
            raise ValueError("n_outputs_max must be >= 0 (0: n_batch)")
        p.n_outputs_max = n_outputs_max
    if n_outputs_max_per_seq is not None:
        if n_outputs_max_per_seq < 0:
            raise ValueError("n_outputs_max_per_seq must be >= 0 (0: n_outputs_max)")
        p.n_outputs_max_per_seq = n_outputs_max_per_seq
    return p
