from llama_cy._handle cimport Handle
from libc.stdint cimport int32_t

from llama_cy._c.llama cimport llama_model, llama_vocab, llama_token


cdef class LlamaModel(Handle):
    cdef llama_model *ptr
    cdef const llama_vocab *vocab
    cdef readonly object path
    cdef readonly int n_vocab
    cdef readonly bint vocab_only
    # kv_overrides given at load, as llama.cpp prints values: shown by metadata/meta_val.
    cdef dict _overrides

    cdef int _check_token(self, llama_token token) except -1
    cdef void _dispose(self) noexcept
    cdef int32_t[::1] _token_array(self, tokens)

    @staticmethod
    cdef LlamaModel _wrap(llama_model *ptr, path)
