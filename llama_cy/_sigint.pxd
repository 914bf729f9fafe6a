cdef extern from "<signal.h>" nogil:
    ctypedef struct sigset_t:
        pass
    ctypedef struct sigaction_t "struct sigaction":
        void (*sa_handler)(int)
        int sa_flags
        sigset_t sa_mask


cdef bint interrupt_begin(volatile int *flag, sigaction_t *saved) noexcept
cdef void interrupt_end(sigaction_t *saved) noexcept
cdef int interrupt_deliver() except -1
