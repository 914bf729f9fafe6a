# cython: language_level=3
"""The tensor table of a GGUF file, read without loading the weights (``gguf_*``)."""

import os

from libc.stdint cimport int64_t

from llama_cy._c.ggml cimport ggml_type_name
from llama_cy._c.gguf cimport (
    gguf_context, gguf_free, gguf_get_n_tensors, gguf_get_tensor_name, gguf_get_tensor_size,
    gguf_get_tensor_type, gguf_init_from_file, gguf_init_params,
)

from llama_cy.errors import ModelLoadError


def gguf_tensors(path):
    """``(name, type name, size in bytes)`` for each tensor of the GGUF file at ``path``."""
    bpath = os.fsencode(path)
    if not os.path.isfile(bpath):
        raise ModelLoadError(f"no model file at {os.fsdecode(bpath)!r}")
    cdef gguf_init_params params
    params.no_alloc = True
    params.ctx = NULL
    cdef const char *cpath = bpath
    cdef gguf_context *g
    with nogil:
        g = gguf_init_from_file(cpath, params)
    if g == NULL:
        raise ModelLoadError(f"{os.fsdecode(bpath)!r} is not a readable GGUF file")
    cdef int64_t i
    try:
        return [(gguf_get_tensor_name(g, i).decode("utf-8", "replace"),
                 ggml_type_name(gguf_get_tensor_type(g, i)).decode(),
                 gguf_get_tensor_size(g, i))
                for i in range(gguf_get_n_tensors(g))]
    finally:
        gguf_free(g)
