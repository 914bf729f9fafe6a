"""Zero-copy NumPy views of memory owned by llama_cy objects (logits, batches, ...)."""

import numpy as np

cimport cython

from llama_cy._handle cimport Handle
from cpython.buffer cimport PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES


cdef class ViewOwner(Handle):
    def __cinit__(self):
        self._n_views = 0

    cdef bint _in_use(self) noexcept:
        return self._n_users > 0 or self._n_views > 0

    cdef void _view_released(self) noexcept:
        if self._closed and not self._in_use():
            self._dispose()


@cython.no_gc_clear  # __dealloc__ tells its owner
cdef class _ArrayView:
    """The buffer exporter behind each view: it keeps its owner alive."""
    cdef ViewOwner owner
    cdef void *data
    cdef const char *fmt
    cdef Py_ssize_t itemsize
    cdef int ndim
    cdef Py_ssize_t shape[2]
    cdef Py_ssize_t strides[2]
    cdef bint readonly

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if self.readonly and (flags & PyBUF_WRITABLE):
            raise BufferError("this view is read-only")
        buffer.buf = self.data
        buffer.obj = self
        buffer.len = self.shape[0] * (self.shape[1] if self.ndim == 2 else 1) * self.itemsize
        buffer.readonly = self.readonly
        buffer.itemsize = self.itemsize
        buffer.format = <char *>self.fmt if flags & PyBUF_FORMAT else NULL
        buffer.ndim = self.ndim
        buffer.shape = self.shape if flags & PyBUF_ND else NULL
        buffer.strides = self.strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buffer.suboffsets = NULL
        buffer.internal = NULL

    def __releasebuffer__(self, Py_buffer *buffer):
        pass

    def __dealloc__(self):
        if self.owner is not None:
            self.owner._n_views -= 1
            self.owner._view_released()


cdef object array_view(ViewOwner owner, void *data, const char *fmt, Py_ssize_t itemsize,
                       Py_ssize_t n0, Py_ssize_t n1, bint readonly):
    """A NumPy array over ``data`` (1-D when ``n1 < 0``), alive as long as ``owner``."""
    cdef _ArrayView v = _ArrayView.__new__(_ArrayView)
    v.data = data
    v.fmt = fmt
    v.itemsize = itemsize
    v.readonly = readonly
    v.shape[0] = n0
    if n1 < 0:
        v.ndim = 1
        v.strides[0] = itemsize
    else:
        v.ndim = 2
        v.shape[1] = n1
        v.strides[0] = n1 * itemsize
        v.strides[1] = itemsize
    owner._n_views += 1
    v.owner = owner
    return np.asarray(v)
