from libc.stddef cimport size_t

from llama_cy._c.ggml cimport ggml_log_level
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

# llama.cpp's log into the "llama_cy" logger, and the sink used once Python shuts down:
# also handed to libmtmd's loggers (_mtmd), so that every line reaches one logger.
cdef void _log_callback(ggml_log_level level, const char *text, void *user_data) noexcept with gil
cdef void _log_silent(ggml_log_level level, const char *text, void *user_data) noexcept nogil
