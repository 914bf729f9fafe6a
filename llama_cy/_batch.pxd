from libc.stdint cimport int32_t

from llama_cy._c.llama cimport llama_batch
from llama_cy._view cimport ViewOwner


cdef class LlamaBatch(ViewOwner):
    cdef llama_batch batch
    cdef readonly int capacity
    cdef readonly int n_seq_max
    cdef readonly int embd
    cdef bint _allocated
    # Its struct's address was handed out (``address``): its counts may be written raw.
    cdef bint _raw

    cdef int _count_outputs(self) noexcept nogil
    cdef int _check_raw_counts(self) except -1
    cdef void _dispose(self) noexcept
    cdef int _set_seq_ids(self, int32_t i, seq_ids) except -1
