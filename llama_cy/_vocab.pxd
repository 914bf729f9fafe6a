from libc.stdint cimport int32_t

from llama_cy._c.llama cimport llama_token, llama_vocab
from llama_cy._handle cimport Handle


cdef class LlamaVocab(Handle):
    cdef const llama_vocab *vocab
    cdef readonly int n_vocab

    cdef int _check_token(self, llama_token token) except -1
    cdef int32_t[::1] _token_array(self, tokens)
