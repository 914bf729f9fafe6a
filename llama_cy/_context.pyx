"""LlamaContext: the state of inference on one model (``llama_context``).

Thread model: a model may be shared by any number of contexts on any threads; one
context is used by one thread at a time. ``decode``/``encode`` and the other calls
that touch the context's state take its lock, so a second thread waits (with the GIL
released) instead of corrupting it.
"""

import logging
import os
import struct
import threading

cimport cython

import numpy as np

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.pythread cimport (
    PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock, PyThread_release_lock,
    NOWAIT_LOCK, WAIT_LOCK, PyThread_get_thread_ident,
)
from libc.stdbool cimport bool as cbool
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.stdlib cimport malloc, free

from llama_cy._c cimport llama as c
from llama_cy._c.ggml cimport (
    ggml_threadpool_t, ggml_threadpool_params, ggml_abort_callback,
    ggml_threadpool_params_default, ggml_threadpool_params_match, ggml_sched_priority,
)
from llama_cy._c.ggml_backend cimport (
    ggml_backend_reg_by_name, ggml_backend_reg_get_proc_address, ggml_backend_sched_eval_callback,
)
from llama_cy._adapter cimport LoraAdapter
from llama_cy._batch cimport LlamaBatch
from llama_cy._context_params cimport (
    _check_k_blocks, _check_threads, _context_params, pooling_name,
)
from llama_cy._guard cimport init_context, last_abort
from llama_cy._handle cimport Handle
from llama_cy._model cimport LlamaModel
from llama_cy._sigint cimport interrupt_begin, interrupt_deliver, interrupt_end, lcy_sigint_saved
from llama_cy._view cimport ViewOwner, array_view

from llama_cy.errors import (
    BusyError, ClosedError, ContextCreationError, EncodeError, InvalidBatchError, LlamaError,
    StateError, call_error, decode_error,
)
from llama_cy.cpu_params import CpuParams
from llama_cy.perf import ContextPerf


# ggml's threadpool functions live in the CPU backend plugin (GGML_BACKEND_DL).
ctypedef ggml_threadpool_t (*_tp_new_t)(ggml_threadpool_params *) noexcept nogil
ctypedef void (*_tp_free_t)(ggml_threadpool_t) noexcept nogil
cdef _tp_new_t _tp_new = <_tp_new_t>ggml_backend_reg_get_proc_address(
    ggml_backend_reg_by_name(b"CPU"), b"ggml_threadpool_new")
cdef _tp_free_t _tp_free = <_tp_free_t>ggml_backend_reg_get_proc_address(
    ggml_backend_reg_by_name(b"CPU"), b"ggml_threadpool_free")

cdef extern from "_threadpool_shim.h" nogil:
    void *lcy_sibling_symbol(const void *known, const char *name)

# Pausing stops a pool's workers from spinning for the next graph: other compute on the
# same cores (a multimodal projector's encode) runs at full speed meanwhile. A paused
# pool resumes by itself at its next graph.
cdef _tp_free_t _tp_pause = <_tp_free_t>lcy_sibling_symbol(
    <const void *>_tp_new, b"ggml_threadpool_pause")

cdef cbool _abort_callback(void *data) noexcept nogil:
    return (<volatile int *>data)[0] != 0


cdef cbool _abort_chained(void *data) noexcept nogil:
    cdef AbortChain *chain = <AbortChain *>data
    return chain.flag[0] != 0 or chain.user(chain.user_data)


def _c_function(value, str what, int n_args):
    """The address of a ctypes function made by ``CFUNCTYPE(c_bool, ...)`` with
    llama.cpp's signature for ``what`` (checked: llama.cpp calls it as such)."""
    import ctypes
    if not isinstance(value, ctypes._CFuncPtr):
        raise TypeError(f"{what} must be a ctypes function (ctypes.CFUNCTYPE(ctypes.c_bool, "
                        f"...)(f)), not {type(value).__name__}")
    if value.restype is not ctypes.c_bool or len(value.argtypes or ()) != n_args:
        raise TypeError(f"{what}: llama.cpp calls it with {n_args} arguments and reads a "
                        "c_bool; this ctypes function's prototype differs")
    address = ctypes.cast(value, ctypes.c_void_p).value
    if not address:
        raise ValueError(f"{what} is a NULL function pointer")
    return address


def _c_data(value, str what):
    """``cb_eval_user_data`` / ``abort_callback_data``: an opaque pointer llama.cpp hands
    back to the callback (an address, a ctypes pointer or array, or None)."""
    import ctypes
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64:
        return value
    if isinstance(value, (ctypes.c_void_p, ctypes._Pointer, ctypes.Array)):
        return ctypes.cast(value, ctypes.c_void_p).value or 0
    raise TypeError(f"{what} must be an address (int), a ctypes pointer or None, "
                    f"not {type(value).__name__}")


_log = logging.getLogger("llama_cy")

# llama-context.cpp's io_magic: the head that llama_state_seq_set_data expects before a
# sequence's state (a sequence file holds the state without it).
cdef uint32_t _SEQ_IO_MAGIC = 0xaf143cd8


def _read_state_file(path, uint32_t magic, uint32_t version, size_t capacity, size_t head):
    """A session or sequence file read whole and checked before llama.cpp sees it:
    ``(tokens, buf)``, the state in ``buf`` after ``head`` free bytes. llama.cpp's own
    file loaders read past the end of a truncated file unchecked and then abort
    (``GGML_ASSERT(nread <= state_size)``); from a buffer, a short state is an error."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise StateError(f"state file not found: {p!r}")
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header = f.read(12)
        if len(header) < 12:
            raise StateError(f"not a llama.cpp state file: {size} bytes, shorter than its header")
        got_magic, got_version, n_tokens = struct.unpack("=III", header)
        if got_magic != magic or got_version != version:
            raise StateError(
                f"not a state file of this llama.cpp: magic {got_magic:08x} version {got_version}"
                f" (expected {magic:08x} version {version})")
        if n_tokens > capacity:
            raise StateError(f"the file holds {n_tokens} tokens, more than the context's {capacity}")
        n_state = size - 12 - 4 * n_tokens
        if n_state <= 0:
            raise StateError(f"the file is truncated: {size} bytes cannot hold {n_tokens} tokens and a state")
        tokens = np.frombuffer(f.read(4 * n_tokens), dtype=np.int32).copy()
        buf = bytearray(head + n_state)
        if f.readinto(memoryview(buf)[head:]) != n_state:
            raise StateError("the file changed while it was read")
    return tokens, buf


def _save_atomically(path, save):
    """``save(target)`` writes the file under a temporary name in the same folder, then
    it is renamed into place: a save that fails (a full disk) leaves no partial file
    under ``path``. A path that is not a regular file (a device, a pipe) is written
    directly."""
    p = os.fsdecode(os.fspath(path))
    if os.path.exists(p) and not os.path.isfile(p):
        return save(p)
    folder, name = os.path.split(p)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        out = save(tmp)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return out


cdef int _threadpool_params(ggml_threadpool_params *params, int n_threads, cpu) except -1:
    """ggml_threadpool_params_from_cpu_params: ggml's defaults, placed as ``cpu`` says."""
    params[0] = ggml_threadpool_params_default(n_threads)
    if cpu is None:
        return 0
    for i in (cpu.cpumask or ()):
        params.cpumask[i] = True
    params.prio = <ggml_sched_priority><int>cpu.priority
    params.poll = cpu.poll
    params.strict_cpu = cpu.strict_cpu
    return 0


