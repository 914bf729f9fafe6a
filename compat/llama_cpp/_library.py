"""libllama opened with ctypes: the library llama_cy's extension modules use, so that
``Llama.model`` and ``Llama.ctx`` (addresses) can be passed to its functions. Shared by
the generated :mod:`llama_cpp.llama_cpp` and its hand-written aliases."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import llama_cy

__all__ = ["function", "lib"]

_dir = Path(llama_cy.get_lib_dir())
_names = ("libllama.so.0", "libllama.so", "libllama.0.dylib", "libllama.dylib", "llama.dll")
lib = ctypes.CDLL(str(next((p for n in _names if (p := _dir / n).is_file()), _dir / "libllama.so")))


def function(name: str, argtypes: list[Any], restype: Any) -> Any:
    """The C function ``name`` with these types (one object per name: ctypes keeps it)."""
    func = getattr(lib, name)
    func.argtypes = argtypes
    func.restype = restype
    return func
