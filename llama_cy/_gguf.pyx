# cython: language_level=3
"""GGUF files through ggml's ``gguf_*`` API: the tensor table read without loading the
weights, and metadata written (what ``LlamaModel.from_metadata`` builds a model from)."""

import os

import numpy as np

from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free

from llama_cy._c.ggml cimport ggml_type_name
from llama_cy._c.gguf cimport (
    gguf_context, gguf_find_key, gguf_free, gguf_get_kv_type, gguf_get_n_tensors,
    gguf_get_tensor_name, gguf_get_tensor_size, gguf_get_tensor_type, gguf_get_val_bool,
    gguf_init_from_file, gguf_init_params,
    gguf_set_val_u32, gguf_set_val_i32, gguf_set_val_u64, gguf_set_val_i64, gguf_set_val_f32,
    gguf_set_val_f64, gguf_set_val_bool, gguf_set_val_str, gguf_set_arr_data, gguf_set_arr_str,
    GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16, GGUF_TYPE_UINT32,
    GGUF_TYPE_INT32, GGUF_TYPE_FLOAT32, GGUF_TYPE_UINT64, GGUF_TYPE_INT64, GGUF_TYPE_FLOAT64,
    GGUF_TYPE_BOOL,
)

from llama_cy.errors import ModelLoadError


cdef gguf_context *_open(path) except NULL:
    """The GGUF file at ``path`` opened without its tensor data (``gguf_free`` it)."""
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
    return g


def gguf_tensors(path):
    """``(name, type name, size in bytes)`` for each tensor of the GGUF file at ``path``."""
    cdef gguf_context *g = _open(path)
    cdef int64_t i
    try:
        return [(gguf_get_tensor_name(g, i).decode("utf-8", "replace"),
                 ggml_type_name(gguf_get_tensor_type(g, i)).decode(),
                 gguf_get_tensor_size(g, i))
                for i in range(gguf_get_n_tensors(g))]
    finally:
        gguf_free(g)


def gguf_flags(path, keys):
    """``{key: value}`` for the boolean metadata ``keys`` of the GGUF file at ``path``
    (False where a key is missing or not a boolean), as llama.cpp's ``get_bool`` reads
    them with a default of false: ``clip.has_vision_encoder`` and the like."""
    cdef gguf_context *g = _open(path)
    cdef int64_t k
    out = {}
    try:
        for key in keys:
            k = gguf_find_key(g, key.encode())
            out[key] = bool(k >= 0 and gguf_get_kv_type(g, k) == GGUF_TYPE_BOOL
                            and gguf_get_val_bool(g, k))
        return out
    finally:
        gguf_free(g)


# ---- writing metadata ----------------------------------------------------------------

cdef dict _GGUF_ARRAY_TYPES = {
    np.dtype(np.uint8): GGUF_TYPE_UINT8, np.dtype(np.int8): GGUF_TYPE_INT8,
    np.dtype(np.uint16): GGUF_TYPE_UINT16, np.dtype(np.int16): GGUF_TYPE_INT16,
    np.dtype(np.uint32): GGUF_TYPE_UINT32, np.dtype(np.int32): GGUF_TYPE_INT32,
    np.dtype(np.float32): GGUF_TYPE_FLOAT32, np.dtype(np.uint64): GGUF_TYPE_UINT64,
    np.dtype(np.int64): GGUF_TYPE_INT64, np.dtype(np.float64): GGUF_TYPE_FLOAT64,
    np.dtype(np.bool_): GGUF_TYPE_BOOL,
}


cdef int fill_gguf(gguf_context *g, dict metadata) except -1:
    """Write ``metadata`` (Python or NumPy values) as GGUF key/values into ``g``."""
    cdef const char **strs
    cdef const unsigned char[::1] raw
    for key, value in metadata.items():
        bkey = key.encode()
        if isinstance(value, (bool, np.bool_)):
            gguf_set_val_bool(g, bkey, bool(value))
        elif isinstance(value, str):
            gguf_set_val_str(g, bkey, value.encode())
        elif isinstance(value, np.generic):
            _set_scalar(g, bkey, value)
        elif isinstance(value, int):
            # llama.cpp reads most hyperparameters as uint32.
            if 0 <= value < 2**32:
                gguf_set_val_u32(g, bkey, value)
            elif value >= 0:
                gguf_set_val_u64(g, bkey, value)
            elif value >= -2**31:
                gguf_set_val_i32(g, bkey, value)
            else:
                gguf_set_val_i64(g, bkey, value)
        elif isinstance(value, float):
            gguf_set_val_f32(g, bkey, value)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            encoded = [v.encode() for v in value]
            strs = <const char **>malloc(max(1, len(encoded)) * sizeof(char *))
            try:
                for i, b in enumerate(encoded):
                    strs[i] = b
                gguf_set_arr_str(g, bkey, strs, len(encoded))
            finally:
                free(strs)
        else:
            arr = np.ascontiguousarray(value)
            if arr.dtype == np.int64 and isinstance(value, (list, tuple)):
                arr = arr.astype(np.int32)
            elif arr.dtype == np.float64 and isinstance(value, (list, tuple)):
                arr = arr.astype(np.float32)
            try:
                t = _GGUF_ARRAY_TYPES[arr.dtype]
            except KeyError:
                raise TypeError(f"metadata[{key!r}]: unsupported type {type(value).__name__}") from None
            raw = arr.reshape(-1).view(np.uint8) if arr.size else np.zeros(1, np.uint8)
            gguf_set_arr_data(g, bkey, t, &raw[0], arr.size)

    return 0

cdef _set_scalar(gguf_context *g, bytes bkey, value):
    dt = value.dtype
    if dt == np.uint32:
        gguf_set_val_u32(g, bkey, value)
    elif dt == np.int32:
        gguf_set_val_i32(g, bkey, value)
    elif dt == np.uint64:
        gguf_set_val_u64(g, bkey, value)
    elif dt == np.int64:
        gguf_set_val_i64(g, bkey, value)
    elif dt == np.float32:
        gguf_set_val_f32(g, bkey, value)
    elif dt == np.float64:
        gguf_set_val_f64(g, bkey, value)
    else:
        raise TypeError(f"metadata scalar of dtype {dt} is not supported")
