"""llama-cpp-python's ``llama_cpp._utils``: ``suppress_stdout_stderr``, which programs
import to keep llama.cpp's C-level output off the terminal, and its singleton helpers.

As there, ``suppress_stdout_stderr()`` with its default ``disable=True`` does nothing;
``disable=False`` sends file descriptors 1 and 2, and ``sys.stdout``/``sys.stderr``, to
``os.devnull`` for the block. (llama_cy's own log goes through Python's logging, which
``Llama(verbose=False)`` already keeps quiet.)
"""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import IO, Any, ClassVar

__all__ = ["MetaSingleton", "Singleton", "suppress_stdout_stderr"]


class suppress_stdout_stderr:  # noqa: N801 (llama-cpp-python's name)
    def __init__(self, disable: bool = True) -> None:
        self.disable = disable
        self._saved: tuple[int, int] | None = None
        self._streams: tuple[Any, Any] = (None, None)
        self._null: IO[str] | None = None

    def __enter__(self) -> suppress_stdout_stderr:
        if self.disable:
            return self
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()  # what was written before the block still goes out
        self._saved = (os.dup(1), os.dup(2))
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        self._streams = (sys.stdout, sys.stderr)
        self._null = open(os.devnull, "w")  # closed in __exit__
        sys.stdout = sys.stderr = self._null
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.disable or self._saved is None:
            return
        sys.stdout, sys.stderr = self._streams
        for fd, saved in zip((1, 2), self._saved, strict=True):
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = None
        if self._null is not None:
            self._null.close()
            self._null = None


class MetaSingleton(type):
    """One instance per class (llama-cpp-python's chat handler registry is one)."""

    _instances: ClassVar[dict[type, Any]] = {}

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls not in cls._instances:
            cls._instances[cls] = super().__call__(*args, **kwargs)
        return cls._instances[cls]


class Singleton(metaclass=MetaSingleton):
    pass
