# cython: language_level=3
"""llama-server's ``--fit`` (common/fit.cpp's ``common_fit_params``): before a load, the
layers on the GPUs (``n_gpu_layers``), their split, the MoE weights left on the CPU and
the context size are chosen so that the model and its context leave ``margins`` of
each device's memory free (of the host's, without GPUs). Only the arguments left at
llama.cpp's defaults change: ``n_gpu_layers=-1``, no ``tensor_split`` or overrides,
``n_ctx=0`` (the model's training context, shrunk down to ``n_ctx_min`` if need be)."""

from libc.stdint cimport uint32_t
from libc.stdlib cimport calloc, free

from llama_cy._c cimport llama as c
from llama_cy._c.ggml_backend cimport ggml_backend_buft_name
from llama_cy._context_params cimport _context_params
from llama_cy._model cimport _LoadBuffers, _model_params

import os

__all__ = ["FIT_STATUSES", "fit_params"]


cdef extern from "ggml.h" nogil:
    cdef enum ggml_log_level:
        GGML_LOG_LEVEL_DEBUG
        GGML_LOG_LEVEL_ERROR


cdef extern from "fit.h" nogil:
    cdef enum common_params_fit_status:
        COMMON_PARAMS_FIT_STATUS_SUCCESS
        COMMON_PARAMS_FIT_STATUS_FAILURE
        COMMON_PARAMS_FIT_STATUS_ERROR
    cdef struct common_fit_extra_model:
        const char *path_model
        c.llama_model_params *mparams
        c.llama_context_params *cparams
        bint shares_model
    common_params_fit_status common_fit_params(
        const char *path_model, c.llama_model_params *mparams,
        c.llama_context_params *cparams, float *tensor_split,
        c.llama_model_tensor_buft_override *tensor_buft_overrides, size_t *margins,
        uint32_t n_ctx_min, const common_fit_extra_model *extra,
        ggml_log_level log_level) except +


#: What ``fit_params`` reports: the arguments fit, could not be fit, or a hard error.
FIT_STATUSES = ("success", "failure", "error")
MiB = 1024 * 1024


