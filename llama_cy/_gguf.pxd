from llama_cy._c.gguf cimport gguf_context


cdef int fill_gguf(gguf_context *g, dict metadata) except -1
