"""LoraAdapter: a LoRA (or aLoRA) adapter loaded for a model (``llama_adapter_lora``); and
control vector files read as llama.cpp's tools read them (``llama_adapter_cvec``'s data)."""

import os

import numpy as np

cimport cython

from libc.stdint cimport int32_t
from libcpp.string cimport string
from libcpp.vector cimport vector

from llama_cy._c cimport llama as c
from llama_cy._handle cimport Handle
from llama_cy._model cimport LlamaModel

from llama_cy.errors import ModelLoadError

cdef extern from "common.h" nogil:
    cdef struct common_control_vector_load_info:
        float strength
        string fname
    cdef struct common_control_vector_data:
        int n_embd
        vector[float] data
    common_control_vector_data common_control_vector_load(
        const vector[common_control_vector_load_info] &load_infos) except +


def load_control_vectors(items):
    """llama.cpp's ``common_control_vector_load``: the ``direction.N`` tensors of each
    ``(path, strength)`` GGUF file, scaled and summed, as a float32 array of shape
    ``(layers, n_embd)`` whose row 0 is layer 1 (what
    :meth:`~llama_cy.LlamaContext.set_control_vector` takes). ValueError names the file
    llama.cpp could not read (its log says why)."""
    cdef vector[common_control_vector_load_info] infos
    cdef common_control_vector_load_info info
    cdef common_control_vector_data result
    items = list(items)
    for path, strength in items:
        if not os.path.isfile(path):
            raise ValueError(f"control vector file not found: {os.fspath(path)!r}")
        info.fname = os.fsencode(path)
        info.strength = strength
        infos.push_back(info)
    if infos.empty():
        raise ValueError("no control vector files given")
    with nogil:
        result = common_control_vector_load(infos)
    if result.n_embd <= 0 or result.data.empty():
        names = ", ".join(repr(os.fspath(p)) for p, _ in items)
        raise ValueError(f"no valid control vector in {names} (a GGUF file of F32 1-D "
                         "direction.N tensors, N >= 1, all the same length; see the "
                         "'llama_cy' log)")
    out = np.empty(result.data.size(), dtype=np.float32)
    cdef float[::1] view = out
    cdef size_t i
    for i in range(result.data.size()):
        view[i] = result.data[i]
    return out.reshape(-1, result.n_embd)


cdef str _meta_str(int32_t (*getter)(const c.llama_adapter_lora *, int32_t, char *, size_t) noexcept nogil,
                   const c.llama_adapter_lora *adapter, int32_t i):
    cdef int32_t n = getter(adapter, i, NULL, 0)
    if n < 0:
        return None
    buf = bytearray(n + 1)
    getter(adapter, i, buf, n + 1)
    return bytes(buf[:n]).decode("utf-8", "replace")


@cython.no_gc_clear  # __dealloc__ releases the model it points to
cdef class LoraAdapter(Handle):
    """A LoRA adapter file applied on top of a model's weights.

    Set it on a context with ``LlamaContext.set_lora(adapter, scale)``. The adapter keeps
    its model alive; ``close()`` frees it once no context uses it any more.
    """

    def __cinit__(self, LlamaModel model not None, path):
        # Allocated here, not in __init__, so that calling __init__ again cannot leak.
        self.ptr = NULL
        model._ensure_alive()
        if not os.path.isfile(path):
            raise ModelLoadError(f"LoRA adapter file not found: {os.fspath(path)!r}")
        cdef bytes bpath = os.fsencode(path)
        cdef const char *cpath = bpath
        with nogil:
            self.ptr = c.llama_adapter_lora_init(model.ptr, cpath)
        if self.ptr == NULL:
            raise ModelLoadError(f"failed to load LoRA adapter {os.fspath(path)!r} "
                                 "(not an adapter for this model?); see the 'llama_cy' log")
        self.model = model
        self.path = os.fspath(path)
        model._acquire()
        self._closed = False

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        # Contexts using the adapter are users: close() gets here after them.
        if self.ptr != NULL:
            c.llama_adapter_lora_free(self.ptr)
            self.ptr = NULL
            self.model._release()

    def __repr__(self):
        return "<LoraAdapter closed>" if self._closed else f"<LoraAdapter {self.path!r}>"

    @property
    def metadata(self):
        """The adapter's GGUF key/values as strings."""
        self._ensure_alive()
        return {
            _meta_str(c.llama_adapter_meta_key_by_index, self.ptr, i):
            _meta_str(c.llama_adapter_meta_val_str_by_index, self.ptr, i)
            for i in range(c.llama_adapter_meta_count(self.ptr))
        }

    @property
    def alora_invocation_tokens(self):
        """The tokens that activate an aLoRA adapter (empty for a plain LoRA)."""
        self._ensure_alive()
        cdef size_t n = c.llama_adapter_get_alora_n_invocation_tokens(self.ptr)
        cdef const c.llama_token *toks = c.llama_adapter_get_alora_invocation_tokens(self.ptr)
        return np.array([toks[i] for i in range(n)], dtype=np.int32)
