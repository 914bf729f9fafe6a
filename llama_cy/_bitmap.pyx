"""One image, clip of audio or video for libmtmd (``mtmd_bitmap``): :class:`Bitmap`,
decoded from a file or bytes by an :class:`~llama_cy.MtmdContext`, or made from pixels
or samples, with the id that names its content in a KV cache prefix.
"""

import hashlib
import os

import numpy as np

cimport cython

from libc.stdint cimport uint32_t
from libc.stddef cimport size_t

from llama_cy._c cimport mtmd as m
from llama_cy._c cimport mtmd_helper as mh
from llama_cy._handle cimport Handle
from llama_cy._view cimport ViewOwner, array_view

from llama_cy.errors import MediaError

#: The most pixels a decoded image may have (stb_image's own limit is per side).
MAX_IMAGE_PIXELS = 64 * 1024 * 1024


cdef object _decoder(mctx):
    """``mctx``, checked: an open MtmdContext (its module cimports this one, so it is
    looked up when first needed)."""
    from llama_cy._mtmd import MtmdContext

    if not isinstance(mctx, MtmdContext):
        raise TypeError(f"expected an MtmdContext, not {type(mctx).__name__}")
    (<Handle>mctx)._ensure_alive()
    return mctx


@cython.final
cdef class Bitmap(ViewOwner):
    """One decoded image (RGB, 8 bits a channel) or one clip of mono float32 audio.

    Build it with :meth:`from_file` or :meth:`from_bytes` (any image stb_image reads, or
    WAV, MP3 or FLAC audio, resampled to the projector's rate), :meth:`from_array` (an
    ``(H, W, 3)`` uint8 array) or :meth:`from_audio` (float32 PCM at the projector's
    rate). libmtmd keeps its own copy of the pixels or samples. :attr:`id` names the
    content (a hash of it, unless set): chunks of the same content have the same id, which
    is how a KV cache prefix with this image is recognised.
    """

    def __cinit__(self):
        self.ptr = NULL
        self.video = NULL
        self._read = False

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        if self.ptr != NULL:
            m.mtmd_bitmap_free(self.ptr)
            self.ptr = NULL
        if self.video != NULL:
            mh.mtmd_helper_video_free(self.video)  # ends its ffmpeg
            self.video = NULL

    @staticmethod
    cdef Bitmap _wrap(m.mtmd_bitmap *ptr, object id):
        cdef Bitmap b = Bitmap.__new__(Bitmap)
        b.ptr = ptr
        b._closed = False
        if b.is_audio:
            if m.mtmd_bitmap_get_n_bytes(ptr) == 0:
                raise MediaError("the audio has no samples")
        else:
            b._check_size()
        b.id = id if id is not None else b._content_hash()
        return b

    cdef int _check_size(self) except -1:
        cdef uint32_t nx = m.mtmd_bitmap_get_nx(self.ptr)
        cdef uint32_t ny = m.mtmd_bitmap_get_ny(self.ptr)
        if nx == 0 or ny == 0:
            raise MediaError(f"the image is empty ({nx}x{ny})")
        if <size_t>nx * ny > MAX_IMAGE_PIXELS:
            raise MediaError(f"the image is too large ({nx}x{ny} pixels; at most "
                             f"{MAX_IMAGE_PIXELS} pixels)")
        return 0

    cdef str _content_hash(self):
        cdef const unsigned char *data = m.mtmd_bitmap_get_data(self.ptr)
        cdef size_t n = m.mtmd_bitmap_get_n_bytes(self.ptr)
        h = hashlib.blake2b(digest_size=16)
        h.update(b"audio" if self.is_audio else b"%dx%d" % (self.nx, self.ny))
        if n:
            h.update(<unsigned char[:n]><unsigned char *>data)
        return h.hexdigest()

    @staticmethod
    def from_bytes(mctx, data, id=None):
        """Decode an encoded image (JPEG, PNG, BMP, GIF, …) or audio file (WAV, MP3,
        FLAC) held in memory, with the decoders of ``mctx`` (an
        :class:`~llama_cy.MtmdContext`: the audio is resampled to its projector's rate).
        Raises :class:`~llama_cy.errors.MediaError` when it is neither, is cut short, or
        is a kind the projector does not take."""
        return _decoder(mctx).bitmap(memoryview(data), id)

    @staticmethod
    def from_file(mctx, path, id=None):
        """Decode an image or audio file (see :meth:`from_bytes`)."""
        _decoder(mctx)
        path = os.fspath(path)  # not an int: open() takes one as a descriptor, and closes it
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise MediaError(f"cannot read media file {os.fspath(path)!r}: {e.strerror}") from e
        return Bitmap.from_bytes(mctx, data, id)

    @staticmethod
    def from_array(pixels, id=None):
        """An image from an ``(H, W, 3)`` uint8 RGB array (copied once, into libmtmd)."""
        arr = np.ascontiguousarray(pixels)
        if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
            raise ValueError(f"pixels must be an (H, W, 3) uint8 array, not {arr.dtype} "
                             f"of shape {tuple(arr.shape)}")
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise MediaError(f"the image is empty ({arr.shape[1]}x{arr.shape[0]})")
        if arr.shape[0] * arr.shape[1] > MAX_IMAGE_PIXELS:
            raise MediaError(f"the image is too large ({arr.shape[1]}x{arr.shape[0]} pixels)")
        cdef const unsigned char[:, :, ::1] px = arr
        cdef m.mtmd_bitmap *ptr
        with nogil:
            ptr = m.mtmd_bitmap_init(<uint32_t>px.shape[1], <uint32_t>px.shape[0], &px[0, 0, 0])
        if ptr == NULL:
            raise MemoryError("mtmd_bitmap_init failed")
        return Bitmap._wrap(ptr, id)

    @staticmethod
    def from_audio(samples, id=None):
        """A clip from mono float32 PCM samples at the projector's sample rate."""
        arr = np.ascontiguousarray(samples, dtype=np.float32)
        if arr.ndim != 1:
            raise ValueError(f"samples must be one-dimensional, not of shape {tuple(arr.shape)}")
        if arr.shape[0] == 0:
            raise MediaError("the audio has no samples")
        if not np.isfinite(arr).all():
            raise MediaError("the audio has samples that are NaN or infinite")
        cdef const float[::1] pcm = arr
        cdef m.mtmd_bitmap *ptr
        with nogil:
            ptr = m.mtmd_bitmap_init_from_audio(<size_t>pcm.shape[0], &pcm[0])
        if ptr == NULL:
            raise MemoryError("mtmd_bitmap_init_from_audio failed")
        return Bitmap._wrap(ptr, id)

    def __repr__(self):
        if self._closed:
            return "<Bitmap closed>"
        if self.video != NULL:
            return f"<Bitmap video {self.nx}x{self.ny} id={self.id!r}>"
        if self.is_audio:
            return f"<Bitmap audio n_samples={self.nx} id={self.id!r}>"
        return f"<Bitmap image {self.nx}x{self.ny} id={self.id!r}>"

    @property
    def is_audio(self):
        self._ensure_alive()
        return bool(m.mtmd_bitmap_is_audio(self.ptr))

    @property
    def is_video(self):
        """A video: its frames (and timestamps, as text) are read, through ffmpeg, by the
        one :meth:`MtmdContext.tokenize` it goes to."""
        self._ensure_alive()
        return self.video != NULL

    @property
    def video_info(self):
        """A video's ``{"width", "height", "fps", "n_frames"}``: ffprobe's size, the rate
        frames are taken at, and the frames that makes (-1 if unknown)."""
        self._ensure_alive()
        if self.video == NULL:
            raise ValueError("this bitmap is not a video")
        cdef mh.mtmd_helper_video_info info = mh.mtmd_helper_video_get_info(self.video)
        return {"width": info.width, "height": info.height, "fps": info.fps,
                "n_frames": info.n_frames}

    @property
    def nx(self):
        """Width in pixels (an image, a video), or the number of samples (audio)."""
        self._ensure_alive()
        if self.video != NULL:
            return mh.mtmd_helper_video_get_info(self.video).width
        return m.mtmd_bitmap_get_nx(self.ptr)

    @property
    def ny(self):
        """Height in pixels (an image, a video); 1 for audio."""
        self._ensure_alive()
        if self.video != NULL:
            return mh.mtmd_helper_video_get_info(self.video).height
        return m.mtmd_bitmap_get_ny(self.ptr)

    @property
    def id(self):
        self._ensure_alive()
        cdef const char *s = m.mtmd_bitmap_get_id(self.ptr)
        return s.decode() if s != NULL else None

    @id.setter
    def id(self, value):
        self._ensure_alive()
        cdef bytes b = str(value).encode()
        m.mtmd_bitmap_set_id(self.ptr, b)

    @property
    def data(self):
        """The pixels, ``(H, W, 3)`` uint8, or the samples, ``(n,)`` float32: a read-only
        view of libmtmd's copy, valid while the bitmap lives."""
        self._ensure_alive()
        if self.video != NULL:
            raise ValueError("a video has no pixels of its own: its frames are read when it "
                             "is tokenized")
        cdef const unsigned char *p = m.mtmd_bitmap_get_data(self.ptr)
        cdef size_t n = m.mtmd_bitmap_get_n_bytes(self.ptr)
        if self.is_audio:
            return array_view(self, <void *>p, b"f", sizeof(float), n // sizeof(float), -1, True)
        flat = array_view(self, <void *>p, b"B", 1, self.ny, self.nx * 3, True)
        return np.asarray(flat).reshape(self.ny, self.nx, 3)
