# Declarations of ggml-alloc.h (llama.cpp b11434), in the header's order.
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport ggml_status, ggml_tensor, ggml_cgraph, ggml_context

cdef extern from "ggml-alloc.h" nogil:
    # (opaque; defined in ggml-backend-impl.h)
    cdef struct ggml_backend_buffer_type
    cdef struct ggml_backend_buffer
    cdef struct ggml_backend

    ctypedef ggml_backend_buffer_type * ggml_backend_buffer_type_t
    ctypedef ggml_backend_buffer * ggml_backend_buffer_t
    ctypedef ggml_backend * ggml_backend_t

    # ---- Tensor allocator ----
    cdef struct ggml_tallocr:
        ggml_backend_buffer_t buffer
        void * base
        size_t alignment
        size_t offset

    ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer)
    ggml_status ggml_tallocr_alloc(ggml_tallocr * talloc, ggml_tensor * tensor)

    # ---- Graph allocator ----
    cdef struct ggml_gallocr
    ctypedef ggml_gallocr * ggml_gallocr_t

    ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft)
    ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs)
    void ggml_gallocr_free(ggml_gallocr_t galloc)

    bool ggml_gallocr_reserve(ggml_gallocr_t galloc, ggml_cgraph * graph)
    void ggml_gallocr_reserve_n_size(
            ggml_gallocr_t galloc,
            ggml_cgraph * graph,
            const int * node_buffer_ids,
            const int * leaf_buffer_ids,
            size_t * sizes)
    bool ggml_gallocr_reserve_n(
            ggml_gallocr_t galloc,
            ggml_cgraph * graph,
            const int * node_buffer_ids,
            const int * leaf_buffer_ids)

    bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, ggml_cgraph * graph)

    size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id)

    # ---- Utils ----
    size_t ggml_backend_alloc_ctx_tensors_from_buft_size(ggml_context * ctx, ggml_backend_buffer_type_t buft)
    ggml_backend_buffer * ggml_backend_alloc_ctx_tensors_from_buft(
            ggml_context * ctx, ggml_backend_buffer_type_t buft)
    ggml_backend_buffer * ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend)
