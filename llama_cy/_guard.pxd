from libc.stddef cimport size_t

from llama_cy._c.gguf cimport gguf_context
from llama_cy._c.llama cimport (
    llama_context, llama_context_params, llama_model, llama_model_params,
    llama_model_set_tensor_data_t,
)


cdef llama_model *load_model(const char **paths, size_t n, llama_model_params params) noexcept nogil
cdef llama_model *init_from_user(gguf_context *meta, llama_model_set_tensor_data_t set_data,
                                 void *ud, llama_model_params params) noexcept
cdef llama_context *init_context(llama_model *model, llama_context_params params) noexcept nogil
cdef str last_abort()
