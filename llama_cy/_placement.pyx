"""Where a model's weights go: llama.cpp's tensor buffer-type overrides (llama-server's
``-ot``, ``--cpu-moe``, ``--n-cpu-moe``, ``--n-cpu-ffn``) checked and resolved before a
load, and each weight's buffer type read back after one.

The loader compiles every pattern with ``std::regex`` (ECMAScript) and searches each
tensor's name with it, first match winning; a pattern it cannot compile would throw from
inside the load, so patterns are compiled here first, by the same library.
"""

from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free
from libcpp.string cimport string
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from llama_cy._c cimport llama as c
from llama_cy._c.ggml_backend cimport (
    ggml_backend_buffer_type_t, ggml_backend_buft_name, ggml_backend_dev_buffer_type,
    ggml_backend_dev_count, ggml_backend_dev_get,
)

cdef extern from *:
    """
    #include <regex>
    #include <string>
    #include <utility>
    #include <vector>
    #include "ggml.h"
    #include "ggml-backend.h"
    #include "llama.h"

    // Exported by libllama for llama.cpp's own tools (src/llama-model.h), not in llama.h.
    const std::vector<std::pair<std::string, struct ggml_tensor *>> &
    llama_internal_get_tensor_map(const struct llama_model * model);

    // std::regex's complaint about pattern, or "" where the loader can compile it.
    static std::string lcy_regex_error(const std::string &pattern) {
        try {
            std::regex compiled(pattern);
            return "";
        } catch (const std::exception &e) {
            return std::string(e.what()).empty() ? "invalid pattern" : e.what();
        }
    }

    // Each weight's name and the type of the buffer that holds it ("" if none).
    static std::vector<std::pair<std::string, std::string>> lcy_tensor_buffers(
            const struct llama_model *model) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto &entry : llama_internal_get_tensor_map(model)) {
            const ggml_backend_buffer_t buffer = entry.second->buffer;
            out.emplace_back(entry.first, buffer ? ggml_backend_buffer_name(buffer) : "");
        }
        return out;
    }
    """
    string lcy_regex_error(const string &pattern) nogil
    vector[pair[string, string]] lcy_tensor_buffers(const c.llama_model *model) nogil


#: llama-server's patterns (common/common.h): the experts' and the dense FFN's weights.
FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."


def buffer_types():
    """The names ``tensor_overrides`` may place weights in: each device's buffer type
    (``CPU``, ``CUDA0``, an RPC server's, ...), as llama-server's ``-ot`` lists them."""
    cdef size_t i
    cdef ggml_backend_buffer_type_t buft
    out = {}
    for i in range(ggml_backend_dev_count()):
        buft = ggml_backend_dev_buffer_type(ggml_backend_dev_get(i))
        if buft != NULL:
            out[ggml_backend_buft_name(buft).decode()] = <uintptr_t>buft
    return out


def check_pattern(str pattern):
    """Raise ValueError if llama.cpp's loader cannot compile ``pattern``."""
    cdef string error = lcy_regex_error(pattern.encode())
    if not error.empty():
        raise ValueError(f"tensor override pattern {pattern!r}: {error.decode(errors='replace')}")


def n_cpu_overrides(int n, str ffn_regex):
    """``--n-cpu-moe N`` / ``--n-cpu-ffn N``: the first ``n`` layers' weights on the CPU."""
    if n < 0:
        raise ValueError(f"the number of layers must be >= 0, not {n}")
    return [(f"blk\\.{i}{ffn_regex}", "CPU") for i in range(n)]


cdef class TensorOverrides:
    """``[(pattern, buffer type name), ...]`` as the NULL-terminated array
    ``llama_model_params.tensor_buft_overrides`` points to; it lives as long as this."""

    def __cinit__(self, overrides):
        self.array = NULL
        self._patterns = []
        items = list(overrides)
        if len(items) > c.llama_max_tensor_buft_overrides():
            raise ValueError(f"at most {c.llama_max_tensor_buft_overrides()} tensor overrides")
        types = buffer_types()
        for item in items:
            try:
                pattern, name = item
            except (TypeError, ValueError):
                raise TypeError("tensor_overrides takes (pattern, buffer type) pairs") from None
            if not isinstance(pattern, str) or not isinstance(name, str):
                raise TypeError("tensor_overrides takes (pattern, buffer type) pairs of str")
            if name not in types:
                raise ValueError(f"unknown buffer type {name!r}; available: "
                                 f"{', '.join(sorted(types))}")
            check_pattern(pattern)
            self._patterns.append((pattern.encode(), types[name]))
        self.array = <c.llama_model_tensor_buft_override *>calloc(
            len(self._patterns) + 1, sizeof(c.llama_model_tensor_buft_override))
        if self.array == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        for i, (bpattern, address) in enumerate(self._patterns):
            self.array[i].pattern = <const char *>bpattern
            self.array[i].buft = <ggml_backend_buffer_type_t><uintptr_t>address

    def __dealloc__(self):
        free(self.array)

    def __len__(self):
        return len(self._patterns)


def tensor_buffers(size_t model_address):
    """``{weight name: buffer type}`` of the ``llama_model *`` at ``model_address``
    (:attr:`LlamaModel.tensor_buffers` passes its own, open model)."""
    cdef vector[pair[string, string]] rows
    with nogil:
        rows = lcy_tensor_buffers(<const c.llama_model *>model_address)
    return {row.first.decode(): row.second.decode() for row in rows}
