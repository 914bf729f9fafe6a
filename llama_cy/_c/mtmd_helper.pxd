# Declarations of mtmd-helper.h (llama.cpp b11434), in the header's order: the parts of
# libmtmd's helper API that llama_cy calls (file and buffer decoding, chunk evaluation).
# Video and audio generation are left out.
from libc.stdint cimport int32_t, int64_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport ggml_log_callback
from llama_cy._c.llama cimport llama_context, llama_pos, llama_seq_id
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

    void mtmd_helper_video_free(mtmd_helper_video * ctx)

    bool mtmd_helper_model_can_chat(const llama_context * lctx, const mtmd_context * mctx)
