"""llama-cpp-python's ctypes layer (``llama_cpp.llama_cpp``) over llama_cy's own libllama.

Generated from llama.cpp b11434's ``include/llama.h`` by ``tools/gen_llama_ctypes.py``:
do not edit. Every function is the C function itself, with llama-cpp-python's argument
and return types; structs are ``ctypes.Structure`` classes whose fields can be written.

These calls are as unguarded as C: a NULL, a closed handle or a bad index passed here
crashes the process, as it does in llama-cpp-python. ``llama_cpp.Llama`` and everything
of llama_cy stays guarded. The library is the one llama_cy's extension modules use, so
``Llama.model`` and ``Llama.ctx`` (addresses) can be passed to these functions.
"""

# ruff: noqa: E501, N801

from __future__ import annotations

import ctypes
from typing import NewType

from llama_cpp import _library

_lib = _library.lib
_function = _library.function

# ---- constants (#define) ----

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
LLAMA_TOKEN_NULL = -1
LLAMA_FILE_MAGIC_GGLA = 0x67676C61
LLAMA_FILE_MAGIC_GGSN = 0x6767736E
LLAMA_FILE_MAGIC_GGSQ = 0x67677371
LLAMA_SESSION_MAGIC = LLAMA_FILE_MAGIC_GGSN
LLAMA_SESSION_VERSION = 11
LLAMA_STATE_SEQ_MAGIC = LLAMA_FILE_MAGIC_GGSQ
LLAMA_STATE_SEQ_VERSION = 4
LLAMA_STATE_SEQ_FLAGS_NONE = 0
LLAMA_STATE_SEQ_FLAGS_SWA_ONLY = 1
LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY = 1
LLAMA_STATE_SEQ_FLAGS_ON_DEVICE = 2
LLAMA_MAX_DEVICES: int = _lib.llama_max_devices()

# enum ggml_log_level
GGML_LOG_LEVEL_NONE = 0
GGML_LOG_LEVEL_DEBUG = 1
GGML_LOG_LEVEL_INFO = 2
GGML_LOG_LEVEL_WARN = 3
GGML_LOG_LEVEL_ERROR = 4
GGML_LOG_LEVEL_CONT = 5

# enum llama_vocab_type
LLAMA_VOCAB_TYPE_NONE = 0
LLAMA_VOCAB_TYPE_SPM = 1
LLAMA_VOCAB_TYPE_BPE = 2
LLAMA_VOCAB_TYPE_WPM = 3
LLAMA_VOCAB_TYPE_UGM = 4
LLAMA_VOCAB_TYPE_RWKV = 5
LLAMA_VOCAB_TYPE_PLAMO2 = 6
LLAMA_VOCAB_TYPE_TEST = 7

# enum llama_rope_type
LLAMA_ROPE_TYPE_NONE = -1
LLAMA_ROPE_TYPE_NORM = 0
LLAMA_ROPE_TYPE_NEOX = 2
LLAMA_ROPE_TYPE_MROPE = 8
LLAMA_ROPE_TYPE_IMROPE = 40
LLAMA_ROPE_TYPE_VISION = 24

# enum llama_token_type
LLAMA_TOKEN_TYPE_UNDEFINED = 0
LLAMA_TOKEN_TYPE_NORMAL = 1
LLAMA_TOKEN_TYPE_UNKNOWN = 2
LLAMA_TOKEN_TYPE_CONTROL = 3
LLAMA_TOKEN_TYPE_USER_DEFINED = 4
LLAMA_TOKEN_TYPE_UNUSED = 5
LLAMA_TOKEN_TYPE_BYTE = 6

# enum llama_token_attr
LLAMA_TOKEN_ATTR_UNDEFINED = 0
LLAMA_TOKEN_ATTR_UNKNOWN = 1
LLAMA_TOKEN_ATTR_UNUSED = 2
LLAMA_TOKEN_ATTR_NORMAL = 4
LLAMA_TOKEN_ATTR_CONTROL = 8
LLAMA_TOKEN_ATTR_USER_DEFINED = 16
LLAMA_TOKEN_ATTR_BYTE = 32
LLAMA_TOKEN_ATTR_NORMALIZED = 64
LLAMA_TOKEN_ATTR_LSTRIP = 128
LLAMA_TOKEN_ATTR_RSTRIP = 256
LLAMA_TOKEN_ATTR_SINGLE_WORD = 512

# enum llama_ftype
LLAMA_FTYPE_ALL_F32 = 0
LLAMA_FTYPE_MOSTLY_F16 = 1
LLAMA_FTYPE_MOSTLY_Q4_0 = 2
LLAMA_FTYPE_MOSTLY_Q4_1 = 3
LLAMA_FTYPE_MOSTLY_Q8_0 = 7
LLAMA_FTYPE_MOSTLY_Q5_0 = 8
LLAMA_FTYPE_MOSTLY_Q5_1 = 9
LLAMA_FTYPE_MOSTLY_Q2_K = 10
LLAMA_FTYPE_MOSTLY_Q3_K_S = 11
LLAMA_FTYPE_MOSTLY_Q3_K_M = 12
LLAMA_FTYPE_MOSTLY_Q3_K_L = 13
LLAMA_FTYPE_MOSTLY_Q4_K_S = 14
LLAMA_FTYPE_MOSTLY_Q4_K_M = 15
LLAMA_FTYPE_MOSTLY_Q5_K_S = 16
LLAMA_FTYPE_MOSTLY_Q5_K_M = 17
LLAMA_FTYPE_MOSTLY_Q6_K = 18
LLAMA_FTYPE_MOSTLY_IQ2_XXS = 19
LLAMA_FTYPE_MOSTLY_IQ2_XS = 20
LLAMA_FTYPE_MOSTLY_Q2_K_S = 21
LLAMA_FTYPE_MOSTLY_IQ3_XS = 22
LLAMA_FTYPE_MOSTLY_IQ3_XXS = 23
LLAMA_FTYPE_MOSTLY_IQ1_S = 24
LLAMA_FTYPE_MOSTLY_IQ4_NL = 25
LLAMA_FTYPE_MOSTLY_IQ3_S = 26
LLAMA_FTYPE_MOSTLY_IQ3_M = 27
LLAMA_FTYPE_MOSTLY_IQ2_S = 28
LLAMA_FTYPE_MOSTLY_IQ2_M = 29
LLAMA_FTYPE_MOSTLY_IQ4_XS = 30
LLAMA_FTYPE_MOSTLY_IQ1_M = 31
LLAMA_FTYPE_MOSTLY_BF16 = 32
LLAMA_FTYPE_MOSTLY_TQ1_0 = 36
LLAMA_FTYPE_MOSTLY_TQ2_0 = 37
LLAMA_FTYPE_MOSTLY_MXFP4_MOE = 38
LLAMA_FTYPE_MOSTLY_NVFP4 = 39
LLAMA_FTYPE_MOSTLY_Q1_0 = 40
LLAMA_FTYPE_MOSTLY_Q2_0 = 41
LLAMA_FTYPE_GUESSED = 1024

# enum llama_rope_scaling_type
LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED = -1
LLAMA_ROPE_SCALING_TYPE_NONE = 0
LLAMA_ROPE_SCALING_TYPE_LINEAR = 1
LLAMA_ROPE_SCALING_TYPE_YARN = 2
LLAMA_ROPE_SCALING_TYPE_LONGROPE = 3
LLAMA_ROPE_SCALING_TYPE_MAX_VALUE = 3

# enum llama_pooling_type
LLAMA_POOLING_TYPE_UNSPECIFIED = -1
LLAMA_POOLING_TYPE_NONE = 0
LLAMA_POOLING_TYPE_MEAN = 1
LLAMA_POOLING_TYPE_CLS = 2
LLAMA_POOLING_TYPE_LAST = 3
LLAMA_POOLING_TYPE_RANK = 4

# enum llama_attention_type
LLAMA_ATTENTION_TYPE_UNSPECIFIED = -1
LLAMA_ATTENTION_TYPE_CAUSAL = 0
LLAMA_ATTENTION_TYPE_NON_CAUSAL = 1

# enum llama_flash_attn_type
LLAMA_FLASH_ATTN_TYPE_AUTO = -1
LLAMA_FLASH_ATTN_TYPE_DISABLED = 0
LLAMA_FLASH_ATTN_TYPE_ENABLED = 1

# enum llama_split_mode
LLAMA_SPLIT_MODE_NONE = 0
LLAMA_SPLIT_MODE_LAYER = 1
LLAMA_SPLIT_MODE_ROW = 2
LLAMA_SPLIT_MODE_TENSOR = 3

# enum llama_load_mode
LLAMA_LOAD_MODE_AUTO = -1
LLAMA_LOAD_MODE_NONE = 0
LLAMA_LOAD_MODE_MMAP = 1
LLAMA_LOAD_MODE_MLOCK = 2
LLAMA_LOAD_MODE_MMAP_MLOCK = 3
LLAMA_LOAD_MODE_DIRECT_IO = 4

# enum llama_lazy_mode
LLAMA_LAZY_MODE_OFF = 0
LLAMA_LAZY_MODE_AUTO = 1
LLAMA_LAZY_MODE_ON = 2

# enum llama_context_type
LLAMA_CONTEXT_TYPE_DEFAULT = 0
LLAMA_CONTEXT_TYPE_MTP = 1

# enum llama_model_kv_override_type
LLAMA_KV_OVERRIDE_TYPE_INT = 0
LLAMA_KV_OVERRIDE_TYPE_FLOAT = 1
LLAMA_KV_OVERRIDE_TYPE_BOOL = 2
LLAMA_KV_OVERRIDE_TYPE_STR = 3

# enum llama_model_meta_key
LLAMA_MODEL_META_KEY_SAMPLING_SEQUENCE = 0
LLAMA_MODEL_META_KEY_SAMPLING_TOP_K = 1
LLAMA_MODEL_META_KEY_SAMPLING_TOP_P = 2
LLAMA_MODEL_META_KEY_SAMPLING_MIN_P = 3
LLAMA_MODEL_META_KEY_SAMPLING_XTC_PROBABILITY = 4
LLAMA_MODEL_META_KEY_SAMPLING_XTC_THRESHOLD = 5
LLAMA_MODEL_META_KEY_SAMPLING_TEMP = 6
LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_LAST_N = 7
LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_REPEAT = 8
LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT = 9
LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_TAU = 10
LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_ETA = 11

# enum llama_process_type
LLAMA_PROCESS_TYPE_ENCODE = 0
LLAMA_PROCESS_TYPE_DECODE = 1

