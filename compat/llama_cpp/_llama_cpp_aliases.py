"""Names llama-cpp-python's ctypes layer keeps for what llama.h renamed or removed, so
that programs written against older releases run: the few that are not in llama.h
itself (the rest of :mod:`llama_cpp.llama_cpp` is generated from it)."""

from __future__ import annotations

import ctypes
import functools
import warnings
from collections.abc import Callable
from typing import Any, NewType, TypeVar

from llama_cpp._library import lib

# Imported at the end of llama_cpp.llama_cpp, which has given libllama's functions their
# argument types by then (ctypes keeps one function object per name); this module does
# not import it back.

__all__ = [
    "ctypes_function",
    "llama_apply_adapter_cvec",
    "llama_batch_ext_p",
    "llama_batch_ext_p_ctypes",
    "llama_kv_cache_p",
    "llama_kv_cache_p_ctypes",
    "llama_log_callback",
    "llama_set_adapter_lora",
]

F = TypeVar("F", bound=Callable[..., Any])

#: llama.h's log callback type before ggml took it over (ggml_log_callback: ctypes makes
#: one type per signature).
llama_log_callback: Any = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
# Handle types of APIs llama.h has since removed (the KV cache view, the extended batch).
llama_kv_cache_p = NewType("llama_kv_cache_p", int)
llama_kv_cache_p_ctypes = ctypes.c_void_p
llama_batch_ext_p = NewType("llama_batch_ext_p", int)
llama_batch_ext_p_ctypes = ctypes.c_void_p


def ctypes_function(
    name: str, argtypes: list[Any], restype: Any, enabled: bool = True
) -> Callable[[F], F]:
    """llama-cpp-python's decorator: the decorated stub becomes ``_lib``'s function
    ``name`` with these types."""

    def decorator(f: F) -> F:
        if not enabled:
            return f
        func = getattr(lib, name)
        func.argtypes, func.restype = argtypes, restype
        functools.update_wrapper(func, f)
        return func  # type: ignore[no-any-return]

    return decorator


def llama_set_adapter_lora(ctx: int, adapter: int, scale: float, /) -> int:
    """One LoRA adapter at ``scale`` (deprecated there too: llama_set_adapters_lora)."""
    warnings.warn(
        "llama_set_adapter_lora is deprecated; use llama_set_adapters_lora instead",
        DeprecationWarning,
        stacklevel=2,
    )
    adapters = (ctypes.c_void_p * 1)(adapter)
    scales = (ctypes.c_float * 1)(scale)
    return int(lib.llama_set_adapters_lora(ctx, adapters, 1, scales))


def llama_apply_adapter_cvec(
    ctx: int, data: Any, len: int, n_embd: int, il_start: int, il_end: int, /
) -> int:
    """The control vector (deprecated there too: llama_set_adapter_cvec)."""
    warnings.warn(
        "llama_apply_adapter_cvec is deprecated; use llama_set_adapter_cvec instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return int(lib.llama_set_adapter_cvec(ctx, data, len, n_embd, il_start, il_end))
