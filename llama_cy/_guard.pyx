"""The last line behind the checks: a GGML_ASSERT during a model load or a context's
creation becomes a failed call instead of a dead process.

llama.cpp checks a model file's hyperparameters with ``GGML_ASSERT``, which calls
``ggml_abort``, which calls ``abort()``. The loader and ``llama_init_from_model`` catch
``std::exception`` and return NULL. So while this thread is inside one of those two calls,
ggml's abort callback throws: the assert unwinds into llama.cpp's own catch, which frees
what it had built, and the caller sees NULL as for any other bad file. Anywhere else the
callback only prints, and ggml aborts as it always has (a decode's asserts run on worker
threads, and llama_decode catches nothing: those are prevented by checks before the call).
The known asserts are still checked before the call (see README, "Guarded asserts").
"""

from libc.stddef cimport size_t

from llama_cy._c.ggml cimport ggml_set_abort_callback, ggml_abort_callback_t
from llama_cy._c.gguf cimport gguf_context
from llama_cy._c.llama cimport (
    llama_context, llama_context_params, llama_model, llama_model_params,
    llama_model_set_tensor_data_t,
)

cdef extern from *:
    """
    #include <cstdio>
    #include <stdexcept>
    #include "llama.h"

    static thread_local int llama_cy_guard_depth = 0;
    static thread_local char llama_cy_guard_message[1024];

    static void llama_cy_on_abort(const char *message) {
        if (llama_cy_guard_depth > 0) {
            std::snprintf(llama_cy_guard_message, sizeof llama_cy_guard_message, "%s", message);
            throw std::runtime_error(message);
        }
        std::fprintf(stderr, "%s\\n", message);
        std::fflush(stderr);
    }

    // Runs call() with this thread's asserts thrown; what ended it (an assert, or a
    // C++ exception llama.cpp let through) is kept for last_abort().
    template <class T, class F> static T *llama_cy_guarded(F call) {
        T *result = nullptr;
        llama_cy_guard_message[0] = '\\0';
        ++llama_cy_guard_depth;
        try {
            result = call();
        } catch (const std::exception &e) {
            std::snprintf(llama_cy_guard_message, sizeof llama_cy_guard_message, "%s", e.what());
        }
        --llama_cy_guard_depth;
        return result;
    }

    static llama_model *llama_cy_load_model(const char **paths, size_t n, llama_model_params params) {
        return llama_cy_guarded<llama_model>([&] {
            return n == 1 ? llama_model_load_from_file(paths[0], params)
                          : llama_model_load_from_splits(paths, n, params);
        });
    }

    static llama_model *llama_cy_init_from_user(gguf_context *meta,
            llama_model_set_tensor_data_t set_data, void *ud, llama_model_params params) {
        return llama_cy_guarded<llama_model>(
            [&] { return llama_model_init_from_user(meta, set_data, ud, params); });
    }

    static llama_context *llama_cy_init_context(llama_model *model, llama_context_params params) {
        return llama_cy_guarded<llama_context>(
            [&] { return llama_init_from_model(model, params); });
    }
    """
    void llama_cy_on_abort(const char *message) noexcept
    llama_model *llama_cy_load_model(
        const char **paths, size_t n, llama_model_params params) noexcept nogil
    llama_model *llama_cy_init_from_user(
        gguf_context *meta, llama_model_set_tensor_data_t set_data, void *ud,
        llama_model_params params) noexcept
    llama_context *llama_cy_init_context(
        llama_model *model, llama_context_params params) noexcept nogil
    char llama_cy_guard_message[1024]


ggml_set_abort_callback(<ggml_abort_callback_t>llama_cy_on_abort)


cdef llama_model *load_model(const char **paths, size_t n, llama_model_params params) noexcept nogil:
    """``llama_model_load_from_file`` (n == 1) or ``_from_splits``, asserts turned to NULL."""
    return llama_cy_load_model(paths, n, params)


cdef llama_model *init_from_user(gguf_context *meta, llama_model_set_tensor_data_t set_data,
                                 void *ud, llama_model_params params) noexcept:
    """``llama_model_init_from_user``, asserts turned to NULL (the GIL held: ``set_data``
    calls Python)."""
    return llama_cy_init_from_user(meta, set_data, ud, params)


cdef llama_context *init_context(llama_model *model, llama_context_params params) noexcept nogil:
    """``llama_init_from_model``, asserts turned to NULL."""
    return llama_cy_init_context(model, params)


cdef str last_abort():
    """The assert that ended this thread's last guarded call, or ``""``."""
    return llama_cy_guard_message.decode("utf-8", "replace")