# enum ggml_type
GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_TYPE_Q4_0 = 2
GGML_TYPE_Q4_1 = 3
GGML_TYPE_Q5_0 = 6
GGML_TYPE_Q5_1 = 7
GGML_TYPE_Q8_0 = 8
GGML_TYPE_Q8_1 = 9
GGML_TYPE_Q2_K = 10
GGML_TYPE_Q3_K = 11
GGML_TYPE_Q4_K = 12
GGML_TYPE_Q5_K = 13
GGML_TYPE_Q6_K = 14
GGML_TYPE_Q8_K = 15
GGML_TYPE_IQ2_XXS = 16
GGML_TYPE_IQ2_XS = 17
GGML_TYPE_IQ3_XXS = 18
GGML_TYPE_IQ1_S = 19
GGML_TYPE_IQ4_NL = 20
GGML_TYPE_IQ3_S = 21
GGML_TYPE_IQ2_S = 22
GGML_TYPE_IQ4_XS = 23
GGML_TYPE_I8 = 24
GGML_TYPE_I16 = 25
GGML_TYPE_I32 = 26
GGML_TYPE_I64 = 27
GGML_TYPE_F64 = 28
GGML_TYPE_IQ1_M = 29
GGML_TYPE_BF16 = 30
GGML_TYPE_TQ1_0 = 34
GGML_TYPE_TQ2_0 = 35
GGML_TYPE_MXFP4 = 39
GGML_TYPE_NVFP4 = 40
GGML_TYPE_Q1_0 = 41
GGML_TYPE_Q2_0 = 42
GGML_TYPE_COUNT = 43

# enum ggml_numa_strategy
GGML_NUMA_STRATEGY_DISABLED = 0
GGML_NUMA_STRATEGY_DISTRIBUTE = 1
GGML_NUMA_STRATEGY_ISOLATE = 2
GGML_NUMA_STRATEGY_NUMACTL = 3
GGML_NUMA_STRATEGY_MIRROR = 4
GGML_NUMA_STRATEGY_COUNT = 5

# enum ggml_opt_optimizer_type
GGML_OPT_OPTIMIZER_TYPE_ADAMW = 0
GGML_OPT_OPTIMIZER_TYPE_SGD = 1
GGML_OPT_OPTIMIZER_TYPE_COUNT = 2

# enum llama_vocab_pre_type (src/llama-vocab.h)
LLAMA_VOCAB_PRE_TYPE_DEFAULT = 0
LLAMA_VOCAB_PRE_TYPE_LLAMA3 = 1
LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM = 2
LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER = 3
LLAMA_VOCAB_PRE_TYPE_FALCON = 4
LLAMA_VOCAB_PRE_TYPE_MPT = 5
LLAMA_VOCAB_PRE_TYPE_STARCODER = 6
LLAMA_VOCAB_PRE_TYPE_GPT2 = 7
LLAMA_VOCAB_PRE_TYPE_REFACT = 8
LLAMA_VOCAB_PRE_TYPE_COMMAND_R = 9
LLAMA_VOCAB_PRE_TYPE_STABLELM2 = 10
LLAMA_VOCAB_PRE_TYPE_QWEN2 = 11
LLAMA_VOCAB_PRE_TYPE_OLMO = 12
LLAMA_VOCAB_PRE_TYPE_DBRX = 13
LLAMA_VOCAB_PRE_TYPE_SMAUG = 14
LLAMA_VOCAB_PRE_TYPE_PORO = 15
LLAMA_VOCAB_PRE_TYPE_CHATGLM3 = 16
LLAMA_VOCAB_PRE_TYPE_CHATGLM4 = 17
LLAMA_VOCAB_PRE_TYPE_VIKING = 18
LLAMA_VOCAB_PRE_TYPE_JAIS = 19
LLAMA_VOCAB_PRE_TYPE_TEKKEN = 20
LLAMA_VOCAB_PRE_TYPE_SMOLLM = 21
LLAMA_VOCAB_PRE_TYPE_CODESHELL = 22
LLAMA_VOCAB_PRE_TYPE_BLOOM = 23
LLAMA_VOCAB_PRE_TYPE_GPT3_FINNISH = 24
LLAMA_VOCAB_PRE_TYPE_EXAONE = 25
LLAMA_VOCAB_PRE_TYPE_CHAMELEON = 26
LLAMA_VOCAB_PRE_TYPE_MINERVA = 27
LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM = 28
LLAMA_VOCAB_PRE_TYPE_GPT4O = 29
LLAMA_VOCAB_PRE_TYPE_SUPERBPE = 30
LLAMA_VOCAB_PRE_TYPE_TRILLION = 31
LLAMA_VOCAB_PRE_TYPE_BAILINGMOE = 32
LLAMA_VOCAB_PRE_TYPE_LLAMA4 = 33
LLAMA_VOCAB_PRE_TYPE_PIXTRAL = 34
LLAMA_VOCAB_PRE_TYPE_SEED_CODER = 35
LLAMA_VOCAB_PRE_TYPE_HUNYUAN = 36
LLAMA_VOCAB_PRE_TYPE_KIMI_K2 = 37
LLAMA_VOCAB_PRE_TYPE_HUNYUAN_DENSE = 38
LLAMA_VOCAB_PRE_TYPE_GROK_2 = 39
LLAMA_VOCAB_PRE_TYPE_GRANITE_DOCLING = 40
LLAMA_VOCAB_PRE_TYPE_MINIMAX_M2 = 41
LLAMA_VOCAB_PRE_TYPE_AFMOE = 42
LLAMA_VOCAB_PRE_TYPE_SOLAR_OPEN = 43
LLAMA_VOCAB_PRE_TYPE_YOUTU = 44
LLAMA_VOCAB_PRE_TYPE_EXAONE_MOE = 45
LLAMA_VOCAB_PRE_TYPE_QWEN35 = 46
LLAMA_VOCAB_PRE_TYPE_TINY_AYA = 47
LLAMA_VOCAB_PRE_TYPE_JOYAI_LLM = 48
LLAMA_VOCAB_PRE_TYPE_JAIS2 = 49
LLAMA_VOCAB_PRE_TYPE_GEMMA4 = 50
LLAMA_VOCAB_PRE_TYPE_SARVAM_MOE = 51
LLAMA_VOCAB_PRE_TYPE_MINICPM5 = 52
LLAMA_VOCAB_PRE_TYPE_WHITESPACE = 53
LLAMA_VOCAB_PRE_TYPE_GRANITE_EMB_MULTI = 54
LLAMA_VOCAB_PRE_TYPE_MELLUM2 = 55
LLAMA_VOCAB_PRE_TYPE_LAGUNA = 56
LLAMA_VOCAB_PRE_TYPE_HY_V4 = 57
LLAMA_VOCAB_PRE_TYPE_SPARK2_5 = 58
LLAMA_VOCAB_PRE_TYPE_UFAKZEKA = 59
LLAMA_VOCAB_PRE_TYPE_MMBERT = 60

# ---- scalar and handle types ----

llama_pos = ctypes.c_int32
llama_token = ctypes.c_int32
llama_token_p = ctypes.POINTER(llama_token)
llama_seq_id = ctypes.c_int32
llama_state_seq_flags = ctypes.c_uint32
llama_vocab_p = NewType("llama_vocab_p", int)
llama_vocab_p_ctypes = ctypes.c_void_p
llama_model_p = NewType("llama_model_p", int)
llama_model_p_ctypes = ctypes.c_void_p
llama_context_p = NewType("llama_context_p", int)
llama_context_p_ctypes = ctypes.c_void_p
llama_adapter_lora_p = NewType("llama_adapter_lora_p", int)
llama_adapter_lora_p_ctypes = ctypes.c_void_p
gguf_context_p = NewType("gguf_context_p", int)
gguf_context_p_ctypes = ctypes.c_void_p
llama_memory_t = NewType("llama_memory_t", int)
llama_memory_t_ctypes = ctypes.c_void_p

# ---- structs (fields below, once every member type exists) ----


class llama_token_data(ctypes.Structure):
    pass


class llama_token_data_array(ctypes.Structure):
    pass


class llama_batch(ctypes.Structure):
    pass


class llama_model_kv_override_value(ctypes.Union):
    pass


class llama_model_kv_override(ctypes.Structure):
    pass


class llama_model_tensor_buft_override(ctypes.Structure):
    pass


class llama_model_params(ctypes.Structure):
    pass


class llama_sampler_seq_config(ctypes.Structure):
    pass


class llama_context_params(ctypes.Structure):
    pass


class llama_model_tensor_override(ctypes.Structure):
    pass


class llama_model_imatrix_data(ctypes.Structure):
    pass


class llama_model_quantize_params(ctypes.Structure):
    pass


class llama_logit_bias(ctypes.Structure):
    pass


class llama_sampler_chain_params(ctypes.Structure):
    pass


class llama_chat_message(ctypes.Structure):
    pass


class llama_embd(ctypes.Structure):
    pass


class llama_sampler_data(ctypes.Structure):
    pass


class llama_sampler_i(ctypes.Structure):
    pass


class llama_sampler(ctypes.Structure):
    pass


class llama_perf_context_data(ctypes.Structure):
    pass


class llama_perf_sampler_data(ctypes.Structure):
    pass


class llama_opt_params(ctypes.Structure):
    pass


llama_token_data_p = ctypes.POINTER(llama_token_data)
llama_token_data_array_p = ctypes.POINTER(llama_token_data_array)
llama_logit_bias_p = ctypes.POINTER(llama_logit_bias)
llama_sampler_p_ctypes = ctypes.POINTER(llama_sampler)

# ---- callback types ----

ggml_abort_callback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
llama_progress_callback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_float, ctypes.c_void_p)
ggml_backend_sched_eval_callback = ctypes.CFUNCTYPE(
    ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p
)
llama_model_set_tensor_data_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
ggml_log_callback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
llama_opt_param_filter = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p)
ggml_opt_get_optimizer_params = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
ggml_opt_epoch_callback = ctypes.CFUNCTYPE(
    None,
    ctypes.c_bool,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
)
llama_sampler_context_t = ctypes.c_void_p
llama_sampler_i_name = ctypes.CFUNCTYPE(ctypes.c_void_p, llama_sampler_p_ctypes)
llama_sampler_i_accept = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes, llama_token)
llama_sampler_i_apply = ctypes.CFUNCTYPE(
    None, llama_sampler_p_ctypes, ctypes.POINTER(llama_token_data_array)
)
llama_sampler_i_reset = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)
llama_sampler_i_clone = ctypes.CFUNCTYPE(ctypes.c_void_p, llama_sampler_p_ctypes)
llama_sampler_i_free = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)
llama_sampler_i_backend_init = ctypes.CFUNCTYPE(
    ctypes.c_bool, llama_sampler_p_ctypes, ctypes.c_void_p, ctypes.c_uint32
)
llama_sampler_i_backend_accept = ctypes.CFUNCTYPE(
    None, llama_sampler_p_ctypes, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
llama_sampler_i_backend_apply = ctypes.CFUNCTYPE(
    None,
    llama_sampler_p_ctypes,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.POINTER(llama_sampler_data),
)
llama_sampler_i_backend_set_input = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)
llama_sampler_i_backend_reset = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)
llama_sampler_i_copy_state = ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes, llama_sampler_p_ctypes)

