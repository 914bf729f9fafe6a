"""llama-cpp-python's ``llama_cpp._logger``: ``set_verbose``, ``logger`` and
``llama_log_callback``, which programs import to quiet or reroute llama.cpp's log.

llama_cy sends llama.cpp's log lines to Python's logging (the ``llama_cy`` logger):
``set_verbose(True)`` shows them from INFO up on stderr, ``set_verbose(False)`` only
errors, as llama-cpp-python's does with its callback. ``llama_log_callback`` is that
callback (print the text when ``logger``'s level lets it through) for a program to hand
to ``llama_cpp.llama_log_set``; it is not installed at import here.
"""

from __future__ import annotations

import ctypes
import logging
import sys

from llama_cy import enable_verbose_log

from . import llama_cpp

__all__ = ["GGML_LOG_LEVEL_TO_LOGGING_LEVEL", "llama_log_callback", "logger", "set_verbose"]

#: ggml_log_level (NONE, INFO, WARN, ERROR, DEBUG, CONT) -> logging's levels
GGML_LOG_LEVEL_TO_LOGGING_LEVEL = {
    0: logging.CRITICAL,
    1: logging.INFO,
    2: logging.WARNING,
    3: logging.ERROR,
    4: logging.DEBUG,
    5: logging.DEBUG,
}

logger = logging.getLogger("llama-cpp-python")
_last = logging.CRITICAL  # a CONT piece continues the previous line's level


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def llama_log_callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    global _last
    if level != 5:
        _last = GGML_LOG_LEVEL_TO_LOGGING_LEVEL.get(level, logging.INFO)
    if logger.isEnabledFor(_last):
        print(text.decode("utf-8", "replace"), end="", flush=True, file=sys.stderr)


def set_verbose(verbose: bool) -> None:
    """llama.cpp's log on stderr from INFO up (True), or its errors only (False)."""
    logger.setLevel(logging.DEBUG if verbose else logging.ERROR)
    if verbose:
        enable_verbose_log()
    else:
        logging.getLogger("llama_cy").setLevel(logging.ERROR)
