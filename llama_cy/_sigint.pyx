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


cdef extern from "_sigint_shim.h" nogil:
    ctypedef void (*lcy_sigint_handler)(int) noexcept nogil
    lcy_sigint_handler lcy_sigint_current()
    void lcy_sigint_install(lcy_sigint_handler handler, lcy_sigint_saved *saved)
    void lcy_sigint_restore(const lcy_sigint_saved *saved)
    bint lcy_sigint_ignored(lcy_sigint_handler handler)


# The abort flag of the context decoding on the main thread now.
cdef volatile int *_flag = NULL
cdef unsigned long _main_thread = PyThread_get_thread_ident()


cdef void _on_sigint(int signum) noexcept nogil:
    if _flag != NULL:
        _flag[0] = 2


cdef bint interrupt_begin(volatile int *flag, lcy_sigint_saved *saved) noexcept:
    """On the main thread, make Ctrl-C set ``flag[0] = 2`` until :func:`interrupt_end`;
    False (nothing done) on other threads or where Ctrl-C is ignored (a background job)."""
    global _flag
    if PyThread_get_thread_ident() != _main_thread:
        return False
    if lcy_sigint_ignored(lcy_sigint_current()):
        return False
    _flag = flag
    lcy_sigint_install(_on_sigint, saved)
    return True


cdef void interrupt_end(lcy_sigint_saved *saved) noexcept:
    global _flag
    lcy_sigint_restore(saved)
    _flag = NULL


cdef int interrupt_deliver() except -1:
    """Raise the Ctrl-C the decode caught with the handler it was meant for."""
    raise_signal(SIGINT)
    PyErr_CheckSignals()
    return 0
