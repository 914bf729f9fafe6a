"""llama.h's enum values (llama-cpp-python passes numbers) as the names llama_cy and
llama-server take (``LLAMA_POOLING_TYPE_MEAN`` -> ``"mean"``)."""

from __future__ import annotations

import functools
from typing import Any

from llama_cpp import llama_cpp as _c

__all__ = ["enum_name", "enum_value"]


@functools.cache
def _table(prefix: str) -> dict[int, str]:
    out = {}
    for name in dir(_c):
        suffix = name[len(prefix) :]
        if name.startswith(prefix) and suffix not in ("COUNT", "MAX_VALUE"):
            out[int(getattr(_c, name))] = suffix.lower()
    return out


def enum_name(prefix: str, value: Any, what: str | None = None) -> Any:
    """The lower-case name of ``value`` in llama.h's ``prefix*`` enum; None for its
    UNSPECIFIED (-1) and for None; a name passes through. ValueError (naming ``what``)
    for a number the enum does not have."""
    if value is None or isinstance(value, str):
        return value
    table = _table(prefix)
    number = int(value)
    if number not in table:
        raise ValueError(f"{what or prefix + '*'}={value}: not a value of llama.h's enum")
    name = table[number]
    return None if name == "unspecified" else name


def enum_value(prefix: str, value: Any, default: int) -> int:
    """llama.h's number for ``value`` (a name of its ``prefix*`` enum, or a number);
    ``default`` for None or a name it does not have."""
    if value is None:
        return default
    if not isinstance(value, str):
        return int(value)
    return next((k for k, v in _table(prefix).items() if v == value), default)
