"""LlamaModel: a loaded GGUF model and its vocabulary (``llama_model`` + ``llama_vocab``)."""

import os

import numpy as np

from libc.stdbool cimport bool as cbool
from libc.stdint cimport int32_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport strncpy

from llama_cy._c cimport llama as c
from llama_cy._vocab cimport LlamaVocab
from llama_cy._c.ggml cimport (
    ggml_tensor, ggml_nbytes, ggml_get_name, GGML_TYPE_F32,
)
from llama_cy._c.ggml_backend cimport ggml_backend_tensor_set, ggml_backend_dev_t
from llama_cy._c.gguf cimport gguf_context, gguf_init_empty, gguf_free
from llama_cy._backend cimport Device
from llama_cy._guard cimport init_from_user, last_abort, load_model
from llama_cy._gguf cimport fill_gguf
from llama_cy._placement cimport TensorOverrides

from llama_cy._placement import tensor_buffers as _tensor_buffers

from llama_cy.errors import ModelLoadError

cdef dict _SPLIT_MODES = {
    "none": c.LLAMA_SPLIT_MODE_NONE,
    "layer": c.LLAMA_SPLIT_MODE_LAYER,
    "row": c.LLAMA_SPLIT_MODE_ROW,
    "tensor": c.LLAMA_SPLIT_MODE_TENSOR,
}
# llama-server's --load-mode and --lazy-mode values (common/arg.cpp).
cdef dict _LOAD_MODES = {
    "auto": c.LLAMA_LOAD_MODE_AUTO,
    "none": c.LLAMA_LOAD_MODE_NONE,
    "mmap": c.LLAMA_LOAD_MODE_MMAP,
    "mlock": c.LLAMA_LOAD_MODE_MLOCK,
    "mmap+mlock": c.LLAMA_LOAD_MODE_MMAP_MLOCK,
    "dio": c.LLAMA_LOAD_MODE_DIRECT_IO,
}
cdef dict _LAZY_MODES = {
    "off": c.LLAMA_LAZY_MODE_OFF,
    "auto": c.LLAMA_LAZY_MODE_AUTO,
    "on": c.LLAMA_LAZY_MODE_ON,
}
cdef dict _ROPE_TYPES = {
    c.LLAMA_ROPE_TYPE_NONE: "none",
    c.LLAMA_ROPE_TYPE_NORM: "norm",
    c.LLAMA_ROPE_TYPE_NEOX: "neox",
    c.LLAMA_ROPE_TYPE_MROPE: "mrope",
    c.LLAMA_ROPE_TYPE_IMROPE: "imrope",
    c.LLAMA_ROPE_TYPE_VISION: "vision",
}
# numpy dtype -> GGUF array element type, for metadata given to from_metadata().
cdef class _Callback:
    """A Python callable handed to C as user data; the exception it raised, if any."""
    cdef object fn
    cdef object error
    cdef bint cancelled  # the callable returned False

    def __cinit__(self, fn):
        self.fn = fn
        self.error = None
        self.cancelled = False


cdef cbool _progress_trampoline(float progress, void *user_data) noexcept with gil:
    cdef _Callback cb = <_Callback>user_data
    try:
        cb.cancelled = cb.fn(progress) is False
        return not cb.cancelled
    except BaseException as exc:
        cb.error = exc
        return False


cdef void _set_tensor_trampoline(ggml_tensor *tensor, void *user_data) noexcept with gil:
    cdef _Callback cb = <_Callback>user_data
    if cb.error is not None:
        return
    cdef size_t nbytes = ggml_nbytes(tensor)
    try:
        if tensor.type == GGML_TYPE_F32:
            shape = tuple(tensor.ne[i] for i in range(3, -1, -1) if i == 0 or tensor.ne[i] > 1)
            data = np.zeros(shape, dtype=np.float32)
        else:
            data = np.zeros(nbytes, dtype=np.uint8)
        cb.fn(ggml_get_name(tensor).decode(), data)
        data = np.ascontiguousarray(data, dtype=data.dtype)
        if data.nbytes != nbytes:
            raise ValueError(f"tensor {ggml_get_name(tensor).decode()}: {data.nbytes} bytes, expected {nbytes}")
        _tensor_set(tensor, data)
    except BaseException as exc:
        cb.error = exc