# ---- struct fields ----
llama_token_data._fields_ = [
    ("id", llama_token),
    ("logit", ctypes.c_float),
    ("p", ctypes.c_float),
]
llama_token_data_array._fields_ = [
    ("data", ctypes.POINTER(llama_token_data)),
    ("size", ctypes.c_size_t),
    ("selected", ctypes.c_int64),
    ("sorted", ctypes.c_bool),
]
llama_batch._fields_ = [
    ("n_tokens", ctypes.c_int32),
    ("token", llama_token_p),
    ("embd", ctypes.POINTER(ctypes.c_float)),
    ("pos", ctypes.POINTER(llama_pos)),
    ("n_seq_id", ctypes.POINTER(ctypes.c_int32)),
    ("seq_id", ctypes.POINTER(ctypes.POINTER(llama_seq_id))),
    ("logits", ctypes.POINTER(ctypes.c_int8)),
]
llama_model_kv_override_value._fields_ = [
    ("val_i64", ctypes.c_int64),
    ("val_f64", ctypes.c_double),
    ("val_bool", ctypes.c_bool),
    ("val_str", ctypes.c_char * 128),
]
llama_model_kv_override._anonymous_ = ("value",)
llama_model_kv_override._fields_ = [
    ("tag", ctypes.c_int),
    ("key", ctypes.c_char * 128),
    ("value", llama_model_kv_override_value),
]
llama_model_tensor_buft_override._fields_ = [
    ("pattern", ctypes.c_char_p),
    ("buft", ctypes.c_void_p),
]
llama_model_params._fields_ = [
    ("devices", ctypes.POINTER(ctypes.c_void_p)),
    ("tensor_buft_overrides", ctypes.POINTER(llama_model_tensor_buft_override)),
    ("n_gpu_layers", ctypes.c_int32),
    ("split_mode", ctypes.c_int),
    ("load_mode", ctypes.c_int),
    ("lazy_mode", ctypes.c_int),
    ("main_gpu", ctypes.c_int32),
    ("tensor_split", ctypes.POINTER(ctypes.c_float)),
    ("progress_callback", llama_progress_callback),
    ("progress_callback_user_data", ctypes.c_void_p),
    ("kv_overrides", ctypes.POINTER(llama_model_kv_override)),
    ("vocab_only", ctypes.c_bool),
    ("check_tensors", ctypes.c_bool),
    ("use_extra_bufts", ctypes.c_bool),
    ("no_host", ctypes.c_bool),
    ("no_alloc", ctypes.c_bool),
    ("load_mtp", ctypes.c_bool),
]
llama_sampler_seq_config._fields_ = [
    ("seq_id", llama_seq_id),
    ("sampler", llama_sampler_p_ctypes),
]
llama_context_params._fields_ = [
    ("n_ctx", ctypes.c_uint32),
    ("n_batch", ctypes.c_uint32),
    ("n_ubatch", ctypes.c_uint32),
    ("n_seq_max", ctypes.c_uint32),
    ("n_rs_seq", ctypes.c_uint32),
    ("n_outputs_max", ctypes.c_uint32),
    ("n_outputs_max_per_seq", ctypes.c_uint32),
    ("n_threads", ctypes.c_int32),
    ("n_threads_batch", ctypes.c_int32),
    ("ctx_type", ctypes.c_int),
    ("rope_scaling_type", ctypes.c_int),
    ("pooling_type", ctypes.c_int),
    ("attention_type", ctypes.c_int),
    ("flash_attn_type", ctypes.c_int),
    ("rope_freq_base", ctypes.c_float),
    ("rope_freq_scale", ctypes.c_float),
    ("yarn_ext_factor", ctypes.c_float),
    ("yarn_attn_factor", ctypes.c_float),
    ("yarn_beta_fast", ctypes.c_float),
    ("yarn_beta_slow", ctypes.c_float),
    ("yarn_orig_ctx", ctypes.c_uint32),
    ("defrag_thold", ctypes.c_float),
    ("cb_eval", ggml_backend_sched_eval_callback),
    ("cb_eval_user_data", ctypes.c_void_p),
    ("type_k", ctypes.c_int),
    ("type_v", ctypes.c_int),
    ("abort_callback", ggml_abort_callback),
    ("abort_callback_data", ctypes.c_void_p),
    ("embeddings", ctypes.c_bool),
    ("offload_kqv", ctypes.c_bool),
    ("no_perf", ctypes.c_bool),
    ("op_offload", ctypes.c_bool),
    ("swa_full", ctypes.c_bool),
    ("kv_unified", ctypes.c_bool),
    ("samplers", ctypes.POINTER(llama_sampler_seq_config)),
    ("n_samplers", ctypes.c_size_t),
    ("ctx_other", llama_context_p_ctypes),
]
llama_model_tensor_override._fields_ = [
    ("pattern", ctypes.c_char_p),
    ("type", ctypes.c_int),
]
llama_model_imatrix_data._fields_ = [
    ("name", ctypes.c_char_p),
    ("data", ctypes.POINTER(ctypes.c_float)),
    ("size", ctypes.c_size_t),
]
llama_model_quantize_params._fields_ = [
    ("nthread", ctypes.c_int32),
    ("ftype", ctypes.c_int),
    ("output_tensor_type", ctypes.c_int),
    ("token_embedding_type", ctypes.c_int),
    ("allow_requantize", ctypes.c_bool),
    ("quantize_output_tensor", ctypes.c_bool),
    ("only_copy", ctypes.c_bool),
    ("pure", ctypes.c_bool),
    ("keep_split", ctypes.c_bool),
    ("dry_run", ctypes.c_bool),
    ("imatrix", ctypes.POINTER(llama_model_imatrix_data)),
    ("kv_overrides", ctypes.POINTER(llama_model_kv_override)),
    ("tt_overrides", ctypes.POINTER(llama_model_tensor_override)),
    ("prune_layers", ctypes.POINTER(ctypes.c_int32)),
    ("max_buf_size", ctypes.c_size_t),
]
llama_logit_bias._fields_ = [
    ("token", llama_token),
    ("bias", ctypes.c_float),
]
llama_sampler_chain_params._fields_ = [
    ("no_perf", ctypes.c_bool),
]
llama_chat_message._fields_ = [
    ("role", ctypes.c_char_p),
    ("content", ctypes.c_char_p),
]
llama_embd._fields_ = [
    ("data", ctypes.POINTER(ctypes.c_float)),
    ("n_rows", ctypes.c_size_t),
    ("n_embd", ctypes.c_size_t),
]
llama_sampler_data._fields_ = [
    ("logits", ctypes.c_void_p),
    ("probs", ctypes.c_void_p),
    ("sampled", ctypes.c_void_p),
    ("candidates", ctypes.c_void_p),
]
llama_sampler_i._fields_ = [
    ("name", ctypes.CFUNCTYPE(ctypes.c_void_p, llama_sampler_p_ctypes)),
    ("accept", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes, llama_token)),
    (
        "apply",
        ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes, ctypes.POINTER(llama_token_data_array)),
    ),
    ("reset", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)),
    ("clone", ctypes.CFUNCTYPE(ctypes.c_void_p, llama_sampler_p_ctypes)),
    ("free", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)),
    (
        "backend_init",
        ctypes.CFUNCTYPE(ctypes.c_bool, llama_sampler_p_ctypes, ctypes.c_void_p, ctypes.c_uint32),
    ),
    (
        "backend_accept",
        ctypes.CFUNCTYPE(
            None, llama_sampler_p_ctypes, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
        ),
    ),
    (
        "backend_apply",
        ctypes.CFUNCTYPE(
            None,
            llama_sampler_p_ctypes,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(llama_sampler_data),
        ),
    ),
    ("backend_set_input", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)),
    ("backend_reset", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes)),
    ("copy_state", ctypes.CFUNCTYPE(None, llama_sampler_p_ctypes, llama_sampler_p_ctypes)),
]
llama_sampler._fields_ = [
    ("iface", ctypes.POINTER(llama_sampler_i)),
    ("ctx", ctypes.c_void_p),
]
llama_perf_context_data._fields_ = [
    ("t_start_ms", ctypes.c_double),
    ("t_load_ms", ctypes.c_double),
    ("t_p_eval_ms", ctypes.c_double),
    ("t_eval_ms", ctypes.c_double),
    ("n_p_eval", ctypes.c_int32),
    ("n_eval", ctypes.c_int32),
    ("n_reused", ctypes.c_int32),
]
llama_perf_sampler_data._fields_ = [
    ("t_sample_ms", ctypes.c_double),
    ("n_sample", ctypes.c_int32),
]
llama_opt_params._fields_ = [
    ("n_ctx_train", ctypes.c_uint32),
    ("param_filter", llama_opt_param_filter),
    ("param_filter_ud", ctypes.c_void_p),
    ("get_opt_pars", ggml_opt_get_optimizer_params),
    ("get_opt_pars_ud", ctypes.c_void_p),
    ("optimizer_type", ctypes.c_int),
]

# ---- functions ----

# const char *llama_ftype_name(enum llama_ftype ftype)
llama_ftype_name = _function("llama_ftype_name", [ctypes.c_int], ctypes.c_char_p)

# const char *llama_flash_attn_type_name(enum llama_flash_attn_type flash_attn_type)
llama_flash_attn_type_name = _function(
    "llama_flash_attn_type_name", [ctypes.c_int], ctypes.c_char_p
)

# const char *llama_load_mode_name(enum llama_load_mode load_mode)
llama_load_mode_name = _function("llama_load_mode_name", [ctypes.c_int], ctypes.c_char_p)

# enum llama_load_mode llama_load_mode_from_str(const char *str)
llama_load_mode_from_str = _function("llama_load_mode_from_str", [ctypes.c_char_p], ctypes.c_int)

# const char *llama_version(void)
llama_version = _function("llama_version", [], ctypes.c_char_p)

# struct llama_model_params llama_model_default_params(void)
llama_model_default_params = _function("llama_model_default_params", [], llama_model_params)

# struct llama_context_params llama_context_default_params(void)
llama_context_default_params = _function("llama_context_default_params", [], llama_context_params)

# struct llama_sampler_chain_params llama_sampler_chain_default_params(void)
llama_sampler_chain_default_params = _function(
    "llama_sampler_chain_default_params", [], llama_sampler_chain_params
)

# struct llama_model_quantize_params llama_model_quantize_default_params(void)
llama_model_quantize_default_params = _function(
    "llama_model_quantize_default_params", [], llama_model_quantize_params
)

