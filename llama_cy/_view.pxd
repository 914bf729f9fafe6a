from llama_cy._handle cimport Handle


cdef class ViewOwner(Handle):
    """Base of types that lend zero-copy NumPy views of their C memory.

    Counts the views alive, so that ``close()`` can defer freeing until the last one
    is gone and a context can refuse a decode that would move memory under them.
    """
    cdef int _n_views
    cdef void _view_released(self) noexcept
    cdef bint _in_use(self) noexcept


cdef object array_view(ViewOwner owner, void *data, const char *fmt, Py_ssize_t itemsize,
                       Py_ssize_t n0, Py_ssize_t n1, bint readonly)
