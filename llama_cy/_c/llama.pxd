# Declarations of llama.h (llama.cpp b11434), in the header's order.

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stddef cimport size_t
from libc.stdio cimport FILE
from libc.stdbool cimport bool

from llama_cy._c.ggml cimport (
        ggml_type, ggml_tensor, ggml_context, ggml_cgraph, ggml_log_callback, ggml_abort_callback,
        ggml_threadpool_t)
from llama_cy._c.ggml_cpu cimport ggml_numa_strategy
from llama_cy._c.ggml_backend cimport (
        ggml_backend_dev_t, ggml_backend_buffer_type_t, ggml_backend_sched_eval_callback)
from llama_cy._c.ggml_opt cimport (
        ggml_opt_get_optimizer_params, ggml_opt_optimizer_type, ggml_opt_dataset_t, ggml_opt_result_t,
        ggml_opt_epoch_callback)
from llama_cy._c.gguf cimport gguf_context

cdef extern from "llama.h" nogil:

    # ---- constants ----

    unsigned int LLAMA_DEFAULT_SEED         # 0xFFFFFFFF

    int LLAMA_TOKEN_NULL                    # -1

    unsigned int LLAMA_FILE_MAGIC_GGLA      # 'ggla'
    unsigned int LLAMA_FILE_MAGIC_GGSN      # 'ggsn'
    unsigned int LLAMA_FILE_MAGIC_GGSQ      # 'ggsq'

    unsigned int LLAMA_SESSION_MAGIC
    int LLAMA_SESSION_VERSION

    unsigned int LLAMA_STATE_SEQ_MAGIC
    int LLAMA_STATE_SEQ_VERSION

    # ---- C interface ----

    cdef struct llama_vocab
    cdef struct llama_model
    cdef struct llama_context
    cdef struct llama_sampler   # defined below (Sampling API)

    cdef struct llama_memory_i
    ctypedef llama_memory_i * llama_memory_t

    ctypedef int32_t llama_pos
    ctypedef int32_t llama_token
    ctypedef int32_t llama_seq_id

    cdef enum llama_vocab_type:
        LLAMA_VOCAB_TYPE_NONE
        LLAMA_VOCAB_TYPE_SPM
        LLAMA_VOCAB_TYPE_BPE
        LLAMA_VOCAB_TYPE_WPM
        LLAMA_VOCAB_TYPE_UGM
        LLAMA_VOCAB_TYPE_RWKV
        LLAMA_VOCAB_TYPE_PLAMO2
        LLAMA_VOCAB_TYPE_TEST

    cdef enum llama_rope_type:
        LLAMA_ROPE_TYPE_NONE
        LLAMA_ROPE_TYPE_NORM
        LLAMA_ROPE_TYPE_NEOX
        LLAMA_ROPE_TYPE_MROPE
        LLAMA_ROPE_TYPE_IMROPE
        LLAMA_ROPE_TYPE_VISION

    cdef enum llama_token_type:
        LLAMA_TOKEN_TYPE_UNDEFINED
        LLAMA_TOKEN_TYPE_NORMAL
        LLAMA_TOKEN_TYPE_UNKNOWN
        LLAMA_TOKEN_TYPE_CONTROL
        LLAMA_TOKEN_TYPE_USER_DEFINED
        LLAMA_TOKEN_TYPE_UNUSED
        LLAMA_TOKEN_TYPE_BYTE

    cdef enum llama_token_attr:
        LLAMA_TOKEN_ATTR_UNDEFINED
        LLAMA_TOKEN_ATTR_UNKNOWN
        LLAMA_TOKEN_ATTR_UNUSED
        LLAMA_TOKEN_ATTR_NORMAL
        LLAMA_TOKEN_ATTR_CONTROL
        LLAMA_TOKEN_ATTR_USER_DEFINED
        LLAMA_TOKEN_ATTR_BYTE
        LLAMA_TOKEN_ATTR_NORMALIZED
        LLAMA_TOKEN_ATTR_LSTRIP
        LLAMA_TOKEN_ATTR_RSTRIP
        LLAMA_TOKEN_ATTR_SINGLE_WORD

    # model file types
    cdef enum llama_ftype:
        LLAMA_FTYPE_ALL_F32
        LLAMA_FTYPE_MOSTLY_F16
        LLAMA_FTYPE_MOSTLY_Q4_0
        LLAMA_FTYPE_MOSTLY_Q4_1
        LLAMA_FTYPE_MOSTLY_Q8_0
        LLAMA_FTYPE_MOSTLY_Q5_0
        LLAMA_FTYPE_MOSTLY_Q5_1
        LLAMA_FTYPE_MOSTLY_Q2_K
        LLAMA_FTYPE_MOSTLY_Q3_K_S
        LLAMA_FTYPE_MOSTLY_Q3_K_M
        LLAMA_FTYPE_MOSTLY_Q3_K_L
        LLAMA_FTYPE_MOSTLY_Q4_K_S
        LLAMA_FTYPE_MOSTLY_Q4_K_M
        LLAMA_FTYPE_MOSTLY_Q5_K_S
        LLAMA_FTYPE_MOSTLY_Q5_K_M
        LLAMA_FTYPE_MOSTLY_Q6_K
        LLAMA_FTYPE_MOSTLY_IQ2_XXS
        LLAMA_FTYPE_MOSTLY_IQ2_XS
        LLAMA_FTYPE_MOSTLY_Q2_K_S
        LLAMA_FTYPE_MOSTLY_IQ3_XS
        LLAMA_FTYPE_MOSTLY_IQ3_XXS
        LLAMA_FTYPE_MOSTLY_IQ1_S
        LLAMA_FTYPE_MOSTLY_IQ4_NL
        LLAMA_FTYPE_MOSTLY_IQ3_S
        LLAMA_FTYPE_MOSTLY_IQ3_M
        LLAMA_FTYPE_MOSTLY_IQ2_S
        LLAMA_FTYPE_MOSTLY_IQ2_M
        LLAMA_FTYPE_MOSTLY_IQ4_XS
        LLAMA_FTYPE_MOSTLY_IQ1_M
        LLAMA_FTYPE_MOSTLY_BF16
        LLAMA_FTYPE_MOSTLY_TQ1_0
        LLAMA_FTYPE_MOSTLY_TQ2_0
        LLAMA_FTYPE_MOSTLY_MXFP4_MOE
        LLAMA_FTYPE_MOSTLY_NVFP4
        LLAMA_FTYPE_MOSTLY_Q1_0
        LLAMA_FTYPE_MOSTLY_Q2_0

        LLAMA_FTYPE_GUESSED

    # Get the model file type (quantization) as a string, e.g. "Q8_0" or "Q4_K - Medium"
    const char * llama_ftype_name(llama_ftype ftype)

    cdef enum llama_rope_scaling_type:
        LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED
        LLAMA_ROPE_SCALING_TYPE_NONE
        LLAMA_ROPE_SCALING_TYPE_LINEAR
        LLAMA_ROPE_SCALING_TYPE_YARN
        LLAMA_ROPE_SCALING_TYPE_LONGROPE
        LLAMA_ROPE_SCALING_TYPE_MAX_VALUE

    cdef enum llama_pooling_type:
        LLAMA_POOLING_TYPE_UNSPECIFIED
        LLAMA_POOLING_TYPE_NONE
        LLAMA_POOLING_TYPE_MEAN
        LLAMA_POOLING_TYPE_CLS
        LLAMA_POOLING_TYPE_LAST
        LLAMA_POOLING_TYPE_RANK

    cdef enum llama_attention_type:
        LLAMA_ATTENTION_TYPE_UNSPECIFIED
        LLAMA_ATTENTION_TYPE_CAUSAL
        LLAMA_ATTENTION_TYPE_NON_CAUSAL

    cdef enum llama_flash_attn_type:
        LLAMA_FLASH_ATTN_TYPE_AUTO
        LLAMA_FLASH_ATTN_TYPE_DISABLED
        LLAMA_FLASH_ATTN_TYPE_ENABLED

    const char * llama_flash_attn_type_name(llama_flash_attn_type flash_attn_type)

    cdef enum llama_split_mode:
        LLAMA_SPLIT_MODE_NONE
        LLAMA_SPLIT_MODE_LAYER
        LLAMA_SPLIT_MODE_ROW
        LLAMA_SPLIT_MODE_TENSOR

    cdef enum llama_load_mode:
        LLAMA_LOAD_MODE_AUTO
        LLAMA_LOAD_MODE_NONE
        LLAMA_LOAD_MODE_MMAP
        LLAMA_LOAD_MODE_MLOCK
        LLAMA_LOAD_MODE_MMAP_MLOCK
        LLAMA_LOAD_MODE_DIRECT_IO

    const char * llama_load_mode_name(llama_load_mode load_mode)
    llama_load_mode llama_load_mode_from_str(const char * str)

    cdef enum llama_lazy_mode:
        LLAMA_LAZY_MODE_OFF
        LLAMA_LAZY_MODE_AUTO
        LLAMA_LAZY_MODE_ON

    cdef enum llama_context_type:
        LLAMA_CONTEXT_TYPE_DEFAULT
        LLAMA_CONTEXT_TYPE_MTP

    ctypedef struct llama_token_data:
        llama_token id      # token id
        float logit         # log-odds of the token
        float p             # probability of the token

    ctypedef struct llama_token_data_array:
        llama_token_data * data
        size_t size
        int64_t selected    # index in the data array (i.e. not the token id)
        bool sorted

    ctypedef bool (*llama_progress_callback)(float progress, void * user_data)

    # Input data for llama_encode/llama_decode
    ctypedef struct llama_batch:
        int32_t n_tokens

        llama_token  *  token
        float        *  embd
        llama_pos    *  pos
        int32_t      *  n_seq_id
        llama_seq_id ** seq_id
        int8_t       *  logits

    cdef enum llama_model_kv_override_type:
        LLAMA_KV_OVERRIDE_TYPE_INT
        LLAMA_KV_OVERRIDE_TYPE_FLOAT
        LLAMA_KV_OVERRIDE_TYPE_BOOL
        LLAMA_KV_OVERRIDE_TYPE_STR

    cdef enum llama_model_meta_key:
        LLAMA_MODEL_META_KEY_SAMPLING_SEQUENCE
        LLAMA_MODEL_META_KEY_SAMPLING_TOP_K
        LLAMA_MODEL_META_KEY_SAMPLING_TOP_P
        LLAMA_MODEL_META_KEY_SAMPLING_MIN_P
        LLAMA_MODEL_META_KEY_SAMPLING_XTC_PROBABILITY
        LLAMA_MODEL_META_KEY_SAMPLING_XTC_THRESHOLD
        LLAMA_MODEL_META_KEY_SAMPLING_TEMP
        LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_LAST_N
        LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_REPEAT
        LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT
        LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_TAU
        LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_ETA

    cdef enum llama_process_type:
        LLAMA_PROCESS_TYPE_ENCODE
        LLAMA_PROCESS_TYPE_DECODE

    cdef struct llama_model_kv_override:
        llama_model_kv_override_type tag

        char key[128]

        # the next four are members of an anonymous union in C (Cython has no anonymous unions);
        # they share storage: write only the one selected by `tag`
        int64_t val_i64
        double  val_f64
        bool    val_bool
        char    val_str[128]

    cdef struct llama_model_tensor_buft_override:
        const char * pattern
        ggml_backend_buffer_type_t buft

    cdef struct llama_model_params:
        # NULL-terminated list of devices to use for offloading (if NULL, all available devices are used)
        ggml_backend_dev_t * devices

        # NULL-terminated list of buffer types to use for tensors that match a pattern
        const llama_model_tensor_buft_override * tensor_buft_overrides

        int32_t n_gpu_layers
        llama_split_mode split_mode
        llama_load_mode  load_mode

        llama_lazy_mode lazy_mode

        int32_t main_gpu

        const float * tensor_split

        llama_progress_callback progress_callback

        void * progress_callback_user_data

        const llama_model_kv_override * kv_overrides

        bool vocab_only
        bool check_tensors
        bool use_extra_bufts
        bool no_host
        bool no_alloc
        bool load_mtp

    cdef struct llama_sampler_seq_config:
        llama_seq_id    seq_id
        llama_sampler * sampler

    cdef struct llama_context_params:
        uint32_t n_ctx
        uint32_t n_batch
        uint32_t n_ubatch
        uint32_t n_seq_max
        uint32_t n_rs_seq
        uint32_t n_outputs_max
        uint32_t n_outputs_max_per_seq
        int32_t  n_threads
        int32_t  n_threads_batch

        llama_context_type      ctx_type
        llama_rope_scaling_type rope_scaling_type
        llama_pooling_type      pooling_type
        llama_attention_type    attention_type
        llama_flash_attn_type   flash_attn_type

        float    rope_freq_base
        float    rope_freq_scale
        float    yarn_ext_factor
        float    yarn_attn_factor
        float    yarn_beta_fast
        float    yarn_beta_slow
        uint32_t yarn_orig_ctx
        float    defrag_thold       # [DEPRECATED] in the header, kept: it is part of the struct layout

        ggml_backend_sched_eval_callback cb_eval
        void * cb_eval_user_data

        ggml_type type_k
        ggml_type type_v

        ggml_abort_callback abort_callback
        void *              abort_callback_data

        bool embeddings
        bool offload_kqv
        bool no_perf
        bool op_offload
        bool swa_full
        bool kv_unified

        llama_sampler_seq_config * samplers
        size_t                     n_samplers

        llama_context * ctx_other

    cdef struct llama_model_tensor_override:
        const char * pattern
        ggml_type type_ "type"

    cdef struct llama_model_imatrix_data:
        const char * name
        const float * data
        size_t size

    # model quantization parameters
    ctypedef struct llama_model_quantize_params:
        int32_t nthread
        llama_ftype ftype
        ggml_type output_tensor_type
        ggml_type token_embedding_type
        bool allow_requantize
        bool quantize_output_tensor
        bool only_copy
        bool pure
        bool keep_split
        bool dry_run
        const llama_model_imatrix_data * imatrix
        const llama_model_kv_override * kv_overrides
        const llama_model_tensor_override * tt_overrides
        const int32_t * prune_layers
        size_t max_buf_size

    ctypedef struct llama_logit_bias:
        llama_token token
        float bias

    ctypedef struct llama_sampler_chain_params:
        bool no_perf

    # used in chat template
    ctypedef struct llama_chat_message:
        const char * role
        const char * content

    # lora adapter
    cdef struct llama_adapter_lora

    const char * llama_version()

    # Helpers for getting default parameters
    llama_model_params          llama_model_default_params()
    llama_context_params        llama_context_default_params()
    llama_sampler_chain_params  llama_sampler_chain_default_params()
    llama_model_quantize_params llama_model_quantize_default_params()

    void llama_backend_init()

    void llama_backend_free()

    void llama_numa_init(ggml_numa_strategy numa)

    void llama_attach_threadpool(
            llama_context *   ctx,
            ggml_threadpool_t threadpool,
            ggml_threadpool_t threadpool_batch)

    void llama_detach_threadpool(llama_context * ctx)

    ctypedef void (*llama_model_set_tensor_data_t)(ggml_tensor * tensor, void * userdata)

    # Create a new model from GGUF metadata as well as a function to set the tensor data
    llama_model * llama_model_init_from_user(
            gguf_context *                metadata,
            llama_model_set_tensor_data_t set_tensor_data,
            void *                        set_tensor_data_ud,
            llama_model_params            params)

    # Load a model from a file
    llama_model * llama_model_load_from_file(
            const char *       path_model,
            llama_model_params params)

    # Load a model from an open FILE pointer
    llama_model * llama_model_load_from_file_ptr(
            FILE *             file,
            llama_model_params params)

    # Load a model from multiple splits (support custom naming scheme)
    llama_model * llama_model_load_from_splits(
            const char **      paths,
            size_t             n_paths,
            llama_model_params params)

    void llama_model_save_to_file(
            const llama_model * model,
            const char *        path_model)

    void llama_model_free(llama_model * model)

    llama_context * llama_init_from_model(
            llama_model *        model,
            llama_context_params params)

    # Frees all allocated memory
    void llama_free(llama_context * ctx)

    int64_t llama_time_us()

    size_t llama_max_devices()
    size_t llama_max_parallel_sequences()
    size_t llama_max_tensor_buft_overrides()

    bool llama_supports_mmap       ()
    bool llama_supports_mlock      ()
    bool llama_supports_gpu_offload()
    bool llama_supports_rpc        ()

    uint32_t llama_n_ctx      (const llama_context * ctx)
    uint32_t llama_n_ctx_seq  (const llama_context * ctx)
    uint32_t llama_n_batch    (const llama_context * ctx)
    uint32_t llama_n_ubatch   (const llama_context * ctx)
    uint32_t llama_n_seq_max  (const llama_context * ctx)
    uint32_t llama_n_rs_seq   (const llama_context * ctx)

    const llama_model * llama_get_model   (const llama_context * ctx)
    llama_memory_t      llama_get_memory  (const llama_context * ctx)
    # C name `llama_pooling_type` clashes with the enum of that name in Cython's namespace
    llama_pooling_type  llama_get_pooling_type "llama_pooling_type"(const llama_context * ctx)

    const llama_vocab * llama_model_get_vocab(const llama_model * model)
    llama_rope_type     llama_model_rope_type(const llama_model * model)

    int32_t llama_model_n_ctx_train  (const llama_model * model)
    int32_t llama_model_n_embd       (const llama_model * model)
    int32_t llama_model_n_embd_inp   (const llama_model * model)
    int32_t llama_model_n_embd_out   (const llama_model * model)
    int32_t llama_model_n_layer      (const llama_model * model)
    int32_t llama_model_n_layer_nextn(const llama_model * model)
    int32_t llama_model_n_head       (const llama_model * model)
    int32_t llama_model_n_head_kv    (const llama_model * model)
    int32_t llama_model_n_swa        (const llama_model * model)

    # Get the model's RoPE frequency scaling factor
    float llama_model_rope_freq_scale_train(const llama_model * model)

    # Returns the number of classifier outputs (only valid for classifier models)
    uint32_t llama_model_n_cls_out(const llama_model * model)

    # Returns label of classifier output by index (<n_cls_out). Returns nullptr if no label provided
    const char * llama_model_cls_label(const llama_model * model, uint32_t i)

    # C name `llama_vocab_type` clashes with the enum of that name in Cython's namespace
    llama_vocab_type llama_vocab_get_type "llama_vocab_type"(const llama_vocab * vocab)

    int32_t llama_vocab_n_tokens(const llama_vocab * vocab)

    # Functions to access the model's GGUF metadata scalar values
    int32_t llama_model_meta_val_str(const llama_model * model, const char * key, char * buf, size_t buf_size)

    int32_t llama_model_meta_count(const llama_model * model)

    const char * llama_model_meta_key_str(llama_model_meta_key key)

    int32_t llama_model_meta_key_by_index(const llama_model * model, int32_t i, char * buf, size_t buf_size)

    int32_t llama_model_meta_val_str_by_index(
            const llama_model * model, int32_t i, char * buf, size_t buf_size)

    int32_t llama_model_desc(const llama_model * model, char * buf, size_t buf_size)

    llama_ftype llama_model_ftype(const llama_model * model)

    uint64_t llama_model_size(const llama_model * model)

    const char * llama_model_chat_template(const llama_model * model, const char * name)

    uint64_t llama_model_n_params(const llama_model * model)

    bool llama_model_has_encoder(const llama_model * model)

    bool llama_model_has_decoder(const llama_model * model)

    llama_token llama_model_decoder_start_token(const llama_model * model)

    bool llama_model_is_recurrent(const llama_model * model)

    bool llama_model_is_hybrid(const llama_model * model)

    bool llama_model_is_diffusion(const llama_model * model)

    # Returns 0 on success
    uint32_t llama_model_quantize(
            const char *                        fname_inp,
            const char *                        fname_out,
            const llama_model_quantize_params * params)

    # ---- Adapters ----

    llama_adapter_lora * llama_adapter_lora_init(
            llama_model * model,
            const char *  path_lora)

    llama_adapter_lora * llama_adapter_lora_init_from_file_ptr(
            llama_model * model,
            FILE *        file)

    int32_t llama_adapter_meta_val_str(
            const llama_adapter_lora * adapter, const char * key, char * buf, size_t buf_size)

    int32_t llama_adapter_meta_count(const llama_adapter_lora * adapter)

    int32_t llama_adapter_meta_key_by_index(
            const llama_adapter_lora * adapter, int32_t i, char * buf, size_t buf_size)

    int32_t llama_adapter_meta_val_str_by_index(
            const llama_adapter_lora * adapter, int32_t i, char * buf, size_t buf_size)

    void llama_adapter_lora_free(llama_adapter_lora * adapter)

    uint64_t            llama_adapter_get_alora_n_invocation_tokens(const llama_adapter_lora * adapter)
    const llama_token * llama_adapter_get_alora_invocation_tokens  (const llama_adapter_lora * adapter)

    int32_t llama_set_adapters_lora(
            llama_context *       ctx,
            llama_adapter_lora ** adapters,
            size_t                n_adapters,
            float *               scales)

    int32_t llama_set_adapter_cvec(
            llama_context * ctx,
            const float *   data,
            size_t          len,
            int32_t         n_embd,
            int32_t         il_start,
            int32_t         il_end)

    # ---- Memory ----

    void llama_memory_clear(
            llama_memory_t mem,
            bool           data)

    bool llama_memory_seq_rm(
            llama_memory_t mem,
            llama_seq_id   seq_id,
            llama_pos      p0,
            llama_pos      p1)

    void llama_memory_seq_cp(
            llama_memory_t mem,
            llama_seq_id   seq_id_src,
            llama_seq_id   seq_id_dst,
            llama_pos      p0,
            llama_pos      p1)

    void llama_memory_seq_keep(
            llama_memory_t mem,
            llama_seq_id   seq_id)

    void llama_memory_seq_add(
            llama_memory_t mem,
            llama_seq_id   seq_id,
            llama_pos      p0,
            llama_pos      p1,
            llama_pos      delta)

    void llama_memory_seq_div(
            llama_memory_t mem,
            llama_seq_id   seq_id,
            llama_pos      p0,
            llama_pos      p1,
            int            d)

    llama_pos llama_memory_seq_pos_min(
            llama_memory_t mem,
            llama_seq_id   seq_id)

    llama_pos llama_memory_seq_pos_max(
            llama_memory_t mem,
            llama_seq_id   seq_id)

    bool llama_memory_can_shift(llama_memory_t mem)

    # ---- State / sessions ----

    size_t llama_state_get_size(llama_context * ctx)

    size_t llama_state_get_data(
            llama_context * ctx,
            uint8_t *       dst,
            size_t          size)

    size_t llama_state_set_data(
            llama_context * ctx,
            const uint8_t * src,
            size_t          size)

    # Save/load session file
    bool llama_state_load_file(
            llama_context * ctx,
            const char *    path_session,
            llama_token *   tokens_out,
            size_t          n_token_capacity,
            size_t *        n_token_count_out)

    bool llama_state_save_file(
            llama_context *     ctx,
            const char *        path_session,
            const llama_token * tokens,
            size_t              n_token_count)

    size_t llama_state_seq_get_size(
            llama_context * ctx,
            llama_seq_id    seq_id)

    size_t llama_state_seq_get_data(
            llama_context * ctx,
            uint8_t *       dst,
            size_t          size,
            llama_seq_id    seq_id)

    size_t llama_state_seq_set_data(
            llama_context * ctx,
            const uint8_t * src,
            size_t          size,
            llama_seq_id    dest_seq_id)

    size_t llama_state_seq_save_file(
            llama_context *     ctx,
            const char *        filepath,
            llama_seq_id        seq_id,
            const llama_token * tokens,
            size_t              n_token_count)

    size_t llama_state_seq_load_file(
            llama_context * ctx,
            const char *    filepath,
            llama_seq_id    dest_seq_id,
            llama_token *   tokens_out,
            size_t          n_token_capacity,
            size_t *        n_token_count_out)

    int LLAMA_STATE_SEQ_FLAGS_NONE

    # for backwards-compat
    int LLAMA_STATE_SEQ_FLAGS_SWA_ONLY

    # work only with partial states, such as SWA KV cache or recurrent cache (e.g. Mamba)
    int LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY

    # Keeps the tensor data on device buffers
    int LLAMA_STATE_SEQ_FLAGS_ON_DEVICE

    ctypedef uint32_t llama_state_seq_flags

    size_t llama_state_seq_get_size_ext(
            llama_context *       ctx,
            llama_seq_id          seq_id,
            llama_state_seq_flags flags)

    size_t llama_state_seq_get_data_ext(
            llama_context *       ctx,
            uint8_t *             dst,
            size_t                size,
            llama_seq_id          seq_id,
            llama_state_seq_flags flags)

    size_t llama_state_seq_set_data_ext(
            llama_context *       ctx,
            const uint8_t *       src,
            size_t                size,
            llama_seq_id          dest_seq_id,
            llama_state_seq_flags flags)

    # ---- Decoding ----

    llama_batch llama_batch_get_one(
            llama_token * tokens,
            int32_t       n_tokens)

    llama_batch llama_batch_init(
            int32_t n_tokens,
            int32_t embd,
            int32_t n_seq_max)

    void llama_batch_free(llama_batch batch)

    int32_t llama_encode(
            llama_context * ctx,
            llama_batch     batch)

    int32_t llama_decode(
            llama_context * ctx,
            llama_batch     batch)

    # ---- Extended batch API ----

    cdef struct llama_batch_ext

    cdef struct llama_embd:
        const float * data
        size_t n_rows       # number of embedding rows in data
        size_t n_embd       # size of one row

    llama_batch_ext * llama_batch_ext_init (llama_context * ctx)
    void              llama_batch_ext_free (llama_batch_ext * batch)
    void              llama_batch_ext_clear(llama_batch_ext * batch)

    int32_t llama_batch_ext_add      (llama_batch_ext * batch, llama_seq_id seq_id)

    int32_t llama_batch_ext_add_token(llama_batch_ext * batch, llama_seq_id seq_id, llama_token id)
    int32_t llama_batch_ext_add_embd (llama_batch_ext * batch, llama_seq_id seq_id, llama_embd embd)

    bool llama_batch_ext_add_seq(
            llama_batch_ext * batch,
            int32_t           idx,
            llama_seq_id      seq_id)

    bool llama_batch_ext_set_embd_token(
            llama_batch_ext * batch,
            int32_t           idx,
            llama_embd        embd)

    bool llama_batch_ext_set_embd_state(
            llama_batch_ext * batch,
            int32_t           idx,
            llama_embd        embd)

    bool llama_batch_ext_set_output_embd(
            llama_batch_ext * batch,
            int32_t           idx,
            bool              value)

    bool llama_batch_ext_set_output_logits(
            llama_batch_ext * batch,
            int32_t           idx,
            bool              value)

    bool llama_batch_ext_set_pos(
            llama_batch_ext * batch,
            int32_t           idx,
            const llama_pos * pos)

    # Return values are the same as llama_decode()
    int32_t llama_process(
            llama_context *    ctx,
            llama_process_type type_,
            llama_batch_ext *  batch)

    void llama_set_n_threads(llama_context * ctx, int32_t n_threads, int32_t n_threads_batch)

    int32_t llama_n_threads(llama_context * ctx)

    int32_t llama_n_threads_batch(llama_context * ctx)

    void llama_set_embeddings(llama_context * ctx, bool embeddings)

    void llama_set_causal_attn(llama_context * ctx, bool causal_attn)

    bool llama_get_causal_attn(const llama_context * ctx)

    void llama_set_abort_callback(
            llama_context * ctx, ggml_abort_callback abort_callback, void * abort_callback_data)

    void llama_synchronize(llama_context * ctx)

    float * llama_get_logits(llama_context * ctx)

    float * llama_get_logits_ith(llama_context * ctx, int32_t i)

    float * llama_get_embeddings(llama_context * ctx)

    float * llama_get_embeddings_ith(llama_context * ctx, int32_t i)

    float * llama_get_embeddings_seq(llama_context * ctx, llama_seq_id seq_id)

    # ---- backend sampling API [EXPERIMENTAL] ----

    llama_token llama_get_sampled_token_ith(llama_context * ctx, int32_t i)

    float *  llama_get_sampled_probs_ith      (llama_context * ctx, int32_t i)
    uint32_t llama_get_sampled_probs_count_ith(llama_context * ctx, int32_t i)

    float *  llama_get_sampled_logits_ith      (llama_context * ctx, int32_t i)
    uint32_t llama_get_sampled_logits_count_ith(llama_context * ctx, int32_t i)

    llama_token * llama_get_sampled_candidates_ith      (llama_context * ctx, int32_t i)
    uint32_t      llama_get_sampled_candidates_count_ith(llama_context * ctx, int32_t i)

    # ---- Vocab ----

    const char * llama_vocab_get_text(const llama_vocab * vocab, llama_token token)

    float llama_vocab_get_score(const llama_vocab * vocab, llama_token token)

    llama_token_attr llama_vocab_get_attr(const llama_vocab * vocab, llama_token token)

    bool llama_vocab_is_eog(const llama_vocab * vocab, llama_token token)

    bool llama_vocab_is_control(const llama_vocab * vocab, llama_token token)

    # Special tokens
    llama_token llama_vocab_bos(const llama_vocab * vocab)
    llama_token llama_vocab_eos(const llama_vocab * vocab)
    llama_token llama_vocab_eot(const llama_vocab * vocab)
    llama_token llama_vocab_sep(const llama_vocab * vocab)
    llama_token llama_vocab_nl (const llama_vocab * vocab)
    llama_token llama_vocab_pad(const llama_vocab * vocab)
    llama_token llama_vocab_mask(const llama_vocab * vocab)

    bool llama_vocab_get_add_bos(const llama_vocab * vocab)
    bool llama_vocab_get_add_eos(const llama_vocab * vocab)
    bool llama_vocab_get_add_sep(const llama_vocab * vocab)

    const llama_token * llama_vocab_get_suppress_tokens(
            const llama_vocab * vocab, int32_t * n_suppress_tokens)

    llama_token llama_vocab_fim_pre(const llama_vocab * vocab)
    llama_token llama_vocab_fim_suf(const llama_vocab * vocab)
    llama_token llama_vocab_fim_mid(const llama_vocab * vocab)
    llama_token llama_vocab_fim_pad(const llama_vocab * vocab)
    llama_token llama_vocab_fim_rep(const llama_vocab * vocab)
    llama_token llama_vocab_fim_sep(const llama_vocab * vocab)

    # ---- Tokenization ----

    int32_t llama_tokenize(
            const llama_vocab * vocab,
            const char *        text,
            int32_t             text_len,
            llama_token *       tokens,
            int32_t             n_tokens_max,
            bool                add_special,
            bool                parse_special)

    int32_t llama_token_to_piece(
            const llama_vocab * vocab,
            llama_token         token,
            char *              buf,
            int32_t             length,
            int32_t             lstrip,
            bool                special)

    int32_t llama_detokenize(
            const llama_vocab * vocab,
            const llama_token * tokens,
            int32_t             n_tokens,
            char *              text,
            int32_t             text_len_max,
            bool                remove_special,
            bool                unparse_special)

    # ---- Chat templates ----

    int32_t llama_chat_apply_template(
            const char *               tmpl,
            const llama_chat_message * chat,
            size_t                     n_msg,
            bool                       add_ass,
            char *                     buf,
            int32_t                    length)

    int32_t llama_chat_builtin_templates(const char ** output, size_t len)

    # ---- Sampling API ----

    ctypedef void * llama_sampler_context_t

    cdef struct llama_sampler_data:
        ggml_tensor * logits
        ggml_tensor * probs
        ggml_tensor * sampled
        ggml_tensor * candidates

    # user code can implement the interface below in order to create custom llama_sampler
    cdef struct llama_sampler_i:
        const char *    (*name)  (const llama_sampler * smpl)                            # can be NULL
        void            (*accept)(llama_sampler * smpl, llama_token token)               # can be NULL
        void            (*apply) (llama_sampler * smpl, llama_token_data_array * cur_p)  # required
        void            (*reset) (llama_sampler * smpl)                                  # can be NULL
        llama_sampler * (*clone) (const llama_sampler * smpl)            # can be NULL if ctx is NULL
        void            (*free)  (llama_sampler * smpl)                  # can be NULL if ctx is NULL

        # [EXPERIMENTAL] backend sampling interface:
        bool (*backend_init)(
                llama_sampler *            smpl,
                ggml_backend_buffer_type_t buft,
                uint32_t                   n_outputs_max_per_seq)

        void (*backend_accept)(
                llama_sampler * smpl,
                ggml_context *  ctx,
                ggml_cgraph *   gf,
                ggml_tensor *   selected_token)

        void (*backend_apply)(
                llama_sampler *      smpl,
                ggml_context *       ctx,
                ggml_cgraph *        gf,
                llama_sampler_data * data)

        void (*backend_set_input)(llama_sampler * smpl)

        void (*backend_reset)(llama_sampler * smpl)

        void (*copy_state)(const llama_sampler * src, llama_sampler * dst)

    cdef struct llama_sampler:
        llama_sampler_i * iface

        llama_sampler_context_t ctx

    # [EXPERIMENTAL] attach a sampler to the context
    bool llama_set_sampler(llama_context * ctx, llama_seq_id seq_id, llama_sampler * smpl)

    # mirror of llama_sampler_i:
    llama_sampler * llama_sampler_init  (llama_sampler_i * iface, llama_sampler_context_t ctx)
    const char *    llama_sampler_name  (const llama_sampler * smpl)
    void            llama_sampler_accept(llama_sampler * smpl, llama_token token)
    void            llama_sampler_apply (llama_sampler * smpl, llama_token_data_array * cur_p)
    void            llama_sampler_reset (llama_sampler * smpl)
    llama_sampler * llama_sampler_clone (const llama_sampler * smpl)
    void            llama_sampler_copy  (const llama_sampler * src, llama_sampler * dst)
    # important: do not free if the sampler has been added to a llama_sampler_chain
    # (via llama_sampler_chain_add)
    void            llama_sampler_free  (llama_sampler * smpl)

    # llama_sampler_chain

    llama_sampler * llama_sampler_chain_init(llama_sampler_chain_params params)

    # important: takes ownership of the sampler object and will free it when llama_sampler_free is called
    void            llama_sampler_chain_add(llama_sampler * chain, llama_sampler * smpl)

    llama_sampler * llama_sampler_chain_get(llama_sampler * chain, int32_t i)

    int32_t         llama_sampler_chain_n  (const llama_sampler * chain)

    llama_sampler * llama_sampler_chain_remove(llama_sampler * chain, int32_t i)

    # available samplers:

    llama_sampler * llama_sampler_init_greedy()

    llama_sampler * llama_sampler_init_dist(uint32_t seed)

    llama_sampler * llama_sampler_init_top_k      (int32_t k)

    llama_sampler * llama_sampler_init_top_p      (float p, size_t min_keep)

    llama_sampler * llama_sampler_init_min_p      (float p, size_t min_keep)

    llama_sampler * llama_sampler_init_typical    (float p, size_t min_keep)

    llama_sampler * llama_sampler_init_temp       (float t)

    llama_sampler * llama_sampler_init_temp_ext   (float t, float delta, float exponent)

    llama_sampler * llama_sampler_init_xtc        (float p, float t, size_t min_keep, uint32_t seed)

    llama_sampler * llama_sampler_init_top_n_sigma(float n)

    llama_sampler * llama_sampler_init_mirostat(
            int32_t  n_vocab,
            uint32_t seed,
            float    tau,
            float    eta,
            int32_t  m)

    llama_sampler * llama_sampler_init_mirostat_v2(
            uint32_t seed,
            float    tau,
            float    eta)

    llama_sampler * llama_sampler_init_grammar(
            const llama_vocab * vocab,
            const char *        grammar_str,
            const char *        grammar_root)

    llama_sampler * llama_sampler_init_grammar_lazy_patterns(
            const llama_vocab * vocab,
            const char *        grammar_str,
            const char *        grammar_root,
            const char **       trigger_patterns,
            size_t              num_trigger_patterns,
            const llama_token * trigger_tokens,
            size_t              num_trigger_tokens)

    llama_sampler * llama_sampler_init_penalties(
            int32_t n_vocab,
            int32_t penalty_last_n,
            float   penalty_repeat,
            float   penalty_freq,
            float   penalty_present)

    llama_sampler * llama_sampler_init_dry(
            const llama_vocab * vocab,
            float               dry_multiplier,
            float               dry_base,
            int32_t             dry_allowed_length,
            int32_t             dry_penalty_last_n,
            const char **       seq_breakers,
            size_t              num_breakers)

    llama_sampler * llama_sampler_init_adaptive_p(
            float    target,
            float    decay,
            uint32_t seed)

    llama_sampler * llama_sampler_init_logit_bias(
            int32_t                  n_vocab,
            int32_t                  n_logit_bias,
            const llama_logit_bias * logit_bias)

    llama_sampler * llama_sampler_init_infill(const llama_vocab * vocab)

    # Returns the seed used by the sampler if applicable, LLAMA_DEFAULT_SEED otherwise
    uint32_t llama_sampler_get_seed(const llama_sampler * smpl)

    # Sample and accept a token from the idx-th output of the last evaluation
    llama_token llama_sampler_sample(llama_sampler * smpl, llama_context * ctx, int32_t idx)

    # ---- Model split ----

    int32_t llama_split_path(
            char *       split_path,
            size_t       maxlen,
            const char * path_prefix,
            int32_t      split_no,
            int32_t      split_count)

    int32_t llama_split_prefix(
            char *       split_prefix,
            size_t       maxlen,
            const char * split_path,
            int32_t      split_no,
            int32_t      split_count)

    # Print system information
    const char * llama_print_system_info()

    # Set callback for all future logging events.
    void llama_log_get(ggml_log_callback * log_callback, void ** user_data)
    void llama_log_set(ggml_log_callback   log_callback, void *  user_data)

    # ---- Performance utils ----

    cdef struct llama_perf_context_data:
        double t_start_ms
        double t_load_ms
        double t_p_eval_ms
        double t_eval_ms

        int32_t n_p_eval
        int32_t n_eval
        int32_t n_reused

    cdef struct llama_perf_sampler_data:
        double t_sample_ms

        int32_t n_sample

    llama_perf_context_data llama_perf_context      (const llama_context * ctx)
    void                    llama_perf_context_print(const llama_context * ctx)
    void                    llama_perf_context_reset(llama_context * ctx)

    # NOTE: the following work only with samplers constructed via llama_sampler_chain_init
    llama_perf_sampler_data llama_perf_sampler      (const llama_sampler * chain)
    void                    llama_perf_sampler_print(const llama_sampler * chain)
    void                    llama_perf_sampler_reset(llama_sampler * chain)

    # ---- training ----

    # function that returns whether or not a given tensor contains trainable parameters
    ctypedef bool (*llama_opt_param_filter)(const ggml_tensor * tensor, void * userdata)

    # always returns true
    bool llama_opt_param_filter_all(const ggml_tensor * tensor, void * userdata)

    cdef struct llama_opt_params:
        uint32_t n_ctx_train

        llama_opt_param_filter param_filter
        void * param_filter_ud

        ggml_opt_get_optimizer_params get_opt_pars
        void * get_opt_pars_ud

        ggml_opt_optimizer_type optimizer_type

    void llama_opt_init(llama_context * lctx, llama_model * model, llama_opt_params lopt_params)

    void llama_opt_epoch(
            llama_context *         lctx,
            ggml_opt_dataset_t      dataset,
            ggml_opt_result_t       result_train,
            ggml_opt_result_t       result_eval,
            int64_t                 idata_split,
            ggml_opt_epoch_callback callback_train,
            ggml_opt_epoch_callback callback_eval)
