"""Multimodal input through llama.cpp's libmtmd: images and audio into a text model.

A projector file (``mmproj``) turns an image or a clip of audio into embeddings in the
text model's input space. :class:`MtmdContext` holds it; :class:`Bitmap` is one decoded
image or one clip; :meth:`MtmdContext.tokenize` splits a prompt with media markers into
:class:`InputChunks` (text tokens, images, audio); :meth:`MtmdContext.encode` runs the
projector on a media chunk (a zero-copy embeddings view); :meth:`MtmdContext.eval_chunk`
puts a chunk into a :class:`~llama_cy.LlamaContext` sequence at a position: text through
a batch, media through mtmd-helper's embedding batches, which set M-RoPE positions and
non-causal attention where the model needs them.
"""

import atexit
import os
import threading

import numpy as np

from llama_cy._backend import default_n_threads

cimport cython

from libc.stdint cimport int32_t
from libc.stddef cimport size_t
from libc.string cimport memcpy

from llama_cy._c cimport llama as c
from llama_cy._c cimport mtmd as m
from llama_cy._c cimport mtmd_helper as mh
from llama_cy._backend cimport Device, _log_callback, _log_silent
from llama_cy._bitmap cimport Bitmap
from llama_cy._batch cimport LlamaBatch
from llama_cy._context cimport LlamaContext
from llama_cy._context_params cimport _check_threads
from llama_cy._handle cimport Handle
from llama_cy._model cimport LlamaModel
from llama_cy._view cimport ViewOwner, array_view

from llama_cy.errors import (
    ContextOverflowError, InvalidBatchError, LlamaError, MediaError, ModelLoadError,
    decode_error,
)

_CHUNK_TYPES = {
    m.MTMD_INPUT_CHUNK_TYPE_TEXT: "text",
    m.MTMD_INPUT_CHUNK_TYPE_IMAGE: "image",
    m.MTMD_INPUT_CHUNK_TYPE_AUDIO: "audio",
}

# ---- libmtmd's log, into the "llama_cy" logger as llama.cpp's own ----------------------


def _shutdown():
    m.mtmd_log_set(_log_silent, NULL)
    mh.mtmd_helper_log_set(_log_silent, NULL)


m.mtmd_log_set(_log_callback, NULL)
mh.mtmd_helper_log_set(_log_callback, NULL)
atexit.register(_shutdown)


def default_marker():
    """The text that stands for one image or clip in a prompt (``<__media__>``)."""
    return m.mtmd_default_marker().decode()


def projector_caps(path):
    """``(vision, audio)``: what the projector file at ``path`` takes, read from its
    metadata without loading it."""
    if not os.path.isfile(path):
        raise ModelLoadError(f"projector file not found: {os.fspath(path)!r}")
    cdef bytes bpath = os.fsencode(path)
    cdef const char *cpath = bpath
    cdef m.mtmd_caps caps
    with nogil:
        caps = m.mtmd_get_cap_from_file(cpath)
    return bool(caps.inp_vision), bool(caps.inp_audio)


# ---- chunks ------------------------------------------------------------------------------

@cython.final
cdef class InputChunks(Handle):
    """A tokenized multimodal prompt: a sequence of :class:`InputChunk`."""

    def __cinit__(self):
        self.ptr = NULL

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        if self.ptr != NULL:
            m.mtmd_input_chunks_free(self.ptr)
            self.ptr = NULL

    def __len__(self):
        self._ensure_alive()
        return m.mtmd_input_chunks_size(self.ptr)

    def __getitem__(self, Py_ssize_t i):
        self._ensure_alive()
        cdef Py_ssize_t n = m.mtmd_input_chunks_size(self.ptr)
        if i < 0:
            i += n
        if i < 0 or i >= n:
            raise IndexError(f"chunk {i} out of range ({n} chunks)")
        cdef InputChunk chunk = InputChunk.__new__(InputChunk)
        chunk.ptr = m.mtmd_input_chunks_get(self.ptr, i)
        chunk.parent = self
        chunk._closed = False
        self._acquire()
        return chunk

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def n_tokens(self):
        """Tokens in the KV cache once all chunks are evaluated."""
        self._ensure_alive()
        return mh.mtmd_helper_get_n_tokens(self.ptr)

    @property
    def n_pos(self):
        """Positions the chunks take (fewer than tokens for M-RoPE images)."""
        self._ensure_alive()
        return mh.mtmd_helper_get_n_pos(self.ptr)

    def __repr__(self):
        if self._closed:
            return "<InputChunks closed>"
        return f"<InputChunks {len(self)} chunks, {self.n_tokens} tokens>"