#: llama.cpp's LLAMA_STATE_SEQ_FLAGS_*: the parts of a sequence's state that cannot be
#: rolled back (SWA cache, recurrent state); tensor data kept on the device.
STATE_SEQ_FLAGS_PARTIAL_ONLY = 1
STATE_SEQ_FLAGS_ON_DEVICE = 2


cdef int _check_state_flags(uint32_t flags) except -1:
    if flags & ~<uint32_t>(STATE_SEQ_FLAGS_PARTIAL_ONLY | STATE_SEQ_FLAGS_ON_DEVICE):
        raise ValueError(f"unknown state flags {flags:#x}")
    return 0


@cython.no_gc_clear  # __dealloc__ releases the model it points to
cdef class LlamaContext(ViewOwner):
    """Inference state on a model: KV cache, output buffers, threads.

    Arguments keep ``llama_context_params``' names; ``None`` means llama.cpp's default.
    ``logits(i)``, ``all_logits()``, ``embeddings(i)`` and ``sequence_embeddings(s)``
    are read-only float32 NumPy views of llama.cpp's own output buffer, made in O(1):
    they hold the results of the latest ``decode`` and are overwritten by the next one
    (copy a view to keep it). A decode that would make llama.cpp reallocate that buffer
    while views are alive raises :class:`~llama_cy.errors.LlamaError` instead.
    ``ctx_other`` makes this a draft context for that (target) context, whose hidden
    states it reads, as llama.cpp's speculative decoding makes them; its size is the
    target's. With ``ctx_type="mtp"`` it is an MTP context: the target's own model,
    loaded with ``load_mtp=True``, drafting with its NextN layers.
    ``cb_eval`` and ``abort_callback`` are llama.cpp's C callbacks, as ctypes functions
    with its prototypes (``CFUNCTYPE(c_bool, c_void_p, c_bool, c_void_p)`` and
    ``CFUNCTYPE(c_bool, c_void_p)``), with their opaque data: llama.cpp calls them from
    its compute threads (they must not call into this context); the context holds
    them. ``abort()`` and Ctrl-C still abort:
    ``abort_callback`` is asked after them.
    """

    def __cinit__(self, LlamaModel model not None, *, n_ctx=4096, n_batch=512, n_ubatch=None,
                  n_seq_max=1, n_threads=None, n_threads_batch=None, rope_scaling_type=None,
                  pooling_type=None, attention_type=None, flash_attn=None,
                  rope_freq_base=None, rope_freq_scale=None, yarn_ext_factor=None,
                  yarn_attn_factor=None, yarn_beta_fast=None, yarn_beta_slow=None,
                  yarn_orig_ctx=None, type_k=None, type_v=None, bint embeddings=False,
                  offload_kqv=None, swa_full=None, kv_unified=None, bint no_perf=False,
                  op_offload=None, samplers=None, n_outputs_max=None, n_outputs_max_per_seq=None,
                  cpu_params=None, cpu_params_batch=None, str ctx_type="default",
                  LlamaContext ctx_other=None, cb_eval=None, cb_eval_user_data=None,
                  abort_callback=None, abort_callback_data=None):
        self.ptr = NULL
        self._samplers = {}
        self._samplers_changed = False
        self._lock = NULL
        self._lock_owner = 0
        self._tp = NULL
        self._tp_batch = NULL
        self._retired = []
        for what, value in (("cpu_params", cpu_params), ("cpu_params_batch", cpu_params_batch)):
            if value is not None and not isinstance(value, CpuParams):
                raise TypeError(f"{what} must be a llama_cy.CpuParams or None")
        self._cpu_params = cpu_params
        # As llama.cpp's tools: the batch pool takes the generation pool's placement
        # unless told otherwise.
        self._cpu_params_batch = cpu_params if cpu_params_batch is None else cpu_params_batch
        model._ensure_alive()
        self.vocab_only = model.vocab_only
        if self.vocab_only and samplers:
            raise ContextCreationError("samplers: the model was loaded with vocab_only=True")
        cdef c.llama_context_params p = _context_params(
            n_ctx, n_batch, n_ubatch, n_seq_max, n_threads, n_threads_batch, rope_scaling_type,
            pooling_type, attention_type, flash_attn, rope_freq_base, rope_freq_scale,
            yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow, yarn_orig_ctx,
            type_k, type_v, embeddings, offload_kqv, swa_full, kv_unified, no_perf, op_offload,
            n_outputs_max, n_outputs_max_per_seq)
        self._swa_full = p.swa_full
        if ctx_type not in ("default", "mtp"):
            raise ValueError(f"ctx_type must be 'default' or 'mtp', not {ctx_type!r}")
        if ctx_type == "mtp":
            # The target model's NextN layers, fed the target context's hidden states.
            if ctx_other is None or ctx_other.model is not model:
                raise ContextCreationError("ctx_type='mtp': ctx_other must be a context of "
                                           "this same model")
            if not model.mtp:
                raise ContextCreationError(
                    "ctx_type='mtp': the model's MTP layers were not loaded "
                    "(LlamaModel.load(load_mtp=True)); it has "
                    f"{c.llama_model_n_layer_nextn(model.ptr)} NextN layers")
            p.ctx_type = c.LLAMA_CONTEXT_TYPE_MTP
        self._eagle3 = model.meta_val("general.architecture") == "eagle3"
        if ctx_other is None and self._eagle3:
            # Its decoder's input is the g-embeddings made of the target's features
            # (eagle3.cpp); alone, a token batch leaves them unset and it decodes
            # whatever that memory held.
            raise ContextCreationError(
                "an EAGLE3 model is a draft: its context reads the target's hidden states "
                "(ctx_other=the target's context, as Speculator(target, 'draft-eagle3', "
                "draft_model=...) makes it)")
        if ctx_other is not None:
            # As common_speculative_init_from_params makes a draft context.
            ctx_other._ensure_alive()
            p.ctx_other = ctx_other.ptr
            p.n_ctx = ctx_other.n_ctx
            p.n_rs_seq = 0
        _check_k_blocks(model, &p)
        p.abort_callback = _abort_callback
        p.abort_callback_data = <void *>&self._abort
        self._abort = 0
        self._c_callbacks = (cb_eval, abort_callback)
        if cb_eval is not None:
            p.cb_eval = <ggml_backend_sched_eval_callback><size_t>_c_function(
                cb_eval, "cb_eval", 3)
            p.cb_eval_user_data = <void *><size_t>_c_data(cb_eval_user_data, "cb_eval_user_data")
        if abort_callback is not None:
            self._abort_chain.flag = &self._abort
            self._abort_chain.user = <ggml_abort_callback><size_t>_c_function(
                abort_callback, "abort_callback", 1)
            self._abort_chain.user_data = <void *><size_t>_c_data(
                abort_callback_data, "abort_callback_data")
            p.abort_callback = _abort_chained
            p.abort_callback_data = <void *>&self._abort_chain

        cdef c.llama_sampler_seq_config *configs = NULL
        configs_list = []
        if samplers:
            from llama_cy._sampler import _backend_configs
            configs_list = _backend_configs(samplers, n_seq_max)
            configs = <c.llama_sampler_seq_config *>malloc(
                len(configs_list) * sizeof(c.llama_sampler_seq_config))
            if configs == NULL:
                raise MemoryError()
            for k, (seq_id, _, address) in enumerate(configs_list):
                configs[k].seq_id = seq_id
                configs[k].sampler = <c.llama_sampler *><size_t>address
            p.samplers = configs
            p.n_samplers = len(configs_list)
        try:
            with nogil:
                self.ptr = init_context(model.ptr, p)
        finally:
            free(configs)
        if self.ptr == NULL:
            raise ContextCreationError(
                f"failed to create a context (n_ctx={n_ctx}, n_batch={n_batch}, "
                f"n_seq_max={n_seq_max}){': ' + last_abort() if last_abort() else ''}; "
                "see the 'llama_cy' log")
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            c.llama_free(self.ptr)
            self.ptr = NULL
            raise MemoryError()
        self.model = model
        model._acquire()
        if ctx_other is not None:
            self.ctx_other = ctx_other
            ctx_other._acquire()  # freed after this context, which reads it
        self._closed = False
        if not self.vocab_only:  # llama.cpp made no backends to run threadpools on
            self._attach_threadpools(c.llama_n_threads(self.ptr), c.llama_n_threads_batch(self.ptr))
        self.mem = c.llama_get_memory(self.ptr)
        self.n_ctx = c.llama_n_ctx(self.ptr)
        self.n_batch = c.llama_n_batch(self.ptr)
        self.n_ubatch = c.llama_n_ubatch(self.ptr)
        self.n_seq_max = c.llama_n_seq_max(self.ptr)
        self.n_ctx_seq = c.llama_n_ctx_seq(self.ptr)
        self.n_vocab = model.n_vocab
        self.n_embd = c.llama_model_n_embd_out(model.ptr)
        self._embeddings = embeddings
        self._n_outputs = 0
        self._loras = {}
        for seq_id, sampler, _ in configs_list:
            (<Handle>sampler)._acquire()  # alive while the context runs it
            self._samplers[seq_id] = sampler
        # llama.cpp sizes the output buffer for n_seq_max rows at creation.
        self._output_capacity = self.n_seq_max

    def __dealloc__(self):
        self._dispose()
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _dispose(self) noexcept:
        # A thread holding the lock (a decode) is a user: close() gets here after it.
        if self.ptr != NULL:
            c.llama_free(self.ptr)
            self.ptr = NULL
            self.model._release()
            if self.ctx_other is not None:
                self.ctx_other._release()
            self._release_loras()
            self._release_samplers()
        self._free_threadpools()

    cdef void _release_samplers(self) noexcept:
        cdef Handle s
        if self._samplers:
            for s in self._samplers.values():
                s._release()
        self._samplers = {}

    cdef void _release_loras(self) noexcept:
        cdef LoraAdapter a
        if self._loras:
            for a in self._loras:
                a._release()
        self._loras = None

    cdef int _attach_threadpools(self, int n_threads, int n_threads_batch) except -1:
        """Give the context persistent threadpools (the caller holds the lock or owns it).

        Without them ggml starts and joins its worker threads on every decode, which is
        slower and, on a busy machine, erratic; llama.cpp's own tools attach them too.
        """
        if _tp_new == NULL or _tp_free == NULL:
            return 0  # a build whose CPU backend lacks them: llama.cpp's per-decode threads
        cdef ggml_threadpool_params params, params_batch
        _threadpool_params(&params, n_threads, self._cpu_params)
        _threadpool_params(&params_batch, n_threads_batch, self._cpu_params_batch)
        cdef ggml_threadpool_t tp_batch = NULL
        cdef ggml_threadpool_t tp
        # common_threadpools::init: one pool unless the two differ; then the batch pool
        # runs first and the generation pool starts paused.
        if not ggml_threadpool_params_match(&params, &params_batch):
            tp_batch = _tp_new(&params_batch)
            if tp_batch == NULL:
                raise MemoryError("ggml_threadpool_new failed")
            params.paused = True
        tp = _tp_new(&params)
        if tp == NULL:
            if tp_batch != NULL:
                _tp_free(tp_batch)
            raise MemoryError("ggml_threadpool_new failed")
        if tp_batch == NULL:
            tp_batch = tp
        c.llama_attach_threadpool(self.ptr, tp, tp_batch)
        # The CPU backend still points at the pools it ran last, and pauses them when the
        # next decode switches (AddressSanitizer caught that read after a free): retire
        # them until the context goes instead of freeing them now.
        if self._tp_batch != NULL and self._tp_batch != self._tp:
            self._retired.append(<size_t>self._tp_batch)
        if self._tp != NULL:
            self._retired.append(<size_t>self._tp)
        self._tp, self._tp_batch = tp, tp_batch
        return 0

    cdef void _pause_threadpools(self) noexcept nogil:
        """Let this context's pool workers sleep until its next decode (the caller holds
        the lock)."""
        if _tp_pause == NULL:
            return
        if self._tp != NULL:
            _tp_pause(self._tp)
        if self._tp_batch != NULL and self._tp_batch != self._tp:
            _tp_pause(self._tp_batch)

    cdef void _free_threadpools(self) noexcept:
        if self._tp_batch != NULL and self._tp_batch != self._tp:
            _tp_free(self._tp_batch)
        if self._tp != NULL:
            _tp_free(self._tp)
        self._tp = self._tp_batch = NULL
        if self._retired:
            for address in self._retired:
                _tp_free(<ggml_threadpool_t><size_t>address)
        self._retired = []

    cdef int _lock_acquire(self) except -1:
        """Take the context for this thread; its holder counts as a user (see Handle)."""
        cdef unsigned long me = PyThread_get_thread_ident()
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            if self._lock_owner == me:
                # A callback (a Python sampler, a logits processor) reaching back into
                # the context it runs under would wait for itself forever.
                raise BusyError("this context is in use by a call further up this thread's stack")
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)
        if self._closed:
            PyThread_release_lock(self._lock)
            raise ClosedError("the context was closed while waiting for it")
        self._lock_owner = me
        self._n_users += 1
        return 0

    cdef void _lock_release(self) noexcept:
        self._lock_owner = 0
        PyThread_release_lock(self._lock)
        self._release()

    cdef int _ensure_weights(self) except -1:
        """Open, and made on a model with weights (a vocab_only model's context has no
        memory or outputs: llama.cpp would dereference NULL)."""
        self._ensure_alive()
        if self.vocab_only:
            raise LlamaError(
                "this context was made on a vocab_only model: it has no weights, memory or "
                "outputs (it tokenizes only)")
        return 0

    cdef int _check_seq(self, int seq_id, bint allow_all) except -1:
        if allow_all and seq_id == -1:
            return 0
        if seq_id < 0 or seq_id >= self.n_seq_max:
            raise ValueError(f"seq_id {seq_id} is out of range [0, {self.n_seq_max})"
                             + (" (or -1 for all)" if allow_all else ""))
        return 0

    def __repr__(self):
        if self._closed:
            return "<LlamaContext closed>"
        return f"<LlamaContext n_ctx={self.n_ctx} n_batch={self.n_batch} n_seq_max={self.n_seq_max}>"

    # ---- compute ----------------------------------------------------------------

    def decode(self, LlamaBatch batch not None):
        """Run the model on a batch (``llama_decode``), the GIL released until its
        outputs are ready (on a GPU too: llama.cpp's decode only queues the graph there).

        Raises KVCacheFullError (no room in the context), AbortedError (``abort()``),
        KeyboardInterrupt (Ctrl-C, within one graph node), InvalidBatchError (bad
        token id, position or sequence id), or DecodeError.
        """
        self._run(batch, False)

    def encode(self, LlamaBatch batch not None):
        """Run an encoder (``llama_encode``: T5-style models, embeddings)."""
        self._run(batch, True)

    cdef _run(self, LlamaBatch batch, bint encoder):
        global _interrupt_flag
        self._ensure_weights()
        batch._ensure_alive()
        cdef int n_tokens = batch.batch.n_tokens
        if n_tokens == 0:
            raise ValueError("the batch is empty")
        batch._check_raw_counts()
        if encoder and not c.llama_model_has_encoder(self.model.ptr):
            raise EncodeError("llama_encode: this model has no encoder", -1)
        if self._eagle3:
            # Each of its decoder's inputs pairs a token with g-embeddings of the target's
            # features (common_speculative's batches); a LlamaBatch carries one or the
            # other, and the other half would be memory nothing set.
            raise InvalidBatchError(
                "an EAGLE3 draft's context decodes through the Speculator, which pairs "
                "each token with the target's features", -1)
        # llama.cpp asserts (aborts the process) on these instead of returning an error.
        if n_tokens > self.n_batch:
            raise InvalidBatchError(
                f"the batch has {n_tokens} tokens, more than this context's n_batch="
                f"{self.n_batch}: split it, or create the context with a larger n_batch", -1)
        if n_tokens > self.n_ubatch and (encoder or not c.llama_get_causal_attn(self.ptr)):
            raise InvalidBatchError(
                f"the batch has {n_tokens} tokens, more than n_ubatch={self.n_ubatch}: "
                "non-causal attention (an encoder, an embedding model, set_causal_attn(False)) "
                "sees a batch in one micro-batch; create the context with a larger n_ubatch", -1)
        cdef int n_out = batch.batch.n_tokens if self._embeddings else batch._count_outputs()
        if self._samplers_changed and self._n_views > 0:
            raise LlamaError(
                "a backend sampler was attached or removed since the last decode: llama.cpp "
                "reallocates its output buffer under the live logits/sampled views. Drop them "
                "(or copy them) first.")
        if n_out > self._output_capacity and self._n_views > 0:
            raise LlamaError(
                f"this decode needs {n_out} output rows, more than the {self._output_capacity} "
                "llama.cpp has allocated: it would move the buffer under the live logits/"
                "embeddings views. Drop them (or copy them) first.")
        cdef int32_t rc
        cdef bint interruptible = False
        cdef lcy_sigint_saved saved
        self._lock_acquire()
        batch._acquire()  # close() of the batch from another thread waits for this decode
        try:
            self._abort = 0
            # Ctrl-C on the main thread aborts the graph (see _sigint).
            interruptible = interrupt_begin(&self._abort, &saved)
            with nogil:
                if encoder:
                    rc = c.llama_encode(self.ptr, batch.batch)
                else:
                    rc = c.llama_decode(self.ptr, batch.batch)
                # A GPU backend's decode returns once the graph is queued; the wait for
                # it would come at the first read of an output, with the GIL held (every
                # other thread, a server's event loop, stopped for the whole compute).
                c.llama_synchronize(self.ptr)
            if interruptible:
                interrupt_end(&saved)
        finally:
            batch._release()
            self._lock_release()
        if n_out > self._output_capacity:
            self._output_capacity = n_out
        if rc == 0:
            self._samplers_changed = False
        self._n_outputs = n_out if rc == 0 else 0
        if self._abort == 2:
            interrupt_deliver()
        if rc != 0:
            raise decode_error(rc, "llama_encode" if encoder else "llama_decode")

    def abort(self):
        """Stop the running decode (from any thread); it raises AbortedError."""
        self._abort = 1

    def synchronize(self):
        """Wait for pending asynchronous backend work to finish."""
        self._ensure_weights()
        self._lock_acquire()
        try:
            with nogil:
                c.llama_synchronize(self.ptr)
        finally:
            self._lock_release()

    def pause_threadpools(self):
        """Let the threadpool workers sleep until the next decode, which wakes them.

        Between decodes a worker polls for the next graph (``--poll``, by default for
        much longer than a decode takes), holding a CPU: a caller that will not decode
        for a while gives those CPUs back to its other threads."""
        self._ensure_weights()
        self._lock_acquire()
        try:
            self._pause_threadpools()
        finally:
            self._lock_release()

    def warmup(self):
        """Run an empty-ish decode so that the first real one is not slower."""
        self._ensure_weights()
        cdef LlamaBatch b = LlamaBatch(1)
        # The vocab pointer stays valid while this context holds the model, closed or not.
        bos = c.llama_vocab_bos(c.llama_model_get_vocab(self.model.ptr))
        b.add(bos if bos >= 0 else 0, 0, (0,), True)
        self.clear()
        self.decode(b)
        self.clear()
        self.perf_reset()

    # ---- outputs: zero-copy views ---------------------------------------------------

    @property
    def n_outputs(self):
        """Rows of outputs (logits or embeddings) the last decode produced."""
        self._ensure_weights()
        return self._n_outputs

    def logits(self, int32_t i=-1):
        """Logits of batch entry ``i`` (negative: counted from the last output).

        A read-only ``(n_vocab,)`` float32 view of llama.cpp's buffer; see the class
        docstring for how long its contents hold.
        """
        self._ensure_weights()
        if self._n_outputs == 0:
            raise IndexError("no logits: decode a batch with an output flag set first")
        if self._samplers:
            self._check_output(i)
        cdef float *ptr = c.llama_get_logits_ith(self.ptr, i)
        if ptr == NULL:
            raise IndexError(f"batch entry {i} has no logits (set its output flag)")
        return array_view(self, ptr, b"f", sizeof(float), self.n_vocab, -1, True)

    cdef int _check_output(self, int32_t i) except -1:
        """Refuse the raw logits of a row that a backend sampler handled: llama.cpp did
        not copy them (they are a previous decode's, or the sampler's candidates)."""
        if (c.llama_get_sampled_token_ith(self.ptr, i) != c.LLAMA_TOKEN_NULL
                or c.llama_get_sampled_logits_ith(self.ptr, i) != NULL
                or c.llama_get_sampled_probs_ith(self.ptr, i) != NULL):
            raise IndexError(
                f"batch entry {i} was sampled on the backend, so llama.cpp kept no full "
                "logits for it: read sampled_token(), sampled_logits() or "
                "sampled_candidates(), or detach the sequence's sampler")
        return 0

    def all_logits(self):
        """Logits of every output of the last decode: ``(n_outputs, n_vocab)`` view."""
        self._ensure_weights()
        if self._n_outputs == 0:
            raise IndexError("no logits: decode a batch with an output flag set first")
        if self._samplers:
            raise IndexError(
                "all_logits() is not available while backend samplers are attached: their "
                "rows hold no full logits (read logits(i) of the other rows)")
        cdef float *ptr = c.llama_get_logits(self.ptr)
        if ptr == NULL:
            raise IndexError("this context produced no logits")
        return array_view(self, ptr, b"f", sizeof(float), self._n_outputs, self.n_vocab, True)

    def embeddings(self, int32_t i=-1):
        """Embedding of batch entry ``i`` (context created with ``embeddings=True``)."""
        self._ensure_weights()
        if self._n_outputs == 0:
            raise IndexError("no embeddings: decode a batch first")
        cdef float *ptr = c.llama_get_embeddings_ith(self.ptr, i)
        if ptr == NULL:
            raise IndexError(f"batch entry {i} has no embedding (embeddings=True, pooling 'none'?)")
        return array_view(self, ptr, b"f", sizeof(float), self.n_embd, -1, True)

    def sequence_embeddings(self, int32_t seq_id=0):
        """Pooled embedding of a sequence (pooling other than ``none``)."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        if self._n_outputs == 0:
            raise IndexError("no embeddings: decode a batch first")
        cdef float *ptr = c.llama_get_embeddings_seq(self.ptr, seq_id)
        if ptr == NULL:
            raise IndexError(f"no pooled embedding for sequence {seq_id}")
        pooling = c.llama_get_pooling_type(self.ptr)
        n = self.model.n_cls_out if pooling == c.LLAMA_POOLING_TYPE_RANK else self.n_embd
        return array_view(self, ptr, b"f", sizeof(float), max(n, 1), -1, True)

    # ---- backend sampling (llama_set_sampler) ---------------------------------------

    @property
    def samplers(self):
        """The backend sampler chains attached to this context: ``{seq_id: chain}``."""
        self._ensure_weights()
        return dict(self._samplers)

    def set_sampler(self, int seq_id, sampler):
        """Run ``sampler`` (a chain) inside the graph for sequence ``seq_id``; None detaches.

        Each decode then samples that sequence's output rows on the backend that holds
        the output layer: the chain's leading stages that the backend supports run
        there, the rest on the CPU in :meth:`LlamaSampler.sample`, as llama.cpp does. A
        chain is attached once in its life (llama.cpp sets it up once): attach
        ``chain.clone()`` to another sequence or context. Returns llama.cpp's answer
        (False: the context cannot offload samplers, e.g. a tensor-split model).
        """
        from llama_cy._sampler import _set_backend_sampler
        return _set_backend_sampler(self, seq_id, sampler)

    def sampled_token(self, int32_t i=-1):
        """The token a backend sampler picked for batch entry ``i``, or None."""
        self._ensure_weights()
        if self._n_outputs == 0 or not self._samplers:
            return None
        cdef c.llama_token t = c.llama_get_sampled_token_ith(self.ptr, i)
        return None if t == c.LLAMA_TOKEN_NULL else t

    def sampled_probs(self, int32_t i=-1):
        """Probabilities the backend chain computed for entry ``i``'s candidates.

        A read-only float32 view, in the order of :meth:`sampled_candidates`; valid
        until the next decode, like :meth:`logits`. IndexError if the row has none.
        """
        return self._sampled_floats(i, True)

    def sampled_logits(self, int32_t i=-1):
        """Logits the backend chain left for entry ``i`` (its candidates', in their
        order): a read-only float32 view valid until the next decode."""
        return self._sampled_floats(i, False)

    cdef object _sampled_floats(self, int32_t i, bint probs):
        self._check_sampled()
        cdef float *ptr
        cdef uint32_t n
        if probs:
            ptr = c.llama_get_sampled_probs_ith(self.ptr, i)
            n = c.llama_get_sampled_probs_count_ith(self.ptr, i)
        else:
            ptr = c.llama_get_sampled_logits_ith(self.ptr, i)
            n = c.llama_get_sampled_logits_count_ith(self.ptr, i)
        if ptr == NULL or n == 0:
            what = "probabilities" if probs else "logits"
            raise IndexError(f"batch entry {i} has no backend-sampled {what}")
        return array_view(self, ptr, b"f", sizeof(float), n, -1, True)

    def sampled_candidates(self, int32_t i=-1):
        """Token ids the backend chain left for entry ``i`` (a top-k's survivors, say):
        a read-only int32 view valid until the next decode, matching
        :meth:`sampled_logits` element by element."""
        self._check_sampled()
        cdef uint32_t n = c.llama_get_sampled_candidates_count_ith(self.ptr, i)
        if n == 0 and c.llama_get_sampled_logits_ith(self.ptr, i) != NULL:
            # Logits of every token (a chain of temp, penalties...): ids are 0..n_vocab-1.
            n = c.llama_get_sampled_logits_count_ith(self.ptr, i)
        if n == 0:
            raise IndexError(f"batch entry {i} has no backend-sampled candidates")
        cdef const c.llama_token *ptr = c.llama_get_sampled_candidates_ith(self.ptr, i)
        return array_view(self, <void *>ptr, b"i", sizeof(c.llama_token), n, -1, True)

    cdef int _check_sampled(self) except -1:
        self._ensure_weights()
        if self._n_outputs == 0:
            raise IndexError("no outputs: decode a batch with an output flag set first")
        if not self._samplers:
            raise IndexError("no backend sampler is attached: see set_sampler()")
        return 0

    @property
    def address(self):
        """The ``llama_context *`` as an int, for ctypes code (llama-cpp-python's
        ``llama_cpp.llama_cpp``). It stays valid while this object is open."""
        self._ensure_alive()
        return <size_t>self.ptr

    @property
    def pooling_type(self):
        self._ensure_alive()
        return pooling_name(c.llama_get_pooling_type(self.ptr))

    # ---- settings ---------------------------------------------------------------

    @property
    def n_threads(self):
        self._ensure_alive()
        return c.llama_n_threads(self.ptr)

    @property
    def n_threads_batch(self):
        self._ensure_alive()
        return c.llama_n_threads_batch(self.ptr)

    def set_n_threads(self, int32_t n_threads, n_threads_batch=None):
        self._ensure_alive()
        _check_threads("n_threads", n_threads)
        cdef int n_batch_threads = _check_threads(
            "n_threads_batch", n_threads if n_threads_batch is None else n_threads_batch)
        self._lock_acquire()
        try:
            c.llama_set_n_threads(self.ptr, n_threads, n_batch_threads)
            if not self.vocab_only:
                self._attach_threadpools(n_threads, n_batch_threads)
        finally:
            self._lock_release()

    def set_embeddings(self, bint embeddings):
        """Switch embedding extraction on or off for the next decodes. LlamaError if the
        model's graph has no embeddings output (an EAGLE3 draft model, say)."""
        self._ensure_weights()
        if embeddings and not self._embeddings:
            self._check_embeddings_output()
        c.llama_set_embeddings(self.ptr, embeddings)
        if embeddings and not self._embeddings:
            # The output buffer grows to hold embeddings too: treat it as unsized so
            # the next decode with live views is refused rather than moved under them.
            self._output_capacity = 0
        self._embeddings = embeddings

    cdef int _check_embeddings_output(self) except -1:
        """A graph without an embeddings output asserts at the next decode (llama-graph's
        "missing result_norm/result_embd tensor"), where nothing catches it; a small
        context made with embeddings on meets the same assert where _guard turns it into
        NULL, so one is made and freed first."""
        cdef c.llama_context_params p = c.llama_context_default_params()
        p.n_ctx = 256
        p.n_batch = p.n_ubatch = 8
        p.n_seq_max = 1
        p.n_threads = p.n_threads_batch = 1
        p.embeddings = True
        p.pooling_type = c.llama_get_pooling_type(self.ptr)
        cdef c.llama_model *model = self.model.ptr
        cdef c.llama_context *probe
        with nogil:
            probe = init_context(model, p)
        if probe == NULL:
            raise LlamaError(
                "this model gives no embeddings"
                + (f" ({last_abort()})" if last_abort() else ""))
        c.llama_free(probe)
        return 0

    def set_causal_attn(self, bint causal):
        self._ensure_weights()
        c.llama_set_causal_attn(self.ptr, causal)

    @property
    def causal_attn(self):
        self._ensure_weights()
        return c.llama_get_causal_attn(self.ptr)

    # ---- memory (KV cache) ----------------------------------------------------------

    def clear(self, bint data=True):
        """Empty the KV cache of every sequence (a vocab_only context has none)."""
        self._ensure_alive()
        if self.mem == NULL:
            return
        self._lock_acquire()
        c.llama_memory_clear(self.mem, data)
        self._lock_release()

    def seq_rm(self, int seq_id, int p0=-1, int p1=-1):
        """Remove positions ``[p0, p1)`` of a sequence (-1: all sequences / open end)."""
        self._ensure_weights()
        self._check_seq(seq_id, True)
        self._lock_acquire()
        ok = c.llama_memory_seq_rm(self.mem, seq_id, p0, p1)
        self._lock_release()
        return ok

    def seq_cp(self, int src, int dst, int p0=-1, int p1=-1):
        """Make positions ``[p0, p1)`` of ``src`` also belong to ``dst``."""
        self._ensure_weights()
        self._check_seq(src, False)
        self._check_seq(dst, False)
        self._lock_acquire()
        c.llama_memory_seq_cp(self.mem, src, dst, p0, p1)
        self._lock_release()

    def seq_keep(self, int seq_id):
        """Remove every sequence but ``seq_id``."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        self._lock_acquire()
        c.llama_memory_seq_keep(self.mem, seq_id)
        # With one KV stream per sequence, llama.cpp's seq_keep only touches seq_id's own
        # stream; remove the others explicitly.
        for other in range(self.n_seq_max):
            if other != seq_id:
                c.llama_memory_seq_rm(self.mem, other, -1, -1)
        self._lock_release()

    def seq_add(self, int seq_id, int p0, int p1, int delta):
        """Shift positions ``[p0, p1)`` of a sequence by ``delta``."""
        self._ensure_weights()
        # One sequence: llama.cpp's KV cache asserts seq_id >= 0 here (no "all" as in
        # seq_rm), and asserts one position per embedding before it looks at delta.
        self._check_seq(seq_id, False)
        if delta == 0:
            return
        if not c.llama_memory_can_shift(self.mem):
            raise LlamaError("this model's memory cannot shift positions")
        self._lock_acquire()
        c.llama_memory_seq_add(self.mem, seq_id, p0, p1, delta)
        self._lock_release()

    def seq_div(self, int seq_id, int p0, int p1, int d):
        """Integer-divide positions ``[p0, p1)`` of a sequence by ``d``."""
        self._ensure_weights()
        self._check_seq(seq_id, False)  # as seq_add
        if d < 1:
            raise ValueError("d must be >= 1")
        if d == 1:
            return
        if not c.llama_memory_can_shift(self.mem):
            raise LlamaError("this model's memory cannot shift positions")
        self._lock_acquire()
        c.llama_memory_seq_div(self.mem, seq_id, p0, p1, d)
        self._lock_release()

    def seq_pos_min(self, int seq_id):
        """Smallest position of a sequence in the cache, -1 if empty."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        return c.llama_memory_seq_pos_min(self.mem, seq_id)

    def seq_pos_max(self, int seq_id):
        """Largest position of a sequence in the cache, -1 if empty."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        return c.llama_memory_seq_pos_max(self.mem, seq_id)

    @property
    def swa_full(self):
        """Whether the SWA layers keep the whole context (llama.cpp's default), not only
        their window: then a prefix of the cache can be reused without checkpoints."""
        return self._swa_full

    @property
    def can_shift(self):
        self._ensure_weights()
        return c.llama_memory_can_shift(self.mem)

    # ---- state ------------------------------------------------------------------

    def state_get_data(self):
        """The whole context state (KV cache, outputs, RNG) as bytes."""
        self._ensure_weights()
        self._lock_acquire()
        try:
            size = c.llama_state_get_size(self.ptr)
            buf = bytearray(size)
            n = c.llama_state_get_data(self.ptr, <uint8_t *><char *>buf, size)
        finally:
            self._lock_release()
        if n != size:
            raise StateError(f"llama_state_get_data wrote {n} of {size} bytes")
        return bytes(buf)

    def state_set_data(self, data):
        """Restore a state from :meth:`state_get_data` bytes."""
        self._ensure_weights()
        cdef const uint8_t[::1] src = memoryview(data).cast("B")
        if src.shape[0] == 0:
            raise StateError("empty state data")
        # A state starts with the architecture's name (uint32 length, then the bytes).
        # llama.cpp allocates whatever length it reads before comparing, and copies
        # through a NULL pointer for length 0 (UBSan): refuse such headers here.
        cdef size_t name_len = int.from_bytes(bytes(src[:4]), "little") if src.shape[0] >= 4 else 0
        if not 0 < name_len <= 256 or name_len + 4 > <size_t>src.shape[0]:
            raise StateError("not a llama.cpp context state (bad architecture header)")
        self._lock_acquire()
        try:
            n = c.llama_state_set_data(self.ptr, &src[0], src.shape[0])
        finally:
            self._lock_release()
        if n == 0:
            raise StateError("state data rejected by llama.cpp (corrupt, or from another model/context size)")
        self._n_outputs = 0
        return n

    cdef size_t _write_state_file(self, target, tokens, int seq_id, path) except 0:
        """Write the whole state (``seq_id`` -1) or one sequence's, with ``tokens``, to
        ``target``; the bytes written (1 for the whole state: llama.cpp tells no more)."""
        cdef const int32_t[::1] toks = tokens
        cdef bytes bpath = os.fsencode(target)
        cdef size_t n
        self._lock_acquire()
        try:
            if seq_id < 0:
                n = c.llama_state_save_file(self.ptr, bpath, &toks[0] if toks.shape[0] else NULL,
                                            toks.shape[0])
            else:
                n = c.llama_state_seq_save_file(self.ptr, bpath, seq_id,
                                                &toks[0] if toks.shape[0] else NULL, toks.shape[0])
        finally:
            self._lock_release()
        if n == 0:
            what = "state" if seq_id < 0 else f"sequence {seq_id}"
            raise StateError(f"failed to save {what} to {os.fspath(path)!r}")
        return n

    def state_save_file(self, path, tokens=()):
        """Save the state and the tokens it holds to a session file (written under a
        temporary name and renamed into place, so a failed save leaves no partial
        file)."""
        self._ensure_weights()
        checked = self.model._token_array(tokens)
        _save_atomically(path, lambda target: self._write_state_file(target, checked, -1, path))

    def state_load_file(self, path):
        """Load a session file; returns the tokens saved with it. The file is checked
        first (header, token count, size): a short or foreign file is a
        :class:`StateError`, and the cache is left empty."""
        self._ensure_weights()
        tokens, buf = _read_state_file(path, c.LLAMA_SESSION_MAGIC, c.LLAMA_SESSION_VERSION, self.n_ctx, 0)
        try:
            n = self.state_set_data(buf)
        except StateError:
            self.clear()
            raise
        if n != len(buf):
            self.clear()
            raise StateError(f"the file holds {len(buf) - n} bytes after its state")
        return tokens

    def state_seq_get_data(self, int seq_id, uint32_t flags=0):
        """The state of one sequence as bytes. ``flags`` are llama.cpp's
        ``LLAMA_STATE_SEQ_FLAGS_*`` (:data:`STATE_SEQ_FLAGS_PARTIAL_ONLY`: only what cannot
        be rolled back, the SWA cache or the recurrent state, as context checkpoints take;
        :data:`STATE_SEQ_FLAGS_ON_DEVICE`: the tensor data stays in device memory, and
        getting it again invalidates the last one taken so)."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        _check_state_flags(flags)
        cdef size_t size, n = 0
        cdef uint8_t *out
        cdef bytes buf
        self._lock_acquire()
        try:
            # The size is counted with the GIL held: it copies nothing, and each release
            # hands the GIL to a waiting thread for its whole turn.
            size = c.llama_state_seq_get_size_ext(self.ptr, seq_id, flags)
            # Written in place: a new bytes object nobody else holds yet (no second copy).
            buf = PyBytes_FromStringAndSize(NULL, size)
            if size:
                out = <uint8_t *>PyBytes_AS_STRING(buf)
                # Without the GIL: on a GPU the state is copied out of device memory (a
                # server does this for its prompt cache while its event loop serves).
                with nogil:
                    n = c.llama_state_seq_get_data_ext(self.ptr, out, size, seq_id, flags)
        finally:
            self._lock_release()
        if n != size:
            raise StateError(f"llama_state_seq_get_data wrote {n} of {size} bytes")
        return buf

    def state_seq_set_data(self, data, int seq_id, uint32_t flags=0):
        """Restore one sequence's state into ``seq_id`` (``flags``: those it was taken
        with)."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        _check_state_flags(flags)
        cdef const uint8_t[::1] src = memoryview(data).cast("B")
        if src.shape[0] == 0:
            raise StateError("empty state data")
        cdef const uint8_t *data_ptr = &src[0]
        cdef size_t n, length = src.shape[0]
        self._lock_acquire()
        try:
            with nogil:
                n = c.llama_state_seq_set_data_ext(self.ptr, data_ptr, length, seq_id, flags)
        finally:
            self._lock_release()
        if n == 0:
            raise StateError("sequence state rejected by llama.cpp")
        return n

    def state_seq_save_file(self, path, int seq_id, tokens=()):
        """Save one sequence's state and ``tokens`` to a file (written under a temporary
        name and renamed into place); returns the bytes written."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        checked = self.model._token_array(tokens)
        return _save_atomically(
            path, lambda target: self._write_state_file(target, checked, seq_id, path))

    def state_seq_load_file(self, path, int seq_id):
        """Load a sequence file into ``seq_id``; returns the tokens saved with it. The
        file is checked first (header, token count, size) and its state read from
        memory: a short, foreign or oversized file is a :class:`StateError`, and
        ``seq_id`` is left empty."""
        self._ensure_weights()
        self._check_seq(seq_id, False)
        tokens, buf = _read_state_file(
            path, c.LLAMA_STATE_SEQ_MAGIC, c.LLAMA_STATE_SEQ_VERSION, self.n_ctx, 8)
        struct.pack_into("=Ii", buf, 0, _SEQ_IO_MAGIC, seq_id)
        cdef const uint8_t[::1] src = buf
        cdef size_t n
        self._lock_acquire()
        try:
            n = c.llama_state_seq_set_data_ext(self.ptr, &src[0], src.shape[0], seq_id, 0)
            if n != <size_t>src.shape[0]:  # a state cut short leaves cells half-restored
                c.llama_memory_seq_rm(self.mem, seq_id, -1, -1)
        finally:
            self._lock_release()
        if n == 0:
            raise StateError("the file's state does not fit this context "
                             "(truncated, or from another model or context size)")
        if n != <size_t>src.shape[0]:
            raise StateError(f"the file holds {src.shape[0] - n} bytes after its state")
        return tokens

    # ---- adapters ---------------------------------------------------------------------

    @property
    def loras(self):
        """The LoRA adapters set on this context and their scales."""
        self._ensure_weights()
        return dict(self._loras)

    def set_lora(self, LoraAdapter adapter not None, float scale=1.0):
        """Apply a LoRA adapter with ``scale`` (replacing its previous scale)."""
        self._ensure_weights()
        adapter._ensure_alive()
        if adapter.model is not self.model:
            raise ValueError("the adapter was loaded for another model")
        loras = dict(self._loras)
        loras[adapter] = scale
        self._apply_loras(loras)

    def remove_lora(self, LoraAdapter adapter not None):
        """Stop applying an adapter; KeyError if it is not set."""
        self._ensure_weights()
        if adapter not in self._loras:
            raise KeyError("this adapter is not set on the context")
        loras = dict(self._loras)
        del loras[adapter]
        self._apply_loras(loras)

    def clear_loras(self):
        """Stop applying every adapter."""
        self._ensure_weights()
        self._apply_loras({})

    cdef int _apply_loras(self, dict loras) except -1:
        cdef size_t n = len(loras), i = 0
        cdef c.llama_adapter_lora **ptrs = <c.llama_adapter_lora **>malloc(max(n, 1) * sizeof(void *))
        cdef float *scales = <float *>malloc(max(n, 1) * sizeof(float))
        cdef LoraAdapter a
        cdef int32_t rc
        try:
            for a, scale in loras.items():
                ptrs[i] = a.ptr
                scales[i] = scale
                i += 1
            self._lock_acquire()
            rc = c.llama_set_adapters_lora(self.ptr, ptrs, n, scales)
            self._lock_release()
        finally:
            free(ptrs)
            free(scales)
        if rc != 0:
            raise call_error(rc, "llama_set_adapters_lora")
        for a in loras:
            if a not in self._loras:
                a._acquire()
        for a in self._loras:
            if a not in loras:
                a._release()
        self._loras = loras
        return 0

    def set_control_vector(self, data, int il_start=1, il_end=None):
        """Add a control vector: ``data`` is ``(layers, n_embd)``, row 0 for layer 1
        (:func:`~llama_cy.load_control_vectors` reads llama.cpp's files).

        It applies to layers ``il_start..il_end`` (inclusive; default: all rows given). As
        in llama.cpp, rows past the model's last layer are not used, and layers in the
        range without a row add nothing.
        """
        self._ensure_weights()
        cdef const float[:, ::1] d = np.ascontiguousarray(data, dtype=np.float32)
        if d.shape[1] != self.model.n_embd:
            raise ValueError(f"control vector rows must have n_embd={self.model.n_embd} values")
        if d.shape[0] == 0:
            raise ValueError("a control vector needs at least one row")
        cdef int end = d.shape[0] if il_end is None else il_end
        self._lock_acquire()
        rc = c.llama_set_adapter_cvec(self.ptr, &d[0, 0], d.shape[0] * d.shape[1], d.shape[1], il_start, end)
        self._lock_release()
        if rc != 0:
            raise call_error(rc, "llama_set_adapter_cvec")

    def clear_control_vector(self):
        """Remove the control vector."""
        self._ensure_weights()
        self._lock_acquire()
        c.llama_set_adapter_cvec(self.ptr, NULL, 0, self.model.n_embd, 0, 0)
        self._lock_release()

    # ---- performance ------------------------------------------------------------

    def perf(self):
        """Timings and token counts since creation or the last ``perf_reset``."""
        self._ensure_alive()
        cdef c.llama_perf_context_data d = c.llama_perf_context(self.ptr)
        return ContextPerf(d.t_start_ms, d.t_load_ms, d.t_p_eval_ms, d.t_eval_ms,
                           d.n_p_eval, d.n_eval, d.n_reused)

    def perf_reset(self):
        self._ensure_alive()
        # llama.cpp counts tokens at synchronisation: settle pending work first.
        c.llama_synchronize(self.ptr)
        c.llama_perf_context_reset(self.ptr)
