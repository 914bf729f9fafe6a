from llama_cy._c cimport mtmd as m
from llama_cy._c cimport mtmd_helper as mh
from llama_cy._bitmap cimport Bitmap
from llama_cy._context cimport LlamaContext
from llama_cy._handle cimport Handle
from llama_cy._model cimport LlamaModel
from llama_cy._view cimport ViewOwner


cdef class InputChunks(Handle):
    cdef m.mtmd_input_chunks *ptr
    cdef readonly MtmdContext mctx


cdef class InputChunk(Handle):
    # Borrowed from the parent, which this chunk keeps alive (counted as its user).
    cdef const m.mtmd_input_chunk *ptr
    cdef readonly InputChunks parent

    cdef int _check(self) except -1


cdef class MtmdContext(ViewOwner):
    cdef m.mtmd_context *ptr
    cdef readonly LlamaModel model
    cdef readonly object path
    cdef readonly bint vision
    cdef readonly bint audio
    cdef readonly bint video
    cdef readonly int audio_sample_rate
    cdef readonly bint uses_mrope
    cdef readonly int n_embd
    # Projector runs (mtmd_encode_chunk calls) so far: a cached prefix costs none.
    cdef readonly long n_encodes
    # libmtmd's context encodes for one caller at a time.
    cdef object _lock

    # How videos are read (llama-server's --video-fps, --video-timestamp-interval,
    # --video-ffmpeg-dir); the folder's bytes outlive the pointer to them.
    cdef mh.mtmd_helper_init_opt _opt
    cdef bytes _ffmpeg_dir

    cdef Bitmap _decode(self, const unsigned char *buf, size_t n, object id)
    cdef Bitmap _decode_buffer(self, const unsigned char[::1] buf, object id)
    cdef int _check_media(self, InputChunk chunk) except -1
    cdef float *_encode(self, InputChunk chunk) except NULL
    cdef int _eval_text(self, LlamaContext ctx, InputChunk chunk, int n_past, int seq_id,
                        bint logits_last) except -1
    cdef int _eval_media(self, LlamaContext ctx, InputChunk chunk, int n_past, int seq_id,
                         embd) except -1