@cython.final
cdef class InputChunk(Handle):
    """One chunk of an :class:`InputChunks`: text tokens, an image or a clip of audio.
    It keeps its :class:`InputChunks` alive."""

    def __cinit__(self):
        self.ptr = NULL

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        if self.parent is not None:
            self.ptr = NULL
            self.parent._release()
            self.parent = None

    cdef int _check(self) except -1:
        self._ensure_alive()
        self.parent._ensure_alive()
        return 0

    @property
    def type(self):
        """``"text"``, ``"image"`` or ``"audio"``."""
        self._check()
        return _CHUNK_TYPES[m.mtmd_input_chunk_get_type(self.ptr)]

    @property
    def n_tokens(self):
        self._check()
        return m.mtmd_input_chunk_get_n_tokens(self.ptr)

    @property
    def n_pos(self):
        self._check()
        return m.mtmd_input_chunk_get_n_pos(self.ptr)

    @property
    def id(self):
        """The media's id (its bitmap's), or None for text."""
        self._check()
        cdef const char *s = m.mtmd_input_chunk_get_id(self.ptr)
        return s.decode() if s != NULL else None

    @property
    def tokens(self):
        """A text chunk's token ids (a copy); empty for media."""
        self._check()
        cdef size_t n = 0
        cdef const c.llama_token *toks
        if m.mtmd_input_chunk_get_type(self.ptr) != m.MTMD_INPUT_CHUNK_TYPE_TEXT:
            return np.empty(0, dtype=np.int32)
        toks = m.mtmd_input_chunk_get_tokens_text(self.ptr, &n)
        out = np.empty(n, dtype=np.int32)
        cdef int32_t[::1] o = out
        for i in range(n):
            o[i] = toks[i]
        return out

    def __repr__(self):
        if self._closed or self.parent is None or self.parent._closed:
            return "<InputChunk closed>"
        return f"<InputChunk {self.type} n_tokens={self.n_tokens} id={self.id!r}>"


# ---- the context -------------------------------------------------------------------------

