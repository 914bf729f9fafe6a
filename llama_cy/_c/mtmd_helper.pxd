# Declarations of mtmd-helper.h (llama.cpp b11434), in the header's order: libmtmd's
# helpers for decoding files and buffers, evaluating chunks, video and audio generation.
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport ggml_log_callback
from llama_cy._c.llama cimport llama_context, llama_pos, llama_seq_id, llama_token
from llama_cy._c.mtmd cimport (
    mtmd_context, mtmd_bitmap, mtmd_input_chunk, mtmd_input_chunks, mtmd_image_tokens,
    mtmd_decoder_pos,
)

cdef extern from "mtmd-helper.h" nogil:
    cdef struct mtmd_helper_video

    cdef struct mtmd_helper_video_init_params:
        float fps_target
        const char * ffmpeg_bin_dir
        int64_t timestamp_interval_ms

    mtmd_helper_video_init_params mtmd_helper_video_init_params_default()

    cdef struct mtmd_helper_init_opt:
        mtmd_helper_video_init_params video_params

    mtmd_helper_init_opt mtmd_helper_init_opt_default()

    void mtmd_helper_log_set(ggml_log_callback log_callback, void * user_data)

    bool mtmd_helper_support_video(const mtmd_context * ctx)

    cdef struct mtmd_helper_bitmap_wrapper:
        mtmd_bitmap * bitmap
        mtmd_helper_video * video_ctx

    mtmd_helper_bitmap_wrapper mtmd_helper_bitmap_init_from_file(
            const mtmd_context * ctx, const char * fname, bool placeholder,
            mtmd_helper_init_opt opt)

    mtmd_helper_bitmap_wrapper mtmd_helper_bitmap_init_from_buf(
            const mtmd_context * ctx, const unsigned char * buf, size_t len, bool placeholder,
            mtmd_helper_init_opt opt)

    size_t mtmd_helper_get_n_tokens(const mtmd_input_chunks * chunks)
    llama_pos mtmd_helper_get_n_pos(const mtmd_input_chunks * chunks)

    void mtmd_helper_image_get_decoder_pos(
            const mtmd_image_tokens * image, llama_pos pos_0, mtmd_decoder_pos * out_pos)

    int32_t mtmd_helper_eval_chunks(
            mtmd_context * ctx, llama_context * lctx, const mtmd_input_chunks * chunks,
            llama_pos n_past, llama_seq_id seq_id, int32_t n_batch, bool logits_last,
            llama_pos * new_n_past)

    int32_t mtmd_helper_eval_chunk_single(
            mtmd_context * ctx, llama_context * lctx, const mtmd_input_chunk * chunk,
            llama_pos n_past, llama_seq_id seq_id, int32_t n_batch, bool logits_last,
            llama_pos * new_n_past)

    cdef struct mtmd_helper_embd_batch:
        int32_t n_tokens
        const float * embd
        int32_t n_embd
        const llama_pos * pos
        int32_t n_pos
        llama_seq_id seq_id

    ctypedef int32_t (*mtmd_helper_post_decode_callback)(
            const mtmd_helper_embd_batch * batch, void * user_data)

    int32_t mtmd_helper_decode_image_chunk(
            mtmd_context * ctx, llama_context * lctx, const mtmd_input_chunk * chunk,
            float * encoded_embd, llama_pos n_past, llama_seq_id seq_id, int32_t n_batch,
            llama_pos * new_n_past, mtmd_helper_post_decode_callback callback,
            void * user_data)

    cdef struct mtmd_helper_video_info:
        uint32_t width
        uint32_t height
        float fps
        int32_t n_frames

    mtmd_helper_video * mtmd_helper_video_init(
            const mtmd_context * mctx, const char * path, mtmd_helper_video_init_params params)

    mtmd_helper_video * mtmd_helper_video_init_from_buf(
            const mtmd_context * mctx, const unsigned char * buf, size_t len,
            mtmd_helper_video_init_params params)

    void mtmd_helper_video_free(mtmd_helper_video * ctx)
    mtmd_helper_video_info mtmd_helper_video_get_info(const mtmd_helper_video * ctx)

    int32_t mtmd_helper_video_read_next(
            mtmd_helper_video * ctx, mtmd_bitmap ** out_bitmap, char ** out_text)

    bool mtmd_helper_model_can_chat(const llama_context * lctx, const mtmd_context * mctx)

    cdef struct mtmd_helper_gen_audio

    cdef enum mtmd_helper_gen_audio_outtype:
        MTMD_HELPER_GEN_AUDIO_OUTTYPE_PCM
        MTMD_HELPER_GEN_AUDIO_OUTTYPE_WAV

    cdef struct mtmd_helper_gen_audio_inp:
        llama_seq_id seq_id
        const char * prompt
        size_t prompt_len
        mtmd_bitmap * speaker_ref
        const char * lang
        int32_t top_k
        float top_p
        uint32_t seed
        mtmd_helper_gen_audio_outtype out_type

    mtmd_helper_gen_audio * mtmd_helper_gen_audio_init(llama_context * lctx, mtmd_context * mctx)
    void mtmd_helper_gen_audio_free(mtmd_helper_gen_audio * ctx)
    void mtmd_helper_gen_audio_reset(mtmd_helper_gen_audio * ctx)

    int32_t mtmd_helper_gen_audio_set_input(
            mtmd_helper_gen_audio * ctx, const mtmd_helper_gen_audio_inp * inp)

    int32_t mtmd_helper_gen_audio_step_prompt(mtmd_helper_gen_audio * ctx, int32_t n_batch)

    int32_t mtmd_helper_gen_audio_step_gen(
            mtmd_helper_gen_audio * ctx, llama_token sampled, const float * h_state_in,
            const float ** h_state_out, bool * out_stop)

    int32_t mtmd_helper_gen_audio_get_output(
            mtmd_helper_gen_audio * ctx, int32_t * out_sample_rate, const char ** out_data,
            size_t * out_data_len, int64_t * out_n_samples)
