from llama_cy._c.llama cimport llama_model
from llama_cy._vocab cimport LlamaVocab


cdef class LlamaModel(LlamaVocab):
    cdef llama_model *ptr
    cdef readonly object path
    cdef readonly bint vocab_only
    # kv_overrides given at load, as llama.cpp prints values: shown by metadata/meta_val.
    cdef dict _overrides

    cdef void _dispose(self) noexcept

    @staticmethod
    cdef LlamaModel _wrap(llama_model *ptr, path)
