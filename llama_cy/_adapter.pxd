from llama_cy._handle cimport Handle
from llama_cy._c.llama cimport llama_adapter_lora
from llama_cy._model cimport LlamaModel


cdef class LoraAdapter(Handle):
    cdef llama_adapter_lora *ptr
    cdef readonly LlamaModel model
    cdef readonly object path
    # Contexts the adapter is set on: close() frees it only once none uses it.
    cdef int _n_users

    cdef void _free(self) noexcept
