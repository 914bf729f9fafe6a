"""llama-server's log lines (common/log.cpp), for ``serve``: plain messages, which
``--log-prefix`` starts with a level letter (and ``--log-timestamps`` with the time since
the log started), coloured by ``--log-colors``; or ``--log-jsonl``'s JSON objects."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import ClassVar

__all__ = ["CommonLogFormatter", "JsonlFormatter", "colors_wanted"]

_START = time.time()  # common_log's t_start: the log's times count from here

DEFAULT, RED, GREEN, YELLOW, BLUE, MAGENTA = (
    "\033[0m",
    "\033[31m",
    "\033[32m",
    "\033[33m",
    "\033[34m",
    "\033[35m",
)


def _micros(record: logging.LogRecord) -> int:
    return max(0, int((record.created - _START) * 1e6))


def colors_wanted(value: str | None) -> bool:
    """``--log-colors`` on, off or auto (the default): auto colours a terminal, unless
    ``NO_COLOR`` is set or ``TERM`` is ``dumb`` (common.cpp's tty_can_use_colors)."""
    if value in ("on", "enabled", "true", "1"):
        return True
    if value in ("off", "disabled", "false", "0"):
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return any(s is not None and s.isatty() for s in (sys.stdout, sys.stderr))


class CommonLogFormatter(logging.Formatter):
    """common_log_entry::print: ``[M.ss.mmm.uuu ]L msg``, the bracketed parts only with
    ``prefix`` (the time only with ``timestamps`` as well)."""

    def __init__(self, *, prefix: bool = False, timestamps: bool = False, colors: bool = False):
        super().__init__()
        self.prefix = prefix
        self.timestamps = timestamps
        col = (lambda c: c) if colors else (lambda c: "")
        self._default = col(DEFAULT)
        self._blue = col(BLUE)
        self._letters = {
            logging.DEBUG: f"{col(YELLOW)}D ",
            logging.INFO: f"{col(GREEN)}I {col(DEFAULT)}",
            logging.WARNING: f"{col(MAGENTA)}W ",
            logging.ERROR: f"{col(RED)}E ",
        }

    def format(self, record: logging.LogRecord) -> str:
        level = min(record.levelno // 10 * 10, logging.ERROR)
        msg = record.getMessage()
        if record.exc_info:
            msg = f"{msg}\n{self.formatException(record.exc_info)}"
        head = ""
        if self.prefix:
            if self.timestamps:
                t = _micros(record)
                head = (
                    f"{self._blue}{t // 60_000_000}.{t // 1_000_000 % 60:02d}."
                    f"{t // 1000 % 1000:03d}.{t % 1000:03d}{self._default} "
                )
            head += self._letters.get(level, "")
        # The reset comes at the end of the colored levels' lines, as there.
        tail = self._default if level in (logging.DEBUG, logging.WARNING, logging.ERROR) else ""
        return f"{head}{msg.rstrip(chr(10))}{tail}"


class JsonlFormatter(logging.Formatter):
    """llama.cpp's --log-jsonl lines (common/log.cpp): ``type``, ``time`` (microseconds
    since the log started), ``level`` and ``msg`` (with its newline)."""

    _LEVELS: ClassVar[dict[int, str]] = {
        logging.DEBUG: "debug",
        logging.INFO: "info",
        logging.WARNING: "warn",
    }

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "type": "log",
                "time": _micros(record),
                "level": self._LEVELS.get(record.levelno, "error"),
                "msg": record.getMessage() + "\n",
            },
            ensure_ascii=False,
        )
