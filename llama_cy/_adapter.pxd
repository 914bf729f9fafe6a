from llama_cy._handle cimport Handle
from llama_cy._c.llama cimport llama_adapter_lora
from llama_cy._model cimport LlamaModel


cdef class LoraAdapter(Handle):
    cdef llama_adapter_lora *ptr
    cdef readonly LlamaModel model
    cdef readonly object path

    cdef void _dispose(self) noexcept
