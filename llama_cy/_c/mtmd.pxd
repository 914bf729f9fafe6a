# Declarations of mtmd.h (llama.cpp b11434), in the header's order.
from libc.stdint cimport uint32_t, int32_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport ggml_log_callback
from llama_cy._c.ggml_backend cimport ggml_backend_dev_t, ggml_backend_sched_eval_callback
from llama_cy._c.llama cimport llama_model, llama_token, llama_pos, llama_flash_attn_type

cdef extern from "mtmd.h" nogil:
    cdef enum mtmd_input_chunk_type:
        MTMD_INPUT_CHUNK_TYPE_TEXT
        MTMD_INPUT_CHUNK_TYPE_IMAGE
        MTMD_INPUT_CHUNK_TYPE_AUDIO
        MTMD_INPUT_CHUNK_TYPE_COUNT  # for validation

    # opaque types
    cdef struct mtmd_context
    cdef struct mtmd_bitmap
    cdef struct mtmd_image_tokens
    cdef struct mtmd_input_chunk
    cdef struct mtmd_input_chunks
    cdef struct mtmd_batch

    cdef struct mtmd_input_text:
        const char * text
        size_t text_len
        bool add_special
        bool parse_special

    cdef struct mtmd_input_part:
        # only text or bitmap can be set, not both
        const mtmd_input_text * text
        const mtmd_bitmap * bitmap

    # ---- C API ----

    # `typedef struct X X;` for mtmd_context, mtmd_bitmap, mtmd_image_tokens, mtmd_input_chunk,
    # mtmd_input_chunks, mtmd_input_text, mtmd_input_part, mtmd_batch: the `cdef struct X` above
    # already names the type X in Cython (a second declaration of the same name is not allowed).

    ctypedef bool (*mtmd_progress_callback)(float progress, void * user_data)

    cdef struct mtmd_context_params:
        bool use_gpu
        ggml_backend_dev_t device
        bool print_timings
        int n_threads
        const char * image_marker  # deprecated, use media_marker instead
        const char * media_marker
        llama_flash_attn_type flash_attn_type
        bool warmup  # whether to run a warmup encode pass after initialization

        # limit number of image tokens, only for vision models with dynamic resolution
        int image_min_tokens
        int image_max_tokens

        # callback function passed over to mtmd proper
        ggml_backend_sched_eval_callback cb_eval
        void * cb_eval_user_data

        # batching params
        int32_t batch_max_tokens  # maximum number of output tokens in a batch

        # Called with a progress value between 0.0 and 1.0. Pass NULL to disable.
        mtmd_progress_callback progress_callback
        void * progress_callback_user_data

    const char * mtmd_default_marker()

    mtmd_context_params mtmd_context_params_default()

    # initialize the mtmd context
    # return nullptr on failure
    mtmd_context * mtmd_init_from_file(
            const char * mmproj_fname,
            const llama_model * text_model,
            const mtmd_context_params ctx_params)

    void mtmd_free(mtmd_context * ctx)

    # whether we need to set non-causal mask before llama_decode
    bool mtmd_decode_use_non_causal(const mtmd_context * ctx, const mtmd_input_chunk * chunk)

    # whether the current model use M-RoPE for llama_decode
    bool mtmd_decode_use_mrope(const mtmd_context * ctx)

    # whether the current model supports vision input
    bool mtmd_support_vision(const mtmd_context * ctx)

    # whether the current model supports audio input
    bool mtmd_support_audio(const mtmd_context * ctx)

    # get audio sample rate in Hz, for example 16000 for Whisper
    # return -1 if audio is not supported
    int mtmd_get_audio_sample_rate(const mtmd_context * ctx)

    # get the current marker string
    const char * mtmd_get_marker(const mtmd_context * ctx)

    # ---- mtmd_bitmap ----
    mtmd_bitmap * mtmd_bitmap_init(uint32_t nx, uint32_t ny, const unsigned char * data)
    mtmd_bitmap * mtmd_bitmap_init_from_audio(size_t n_samples, const float * data)
    uint32_t mtmd_bitmap_get_nx(const mtmd_bitmap * bitmap)
    uint32_t mtmd_bitmap_get_ny(const mtmd_bitmap * bitmap)
    const unsigned char * mtmd_bitmap_get_data(const mtmd_bitmap * bitmap)
    size_t mtmd_bitmap_get_n_bytes(const mtmd_bitmap * bitmap)
    bool mtmd_bitmap_is_audio(const mtmd_bitmap * bitmap)
    void mtmd_bitmap_free(mtmd_bitmap * bitmap)
    # bitmap ID is optional, but useful for KV cache tracking
    const char * mtmd_bitmap_get_id(const mtmd_bitmap * bitmap)
    void mtmd_bitmap_set_id(mtmd_bitmap * bitmap, const char * id)
    # if true, this bitmap can be merged (temporal merge) with an adjacent mergeable bitmap
    void mtmd_bitmap_set_mergeable(mtmd_bitmap * bitmap, bool mergeable)

    # ---- mtmd_bitmap lazy ----
    # return value: 0 on success, -1 on EOF, -2 on error
    ctypedef int (*mtmd_bitmap_lazy_callback)(
            size_t chunk_idx,
            void * user_data,
            mtmd_bitmap ** out_bitmap,
            char ** out_text)

    mtmd_bitmap * mtmd_bitmap_init_lazy(
            const mtmd_context * ctx,
            const char * id,  # usually set to file hash
            void * user_data,
            mtmd_bitmap_lazy_callback callback)

    # ---- mtmd_input_chunks ----
    mtmd_input_chunks * mtmd_input_chunks_init()
    size_t mtmd_input_chunks_size(const mtmd_input_chunks * chunks)
    const mtmd_input_chunk * mtmd_input_chunks_get(const mtmd_input_chunks * chunks, size_t idx)
    void mtmd_input_chunks_free(mtmd_input_chunks * chunks)

    # ---- mtmd_input_chunk ----
    mtmd_input_chunk_type mtmd_input_chunk_get_type(const mtmd_input_chunk * chunk)
    const llama_token * mtmd_input_chunk_get_tokens_text(
            const mtmd_input_chunk * chunk, size_t * n_tokens_output)
    const mtmd_image_tokens * mtmd_input_chunk_get_tokens_image(const mtmd_input_chunk * chunk)
    size_t mtmd_input_chunk_get_n_tokens(const mtmd_input_chunk * chunk)
    # returns nullptr for ID on text chunk
    const char * mtmd_input_chunk_get_id(const mtmd_input_chunk * chunk)
    # number of temporal positions (equals to max(t,h,w) for M-RoPE; equals to n_tokens otherwise)
    llama_pos mtmd_input_chunk_get_n_pos(const mtmd_input_chunk * chunk)

    # move the chunk ownership to your own code by copying it
    mtmd_input_chunk * mtmd_input_chunk_copy(const mtmd_input_chunk * chunk)
    void mtmd_input_chunk_free(mtmd_input_chunk * chunk)

    # similar to mtmd_input_chunk_copy, but returns a placeholder chunk
    mtmd_input_chunk * mtmd_input_chunk_get_placeholder(const mtmd_input_chunk * chunk)

    # save/load an input chunk to/from a buffer (useful for KV save/load)
    # returns 0 on success, non-zero on failure
    int32_t mtmd_input_chunk_save(
            const mtmd_input_chunk * chunk, char * out_buf, size_t out_len, size_t * expected_out_len)
    # returns nullptr on failure
    mtmd_input_chunk * mtmd_input_chunk_load(const char * buf, size_t len)

    # ---- mtmd_image_tokens ----
    size_t mtmd_image_tokens_get_n_tokens(const mtmd_image_tokens * image_tokens)
    const char * mtmd_image_tokens_get_id(const mtmd_image_tokens * image_tokens)
    # number of temporal positions (equals to max(t,h,w) for M-RoPE; equals to n_tokens otherwise)
    llama_pos mtmd_image_tokens_get_n_pos(const mtmd_image_tokens * image_tokens)

    # (mtmd_image_tokens_get_nx / mtmd_image_tokens_get_ny: DEPRECATED, not declared)

    cdef struct mtmd_decoder_pos:
        uint32_t t
        uint32_t x
        uint32_t y
        uint32_t z  # unused for now, reserved for future use
    # get position for decoder attention, to be used by M-RoPE models
    mtmd_decoder_pos mtmd_image_tokens_get_decoder_pos(
            const mtmd_image_tokens * image_tokens, llama_pos pos_0, size_t i)

    # tokenize an input text prompt and a list of bitmaps (image/audio)
    # return values: 0 on success, 1 on number of bitmaps not matching the number of markers,
    #   2 on media preprocessing error
    int32_t mtmd_tokenize(
            const mtmd_context * ctx,
            mtmd_input_chunks * output,
            const mtmd_input_text * text,
            const mtmd_bitmap * const * bitmaps,
            size_t n_bitmaps)

    # same as mtmd_tokenize(), but takes an array of mtmd_input_part
    # return 1 if a part has both text and bitmap set (or neither)
    int32_t mtmd_tokenize_from_parts(
            const mtmd_context * ctx,
            mtmd_input_chunks * output,
            const mtmd_input_part * const * parts,
            size_t n_parts,
            bool add_special)

    # (mtmd_encode: DEPRECATED, not declared)

    # text chunk will be ignored silently, only media chunk will be encoded
    # returns 0 on success, 1 on generic error
    int32_t mtmd_encode_chunk(mtmd_context * ctx, const mtmd_input_chunk * chunk)

    # get output embeddings from the last encode pass
    float * mtmd_get_output_embd(mtmd_context * ctx)

    # ---- batch encoding API ----
    mtmd_batch * mtmd_batch_init(mtmd_context * ctx)
    void mtmd_batch_free(mtmd_batch * batch)

    # only media chunks are allowed, text chunks will be rejected
    # returns 0 on success, 1 on generic error, 2 if the batch is too large (chunk won't be added),
    #   3 if it cannot be batched with the existing chunks in the batch
    int32_t mtmd_batch_add_chunk(mtmd_batch * batch, const mtmd_input_chunk * chunk)

    # returns 0 on success, 1 on generic error
    int32_t mtmd_batch_encode(mtmd_batch * batch)
    float * mtmd_batch_get_output_embd(mtmd_batch * batch, const mtmd_input_chunk * chunk)

    # Set callback for all future logging events.
    void mtmd_log_set(ggml_log_callback log_callback, void * user_data)

    # EXPERIMENTAL API to get mmproj's capabilities without initializing the full context
    cdef struct mtmd_caps:
        bool inp_vision
        bool inp_audio
    mtmd_caps mtmd_get_cap_from_file(const char * mmproj_fname)

    # ---- EXPERIMENTAL API for audio generation ----

    # represent the pipeline type
    cdef enum mtmd_gen_audio_type:
        MTMD_GEN_AUDIO_TYPE_NONE  # not supported
        MTMD_GEN_AUDIO_TYPE_QWEN3TTS
        MTMD_GEN_AUDIO_TYPE_POCKETTTS

    cdef struct mtmd_gen_audio_info:
        mtmd_gen_audio_type type_ "type"
        int32_t sample_rate  # in Hz, for example 24000 for qwen3tts
        const char * model_variant  # name of the weight variant, can be nullptr if not applicable

    mtmd_gen_audio_info mtmd_gen_audio_get_info(const mtmd_context * ctx)

    cdef enum mtmd_gen_process_type:
        MTMD_GEN_PROCESS_TYPE_GEN_CODE  # h_state to semantic (codes, mel-spectrogram, etc.)
        MTMD_GEN_PROCESS_TYPE_GEN_WAV  # convert semantic to PCM audio

    cdef struct mtmd_gen_inp:
        mtmd_gen_process_type type_ "type"

        # for MTMD_GEN_PROCESS_TYPE_GEN_CODE
        int32_t code0  # the sampled codebook 0 entry from backbone
        float * embd  # the hidden state from backbone, must have n_text_embd elements
        int32_t top_k
        float top_p
        uint32_t seed  # UINT32_MAX for random
        float temp  # sampling temperature, or noise scale for flow-matching decoders

        # for MTMD_GEN_PROCESS_TYPE_GEN_WAV
        int32_t * codes
        size_t n_codes
        const float * feats
        size_t n_feats
        const char * state_data
        size_t state_size

    cdef struct mtmd_gen_out:
        # for MTMD_GEN_PROCESS_TYPE_GEN_CODE
        const int32_t * codes
        size_t n_codes
        const float * feats  # continuous counterpart of codes
        size_t n_feats
        const float * embd  # the generated hidden state, to be fed back to backbone
        bool is_eos  # only set by pipelines having the EOS head inside mmproj

        # for MTMD_GEN_PROCESS_TYPE_GEN_WAV
        const float * audio
        size_t n_samples
        const char * state_data
        size_t state_size

    # defaults tuned for the loaded pipeline, callers override only what they care about
    mtmd_gen_inp mtmd_gen_inp_default(const mtmd_context * ctx)

    # note: this API is stateless, caller must handle state management and audio frame accumulation
    int32_t mtmd_gen_audio_process(mtmd_context * ctx, const mtmd_gen_inp * inp, mtmd_gen_out * out)

    # test function, to be used in test-mtmd-c-api.c
    mtmd_input_chunks * mtmd_test_create_input_chunks()

    # (mtmd_memory_usage / mtmd_get_memory_usage and the mtmd:: wrappers are C++-only, not declared)