cdef void _tensor_set(ggml_tensor *tensor, data):
    cdef const unsigned char[::1] raw = data.reshape(-1).view(np.uint8)
    # ggml_backend_tensor_set copies into whatever buffer holds the tensor (host or device).
    ggml_backend_tensor_set(tensor, &raw[0], 0, raw.shape[0])


def default_gpu_layers():
    """``n_gpu_layers`` where a call gives none: ``$LLAMA_CY_N_GPU_LAYERS`` (a number, or
    ``all``), else 0. One switch offloads every model a program (or the test suite) loads."""
    value = os.environ.get("LLAMA_CY_N_GPU_LAYERS", "").strip()
    if not value:
        return 0
    if value in ("all", "auto"):
        return -1
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"LLAMA_CY_N_GPU_LAYERS must be a number or 'all', not {value!r}") from None


cdef int _gpu_layers(n_gpu_layers) except? -2:
    return default_gpu_layers() if n_gpu_layers is None else n_gpu_layers


cdef c.llama_model_params _model_params(
    int n_gpu_layers, str split_mode, int main_gpu, bint use_mmap, bint use_mlock,
    bint vocab_only, bint check_tensors, bint use_extra_bufts=True, str load_mode=None,
    str lazy_mode="auto", bint no_host=False, bint load_mtp=False,
) except *:
    cdef c.llama_model_params p = c.llama_model_default_params()
    p.load_mtp = load_mtp
    p.n_gpu_layers = n_gpu_layers
    try:
        p.split_mode = _SPLIT_MODES[split_mode]
    except KeyError:
        raise ValueError(f"unknown split_mode {split_mode!r}; expected one of {sorted(_SPLIT_MODES)}") from None
    p.main_gpu = main_gpu
    if load_mode is not None:
        try:
            p.load_mode = _LOAD_MODES[load_mode]
        except KeyError:
            raise ValueError(f"unknown load_mode {load_mode!r}; expected one of "
                             f"{sorted(_LOAD_MODES)}") from None
    elif use_mmap and use_mlock:
        p.load_mode = c.LLAMA_LOAD_MODE_MMAP_MLOCK
    elif use_mmap:
        p.load_mode = c.LLAMA_LOAD_MODE_MMAP
    elif use_mlock:
        p.load_mode = c.LLAMA_LOAD_MODE_MLOCK
    else:
        p.load_mode = c.LLAMA_LOAD_MODE_NONE
    p.vocab_only = vocab_only
    p.check_tensors = check_tensors
    p.use_extra_bufts = use_extra_bufts
    p.no_host = no_host
    try:
        p.lazy_mode = _LAZY_MODES[lazy_mode]
    except KeyError:
        raise ValueError(f"unknown lazy_mode {lazy_mode!r}; expected one of "
                         f"{sorted(_LAZY_MODES)}") from None
    return p


def _rpc_devices(devices, rpc_servers):
    if not rpc_servers:
        return devices
    from llama_cy._rpc import with_rpc_devices
    return with_rpc_devices(devices, rpc_servers)


