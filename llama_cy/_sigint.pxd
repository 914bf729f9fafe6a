cdef extern from "_sigint_shim.h" nogil:
    # The handler in place before ours: restored exactly where the platform allows
    # (POSIX sigaction), else the handler itself (Windows, the C standard's signal()).
    ctypedef struct lcy_sigint_saved:
        pass


cdef bint interrupt_begin(volatile int *flag, lcy_sigint_saved *saved) noexcept
cdef void interrupt_end(lcy_sigint_saved *saved) noexcept
cdef int interrupt_deliver() except -1
