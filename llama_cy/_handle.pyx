"""Handle: what every llama_cy type owning a C object shares (close, with, users, checks)."""

from llama_cy.errors import ClosedError


cdef class Handle:
    """A C object owned from Python: ``close()`` or a ``with`` block releases it.

    One lifetime rule for every type: memory that something still uses (a model under a
    live context, a context under a live logits view or a decode running on another
    thread) is freed when the last user goes; the handle itself refuses every new call
    once closed, with :class:`~llama_cy.errors.ClosedError`. So ``close()`` from one
    thread never frees memory under a call running in another.
    """

    def __cinit__(self):
        self._closed = True
        self._n_users = 0

    cdef int _ensure_alive(self) except -1:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed")
        return 0

    cdef int _enter(self) except -1:
        """Check the handle is open and count the caller as a user until ``_release``."""
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed")
        self._n_users += 1
        return 0

    cdef void _acquire(self) noexcept:
        self._n_users += 1

    cdef void _release(self) noexcept:
        self._n_users -= 1
        if self._closed and self._n_users == 0:
            self._free()

    cdef void _free(self) noexcept:
        """``close()``: refuse new calls now; free the memory now, or when the last user
        (or view) leaves."""
        self._closed = True
        if not self._in_use():
            self._dispose()

    cdef bint _in_use(self) noexcept:
        return self._n_users > 0

    cdef void _dispose(self) noexcept:
        pass

    def close(self):
        """Release the C object (deferred while something still uses its memory)."""
        self._free()

    @property
    def closed(self):
        return self._closed

    def __enter__(self):
        self._ensure_alive()
        return self

    def __exit__(self, *exc):
        self._free()