cdef class _LoadBuffers:
    """C arrays that llama_model_params points to; they live until the load returns."""

    def __dealloc__(self):
        free(self.kv)
        free(self.tensor_split)
        free(self.devices)

    cdef int fill(self, c.llama_model_params *p, kv_overrides, tensor_split, devices,
                  tensor_overrides=None) except -1:
        cdef Py_ssize_t i
        cdef c.llama_model_kv_override *o
        if kv_overrides:
            # One zeroed entry more: llama.cpp stops at the first empty key.
            self.kv = <c.llama_model_kv_override *>calloc(len(kv_overrides) + 1, sizeof(c.llama_model_kv_override))
            for i, (key, value) in enumerate(kv_overrides.items()):
                o = &self.kv[i]
                bkey = key.encode()
                if not 0 < len(bkey) < 128:
                    raise ValueError(f"kv_overrides key {key!r} must be 1 to 127 bytes")
                strncpy(o.key, bkey, 127)
                if isinstance(value, bool):
                    o.tag, o.val_bool = c.LLAMA_KV_OVERRIDE_TYPE_BOOL, value
                elif isinstance(value, int):
                    o.tag, o.val_i64 = c.LLAMA_KV_OVERRIDE_TYPE_INT, value
                elif isinstance(value, float):
                    o.tag, o.val_f64 = c.LLAMA_KV_OVERRIDE_TYPE_FLOAT, value
                elif isinstance(value, str):
                    bval = value.encode()
                    if len(bval) >= 128:
                        raise ValueError(f"kv_overrides[{key!r}]: strings are limited to 127 bytes")
                    o.tag = c.LLAMA_KV_OVERRIDE_TYPE_STR
                    strncpy(o.val_str, bval, 127)
                else:
                    raise TypeError(f"kv_overrides[{key!r}] must be bool, int, float or str")
            p.kv_overrides = self.kv
        if tensor_split is not None:
            n = c.llama_max_devices()
            if len(tensor_split) > n:
                raise ValueError(f"tensor_split has {len(tensor_split)} entries; at most {n} devices")
            self.tensor_split = <float *>calloc(n, sizeof(float))
            for i, x in enumerate(tensor_split):
                self.tensor_split[i] = x
            p.tensor_split = self.tensor_split
        if devices is not None:
            self.devices = <ggml_backend_dev_t *>calloc(len(devices) + 1, sizeof(ggml_backend_dev_t))
            for i, d in enumerate(devices):
                if not isinstance(d, Device):
                    raise TypeError("devices must be llama_cy.Device objects (from llama_cy.devices())")
                self.devices[i] = (<Device>d).dev
            p.devices = self.devices
        if tensor_overrides:
            self.overrides = TensorOverrides(tensor_overrides)
            p.tensor_buft_overrides = self.overrides.array
        return 0


cdef str _read_str(int32_t (*getter)(const c.llama_model *, int32_t, char *, size_t) noexcept nogil,
                   const c.llama_model *model, int32_t i):
    cdef char small[256]
    cdef int32_t n = getter(model, i, small, sizeof(small))
    if n < 0:
        return None
    if n < <int32_t>sizeof(small):
        return small[:n].decode("utf-8", "replace")
    cdef char *big = <char *>malloc(n + 1)
    try:
        getter(model, i, big, n + 1)
        return big[:n].decode("utf-8", "replace")
    finally:
        free(big)


