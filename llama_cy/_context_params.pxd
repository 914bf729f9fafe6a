from llama_cy._c.llama cimport llama_context_params
from llama_cy._model cimport LlamaModel


# A thread count checked against ggml's limits and capped at the CPUs this process may use
# (for every compute that takes one: contexts and the multimodal projector).
cdef int _check_threads(str name, n) except -1


# The llama_context_params of LlamaContext's arguments (LlamaContext's and llama_cy._fit's).
cdef llama_context_params _context_params(
    n_ctx, n_batch, n_ubatch, n_seq_max, n_threads, n_threads_batch, rope_scaling_type,
    pooling_type, attention_type, flash_attn, rope_freq_base, rope_freq_scale, yarn_ext_factor,
    yarn_attn_factor, yarn_beta_fast, yarn_beta_slow, yarn_orig_ctx, type_k, type_v,
    bint embeddings, offload_kqv, swa_full, kv_unified, bint no_perf, op_offload, n_outputs_max,
    n_outputs_max_per_seq,
) except *


# Refuse a quantized K cache whose heads a device holding the cache cannot compute.
cdef int _check_k_blocks(LlamaModel model, llama_context_params *p) except -1

# llama.cpp's pooling type by its name ("unspecified" for another value).
cdef str pooling_name(int pooling_type)