@cython.no_gc_clear  # __dealloc__ releases the model it points to
@cython.final
cdef class MtmdContext(ViewOwner):
    """A multimodal projector (``mmproj`` GGUF) loaded for a text model.

    ``use_gpu`` offloads the projector to the first GPU (llama-server's
    ``--mmproj-offload``), or to ``device`` (a :class:`~llama_cy.Device`, its
    ``--mmproj-device``); ``image_min_tokens``/``image_max_tokens`` bound the tokens
    an image becomes, for projectors with dynamic resolution (-1: the file's own);
    ``batch_max_tokens`` bounds the output tokens of one :meth:`encode_batch`
    (llama-server's ``--mtmd-batch-max-tokens``; a batch takes its first chunk whatever
    its size, so 0 or less is one chunk a batch). Videos (:attr:`video`: a vision
    projector) are read through ffmpeg and ffprobe, from ``video_ffmpeg_dir`` or the
    ``PATH``: ``video_fps`` frames a second (<= 0: the video's own rate), with a text
    timestamp every ``video_timestamp_interval_ms`` (<= 0: none), llama-server's
    ``--video-fps``, ``--video-timestamp-interval`` and ``--video-ffmpeg-dir``.
    ``media_marker`` replaces :func:`default_marker` in prompts (llama-server's random
    per-process one). One thread at a time encodes; others wait.
    """

    def __cinit__(self, LlamaModel model not None, path, *, bint use_gpu=True,
                  n_threads=None, int image_min_tokens=-1, int image_max_tokens=-1,
                  flash_attn=None, bint warmup=True, bint print_timings=False,
                  Device device=None, int batch_max_tokens=1024, float video_fps=4.0,
                  video_timestamp_interval_ms=5000, video_ffmpeg_dir=None, media_marker=None):
        self.ptr = NULL
        model._ensure_alive()
        if not os.path.isfile(path):
            raise ModelLoadError(f"projector file not found: {os.fspath(path)!r}")
        if image_min_tokens == 0 or image_min_tokens < -1 or image_max_tokens == 0 \
                or image_max_tokens < -1:
            raise ValueError("image_min_tokens and image_max_tokens are > 0, or -1 for the "
                             "projector's own")
        if image_min_tokens > 0 and image_max_tokens > 0 and image_min_tokens > image_max_tokens:
            raise ValueError(f"image_min_tokens={image_min_tokens} exceeds "
                             f"image_max_tokens={image_max_tokens}")
        # The contexts' default and check: 0, negative or huge counts crash in ggml.
        cdef int threads = _check_threads(
            "n_threads", default_n_threads() if n_threads is None else n_threads)
        cdef m.mtmd_context_params params = m.mtmd_context_params_default()
        params.use_gpu = use_gpu
        if device is not None:
            params.device = device.dev
        params.n_threads = threads
        params.print_timings = print_timings
        params.warmup = warmup
        params.image_min_tokens = image_min_tokens
        params.image_max_tokens = image_max_tokens
        params.batch_max_tokens = batch_max_tokens
        cdef bytes marker = None
        if media_marker is not None:
            if not isinstance(media_marker, str) or not media_marker:
                raise ValueError("media_marker must be a non-empty string")
            marker = media_marker.encode()
            params.media_marker = marker  # copied by mtmd_init_from_file
        if flash_attn is not None:
            params.flash_attn_type = (c.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                      else c.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        cdef bytes bpath = os.fsencode(path)
        cdef const char *cpath = bpath
        with nogil:
            self.ptr = m.mtmd_init_from_file(cpath, model.ptr, params)
        if self.ptr == NULL:
            raise ModelLoadError(
                f"failed to load the projector {os.fspath(path)!r} (not an mmproj GGUF, "
                "truncated, of an unknown projector type, or made for a model of another "
                "embedding size); see the 'llama_cy' log")
        self.model = model
        model._acquire()
        self.path = os.fspath(path)
        self.vision = m.mtmd_support_vision(self.ptr)
        self.audio = m.mtmd_support_audio(self.ptr)
        self.audio_sample_rate = m.mtmd_get_audio_sample_rate(self.ptr)
        self.uses_mrope = m.mtmd_decode_use_mrope(self.ptr)
        self.n_embd = c.llama_model_n_embd_inp(model.ptr)
        self.video = mh.mtmd_helper_support_video(self.ptr)
        self._opt = mh.mtmd_helper_init_opt_default()
        self._opt.video_params.fps_target = video_fps
        self._opt.video_params.timestamp_interval_ms = video_timestamp_interval_ms
        self._ffmpeg_dir = None if video_ffmpeg_dir is None else os.fsencode(video_ffmpeg_dir)
        if self._ffmpeg_dir:
            self._opt.video_params.ffmpeg_bin_dir = self._ffmpeg_dir
        self.n_encodes = 0
        self._lock = threading.Lock()
        self._closed = False

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        if self.ptr != NULL:
            m.mtmd_free(self.ptr)
            self.ptr = NULL
            self.model._release()

    def __repr__(self):
        if self._closed:
            return "<MtmdContext closed>"
        kinds = [k for k, on in (("vision", self.vision), ("audio", self.audio)) if on]
        return f"<MtmdContext {self.path!r} {'+'.join(kinds)}>"

    @property
    def marker(self):
        """The media marker of prompts (:func:`default_marker`)."""
        self._ensure_alive()
        return m.mtmd_get_marker(self.ptr).decode()

    cdef Bitmap _decode(self, const unsigned char *buf, size_t n, object id):
        cdef mh.mtmd_helper_bitmap_wrapper w
        self._enter()
        try:
            with nogil:
                w = mh.mtmd_helper_bitmap_init_from_buf(self.ptr, buf, n, False, self._opt)
        finally:
            self._release()
        cdef Bitmap b
        if w.video_ctx != NULL:
            b = Bitmap.__new__(Bitmap)
            b.ptr, b.video, b._closed = w.bitmap, w.video_ctx, False
            if not self.vision:
                b.close()
                raise MediaError("video input is not supported by this model's projector")
            if id is not None:
                b.id = id  # else libmtmd's hash of the file, which its frames share
            return b
        if w.bitmap == NULL:
            raise MediaError(
                "the media could not be decoded: not an image (JPEG, PNG, BMP, GIF, …), "
                "audio file (WAV, MP3, FLAC) or video ffmpeg reads (ffmpeg and ffprobe "
                "must be installed), cut short, or audio for a projector without audio "
                "input")
        return Bitmap._wrap(w.bitmap, id)

    def bitmap(self, source, id=None):
        """A :class:`Bitmap` from a path, encoded bytes, an ``(H, W, 3)`` uint8 array or
        a float32 PCM array."""
        if isinstance(source, np.ndarray):
            return Bitmap.from_array(source, id) if source.ndim == 3 else Bitmap.from_audio(source, id)
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._ensure_alive()
            return self._decode_buffer(memoryview(source).cast("B"), id)
        return Bitmap.from_file(self, source, id)

    cdef Bitmap _decode_buffer(self, const unsigned char[::1] buf, object id):
        if buf.shape[0] == 0:
            raise MediaError("the media is empty (0 bytes)")
        return self._decode(&buf[0], buf.shape[0], id)

    def tokenize(self, text, bitmaps=(), *, bint add_special=True, bint parse_special=True):
        """Split ``text`` at its media markers into chunks: each marker takes the next of
        ``bitmaps`` (as many markers as bitmaps)."""
        self._ensure_alive()
        bitmaps = list(bitmaps)
        cdef Bitmap b
        marker = self.marker
        n_markers = text.count(marker)
        if n_markers != len(bitmaps):
            raise ValueError(f"the prompt has {n_markers} media markers ({marker!r}) but "
                             f"{len(bitmaps)} images or clips were given")
        videos = [b for b in bitmaps if b.is_video]
        for b in videos:
            if b._read or videos.count(b) > 1:
                raise ValueError("a video is read once, by one tokenize: decode it again to "
                                 "use it again")
        for b in bitmaps:
            b._ensure_alive()
            if b.is_audio and not self.audio:
                raise MediaError("this projector takes no audio input")
            if not b.is_audio and not self.vision:
                raise MediaError("this projector takes no image input")
        cdef bytes btext = text.encode()
        cdef m.mtmd_input_text inp
        inp.text = btext
        inp.text_len = len(btext)
        inp.add_special = add_special
        inp.parse_special = parse_special
        cdef size_t n = len(bitmaps)
        cdef const m.mtmd_bitmap **ptrs = NULL
        cdef InputChunks out = InputChunks.__new__(InputChunks)
        out.ptr = m.mtmd_input_chunks_init()
        if out.ptr == NULL:
            raise MemoryError("mtmd_input_chunks_init failed")
        out.mctx = self
        out._closed = False
        keep = np.empty(max(n, 1), dtype=np.uintp)
        cdef size_t[::1] addr = keep
        for i in range(n):
            b = bitmaps[i]
            addr[i] = <size_t>b.ptr
        ptrs = <const m.mtmd_bitmap **>&addr[0]
        cdef int32_t rc
        with self._lock:
            for b in videos:
                b._read = True
            with nogil:  # a video's frames are read here, from ffmpeg
                rc = m.mtmd_tokenize(self.ptr, out.ptr, &inp, ptrs, n)
        if rc == 1:
            raise ValueError("the number of media markers does not match the number of media")
        if rc == 2:
            raise MediaError("the projector could not preprocess an image or clip, or a "
                             "video's frames could not be read")
        if rc != 0:
            raise LlamaError(f"mtmd_tokenize failed ({rc})")
        return out

    cdef int _check_media(self, InputChunk chunk) except -1:
        chunk._check()
        if chunk.parent.mctx is not self:
            raise ValueError("the chunk was tokenized by another MtmdContext")
        if m.mtmd_input_chunk_get_type(chunk.ptr) == m.MTMD_INPUT_CHUNK_TYPE_TEXT:
            raise ValueError("a text chunk has no media to encode")
        return 0

    def encode(self, InputChunk chunk not None):
        """Run the projector on a media chunk: its embeddings, a read-only
        ``(n_tokens, n_embd)`` float32 view of libmtmd's buffer, overwritten by the next
        encode (copy it to keep it)."""
        self._ensure_alive()
        self._check_media(chunk)
        cdef float *embd = NULL
        self._enter()
        try:
            with self._lock:
                embd = self._encode(chunk)
        finally:
            self._release()
        return array_view(self, embd, b"f", sizeof(float),
                          m.mtmd_input_chunk_get_n_tokens(chunk.ptr), self.n_embd, True)

    cdef float *_encode(self, InputChunk chunk) except NULL:
        """mtmd_encode_chunk, the lock held: libmtmd's output buffer (valid until the
        next encode)."""
        if self._n_views > 0:
            raise LlamaError("a view of the last encode's embeddings is alive: the next "
                             "encode would overwrite it. Drop it (or copy it) first.")
        cdef int32_t rc
        cdef const m.mtmd_input_chunk *p = chunk.ptr
        with nogil:
            rc = m.mtmd_encode_chunk(self.ptr, p)
        self.n_encodes += 1
        if rc != 0:
            raise MediaError(f"the projector failed to encode the {chunk.type} ({rc})")
        return m.mtmd_get_output_embd(self.ptr)

    def encode_batch(self, chunks, LlamaContext ctx=None):
        """Encode ``chunks[0]`` and as many of the media chunks after it as libmtmd takes
        into one batch (``mtmd_batch``: up to ``batch_max_tokens`` output tokens, the
        first chunk whatever its size; chunks it cannot batch together end it), in one
        projector run, as llama-server encodes a prompt's images. Returns a
        ``(n_tokens, n_embd)`` float32 array (a copy) for each chunk encoded, in order:
        :meth:`eval_chunk`'s ``embd``. ``ctx``, the context the embeddings go to, has
        its pool workers sleep through the encode rather than spin beside it."""
        self._ensure_alive()
        if ctx is not None:
            ctx._ensure_alive()
            ctx._lock_acquire()
            try:
                ctx._pause_threadpools()
            finally:
                ctx._lock_release()
        chunks = list(chunks)
        if not chunks:
            raise ValueError("no chunk to encode")
        cdef InputChunk chunk
        for chunk in chunks:
            self._check_media(chunk)
        cdef m.mtmd_batch *b = NULL
        cdef int32_t rc = 0
        cdef const float *embd
        cdef float[:, ::1] out
        taken = []
        arrays = []
        self._enter()
        try:
            with self._lock:
                b = m.mtmd_batch_init(self.ptr)
                if b == NULL:
                    raise MemoryError("mtmd_batch_init failed")
                try:
                    for chunk in chunks:
                        rc = m.mtmd_batch_add_chunk(b, chunk.ptr)
                        if rc != 0:  # 2: full; 3: not batchable with the others
                            if not taken:
                                raise MediaError(f"libmtmd could not batch the {chunk.type} ({rc})")
                            break
                        taken.append(chunk)
                    with nogil:
                        rc = m.mtmd_batch_encode(b)
                    self.n_encodes += 1
                    if rc != 0:
                        raise MediaError(f"the projector failed to encode a batch of {len(taken)} "
                                         f"media chunks ({rc})")
                    for chunk in taken:
                        embd = m.mtmd_batch_get_output_embd(b, chunk.ptr)
                        if embd == NULL:
                            raise MediaError("libmtmd kept no embeddings for a batched chunk")
                        arr = np.empty((m.mtmd_input_chunk_get_n_tokens(chunk.ptr), self.n_embd),
                                       dtype=np.float32)
                        out = arr
                        memcpy(&out[0, 0], embd, out.shape[0] * out.shape[1] * sizeof(float))
                        arrays.append(arr)
                finally:
                    m.mtmd_batch_free(b)
        finally:
            self._release()
        return arrays

    def eval_chunk(self, LlamaContext ctx not None, InputChunk chunk not None, int n_past,
                   int seq_id=0, *, bint logits_last=False, embd=None):
        """Put ``chunk`` into sequence ``seq_id`` of ``ctx`` at position ``n_past``;
        returns the position after it. Text goes in batches of ``ctx.n_batch`` (with
        logits for its last token if ``logits_last``); media is encoded (unless ``embd``
        holds its :meth:`encode` output) and decoded as embeddings."""
        self._ensure_alive()
        ctx._ensure_alive()
        chunk._check()
        if ctx.model is not self.model:
            raise ValueError("the context is of another model than this projector's")
        if chunk.parent.mctx is not self:
            raise ValueError("the chunk was tokenized by another MtmdContext")
        ctx._check_seq(seq_id, False)
        if n_past < 0:
            raise ValueError(f"n_past must be >= 0, not {n_past}")
        cdef int n_pos = m.mtmd_input_chunk_get_n_pos(chunk.ptr)
        if n_past + n_pos > ctx.n_ctx_seq:
            raise ContextOverflowError(n_past + n_pos, ctx.n_ctx_seq)
        cdef int kind = m.mtmd_input_chunk_get_type(chunk.ptr)
        if kind == m.MTMD_INPUT_CHUNK_TYPE_TEXT:
            return self._eval_text(ctx, chunk, n_past, seq_id, logits_last)
        return self._eval_media(ctx, chunk, n_past, seq_id, embd)

    cdef int _eval_text(self, LlamaContext ctx, InputChunk chunk, int n_past, int seq_id,
                        bint logits_last) except -1:
        toks = chunk.tokens
        cdef int n = toks.shape[0]
        cdef int step = ctx.n_batch
        cdef LlamaBatch batch = LlamaBatch(min(max(n, 1), step))
        try:
            for start in range(0, n, step):
                part = toks[start:start + step]
                batch.clear()
                batch.add_sequence(part, n_past + start, seq_id,
                                   logits_last=logits_last and start + step >= n)
                ctx.decode(batch)
        finally:
            batch.close()
        return n_past + n

    cdef int _eval_media(self, LlamaContext ctx, InputChunk chunk, int n_past, int seq_id,
                         embd) except -1:
        cdef int n_tokens = m.mtmd_input_chunk_get_n_tokens(chunk.ptr)
        cdef bint non_causal = m.mtmd_decode_use_non_causal(self.ptr, chunk.ptr)
        if non_causal and n_tokens > ctx.n_ubatch:
            raise InvalidBatchError(
                f"this {chunk.type} is {n_tokens} tokens, decoded with non-causal attention "
                f"in one micro-batch: create the context with n_ubatch >= {n_tokens} "
                f"(it has {ctx.n_ubatch})", -1)
        cdef const float[:, ::1] rows
        if embd is not None:
            arr = np.ascontiguousarray(embd, dtype=np.float32)
            if arr.ndim != 2 or arr.shape[0] != n_tokens or arr.shape[1] != self.n_embd:
                raise ValueError(f"embd must be ({n_tokens}, {self.n_embd}) float32, not "
                                 f"of shape {tuple(arr.shape)}")
            rows = arr
        # mtmd-helper takes a mutable pointer but only reads the embeddings.
        cdef float *p = NULL
        cdef int32_t rc = -1
        cdef c.llama_pos new_n_past = n_past
        cdef int n_batch = ctx.n_batch
        self._enter()
        try:
            # The projector's output buffer is read by the decode: no other thread may
            # encode in between.
            with self._lock:
                ctx._lock_acquire()
                try:
                    if embd is None:
                        # The context's pool workers would spin beside the projector's.
                        ctx._pause_threadpools()
                        p = self._encode(chunk)
                    else:
                        p = <float *>&rows[0, 0]
                    ctx._abort = 0
                    with nogil:
                        rc = mh.mtmd_helper_decode_image_chunk(
                            self.ptr, ctx.ptr, chunk.ptr, p, n_past, seq_id, n_batch,
                            &new_n_past, NULL, NULL)
                    ctx._n_outputs = 0
                finally:
                    ctx._lock_release()
        finally:
            self._release()
        if rc != 0:
            raise decode_error(rc, f"decoding the {chunk.type}'s embeddings")
        return new_n_past

    def eval_chunks(self, LlamaContext ctx not None, InputChunks chunks not None,
                    int n_past=0, int seq_id=0, *, bint logits_last=True):
        """Evaluate every chunk in order from ``n_past``; the last one's last token gets
        logits (``logits_last``). Returns the position after them."""
        n = len(chunks)
        for i in range(n):
            n_past = self.eval_chunk(ctx, chunks[i], n_past, seq_id,
                                     logits_last=logits_last and i == n - 1)
        return n_past