cdef LlamaModel _load(list paths, int n_gpu_layers, str split_mode, int main_gpu, tensor_split,
                      bint use_mmap, bint use_mlock, bint vocab_only, bint check_tensors,
                      kv_overrides, devices, progress, bint use_extra_bufts=True,
                      tensor_overrides=None, str load_mode=None, str lazy_mode="auto",
                      bint no_host=False, bint load_mtp=False):
    """What load() and load_splits() share: the checks, the parameters, the nogil load."""
    for p in paths:
        if not os.path.isfile(p):
            raise ModelLoadError(f"model file not found: {os.fspath(p)!r}")
        if os.path.getsize(p) == 0:
            raise ModelLoadError(f"model file is empty: {os.fspath(p)!r}")
    cdef c.llama_model_params params = _model_params(
        n_gpu_layers, split_mode, main_gpu, use_mmap, use_mlock, vocab_only, check_tensors,
        use_extra_bufts, load_mode, lazy_mode, no_host, load_mtp)
    cdef _LoadBuffers buffers = _LoadBuffers()
    buffers.fill(&params, kv_overrides, tensor_split, devices, tensor_overrides)
    cdef _Callback cb = None
    if progress is not None:
        cb = _Callback(progress)
        params.progress_callback = <c.llama_progress_callback>_progress_trampoline
        params.progress_callback_user_data = <void *>cb
    encoded = [os.fsencode(p) for p in paths]
    cdef const char **cpaths = <const char **>malloc(len(encoded) * sizeof(char *))
    cdef size_t n = len(encoded)
    cdef c.llama_model *ptr
    for i, b in enumerate(encoded):
        cpaths[i] = b
    try:
        with nogil:
            ptr = load_model(cpaths, n, params)
    finally:
        free(cpaths)
    if cb is not None and cb.error is not None:
        if ptr != NULL:
            c.llama_model_free(ptr)
        raise cb.error
    if ptr == NULL:
        # a progress callback that said stop; else what llama.cpp's loader refused
        what = "cancelled by the progress callback" if cb is not None and cb.cancelled \
            else "corrupt, truncated or unsupported"
        if last_abort():
            what = f"llama.cpp refused its hyperparameters ({last_abort()})"
        raise ModelLoadError(f"failed to load model {os.fspath(paths[0])!r}: {what} "
                             "(llama.cpp's log, logger 'llama_cy', has the details)")
    cdef LlamaModel model = LlamaModel._wrap(ptr, os.fspath(paths[0]))
    model.vocab_only = vocab_only
    model.mtp = load_mtp and not vocab_only and c.llama_model_n_layer_nextn(ptr) > 0
    if kv_overrides:
        model._overrides = {
            k: ("true" if v else "false") if isinstance(v, bool) else str(v)
            for k, v in kv_overrides.items()
        }
    try:
        _check_hparams(model)
    except ModelLoadError:
        model.close()
        raise
    return model


cdef _check_hparams(LlamaModel model):
    """Refuse hyperparameters that pass llama.cpp's loader but abort its kernels later.

    The loader's own GGML_ASSERTs are caught by ``_guard``; these are checked by the CPU
    backend's worker threads during the first decode, where nothing can catch them.
    """
    for key, value in model.metadata.items():
        if key.endswith("epsilon"):
            try:
                eps = float(value)
            except ValueError:
                raise ModelLoadError(f"{key} = {value!r} is not a number") from None
            if not (0.0 <= eps < float("inf")):
                raise ModelLoadError(f"{key} = {value} must be a finite number >= 0 "
                                     "(a norm's epsilon)")


