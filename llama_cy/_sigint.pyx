# cython: language_level=3
"""Ctrl-C during a decode: a C handler that aborts llama.cpp's graph, then Python's own.

Python sees SIGINT only between bytecodes, and a decode is one long C call. While one
runs on the main thread, :func:`interrupt_begin` puts a handler in place that sets the
context's abort flag (llama.cpp's abort callback reads it and stops the graph);
:func:`interrupt_end` puts the old handler back, and :func:`interrupt_deliver` hands the
signal to it (``KeyboardInterrupt`` by default).
"""

from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport PyThread_get_thread_ident
from libc.signal cimport SIGINT, raise_ as raise_signal
from libc.string cimport memset


cdef extern from "<signal.h>" nogil:
    int sigaction(int signum, const sigaction_t *act, sigaction_t *oldact)
    int sigemptyset(sigset_t *set)
    void (*SIG_IGN)(int)


# The abort flag of the context decoding on the main thread now.
cdef volatile int *_flag = NULL
cdef unsigned long _main_thread = PyThread_get_thread_ident()


cdef void _on_sigint(int signum) noexcept nogil:
    if _flag != NULL:
        _flag[0] = 2


cdef bint interrupt_begin(volatile int *flag, sigaction_t *saved) noexcept:
    """On the main thread, make Ctrl-C set ``flag[0] = 2`` until :func:`interrupt_end`;
    False (nothing done) on other threads or where Ctrl-C is ignored (a background job)."""
    global _flag
    if PyThread_get_thread_ident() != _main_thread:
        return False
    sigaction(SIGINT, NULL, saved)
    if saved.sa_handler == SIG_IGN:
        return False
    cdef sigaction_t act
    memset(&act, 0, sizeof(act))
    act.sa_handler = _on_sigint
    sigemptyset(&act.sa_mask)
    _flag = flag
    sigaction(SIGINT, &act, saved)
    return True


cdef void interrupt_end(sigaction_t *saved) noexcept:
    global _flag
    sigaction(SIGINT, saved, NULL)
    _flag = NULL


cdef int interrupt_deliver() except -1:
    """Raise the Ctrl-C the decode caught with the handler it was meant for."""
    raise_signal(SIGINT)
    PyErr_CheckSignals()
    return 0
