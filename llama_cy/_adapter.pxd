from llama_cy._c.llama cimport llama_adapter_lora
from llama_cy._model cimport LlamaModel


cdef class LoraAdapter:
    cdef llama_adapter_lora *ptr
    cdef readonly LlamaModel model
    cdef readonly object path
    # Contexts the adapter is set on: close() frees it only once none uses it.
    cdef int _n_users
    cdef bint _closed

    cdef int _ensure_alive(self) except -1
    cdef void _free(self) noexcept