# void llama_backend_init(void)
llama_backend_init = _function("llama_backend_init", [], None)

# void llama_backend_free(void)
llama_backend_free = _function("llama_backend_free", [], None)

# void llama_numa_init(enum ggml_numa_strategy numa)
llama_numa_init = _function("llama_numa_init", [ctypes.c_int], None)

# void llama_attach_threadpool(struct llama_context *ctx, ggml_threadpool_t threadpool, ggml_threadpool_t threadpool_batch)
llama_attach_threadpool = _function(
    "llama_attach_threadpool", [llama_context_p_ctypes, ctypes.c_void_p, ctypes.c_void_p], None
)

# void llama_detach_threadpool(struct llama_context *ctx)
llama_detach_threadpool = _function("llama_detach_threadpool", [llama_context_p_ctypes], None)

# struct llama_model *llama_model_init_from_user(struct gguf_context *metadata, llama_model_set_tensor_data_t set_tensor_data, void *set_tensor_data_ud, struct llama_model_params params)
llama_model_init_from_user = _function(
    "llama_model_init_from_user",
    [gguf_context_p_ctypes, llama_model_set_tensor_data_t, ctypes.c_void_p, llama_model_params],
    llama_model_p_ctypes,
)

# struct llama_model *llama_load_model_from_file(const char *path_model, struct llama_model_params params)
llama_load_model_from_file = _function(
    "llama_load_model_from_file", [ctypes.c_char_p, llama_model_params], llama_model_p_ctypes
)

# struct llama_model *llama_model_load_from_file(const char *path_model, struct llama_model_params params)
llama_model_load_from_file = _function(
    "llama_model_load_from_file", [ctypes.c_char_p, llama_model_params], llama_model_p_ctypes
)

# struct llama_model *llama_model_load_from_file_ptr(FILE *file, struct llama_model_params params)
llama_model_load_from_file_ptr = _function(
    "llama_model_load_from_file_ptr", [ctypes.c_void_p, llama_model_params], llama_model_p_ctypes
)

# struct llama_model *llama_model_load_from_splits(const char **paths, size_t n_paths, struct llama_model_params params)
llama_model_load_from_splits = _function(
    "llama_model_load_from_splits",
    [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, llama_model_params],
    llama_model_p_ctypes,
)

# void llama_model_save_to_file(const struct llama_model *model, const char *path_model)
llama_model_save_to_file = _function(
    "llama_model_save_to_file", [llama_model_p_ctypes, ctypes.c_char_p], None
)

# void llama_free_model(struct llama_model *model)
llama_free_model = _function("llama_free_model", [llama_model_p_ctypes], None)

# void llama_model_free(struct llama_model *model)
llama_model_free = _function("llama_model_free", [llama_model_p_ctypes], None)

# struct llama_context *llama_init_from_model(struct llama_model *model, struct llama_context_params params)
llama_init_from_model = _function(
    "llama_init_from_model", [llama_model_p_ctypes, llama_context_params], llama_context_p_ctypes
)

# struct llama_context *llama_new_context_with_model(struct llama_model *model, struct llama_context_params params)
llama_new_context_with_model = _function(
    "llama_new_context_with_model",
    [llama_model_p_ctypes, llama_context_params],
    llama_context_p_ctypes,
)

# void llama_free(struct llama_context *ctx)
llama_free = _function("llama_free", [llama_context_p_ctypes], None)

# int64_t llama_time_us(void)
llama_time_us = _function("llama_time_us", [], ctypes.c_int64)

# size_t llama_max_devices(void)
llama_max_devices = _function("llama_max_devices", [], ctypes.c_size_t)

# size_t llama_max_parallel_sequences(void)
llama_max_parallel_sequences = _function("llama_max_parallel_sequences", [], ctypes.c_size_t)

# size_t llama_max_tensor_buft_overrides(void)
llama_max_tensor_buft_overrides = _function("llama_max_tensor_buft_overrides", [], ctypes.c_size_t)

# _Bool llama_supports_mmap(void)
llama_supports_mmap = _function("llama_supports_mmap", [], ctypes.c_bool)

# _Bool llama_supports_mlock(void)
llama_supports_mlock = _function("llama_supports_mlock", [], ctypes.c_bool)

# _Bool llama_supports_gpu_offload(void)
llama_supports_gpu_offload = _function("llama_supports_gpu_offload", [], ctypes.c_bool)

# _Bool llama_supports_rpc(void)
llama_supports_rpc = _function("llama_supports_rpc", [], ctypes.c_bool)

# uint32_t llama_n_ctx(const struct llama_context *ctx)
llama_n_ctx = _function("llama_n_ctx", [llama_context_p_ctypes], ctypes.c_uint32)

# uint32_t llama_n_ctx_seq(const struct llama_context *ctx)
llama_n_ctx_seq = _function("llama_n_ctx_seq", [llama_context_p_ctypes], ctypes.c_uint32)

# uint32_t llama_n_batch(const struct llama_context *ctx)
llama_n_batch = _function("llama_n_batch", [llama_context_p_ctypes], ctypes.c_uint32)

# uint32_t llama_n_ubatch(const struct llama_context *ctx)
llama_n_ubatch = _function("llama_n_ubatch", [llama_context_p_ctypes], ctypes.c_uint32)

# uint32_t llama_n_seq_max(const struct llama_context *ctx)
llama_n_seq_max = _function("llama_n_seq_max", [llama_context_p_ctypes], ctypes.c_uint32)

# uint32_t llama_n_rs_seq(const struct llama_context *ctx)
llama_n_rs_seq = _function("llama_n_rs_seq", [llama_context_p_ctypes], ctypes.c_uint32)