cdef class LlamaModel(LlamaVocab):
    """A GGUF model loaded by llama.cpp, with its vocabulary (:class:`LlamaVocab`'s calls).

    Create one with :meth:`load`, :meth:`load_splits` or :meth:`from_metadata`. A model
    is immutable once loaded and may be shared by many contexts on many threads.
    ``close()`` (or leaving a ``with`` block) releases it; the memory is freed once the
    last context or adapter using it is gone.
    """

    def __cinit__(self):
        self.ptr = NULL
        self.vocab = NULL
        self._closed = True

    def __init__(self):
        raise TypeError("use LlamaModel.load(path, ...) or LlamaModel.from_metadata(...)")

    def __dealloc__(self):
        self._dispose()

    cdef void _dispose(self) noexcept:
        # Contexts and adapters on the model are users: close() gets here after them.
        if self.ptr != NULL:
            c.llama_model_free(self.ptr)
            self.ptr = NULL
            self.vocab = NULL

    @staticmethod
    cdef LlamaModel _wrap(c.llama_model *ptr, path):
        cdef LlamaModel m = LlamaModel.__new__(LlamaModel)
        m.ptr = ptr
        m.vocab = c.llama_model_get_vocab(ptr)
        m.n_vocab = c.llama_vocab_n_tokens(m.vocab)
        m.path = path
        m._closed = False
        m.vocab_only = False
        m._overrides = {}
        return m

    @staticmethod
    def load(path, *, n_gpu_layers=None, str split_mode="layer", int main_gpu=0,
             tensor_split=None, bint use_mmap=True, bint use_mlock=False,
             bint vocab_only=False, bint check_tensors=False, kv_overrides=None,
             devices=None, progress=None, rpc_servers=None, bint use_extra_bufts=True,
             tensor_overrides=None, str load_mode=None, str lazy_mode="auto",
             bint no_host=False, bint load_mtp=False):
        """Load a GGUF file (or the first file of a ``-00001-of-0000N.gguf`` split set).

        ``progress(fraction) -> bool | None`` is called during the load; returning
        ``False`` cancels it. ``rpc_servers`` (``"host:port"`` strings) adds the devices
        of those ggml RPC servers to ``devices``: with ``n_gpu_layers=-1`` the layers
        are spread over them. Raises :class:`~llama_cy.errors.ModelLoadError` for a
        missing, empty, corrupt or truncated file, or a cancelled load.
        ``use_extra_bufts=False`` keeps weights out of the CPU backend's repacked layouts
        (llama-cli's ``--no-repack``). ``n_gpu_layers`` (-1: all) defaults to
        :func:`default_gpu_layers`: 0 unless ``$LLAMA_CY_N_GPU_LAYERS`` says.

        ``tensor_overrides`` (llama-server's ``-ot``) places the weights whose names a
        pattern finds (``std::regex``, first match wins) in a buffer type of
        :func:`~llama_cy.buffer_types`, e.g. ``[("_exps", "CPU")]`` keeps the
        experts of a MoE model on the CPU while ``n_gpu_layers`` offloads the rest;
        :attr:`tensor_buffers` shows where each weight went. ``load_mode`` (llama-server's
        ``--load-mode``: ``auto``, ``none``, ``mmap``, ``mlock``, ``mmap+mlock``, ``dio``)
        replaces ``use_mmap``/``use_mlock`` when given; ``lazy_mode`` and ``no_host`` are
        llama-server's ``--lazy-mode`` and ``--no-host``. ``load_mtp`` loads the model's
        MTP (NextN) layers, where it has them (:attr:`n_layer_nextn`), so that it can draft
        for itself (:class:`~llama_cy.Speculator` ``types="draft-mtp"``); llama.cpp skips
        them otherwise.
        """
        return _load([path], _gpu_layers(n_gpu_layers), split_mode, main_gpu, tensor_split,
                     use_mmap, use_mlock, vocab_only, check_tensors,
                     kv_overrides, _rpc_devices(devices, rpc_servers), progress, use_extra_bufts,
                     tensor_overrides, load_mode, lazy_mode, no_host, load_mtp)

    @staticmethod
    def load_splits(paths, *, n_gpu_layers=None, str split_mode="layer", int main_gpu=0,
                    tensor_split=None, bint use_mmap=True, bint use_mlock=False,
                    bint vocab_only=False, bint check_tensors=False, kv_overrides=None,
                    devices=None, progress=None, rpc_servers=None, bint use_extra_bufts=True,
                    tensor_overrides=None, str load_mode=None, str lazy_mode="auto",
                    bint no_host=False, bint load_mtp=False):
        """Load a model split over several files with any naming, given in order (the
        keywords are :meth:`load`'s)."""
        paths = list(paths)
        if not paths:
            raise ValueError("load_splits needs at least one path")
        return _load(paths, _gpu_layers(n_gpu_layers), split_mode, main_gpu, tensor_split,
                     use_mmap, use_mlock, vocab_only, check_tensors,
                     kv_overrides, _rpc_devices(devices, rpc_servers), progress, use_extra_bufts,
                     tensor_overrides, load_mode, lazy_mode, no_host, load_mtp)

    @staticmethod
    def from_metadata(dict metadata, set_tensor_data, *, n_gpu_layers=None,
                      str split_mode="layer", int main_gpu=0, devices=None):
        """Build a model in memory from GGUF metadata (``llama_model_init_from_user``).

        ``metadata`` maps GGUF keys to values (``general.architecture``, hyperparameters,
        ``tokenizer.*``); Python ints become uint32 (int32 when negative), floats float32,
        lists of str string arrays, NumPy arrays and scalars keep their dtype.
        ``set_tensor_data(name, array)`` fills each weight in place: a float32 array in
        GGUF's (reversed) shape for F32 tensors, raw bytes otherwise. It is called for the
        architecture's optional tensors too (biases, scales): leave biases at zero but
        set scales to one, or the model computes nothing useful.
        """
        cdef c.llama_model_params params = _model_params(
            _gpu_layers(n_gpu_layers), split_mode, main_gpu, False, False, False, False)
        cdef _LoadBuffers buffers = _LoadBuffers()
        buffers.fill(&params, None, None, devices)
        cdef _Callback cb = _Callback(set_tensor_data)
        cdef gguf_context *g = gguf_init_empty()
        cdef c.llama_model *ptr = NULL
        try:
            fill_gguf(g, metadata)
            # The callback needs the GIL for every tensor: no point releasing it here.
            ptr = init_from_user(g, _set_tensor_trampoline, <void *>cb, params)
        finally:
            gguf_free(g)
        if cb.error is not None:
            if ptr != NULL:
                c.llama_model_free(ptr)
            raise cb.error
        if ptr == NULL:
            raise ModelLoadError("llama_model_init_from_user failed"
                                 f"{': ' + last_abort() if last_abort() else ''} (see the 'llama_cy' log)")
        return LlamaModel._wrap(ptr, None)

    def __repr__(self):
        if self._closed:
            return "<LlamaModel closed>"
        return f"<LlamaModel {self.desc!r} n_vocab={self.n_vocab} path={self.path!r}>"

    def save(self, path):
        """Write the model to a GGUF file (OSError if it cannot be written)."""
        self._ensure_alive()
        cdef bytes bpath = os.fsencode(path)  # before open(), which takes an int as a descriptor
        # llama.cpp only logs a failed write: open the file here so errors surface.
        with open(bpath, "wb"):
            pass
        cdef const char *cpath = bpath
        self._enter()
        try:
            with nogil:
                c.llama_model_save_to_file(self.ptr, cpath)
        finally:
            self._release()
        if os.path.getsize(path) == 0:
            raise OSError(f"llama.cpp could not write the model to {os.fspath(path)!r}")

    # ---- description ------------------------------------------------------------

    @property
    def address(self):
        """The ``llama_model *`` as an int, for ctypes code (llama-cpp-python's
        ``llama_cpp.llama_cpp``). It stays valid while this object is open."""
        self._ensure_alive()
        return <size_t>self.ptr

    @property
    def tensor_buffers(self):
        """``{weight name: buffer type}``: where llama.cpp placed each weight (``CPU``,
        ``CPU_Mapped`` for a mapped file, ``CUDA0``, an RPC server's, ...), as its loader
        logs them."""
        self._ensure_alive()
        return _tensor_buffers(<size_t>self.ptr)

    @property
    def metadata(self):
        """Every GGUF key/value of the model as strings (arrays are summarised by llama.cpp)."""
        self._ensure_alive()
        cdef int32_t i
        meta = {
            _read_str(c.llama_model_meta_key_by_index, self.ptr, i):
            _read_str(c.llama_model_meta_val_str_by_index, self.ptr, i)
            for i in range(c.llama_model_meta_count(self.ptr))
        }
        meta.update(self._overrides)
        return meta

    def meta_val(self, str key):
        """One metadata value as a string, or ``None`` when the key is absent."""
        self._ensure_alive()
        if key in self._overrides:
            return self._overrides[key]
        cdef bytes bkey = key.encode()
        cdef char small[256]
        cdef int32_t n = c.llama_model_meta_val_str(self.ptr, bkey, small, sizeof(small))
        if n < 0:
            return None
        if n < <int32_t>sizeof(small):
            return small[:n].decode("utf-8", "replace")
        buf = bytearray(n + 1)
        c.llama_model_meta_val_str(self.ptr, bkey, buf, n + 1)
        return bytes(buf[:n]).decode("utf-8", "replace")

    @property
    def desc(self):
        """llama.cpp's one-line description: architecture, size, quantisation."""
        self._ensure_alive()
        cdef char buf[256]
        cdef int32_t n = c.llama_model_desc(self.ptr, buf, sizeof(buf))
        return buf[:max(0, min(n, 255))].decode("utf-8", "replace")

    @property
    def size(self):
        """Total size of the weights in bytes."""
        self._ensure_alive()
        return c.llama_model_size(self.ptr)

    @property
    def n_params(self):
        self._ensure_alive()
        return c.llama_model_n_params(self.ptr)

    @property
    def ftype(self):
        """The file's quantisation as llama.cpp names it (``Q4_K - Medium``, ``F16``...)."""
        self._ensure_alive()
        return c.llama_ftype_name(c.llama_model_ftype(self.ptr)).decode("utf-8", "replace")

    @property
    def n_ctx_train(self):
        self._ensure_alive()
        return c.llama_model_n_ctx_train(self.ptr)

    @property
    def n_embd(self):
        self._ensure_alive()
        return c.llama_model_n_embd(self.ptr)

    @property
    def n_embd_out(self):
        self._ensure_alive()
        return c.llama_model_n_embd_out(self.ptr)

    @property
    def n_layer(self):
        self._ensure_alive()
        return c.llama_model_n_layer(self.ptr)

    @property
    def n_layer_nextn(self):
        """The model's MTP (NextN) layers, loaded or not (:attr:`mtp`)."""
        self._ensure_alive()
        return c.llama_model_n_layer_nextn(self.ptr)

    @property
    def n_head(self):
        self._ensure_alive()
        return c.llama_model_n_head(self.ptr)

    @property
    def n_head_kv(self):
        self._ensure_alive()
        return c.llama_model_n_head_kv(self.ptr)

    @property
    def n_swa(self):
        self._ensure_alive()
        return c.llama_model_n_swa(self.ptr)

    @property
    def n_cls_out(self):
        self._ensure_alive()
        return c.llama_model_n_cls_out(self.ptr)

    @property
    def rope_type(self):
        """``none``, ``norm``, ``neox``, ``mrope``, ``imrope`` or ``vision``."""
        self._ensure_alive()
        return _ROPE_TYPES.get(c.llama_model_rope_type(self.ptr), "unknown")

    @property
    def rope_freq_scale_train(self):
        self._ensure_alive()
        return c.llama_model_rope_freq_scale_train(self.ptr)

    @property
    def has_encoder(self):
        self._ensure_alive()
        return c.llama_model_has_encoder(self.ptr)

    @property
    def has_decoder(self):
        self._ensure_alive()
        return c.llama_model_has_decoder(self.ptr)

    @property
    def decoder_start_token(self):
        self._ensure_alive()
        return c.llama_model_decoder_start_token(self.ptr)

    @property
    def is_recurrent(self):
        self._ensure_alive()
        return c.llama_model_is_recurrent(self.ptr)

    @property
    def is_hybrid(self):
        self._ensure_alive()
        return c.llama_model_is_hybrid(self.ptr)

    @property
    def is_diffusion(self):
        self._ensure_alive()
        return c.llama_model_is_diffusion(self.ptr)

    def chat_template(self, name=None):
        """The model's chat template (Jinja source), a named one, or ``None``."""
        self._ensure_alive()
        cdef bytes bname
        cdef const char *tmpl
        if name is None:
            tmpl = c.llama_model_chat_template(self.ptr, NULL)
        else:
            bname = name.encode()
            tmpl = c.llama_model_chat_template(self.ptr, bname)
        return None if tmpl == NULL else tmpl.decode("utf-8", "replace")
