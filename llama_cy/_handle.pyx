"""Handle: what every llama_cy type owning a C object shares (close, with, closed checks)."""

from llama_cy.errors import ClosedError


cdef class Handle:
    """A C object owned from Python: ``close()`` or a ``with`` block releases it.

    Memory that something else still uses (a model under a live context, a context
    under a live logits view) is freed when the last user goes; the handle itself
    refuses every call once closed, with :class:`~llama_cy.errors.ClosedError`.
    """

    def __cinit__(self):
        self._closed = True

    cdef int _ensure_alive(self) except -1:
        if self._closed:
            raise ClosedError(f"this {type(self).__name__} is closed")
        return 0

    cdef void _free(self) noexcept:
        self._closed = True

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
