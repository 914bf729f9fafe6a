"""llama_cy: llama.cpp under a typed Cython API.

Importing the package loads llama.cpp's backend plugins from this folder once per
process and routes llama.cpp's log to the ``llama_cy`` logger.
"""

from __future__ import annotations

import os

from llama_cy import _build_config

if _build_config.GPU == "cuda":  # NVIDIA's runtime from its pip packages, before the plugin
    from llama_cy._cuda_packs import select
    from llama_cy._cuda_runtime import prepare

    # a wheel's plugin comes in a pack chosen for the GPUs; a source build carries its own
    prepare(select(_build_config.plugin_path("cuda")) or _build_config.plugin_path("cuda"))

# _backend next: importing it loads llama.cpp's backend plugins and routes its log.
from llama_cy import _backend
from llama_cy._backend import (
    LLAMA_CPP_BUILD,
    Device,
    available_cpus,
    default_n_threads,
    devices,
    numa_init,
    supports_gpu_offload,
    supports_mlock,
    supports_mmap,
    supports_rpc,
    system_info,
)

# isort: split
from llama_cy import _build_config, errors
from llama_cy._adapter import LoraAdapter, load_control_vectors
from llama_cy._batch import LlamaBatch
from llama_cy._bitmap import Bitmap
from llama_cy._context import LlamaContext
from llama_cy._fit import fit_params
from llama_cy._model import LlamaModel
from llama_cy._mtmd import InputChunk, InputChunks, MtmdContext
from llama_cy._placement import buffer_types
from llama_cy._sampler import CANDIDATE_DTYPE, LlamaSampler
from llama_cy._speculative import Speculator
from llama_cy._vocab import TOKEN_ATTRS, LlamaVocab
from llama_cy.cpu_params import CpuParams
from llama_cy.errors import LlamaError
from llama_cy.perf import ContextPerf, SamplerPerf

# isort: split
from llama_cy.chat_handlers import (
    Gemma4ChatHandler,
    Llama3VisionAlphaChatHandler,
    Llava15ChatHandler,
    Llava16ChatHandler,
    MiniCPMv26ChatHandler,
    MoondreamChatHandler,
    MtmdChatHandler,
    NanoLlavaChatHandler,
    ObsidianChatHandler,
    Qwen25VLChatHandler,
)
from llama_cy.completion import Completion, CompletionChunk, Timings, TokenLogprob
from llama_cy.llama import Llama, enable_verbose_log
from llama_cy.sampling import LlamaGrammar, SamplingParams
from llama_cy.speculative import LlamaPromptLookupDecoding

__version__ = _build_config.VERSION  # meson.build's project version, the one place

if _build_config.GPU != "cpu" and not any(d.type in ("gpu", "igpu") for d in devices()):
    # llama.cpp skips a GPU plugin whose loader, driver or device is missing: say so once.
    import logging

    logging.getLogger("llama_cy").warning(
        "this is a %s build, but its backend found no device (no driver, loader or device "
        "visible): models run on the CPU",
        _build_config.GPU,
    )

__all__ = [
    "CANDIDATE_DTYPE",
    "LLAMA_CPP_BUILD",
    "TOKEN_ATTRS",
    "Bitmap",
    "Completion",
    "CompletionChunk",
    "ContextPerf",
    "CpuParams",
    "Device",
    "Gemma4ChatHandler",
    "InputChunk",
    "InputChunks",
    "Llama",
    "Llama3VisionAlphaChatHandler",
    "LlamaBatch",
    "LlamaContext",
    "LlamaError",
    "LlamaGrammar",
    "LlamaModel",
    "LlamaPromptLookupDecoding",
    "LlamaSampler",
    "LlamaVocab",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "LoraAdapter",
    "MiniCPMv26ChatHandler",
    "MoondreamChatHandler",
    "MtmdChatHandler",
    "MtmdContext",
    "NanoLlavaChatHandler",
    "ObsidianChatHandler",
    "Qwen25VLChatHandler",
    "SamplerPerf",
    "SamplingParams",
    "Speculator",
    "Timings",
    "TokenLogprob",
    "__version__",
    "available_cpus",
    "buffer_types",
    "default_n_threads",
    "devices",
    "enable_verbose_log",
    "errors",
    "fit_params",
    "get_include",
    "get_lib_dir",
    "load_control_vectors",
    "numa_init",
    "supports_gpu_offload",
    "supports_mlock",
    "supports_mmap",
    "supports_rpc",
    "system_info",
]


def get_include() -> str:
    """The folder of llama.cpp's C headers, for downstream Cython/C extensions."""
    return os.path.join(get_lib_dir(), "include")


def get_lib_dir() -> str:
    """The folder holding libllama, libggml and the backend plugins (link with rpath to it)."""
    return os.path.dirname(os.path.abspath(_backend.__file__))
