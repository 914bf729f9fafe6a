from libc.stddef cimport size_t

from llama_cy._c.ggml_backend cimport ggml_backend_dev_t


cdef class Device:
    cdef ggml_backend_dev_t dev
    cdef readonly str name
    cdef readonly str description
    cdef readonly str type
    cdef readonly str backend
    cdef readonly size_t memory_free
    cdef readonly size_t memory_total


cdef Device _device(ggml_backend_dev_t dev)
