cdef class Handle:
    """Base of every type that owns one C object: the closed flag and its checks."""
    cdef bint _closed

    cdef int _ensure_alive(self) except -1
    cdef void _free(self) noexcept
