cdef class Handle:
    """Base of every type that owns one C object: the closed flag, its users, its checks."""
    cdef bint _closed
    # What still uses the C object's memory: children (contexts and adapters on a model)
    # and calls running without the GIL (a decode, a tokenize, a sampler in a chain).
    # close() marks the handle closed; the memory goes when the last user leaves.
    cdef int _n_users

    cdef int _ensure_alive(self) except -1
    cdef int _enter(self) except -1
    cdef void _acquire(self) noexcept
    cdef void _release(self) noexcept
    cdef void _free(self) noexcept
    # The one release path: close() (through _free, once nothing uses the memory) and
    # __dealloc__ both free the C object here; idempotent.
    cdef void _dispose(self) noexcept
    cdef bint _in_use(self) noexcept
