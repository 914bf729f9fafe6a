from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport int32_t

from llama_cy._c.ggml cimport ggml_abort_callback, ggml_threadpool_t
from llama_cy._c.llama cimport llama_context, llama_memory_t
from llama_cy._batch cimport LlamaBatch
from llama_cy._model cimport LlamaModel
from llama_cy._view cimport ViewOwner


# The abort callback llama.cpp calls: llama_cy's own flag first, then the caller's.
ctypedef struct AbortChain:
    volatile int *flag
    ggml_abort_callback user
    void *user_data


cdef class LlamaContext(ViewOwner):
    cdef llama_context *ptr
    cdef llama_memory_t mem
    cdef readonly LlamaModel model
    # A draft context's target, whose hidden states it reads (llama.cpp's ctx_other).
    cdef readonly LlamaContext ctx_other
    cdef PyThread_type_lock _lock
    cdef unsigned long _lock_owner
    cdef readonly int n_ctx
    cdef readonly int n_batch
    cdef readonly int n_ubatch
    cdef readonly int n_seq_max
    cdef readonly int n_ctx_seq
    cdef readonly int n_vocab
    cdef readonly int n_embd
    cdef bint _embeddings
    # Rows of the last decode's outputs, and the most rows llama.cpp's output buffer
    # has held: a decode asking for more reallocates that buffer under live views.
    cdef int _n_outputs
    cdef int _output_capacity
    # Set by Ctrl-C (SIGINT) or abort() from another thread; read by llama.cpp's
    # abort callback between graph nodes.
    cdef volatile int _abort
    cdef AbortChain _abort_chain
    # The caller's C callbacks (cb_eval, abort_callback: ctypes functions), held alive.
    cdef tuple _c_callbacks
    # LoRA adapters set on this context -> scale; holding them keeps them alive.
    cdef dict _loras
    # Persistent threadpools (generation, batch), as llama.cpp's own tools attach.
    cdef ggml_threadpool_t _tp
    cdef ggml_threadpool_t _tp_batch
    # Where the pools' threads run (llama_cy.CpuParams or None: anywhere).
    cdef object _cpu_params
    cdef object _cpu_params_batch
    # Pools replaced by set_n_threads (addresses): freed with the context.
    cdef list _retired
    # Backend sampler chains by sequence id (llama_set_sampler): held, so alive, while
    # attached. A change grows llama.cpp's output buffer at the next decode.
    cdef dict _samplers
    # Made on a vocab_only model: llama.cpp gives it no memory, backends or outputs.
    cdef readonly bint vocab_only
    cdef bint _swa_full
    cdef bint _eagle3
    cdef bint _samplers_changed

    cdef int _check_seq(self, int seq_id, bint allow_all) except -1
    cdef int _check_embeddings_output(self) except -1
    cdef int _ensure_weights(self) except -1
    cdef int _lock_acquire(self) except -1
    cdef size_t _write_state_file(self, target, tokens, int seq_id, path) except 0
    cdef void _lock_release(self) noexcept
    cdef void _dispose(self) noexcept
    cdef _run(self, LlamaBatch batch, bint encoder)
    cdef int _apply_loras(self, dict loras) except -1
    cdef void _release_loras(self) noexcept
    cdef int _attach_threadpools(self, int n_threads, int n_threads_batch) except -1
    cdef void _pause_threadpools(self) noexcept nogil
    cdef void _free_threadpools(self) noexcept
    cdef void _release_samplers(self) noexcept
    cdef int _check_output(self, int32_t i) except -1
    cdef int _check_sampled(self) except -1
    cdef object _sampled_floats(self, int32_t i, bint probs)