# int32_t llama_n_ctx_train(const struct llama_model *model)
llama_n_ctx_train = _function("llama_n_ctx_train", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_n_embd(const struct llama_model *model)
llama_n_embd = _function("llama_n_embd", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_n_layer(const struct llama_model *model)
llama_n_layer = _function("llama_n_layer", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_n_head(const struct llama_model *model)
llama_n_head = _function("llama_n_head", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_n_vocab(const struct llama_vocab *vocab)
llama_n_vocab = _function("llama_n_vocab", [llama_vocab_p_ctypes], ctypes.c_int32)

# const struct llama_model *llama_get_model(const struct llama_context *ctx)
llama_get_model = _function("llama_get_model", [llama_context_p_ctypes], llama_model_p_ctypes)

# llama_memory_t llama_get_memory(const struct llama_context *ctx)
llama_get_memory = _function("llama_get_memory", [llama_context_p_ctypes], llama_memory_t_ctypes)

# enum llama_pooling_type llama_pooling_type(const struct llama_context *ctx)
llama_pooling_type = _function("llama_pooling_type", [llama_context_p_ctypes], ctypes.c_int)

# const struct llama_vocab *llama_model_get_vocab(const struct llama_model *model)
llama_model_get_vocab = _function(
    "llama_model_get_vocab", [llama_model_p_ctypes], llama_vocab_p_ctypes
)

# enum llama_rope_type llama_model_rope_type(const struct llama_model *model)
llama_model_rope_type = _function("llama_model_rope_type", [llama_model_p_ctypes], ctypes.c_int)

# int32_t llama_model_n_ctx_train(const struct llama_model *model)
llama_model_n_ctx_train = _function(
    "llama_model_n_ctx_train", [llama_model_p_ctypes], ctypes.c_int32
)

# int32_t llama_model_n_embd(const struct llama_model *model)
llama_model_n_embd = _function("llama_model_n_embd", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_embd_inp(const struct llama_model *model)
llama_model_n_embd_inp = _function("llama_model_n_embd_inp", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_embd_out(const struct llama_model *model)
llama_model_n_embd_out = _function("llama_model_n_embd_out", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_layer(const struct llama_model *model)
llama_model_n_layer = _function("llama_model_n_layer", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_layer_nextn(const struct llama_model *model)
llama_model_n_layer_nextn = _function(
    "llama_model_n_layer_nextn", [llama_model_p_ctypes], ctypes.c_int32
)

# int32_t llama_model_n_head(const struct llama_model *model)
llama_model_n_head = _function("llama_model_n_head", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_head_kv(const struct llama_model *model)
llama_model_n_head_kv = _function("llama_model_n_head_kv", [llama_model_p_ctypes], ctypes.c_int32)

# int32_t llama_model_n_swa(const struct llama_model *model)
llama_model_n_swa = _function("llama_model_n_swa", [llama_model_p_ctypes], ctypes.c_int32)

# float llama_model_rope_freq_scale_train(const struct llama_model *model)
llama_model_rope_freq_scale_train = _function(
    "llama_model_rope_freq_scale_train", [llama_model_p_ctypes], ctypes.c_float
)

# uint32_t llama_model_n_cls_out(const struct llama_model *model)
llama_model_n_cls_out = _function("llama_model_n_cls_out", [llama_model_p_ctypes], ctypes.c_uint32)

# const char *llama_model_cls_label(const struct llama_model *model, uint32_t i)
llama_model_cls_label = _function(
    "llama_model_cls_label", [llama_model_p_ctypes, ctypes.c_uint32], ctypes.c_char_p
)

# enum llama_vocab_type llama_vocab_type(const struct llama_vocab *vocab)
llama_vocab_type = _function("llama_vocab_type", [llama_vocab_p_ctypes], ctypes.c_int)

# int32_t llama_vocab_n_tokens(const struct llama_vocab *vocab)
llama_vocab_n_tokens = _function("llama_vocab_n_tokens", [llama_vocab_p_ctypes], ctypes.c_int32)

# int32_t llama_model_meta_val_str(const struct llama_model *model, const char *key, char *buf, size_t buf_size)
llama_model_meta_val_str = _function(
    "llama_model_meta_val_str",
    [llama_model_p_ctypes, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# int32_t llama_model_meta_count(const struct llama_model *model)
llama_model_meta_count = _function("llama_model_meta_count", [llama_model_p_ctypes], ctypes.c_int32)

# const char *llama_model_meta_key_str(enum llama_model_meta_key key)
llama_model_meta_key_str = _function("llama_model_meta_key_str", [ctypes.c_int], ctypes.c_char_p)

# int32_t llama_model_meta_key_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size)
llama_model_meta_key_by_index = _function(
    "llama_model_meta_key_by_index",
    [llama_model_p_ctypes, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# int32_t llama_model_meta_val_str_by_index(const struct llama_model *model, int32_t i, char *buf, size_t buf_size)
llama_model_meta_val_str_by_index = _function(
    "llama_model_meta_val_str_by_index",
    [llama_model_p_ctypes, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# int32_t llama_model_desc(const struct llama_model *model, char *buf, size_t buf_size)
llama_model_desc = _function(
    "llama_model_desc", [llama_model_p_ctypes, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int32
)

# enum llama_ftype llama_model_ftype(const struct llama_model *model)
llama_model_ftype = _function("llama_model_ftype", [llama_model_p_ctypes], ctypes.c_int)

# uint64_t llama_model_size(const struct llama_model *model)
llama_model_size = _function("llama_model_size", [llama_model_p_ctypes], ctypes.c_uint64)

# const char *llama_model_chat_template(const struct llama_model *model, const char *name)
llama_model_chat_template = _function(
    "llama_model_chat_template", [llama_model_p_ctypes, ctypes.c_char_p], ctypes.c_char_p
)

# uint64_t llama_model_n_params(const struct llama_model *model)
llama_model_n_params = _function("llama_model_n_params", [llama_model_p_ctypes], ctypes.c_uint64)

# _Bool llama_model_has_encoder(const struct llama_model *model)
llama_model_has_encoder = _function(
    "llama_model_has_encoder", [llama_model_p_ctypes], ctypes.c_bool
)

# _Bool llama_model_has_decoder(const struct llama_model *model)
llama_model_has_decoder = _function(
    "llama_model_has_decoder", [llama_model_p_ctypes], ctypes.c_bool
)

# llama_token llama_model_decoder_start_token(const struct llama_model *model)
llama_model_decoder_start_token = _function(
    "llama_model_decoder_start_token", [llama_model_p_ctypes], llama_token
)

# _Bool llama_model_is_recurrent(const struct llama_model *model)
llama_model_is_recurrent = _function(
    "llama_model_is_recurrent", [llama_model_p_ctypes], ctypes.c_bool
)

# _Bool llama_model_is_hybrid(const struct llama_model *model)
llama_model_is_hybrid = _function("llama_model_is_hybrid", [llama_model_p_ctypes], ctypes.c_bool)

# _Bool llama_model_is_diffusion(const struct llama_model *model)
llama_model_is_diffusion = _function(
    "llama_model_is_diffusion", [llama_model_p_ctypes], ctypes.c_bool
)

# uint32_t llama_model_quantize(const char *fname_inp, const char *fname_out, const llama_model_quantize_params *params)
llama_model_quantize = _function(
    "llama_model_quantize",
    [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(llama_model_quantize_params)],
    ctypes.c_uint32,
)

# struct llama_adapter_lora *llama_adapter_lora_init(struct llama_model *model, const char *path_lora)
llama_adapter_lora_init = _function(
    "llama_adapter_lora_init", [llama_model_p_ctypes, ctypes.c_char_p], llama_adapter_lora_p_ctypes
)

# struct llama_adapter_lora *llama_adapter_lora_init_from_file_ptr(struct llama_model *model, FILE *file)
llama_adapter_lora_init_from_file_ptr = _function(
    "llama_adapter_lora_init_from_file_ptr",
    [llama_model_p_ctypes, ctypes.c_void_p],
    llama_adapter_lora_p_ctypes,
)

# int32_t llama_adapter_meta_val_str(const struct llama_adapter_lora *adapter, const char *key, char *buf, size_t buf_size)
llama_adapter_meta_val_str = _function(
    "llama_adapter_meta_val_str",
    [llama_adapter_lora_p_ctypes, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# int32_t llama_adapter_meta_count(const struct llama_adapter_lora *adapter)
llama_adapter_meta_count = _function(
    "llama_adapter_meta_count", [llama_adapter_lora_p_ctypes], ctypes.c_int32
)

# int32_t llama_adapter_meta_key_by_index(const struct llama_adapter_lora *adapter, int32_t i, char *buf, size_t buf_size)
llama_adapter_meta_key_by_index = _function(
    "llama_adapter_meta_key_by_index",
    [llama_adapter_lora_p_ctypes, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# int32_t llama_adapter_meta_val_str_by_index(const struct llama_adapter_lora *adapter, int32_t i, char *buf, size_t buf_size)
llama_adapter_meta_val_str_by_index = _function(
    "llama_adapter_meta_val_str_by_index",
    [llama_adapter_lora_p_ctypes, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t],
    ctypes.c_int32,
)

# void llama_adapter_lora_free(struct llama_adapter_lora *adapter)
llama_adapter_lora_free = _function("llama_adapter_lora_free", [llama_adapter_lora_p_ctypes], None)

# uint64_t llama_adapter_get_alora_n_invocation_tokens(const struct llama_adapter_lora *adapter)
llama_adapter_get_alora_n_invocation_tokens = _function(
    "llama_adapter_get_alora_n_invocation_tokens", [llama_adapter_lora_p_ctypes], ctypes.c_uint64
)

# const llama_token *llama_adapter_get_alora_invocation_tokens(const struct llama_adapter_lora *adapter)
llama_adapter_get_alora_invocation_tokens = _function(
    "llama_adapter_get_alora_invocation_tokens", [llama_adapter_lora_p_ctypes], llama_token_p
)

# int32_t llama_set_adapters_lora(struct llama_context *ctx, struct llama_adapter_lora **adapters, size_t n_adapters, float *scales)
llama_set_adapters_lora = _function(
    "llama_set_adapters_lora",
    [llama_context_p_ctypes, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_float)],
    ctypes.c_int32,
)

# int32_t llama_set_adapter_cvec(struct llama_context *ctx, const float *data, size_t len, int32_t n_embd, int32_t il_start, int32_t il_end)
llama_set_adapter_cvec = _function(
    "llama_set_adapter_cvec",
    [
        llama_context_p_ctypes,
        ctypes.POINTER(ctypes.c_float),
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_int32,
    ],
    ctypes.c_int32,
)

# void llama_memory_clear(llama_memory_t mem, _Bool data)
llama_memory_clear = _function("llama_memory_clear", [llama_memory_t_ctypes, ctypes.c_bool], None)

# _Bool llama_memory_seq_rm(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1)
llama_memory_seq_rm = _function(
    "llama_memory_seq_rm",
    [llama_memory_t_ctypes, llama_seq_id, llama_pos, llama_pos],
    ctypes.c_bool,
)

# void llama_memory_seq_cp(llama_memory_t mem, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1)
llama_memory_seq_cp = _function(
    "llama_memory_seq_cp",
    [llama_memory_t_ctypes, llama_seq_id, llama_seq_id, llama_pos, llama_pos],
    None,
)

# void llama_memory_seq_keep(llama_memory_t mem, llama_seq_id seq_id)
llama_memory_seq_keep = _function(
    "llama_memory_seq_keep", [llama_memory_t_ctypes, llama_seq_id], None
)

# void llama_memory_seq_add(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta)
llama_memory_seq_add = _function(
    "llama_memory_seq_add",
    [llama_memory_t_ctypes, llama_seq_id, llama_pos, llama_pos, llama_pos],
    None,
)

# void llama_memory_seq_div(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d)
llama_memory_seq_div = _function(
    "llama_memory_seq_div",
    [llama_memory_t_ctypes, llama_seq_id, llama_pos, llama_pos, ctypes.c_int],
    None,
)

# llama_pos llama_memory_seq_pos_min(llama_memory_t mem, llama_seq_id seq_id)
llama_memory_seq_pos_min = _function(
    "llama_memory_seq_pos_min", [llama_memory_t_ctypes, llama_seq_id], llama_pos
)

# llama_pos llama_memory_seq_pos_max(llama_memory_t mem, llama_seq_id seq_id)
llama_memory_seq_pos_max = _function(
    "llama_memory_seq_pos_max", [llama_memory_t_ctypes, llama_seq_id], llama_pos
)

# _Bool llama_memory_can_shift(llama_memory_t mem)
llama_memory_can_shift = _function("llama_memory_can_shift", [llama_memory_t_ctypes], ctypes.c_bool)

# size_t llama_state_get_size(struct llama_context *ctx)
llama_state_get_size = _function("llama_state_get_size", [llama_context_p_ctypes], ctypes.c_size_t)

# size_t llama_get_state_size(struct llama_context *ctx)
llama_get_state_size = _function("llama_get_state_size", [llama_context_p_ctypes], ctypes.c_size_t)

# size_t llama_state_get_data(struct llama_context *ctx, uint8_t *dst, size_t size)
llama_state_get_data = _function(
    "llama_state_get_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t],
    ctypes.c_size_t,
)

# size_t llama_copy_state_data(struct llama_context *ctx, uint8_t *dst)
llama_copy_state_data = _function(
    "llama_copy_state_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8)],
    ctypes.c_size_t,
)

# size_t llama_state_set_data(struct llama_context *ctx, const uint8_t *src, size_t size)
llama_state_set_data = _function(
    "llama_state_set_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t],
    ctypes.c_size_t,
)

# size_t llama_set_state_data(struct llama_context *ctx, const uint8_t *src)
llama_set_state_data = _function(
    "llama_set_state_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8)],
    ctypes.c_size_t,
)

# _Bool llama_state_load_file(struct llama_context *ctx, const char *path_session, llama_token *tokens_out, size_t n_token_capacity, size_t *n_token_count_out)
llama_state_load_file = _function(
    "llama_state_load_file",
    [
        llama_context_p_ctypes,
        ctypes.c_char_p,
        llama_token_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    ctypes.c_bool,
)

# _Bool llama_load_session_file(struct llama_context *ctx, const char *path_session, llama_token *tokens_out, size_t n_token_capacity, size_t *n_token_count_out)
llama_load_session_file = _function(
    "llama_load_session_file",
    [
        llama_context_p_ctypes,
        ctypes.c_char_p,
        llama_token_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    ctypes.c_bool,
)

# _Bool llama_state_save_file(struct llama_context *ctx, const char *path_session, const llama_token *tokens, size_t n_token_count)
llama_state_save_file = _function(
    "llama_state_save_file",
    [llama_context_p_ctypes, ctypes.c_char_p, llama_token_p, ctypes.c_size_t],
    ctypes.c_bool,
)

# _Bool llama_save_session_file(struct llama_context *ctx, const char *path_session, const llama_token *tokens, size_t n_token_count)
llama_save_session_file = _function(
    "llama_save_session_file",
    [llama_context_p_ctypes, ctypes.c_char_p, llama_token_p, ctypes.c_size_t],
    ctypes.c_bool,
)

# size_t llama_state_seq_get_size(struct llama_context *ctx, llama_seq_id seq_id)
llama_state_seq_get_size = _function(
    "llama_state_seq_get_size", [llama_context_p_ctypes, llama_seq_id], ctypes.c_size_t
)

# size_t llama_state_seq_get_data(struct llama_context *ctx, uint8_t *dst, size_t size, llama_seq_id seq_id)
llama_state_seq_get_data = _function(
    "llama_state_seq_get_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, llama_seq_id],
    ctypes.c_size_t,
)

# size_t llama_state_seq_set_data(struct llama_context *ctx, const uint8_t *src, size_t size, llama_seq_id dest_seq_id)
llama_state_seq_set_data = _function(
    "llama_state_seq_set_data",
    [llama_context_p_ctypes, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, llama_seq_id],
    ctypes.c_size_t,
)

# size_t llama_state_seq_save_file(struct llama_context *ctx, const char *filepath, llama_seq_id seq_id, const llama_token *tokens, size_t n_token_count)
llama_state_seq_save_file = _function(
    "llama_state_seq_save_file",
    [llama_context_p_ctypes, ctypes.c_char_p, llama_seq_id, llama_token_p, ctypes.c_size_t],
    ctypes.c_size_t,
)

# size_t llama_state_seq_load_file(struct llama_context *ctx, const char *filepath, llama_seq_id dest_seq_id, llama_token *tokens_out, size_t n_token_capacity, size_t *n_token_count_out)
llama_state_seq_load_file = _function(
    "llama_state_seq_load_file",
    [
        llama_context_p_ctypes,
        ctypes.c_char_p,
        llama_seq_id,
        llama_token_p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ],
    ctypes.c_size_t,
)

# size_t llama_state_seq_get_size_ext(struct llama_context *ctx, llama_seq_id seq_id, llama_state_seq_flags flags)
llama_state_seq_get_size_ext = _function(
    "llama_state_seq_get_size_ext",
    [llama_context_p_ctypes, llama_seq_id, llama_state_seq_flags],
    ctypes.c_size_t,
)

# size_t llama_state_seq_get_data_ext(struct llama_context *ctx, uint8_t *dst, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags)
llama_state_seq_get_data_ext = _function(
    "llama_state_seq_get_data_ext",
    [
        llama_context_p_ctypes,
        ctypes.POINTER(ctypes.c_uint8),
        ctypes.c_size_t,
        llama_seq_id,
        llama_state_seq_flags,
    ],
    ctypes.c_size_t,
)

# size_t llama_state_seq_set_data_ext(struct llama_context *ctx, const uint8_t *src, size_t size, llama_seq_id dest_seq_id, llama_state_seq_flags flags)
llama_state_seq_set_data_ext = _function(
    "llama_state_seq_set_data_ext",
    [
        llama_context_p_ctypes,
        ctypes.POINTER(ctypes.c_uint8),
        ctypes.c_size_t,
        llama_seq_id,
        llama_state_seq_flags,
    ],
    ctypes.c_size_t,
)

# struct llama_batch llama_batch_get_one(llama_token *tokens, int32_t n_tokens)
llama_batch_get_one = _function("llama_batch_get_one", [llama_token_p, ctypes.c_int32], llama_batch)

# struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max)
llama_batch_init = _function(
    "llama_batch_init", [ctypes.c_int32, ctypes.c_int32, ctypes.c_int32], llama_batch
)

# void llama_batch_free(struct llama_batch batch)
llama_batch_free = _function("llama_batch_free", [llama_batch], None)

# int32_t llama_encode(struct llama_context *ctx, struct llama_batch batch)
llama_encode = _function("llama_encode", [llama_context_p_ctypes, llama_batch], ctypes.c_int32)

# int32_t llama_decode(struct llama_context *ctx, struct llama_batch batch)
llama_decode = _function("llama_decode", [llama_context_p_ctypes, llama_batch], ctypes.c_int32)

# struct llama_batch_ext *llama_batch_ext_init(struct llama_context *ctx)
llama_batch_ext_init = _function("llama_batch_ext_init", [llama_context_p_ctypes], ctypes.c_void_p)

# void llama_batch_ext_free(struct llama_batch_ext *batch)
llama_batch_ext_free = _function("llama_batch_ext_free", [ctypes.c_void_p], None)

# void llama_batch_ext_clear(struct llama_batch_ext *batch)
llama_batch_ext_clear = _function("llama_batch_ext_clear", [ctypes.c_void_p], None)

# int32_t llama_batch_ext_add(struct llama_batch_ext *batch, llama_seq_id seq_id)
llama_batch_ext_add = _function(
    "llama_batch_ext_add", [ctypes.c_void_p, llama_seq_id], ctypes.c_int32
)

# int32_t llama_batch_ext_add_token(struct llama_batch_ext *batch, llama_seq_id seq_id, llama_token id)
llama_batch_ext_add_token = _function(
    "llama_batch_ext_add_token", [ctypes.c_void_p, llama_seq_id, llama_token], ctypes.c_int32
)

# int32_t llama_batch_ext_add_embd(struct llama_batch_ext *batch, llama_seq_id seq_id, struct llama_embd embd)
llama_batch_ext_add_embd = _function(
    "llama_batch_ext_add_embd", [ctypes.c_void_p, llama_seq_id, llama_embd], ctypes.c_int32
)

# _Bool llama_batch_ext_add_seq(struct llama_batch_ext *batch, int32_t idx, llama_seq_id seq_id)
llama_batch_ext_add_seq = _function(
    "llama_batch_ext_add_seq", [ctypes.c_void_p, ctypes.c_int32, llama_seq_id], ctypes.c_bool
)

# _Bool llama_batch_ext_set_embd_token(struct llama_batch_ext *batch, int32_t idx, struct llama_embd embd)
llama_batch_ext_set_embd_token = _function(
    "llama_batch_ext_set_embd_token", [ctypes.c_void_p, ctypes.c_int32, llama_embd], ctypes.c_bool
)

# _Bool llama_batch_ext_set_embd_state(struct llama_batch_ext *batch, int32_t idx, struct llama_embd embd)
llama_batch_ext_set_embd_state = _function(
    "llama_batch_ext_set_embd_state", [ctypes.c_void_p, ctypes.c_int32, llama_embd], ctypes.c_bool
)

# _Bool llama_batch_ext_set_output_embd(struct llama_batch_ext *batch, int32_t idx, _Bool value)
llama_batch_ext_set_output_embd = _function(
    "llama_batch_ext_set_output_embd",
    [ctypes.c_void_p, ctypes.c_int32, ctypes.c_bool],
    ctypes.c_bool,
)

# _Bool llama_batch_ext_set_output_logits(struct llama_batch_ext *batch, int32_t idx, _Bool value)
llama_batch_ext_set_output_logits = _function(
    "llama_batch_ext_set_output_logits",
    [ctypes.c_void_p, ctypes.c_int32, ctypes.c_bool],
    ctypes.c_bool,
)

# _Bool llama_batch_ext_set_pos(struct llama_batch_ext *batch, int32_t idx, const llama_pos *pos)
llama_batch_ext_set_pos = _function(
    "llama_batch_ext_set_pos",
    [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(llama_pos)],
    ctypes.c_bool,
)

# int32_t llama_process(struct llama_context *ctx, enum llama_process_type type, struct llama_batch_ext *batch)
llama_process = _function(
    "llama_process", [llama_context_p_ctypes, ctypes.c_int, ctypes.c_void_p], ctypes.c_int32
)

# void llama_set_n_threads(struct llama_context *ctx, int32_t n_threads, int32_t n_threads_batch)
llama_set_n_threads = _function(
    "llama_set_n_threads", [llama_context_p_ctypes, ctypes.c_int32, ctypes.c_int32], None
)

# int32_t llama_n_threads(struct llama_context *ctx)
llama_n_threads = _function("llama_n_threads", [llama_context_p_ctypes], ctypes.c_int32)

# int32_t llama_n_threads_batch(struct llama_context *ctx)
llama_n_threads_batch = _function("llama_n_threads_batch", [llama_context_p_ctypes], ctypes.c_int32)

# void llama_set_embeddings(struct llama_context *ctx, _Bool embeddings)
llama_set_embeddings = _function(
    "llama_set_embeddings", [llama_context_p_ctypes, ctypes.c_bool], None
)

# void llama_set_causal_attn(struct llama_context *ctx, _Bool causal_attn)
llama_set_causal_attn = _function(
    "llama_set_causal_attn", [llama_context_p_ctypes, ctypes.c_bool], None
)

# _Bool llama_get_causal_attn(const struct llama_context *ctx)
llama_get_causal_attn = _function("llama_get_causal_attn", [llama_context_p_ctypes], ctypes.c_bool)

# void llama_set_warmup(struct llama_context *ctx, _Bool warmup)
llama_set_warmup = _function("llama_set_warmup", [llama_context_p_ctypes, ctypes.c_bool], None)

# void llama_set_abort_callback(struct llama_context *ctx, ggml_abort_callback abort_callback, void *abort_callback_data)
llama_set_abort_callback = _function(
    "llama_set_abort_callback", [llama_context_p_ctypes, ggml_abort_callback, ctypes.c_void_p], None
)

# void llama_synchronize(struct llama_context *ctx)
llama_synchronize = _function("llama_synchronize", [llama_context_p_ctypes], None)

# float *llama_get_logits(struct llama_context *ctx)
llama_get_logits = _function(
    "llama_get_logits", [llama_context_p_ctypes], ctypes.POINTER(ctypes.c_float)
)

# float *llama_get_logits_ith(struct llama_context *ctx, int32_t i)
llama_get_logits_ith = _function(
    "llama_get_logits_ith", [llama_context_p_ctypes, ctypes.c_int32], ctypes.POINTER(ctypes.c_float)
)

# float *llama_get_embeddings(struct llama_context *ctx)
llama_get_embeddings = _function(
    "llama_get_embeddings", [llama_context_p_ctypes], ctypes.POINTER(ctypes.c_float)
)

# float *llama_get_embeddings_ith(struct llama_context *ctx, int32_t i)
llama_get_embeddings_ith = _function(
    "llama_get_embeddings_ith",
    [llama_context_p_ctypes, ctypes.c_int32],
    ctypes.POINTER(ctypes.c_float),
)

# float *llama_get_embeddings_seq(struct llama_context *ctx, llama_seq_id seq_id)
llama_get_embeddings_seq = _function(
    "llama_get_embeddings_seq",
    [llama_context_p_ctypes, llama_seq_id],
    ctypes.POINTER(ctypes.c_float),
)

# llama_token llama_get_sampled_token_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_token_ith = _function(
    "llama_get_sampled_token_ith", [llama_context_p_ctypes, ctypes.c_int32], llama_token
)

# float *llama_get_sampled_probs_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_probs_ith = _function(
    "llama_get_sampled_probs_ith",
    [llama_context_p_ctypes, ctypes.c_int32],
    ctypes.POINTER(ctypes.c_float),
)

# uint32_t llama_get_sampled_probs_count_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_probs_count_ith = _function(
    "llama_get_sampled_probs_count_ith", [llama_context_p_ctypes, ctypes.c_int32], ctypes.c_uint32
)

# float *llama_get_sampled_logits_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_logits_ith = _function(
    "llama_get_sampled_logits_ith",
    [llama_context_p_ctypes, ctypes.c_int32],
    ctypes.POINTER(ctypes.c_float),
)

# uint32_t llama_get_sampled_logits_count_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_logits_count_ith = _function(
    "llama_get_sampled_logits_count_ith", [llama_context_p_ctypes, ctypes.c_int32], ctypes.c_uint32
)

# llama_token *llama_get_sampled_candidates_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_candidates_ith = _function(
    "llama_get_sampled_candidates_ith", [llama_context_p_ctypes, ctypes.c_int32], llama_token_p
)

# uint32_t llama_get_sampled_candidates_count_ith(struct llama_context *ctx, int32_t i)
llama_get_sampled_candidates_count_ith = _function(
    "llama_get_sampled_candidates_count_ith",
    [llama_context_p_ctypes, ctypes.c_int32],
    ctypes.c_uint32,
)

# const char *llama_vocab_get_text(const struct llama_vocab *vocab, llama_token token)
llama_vocab_get_text = _function(
    "llama_vocab_get_text", [llama_vocab_p_ctypes, llama_token], ctypes.c_char_p
)

# float llama_vocab_get_score(const struct llama_vocab *vocab, llama_token token)
llama_vocab_get_score = _function(
    "llama_vocab_get_score", [llama_vocab_p_ctypes, llama_token], ctypes.c_float
)

# enum llama_token_attr llama_vocab_get_attr(const struct llama_vocab *vocab, llama_token token)
llama_vocab_get_attr = _function(
    "llama_vocab_get_attr", [llama_vocab_p_ctypes, llama_token], ctypes.c_int
)

# _Bool llama_vocab_is_eog(const struct llama_vocab *vocab, llama_token token)
llama_vocab_is_eog = _function(
    "llama_vocab_is_eog", [llama_vocab_p_ctypes, llama_token], ctypes.c_bool
)

# _Bool llama_vocab_is_control(const struct llama_vocab *vocab, llama_token token)
llama_vocab_is_control = _function(
    "llama_vocab_is_control", [llama_vocab_p_ctypes, llama_token], ctypes.c_bool
)

# llama_token llama_vocab_bos(const struct llama_vocab *vocab)
llama_vocab_bos = _function("llama_vocab_bos", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_eos(const struct llama_vocab *vocab)
llama_vocab_eos = _function("llama_vocab_eos", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_eot(const struct llama_vocab *vocab)
llama_vocab_eot = _function("llama_vocab_eot", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_sep(const struct llama_vocab *vocab)
llama_vocab_sep = _function("llama_vocab_sep", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_nl(const struct llama_vocab *vocab)
llama_vocab_nl = _function("llama_vocab_nl", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_pad(const struct llama_vocab *vocab)
llama_vocab_pad = _function("llama_vocab_pad", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_mask(const struct llama_vocab *vocab)
llama_vocab_mask = _function("llama_vocab_mask", [llama_vocab_p_ctypes], llama_token)

# _Bool llama_vocab_get_add_bos(const struct llama_vocab *vocab)
llama_vocab_get_add_bos = _function(
    "llama_vocab_get_add_bos", [llama_vocab_p_ctypes], ctypes.c_bool
)

# _Bool llama_vocab_get_add_eos(const struct llama_vocab *vocab)
llama_vocab_get_add_eos = _function(
    "llama_vocab_get_add_eos", [llama_vocab_p_ctypes], ctypes.c_bool
)

# _Bool llama_vocab_get_add_sep(const struct llama_vocab *vocab)
llama_vocab_get_add_sep = _function(
    "llama_vocab_get_add_sep", [llama_vocab_p_ctypes], ctypes.c_bool
)

# const llama_token *llama_vocab_get_suppress_tokens(const struct llama_vocab *vocab, int32_t *n_suppress_tokens)
llama_vocab_get_suppress_tokens = _function(
    "llama_vocab_get_suppress_tokens",
    [llama_vocab_p_ctypes, ctypes.POINTER(ctypes.c_int32)],
    llama_token_p,
)

# llama_token llama_vocab_fim_pre(const struct llama_vocab *vocab)
llama_vocab_fim_pre = _function("llama_vocab_fim_pre", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_fim_suf(const struct llama_vocab *vocab)
llama_vocab_fim_suf = _function("llama_vocab_fim_suf", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_fim_mid(const struct llama_vocab *vocab)
llama_vocab_fim_mid = _function("llama_vocab_fim_mid", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_fim_pad(const struct llama_vocab *vocab)
llama_vocab_fim_pad = _function("llama_vocab_fim_pad", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_fim_rep(const struct llama_vocab *vocab)
llama_vocab_fim_rep = _function("llama_vocab_fim_rep", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_fim_sep(const struct llama_vocab *vocab)
llama_vocab_fim_sep = _function("llama_vocab_fim_sep", [llama_vocab_p_ctypes], llama_token)

# const char *llama_token_get_text(const struct llama_vocab *vocab, llama_token token)
llama_token_get_text = _function(
    "llama_token_get_text", [llama_vocab_p_ctypes, llama_token], ctypes.c_char_p
)

# float llama_token_get_score(const struct llama_vocab *vocab, llama_token token)
llama_token_get_score = _function(
    "llama_token_get_score", [llama_vocab_p_ctypes, llama_token], ctypes.c_float
)

# enum llama_token_attr llama_token_get_attr(const struct llama_vocab *vocab, llama_token token)
llama_token_get_attr = _function(
    "llama_token_get_attr", [llama_vocab_p_ctypes, llama_token], ctypes.c_int
)

# _Bool llama_token_is_eog(const struct llama_vocab *vocab, llama_token token)
llama_token_is_eog = _function(
    "llama_token_is_eog", [llama_vocab_p_ctypes, llama_token], ctypes.c_bool
)

# _Bool llama_token_is_control(const struct llama_vocab *vocab, llama_token token)
llama_token_is_control = _function(
    "llama_token_is_control", [llama_vocab_p_ctypes, llama_token], ctypes.c_bool
)

# llama_token llama_token_bos(const struct llama_vocab *vocab)
llama_token_bos = _function("llama_token_bos", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_eos(const struct llama_vocab *vocab)
llama_token_eos = _function("llama_token_eos", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_eot(const struct llama_vocab *vocab)
llama_token_eot = _function("llama_token_eot", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_cls(const struct llama_vocab *vocab)
llama_token_cls = _function("llama_token_cls", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_sep(const struct llama_vocab *vocab)
llama_token_sep = _function("llama_token_sep", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_nl(const struct llama_vocab *vocab)
llama_token_nl = _function("llama_token_nl", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_pad(const struct llama_vocab *vocab)
llama_token_pad = _function("llama_token_pad", [llama_vocab_p_ctypes], llama_token)

# _Bool llama_add_bos_token(const struct llama_vocab *vocab)
llama_add_bos_token = _function("llama_add_bos_token", [llama_vocab_p_ctypes], ctypes.c_bool)

# _Bool llama_add_eos_token(const struct llama_vocab *vocab)
llama_add_eos_token = _function("llama_add_eos_token", [llama_vocab_p_ctypes], ctypes.c_bool)

# llama_token llama_token_fim_pre(const struct llama_vocab *vocab)
llama_token_fim_pre = _function("llama_token_fim_pre", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_fim_suf(const struct llama_vocab *vocab)
llama_token_fim_suf = _function("llama_token_fim_suf", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_fim_mid(const struct llama_vocab *vocab)
llama_token_fim_mid = _function("llama_token_fim_mid", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_fim_pad(const struct llama_vocab *vocab)
llama_token_fim_pad = _function("llama_token_fim_pad", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_fim_rep(const struct llama_vocab *vocab)
llama_token_fim_rep = _function("llama_token_fim_rep", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_token_fim_sep(const struct llama_vocab *vocab)
llama_token_fim_sep = _function("llama_token_fim_sep", [llama_vocab_p_ctypes], llama_token)

# llama_token llama_vocab_cls(const struct llama_vocab *vocab)
llama_vocab_cls = _function("llama_vocab_cls", [llama_vocab_p_ctypes], llama_token)

# int32_t llama_tokenize(const struct llama_vocab *vocab, const char *text, int32_t text_len, llama_token *tokens, int32_t n_tokens_max, _Bool add_special, _Bool parse_special)
llama_tokenize = _function(
    "llama_tokenize",
    [
        llama_vocab_p_ctypes,
        ctypes.c_char_p,
        ctypes.c_int32,
        llama_token_p,
        ctypes.c_int32,
        ctypes.c_bool,
        ctypes.c_bool,
    ],
    ctypes.c_int32,
)

# int32_t llama_token_to_piece(const struct llama_vocab *vocab, llama_token token, char *buf, int32_t length, int32_t lstrip, _Bool special)
llama_token_to_piece = _function(
    "llama_token_to_piece",
    [
        llama_vocab_p_ctypes,
        llama_token,
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.c_bool,
    ],
    ctypes.c_int32,
)

# int32_t llama_detokenize(const struct llama_vocab *vocab, const llama_token *tokens, int32_t n_tokens, char *text, int32_t text_len_max, _Bool remove_special, _Bool unparse_special)
llama_detokenize = _function(
    "llama_detokenize",
    [
        llama_vocab_p_ctypes,
        llama_token_p,
        ctypes.c_int32,
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.c_bool,
        ctypes.c_bool,
    ],
    ctypes.c_int32,
)

# int32_t llama_chat_apply_template(const char *tmpl, const struct llama_chat_message *chat, size_t n_msg, _Bool add_ass, char *buf, int32_t length)
llama_chat_apply_template = _function(
    "llama_chat_apply_template",
    [
        ctypes.c_char_p,
        ctypes.POINTER(llama_chat_message),
        ctypes.c_size_t,
        ctypes.c_bool,
        ctypes.c_char_p,
        ctypes.c_int32,
    ],
    ctypes.c_int32,
)

# int32_t llama_chat_builtin_templates(const char **output, size_t len)
llama_chat_builtin_templates = _function(
    "llama_chat_builtin_templates",
    [ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t],
    ctypes.c_int32,
)

# _Bool llama_set_sampler(struct llama_context *ctx, llama_seq_id seq_id, struct llama_sampler *smpl)
llama_set_sampler = _function(
    "llama_set_sampler",
    [llama_context_p_ctypes, llama_seq_id, llama_sampler_p_ctypes],
    ctypes.c_bool,
)

# struct llama_sampler *llama_sampler_init(struct llama_sampler_i *iface, llama_sampler_context_t ctx)
llama_sampler_init = _function(
    "llama_sampler_init", [ctypes.POINTER(llama_sampler_i), ctypes.c_void_p], llama_sampler_p_ctypes
)

# const char *llama_sampler_name(const struct llama_sampler *smpl)
llama_sampler_name = _function("llama_sampler_name", [llama_sampler_p_ctypes], ctypes.c_char_p)

# void llama_sampler_accept(struct llama_sampler *smpl, llama_token token)
llama_sampler_accept = _function(
    "llama_sampler_accept", [llama_sampler_p_ctypes, llama_token], None
)

# void llama_sampler_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p)
llama_sampler_apply = _function(
    "llama_sampler_apply", [llama_sampler_p_ctypes, ctypes.POINTER(llama_token_data_array)], None
)

# void llama_sampler_reset(struct llama_sampler *smpl)
llama_sampler_reset = _function("llama_sampler_reset", [llama_sampler_p_ctypes], None)

# struct llama_sampler *llama_sampler_clone(const struct llama_sampler *smpl)
llama_sampler_clone = _function(
    "llama_sampler_clone", [llama_sampler_p_ctypes], llama_sampler_p_ctypes
)

# void llama_sampler_copy(const struct llama_sampler *src, struct llama_sampler *dst)
llama_sampler_copy = _function(
    "llama_sampler_copy", [llama_sampler_p_ctypes, llama_sampler_p_ctypes], None
)

# void llama_sampler_free(struct llama_sampler *smpl)
llama_sampler_free = _function("llama_sampler_free", [llama_sampler_p_ctypes], None)

# struct llama_sampler *llama_sampler_chain_init(struct llama_sampler_chain_params params)
llama_sampler_chain_init = _function(
    "llama_sampler_chain_init", [llama_sampler_chain_params], llama_sampler_p_ctypes
)

# void llama_sampler_chain_add(struct llama_sampler *chain, struct llama_sampler *smpl)
llama_sampler_chain_add = _function(
    "llama_sampler_chain_add", [llama_sampler_p_ctypes, llama_sampler_p_ctypes], None
)

# struct llama_sampler *llama_sampler_chain_get(struct llama_sampler *chain, int32_t i)
llama_sampler_chain_get = _function(
    "llama_sampler_chain_get", [llama_sampler_p_ctypes, ctypes.c_int32], llama_sampler_p_ctypes
)

# int32_t llama_sampler_chain_n(const struct llama_sampler *chain)
llama_sampler_chain_n = _function("llama_sampler_chain_n", [llama_sampler_p_ctypes], ctypes.c_int32)

# struct llama_sampler *llama_sampler_chain_remove(struct llama_sampler *chain, int32_t i)
llama_sampler_chain_remove = _function(
    "llama_sampler_chain_remove", [llama_sampler_p_ctypes, ctypes.c_int32], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_greedy(void)
llama_sampler_init_greedy = _function("llama_sampler_init_greedy", [], llama_sampler_p_ctypes)

# struct llama_sampler *llama_sampler_init_dist(uint32_t seed)
llama_sampler_init_dist = _function(
    "llama_sampler_init_dist", [ctypes.c_uint32], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_top_k(int32_t k)
llama_sampler_init_top_k = _function(
    "llama_sampler_init_top_k", [ctypes.c_int32], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_top_p(float p, size_t min_keep)
llama_sampler_init_top_p = _function(
    "llama_sampler_init_top_p", [ctypes.c_float, ctypes.c_size_t], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_min_p(float p, size_t min_keep)
llama_sampler_init_min_p = _function(
    "llama_sampler_init_min_p", [ctypes.c_float, ctypes.c_size_t], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_typical(float p, size_t min_keep)
llama_sampler_init_typical = _function(
    "llama_sampler_init_typical", [ctypes.c_float, ctypes.c_size_t], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_temp(float t)
llama_sampler_init_temp = _function(
    "llama_sampler_init_temp", [ctypes.c_float], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_temp_ext(float t, float delta, float exponent)
llama_sampler_init_temp_ext = _function(
    "llama_sampler_init_temp_ext",
    [ctypes.c_float, ctypes.c_float, ctypes.c_float],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed)
llama_sampler_init_xtc = _function(
    "llama_sampler_init_xtc",
    [ctypes.c_float, ctypes.c_float, ctypes.c_size_t, ctypes.c_uint32],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_top_n_sigma(float n)
llama_sampler_init_top_n_sigma = _function(
    "llama_sampler_init_top_n_sigma", [ctypes.c_float], llama_sampler_p_ctypes
)

# struct llama_sampler *llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m)
llama_sampler_init_mirostat = _function(
    "llama_sampler_init_mirostat",
    [ctypes.c_int32, ctypes.c_uint32, ctypes.c_float, ctypes.c_float, ctypes.c_int32],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta)
llama_sampler_init_mirostat_v2 = _function(
    "llama_sampler_init_mirostat_v2",
    [ctypes.c_uint32, ctypes.c_float, ctypes.c_float],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_grammar(const struct llama_vocab *vocab, const char *grammar_str, const char *grammar_root)
llama_sampler_init_grammar = _function(
    "llama_sampler_init_grammar",
    [llama_vocab_p_ctypes, ctypes.c_char_p, ctypes.c_char_p],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_grammar_lazy(const struct llama_vocab *vocab, const char *grammar_str, const char *grammar_root, const char **trigger_words, size_t num_trigger_words, const llama_token *trigger_tokens, size_t num_trigger_tokens)
llama_sampler_init_grammar_lazy = _function(
    "llama_sampler_init_grammar_lazy",
    [
        llama_vocab_p_ctypes,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_size_t,
        llama_token_p,
        ctypes.c_size_t,
    ],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_grammar_lazy_patterns(const struct llama_vocab *vocab, const char *grammar_str, const char *grammar_root, const char **trigger_patterns, size_t num_trigger_patterns, const llama_token *trigger_tokens, size_t num_trigger_tokens)
llama_sampler_init_grammar_lazy_patterns = _function(
    "llama_sampler_init_grammar_lazy_patterns",
    [
        llama_vocab_p_ctypes,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_size_t,
        llama_token_p,
        ctypes.c_size_t,
    ],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_penalties(int32_t n_vocab, int32_t penalty_last_n, float penalty_repeat, float penalty_freq, float penalty_present)
llama_sampler_init_penalties = _function(
    "llama_sampler_init_penalties",
    [ctypes.c_int32, ctypes.c_int32, ctypes.c_float, ctypes.c_float, ctypes.c_float],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_dry(const struct llama_vocab *vocab, float dry_multiplier, float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n, const char **seq_breakers, size_t num_breakers)
llama_sampler_init_dry = _function(
    "llama_sampler_init_dry",
    [
        llama_vocab_p_ctypes,
        ctypes.c_float,
        ctypes.c_float,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_size_t,
    ],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_adaptive_p(float target, float decay, uint32_t seed)
llama_sampler_init_adaptive_p = _function(
    "llama_sampler_init_adaptive_p",
    [ctypes.c_float, ctypes.c_float, ctypes.c_uint32],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias *logit_bias)
llama_sampler_init_logit_bias = _function(
    "llama_sampler_init_logit_bias",
    [ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(llama_logit_bias)],
    llama_sampler_p_ctypes,
)

# struct llama_sampler *llama_sampler_init_infill(const struct llama_vocab *vocab)
llama_sampler_init_infill = _function(
    "llama_sampler_init_infill", [llama_vocab_p_ctypes], llama_sampler_p_ctypes
)

# uint32_t llama_sampler_get_seed(const struct llama_sampler *smpl)
llama_sampler_get_seed = _function(
    "llama_sampler_get_seed", [llama_sampler_p_ctypes], ctypes.c_uint32
)

# llama_token llama_sampler_sample(struct llama_sampler *smpl, struct llama_context *ctx, int32_t idx)
llama_sampler_sample = _function(
    "llama_sampler_sample",
    [llama_sampler_p_ctypes, llama_context_p_ctypes, ctypes.c_int32],
    llama_token,
)

# int32_t llama_split_path(char *split_path, size_t maxlen, const char *path_prefix, int32_t split_no, int32_t split_count)
llama_split_path = _function(
    "llama_split_path",
    [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32],
    ctypes.c_int32,
)

# int32_t llama_split_prefix(char *split_prefix, size_t maxlen, const char *split_path, int32_t split_no, int32_t split_count)
llama_split_prefix = _function(
    "llama_split_prefix",
    [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32],
    ctypes.c_int32,
)

# const char *llama_print_system_info(void)
llama_print_system_info = _function("llama_print_system_info", [], ctypes.c_char_p)

# void llama_log_get(ggml_log_callback *log_callback, void **user_data)
llama_log_get = _function("llama_log_get", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)], None)

# void llama_log_set(ggml_log_callback log_callback, void *user_data)
llama_log_set = _function("llama_log_set", [ggml_log_callback, ctypes.c_void_p], None)

# struct llama_perf_context_data llama_perf_context(const struct llama_context *ctx)
llama_perf_context = _function(
    "llama_perf_context", [llama_context_p_ctypes], llama_perf_context_data
)

# void llama_perf_context_print(const struct llama_context *ctx)
llama_perf_context_print = _function("llama_perf_context_print", [llama_context_p_ctypes], None)

# void llama_perf_context_reset(struct llama_context *ctx)
llama_perf_context_reset = _function("llama_perf_context_reset", [llama_context_p_ctypes], None)

# struct llama_perf_sampler_data llama_perf_sampler(const struct llama_sampler *chain)
llama_perf_sampler = _function(
    "llama_perf_sampler", [llama_sampler_p_ctypes], llama_perf_sampler_data
)

# void llama_perf_sampler_print(const struct llama_sampler *chain)
llama_perf_sampler_print = _function("llama_perf_sampler_print", [llama_sampler_p_ctypes], None)

# void llama_perf_sampler_reset(struct llama_sampler *chain)
llama_perf_sampler_reset = _function("llama_perf_sampler_reset", [llama_sampler_p_ctypes], None)

# _Bool llama_opt_param_filter_all(const struct ggml_tensor *tensor, void *userdata)
llama_opt_param_filter_all = _function(
    "llama_opt_param_filter_all", [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_bool
)

# void llama_opt_init(struct llama_context *lctx, struct llama_model *model, struct llama_opt_params lopt_params)
llama_opt_init = _function(
    "llama_opt_init", [llama_context_p_ctypes, llama_model_p_ctypes, llama_opt_params], None
)

# void llama_opt_epoch(struct llama_context *lctx, ggml_opt_dataset_t dataset, ggml_opt_result_t result_train, ggml_opt_result_t result_eval, int64_t idata_split, ggml_opt_epoch_callback callback_train, ggml_opt_epoch_callback callback_eval)
llama_opt_epoch = _function(
    "llama_opt_epoch",
    [
        llama_context_p_ctypes,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int64,
        ggml_opt_epoch_callback,
        ggml_opt_epoch_callback,
    ],
    None,
)

# llama-cpp-python's own names for what llama.h renamed or removed.
from llama_cpp._llama_cpp_aliases import *  # noqa: E402, F403