def fit_params(path, *, int n_gpu_layers=-1, str split_mode="layer", int main_gpu=0,
               tensor_split=None, tensor_overrides=None, devices=None, bint use_mmap=True,
               bint use_mlock=False, str load_mode=None, bint no_host=False,
               int n_ctx=0, int n_batch=2048, n_ubatch=512, int n_seq_max=1,
               flash_attn=None, type_k=None, type_v=None, offload_kqv=None, swa_full=None,
               kv_unified=None, bint embeddings=False, margins=(1024 * MiB,),
               int n_ctx_min=4096, draft=None, int draft_n_gpu_layers=-1, draft_devices=None,
               draft_tensor_overrides=None, bint verbose=False):
    """Fit a load's arguments to free memory, as ``llama-server -fit on`` does.

    The arguments are :meth:`LlamaModel.load`'s and :class:`LlamaContext`'s (the same
    defaults as llama.cpp's); ``margins`` is the memory to leave free on each device,
    in bytes (one value: every device). ``draft`` (a path) is a draft model fitted
    alongside, as llama-server fits it: its weights (``draft_n_gpu_layers`` on
    ``draft_devices``) and a context that follows the main one count against the same
    memory. Returns a dict: ``status`` (one of
    :data:`FIT_STATUSES`), ``n_gpu_layers``, ``n_ctx``, ``tensor_split`` (None if
    unchanged) and ``tensor_overrides`` (the given ones, then those the fit added).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file not found: {path!r}")
    if n_ctx < 0 or n_ctx_min < 0:
        raise ValueError("n_ctx and n_ctx_min must be >= 0")
    cdef size_t n_dev = c.llama_max_devices()
    cdef size_t n_over = c.llama_max_tensor_buft_overrides()
    margins = list(margins)
    if not margins or len(margins) > n_dev or any(m < 0 for m in margins):
        raise ValueError(f"margins: 1 to {n_dev} sizes in bytes, >= 0")
    cdef c.llama_model_params mp = _model_params(
        n_gpu_layers, split_mode, main_gpu, use_mmap, use_mlock, False, False, True,
        load_mode, "auto", no_host)
    cdef _LoadBuffers buffers = _LoadBuffers()
    buffers.fill(&mp, None, tensor_split, devices, tensor_overrides)
    cdef c.llama_context_params cp = _context_params(
        n_ctx, n_batch, n_ubatch, n_seq_max, None, None, None, None, None, flash_attn,
        None, None, None, None, None, None, None, type_k, type_v, embeddings, offload_kqv,
        swa_full, kv_unified, True, None, None, None)
    cdef c.llama_model_params mpd
    cdef c.llama_context_params cpd = cp
    cdef _LoadBuffers buffers_draft = _LoadBuffers()
    cdef common_fit_extra_model extra
    cdef common_fit_extra_model *pextra = NULL
    cdef bytes bdraft
    if draft is not None:
        draft = os.fspath(draft)
        if not os.path.isfile(draft):
            raise FileNotFoundError(f"draft model file not found: {draft!r}")
        mpd = _model_params(draft_n_gpu_layers, split_mode, main_gpu, use_mmap, use_mlock,
                            False, False, True, load_mode, "auto", no_host)
        buffers_draft.fill(&mpd, None, None, draft_devices, draft_tensor_overrides)
        bdraft = os.fsencode(draft)
        extra.path_model = bdraft
        extra.mparams = &mpd
        extra.cparams = &cpd
        extra.shares_model = False
        pextra = &extra
    # Writable room for what the fit may add: llama.cpp's maxima of devices and overrides.
    cdef float *split = <float *>calloc(n_dev, sizeof(float))
    cdef c.llama_model_tensor_buft_override *over = \
        <c.llama_model_tensor_buft_override *>calloc(n_over, sizeof(c.llama_model_tensor_buft_override))
    cdef size_t *marg = <size_t *>calloc(n_dev, sizeof(size_t))
    cdef size_t i
    cdef common_params_fit_status status
    cdef bytes bpath = os.fsencode(path)
    cdef const char *cpath = bpath
    cdef ggml_log_level level = GGML_LOG_LEVEL_DEBUG if verbose else GGML_LOG_LEVEL_ERROR
    if split == NULL or over == NULL or marg == NULL:
        free(split)
        free(over)
        free(marg)
        raise MemoryError()
    try:
        given = list(tensor_overrides or ())
        if len(given) >= n_over:
            raise ValueError(f"at most {n_over - 1} tensor overrides")
        for i in range(n_dev):
            marg[i] = margins[i] if i < len(margins) else margins[-1]
        if tensor_split is not None:
            for i in range(len(tensor_split)):
                split[i] = mp.tensor_split[i]
        i = 0
        while mp.tensor_buft_overrides != NULL and mp.tensor_buft_overrides[i].pattern != NULL:
            over[i] = mp.tensor_buft_overrides[i]
            i += 1
        mp.tensor_buft_overrides = over
        with nogil:
            status = common_fit_params(cpath, &mp, &cp, split, over, marg, n_ctx_min, pextra,
                                       level)
        added = []
        i = 0
        while over[i].pattern != NULL:
            if i >= len(given):
                added.append((over[i].pattern.decode(), ggml_backend_buft_name(over[i].buft).decode()))
            i += 1
        fitted_split = [split[i] for i in range(n_dev)]
        return {
            "status": FIT_STATUSES[<int>status],
            "n_gpu_layers": mp.n_gpu_layers,
            "n_ctx": cp.n_ctx,
            "tensor_split": fitted_split if any(fitted_split) and tensor_split is None else None,
            "tensor_overrides": given + added,
        }
    finally:
        free(split)
        free(over)
        free(marg)
