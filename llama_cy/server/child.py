"""A router's children (server_child in tools/server/server-models.cpp): how one starts
(this interpreter running ``llama-cy serve`` on a loopback port), and the pipes it talks
to its router over: state lines on stdout, the exit command on stdin."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from typing import IO, Any

__all__ = ["CHILD_ADDR", "CMD_EXIT", "CMD_STATE", "ChildLink", "child_command"]

_log = logging.getLogger("llama_cy.server.router")

CHILD_ADDR = "127.0.0.1"
CMD_EXIT = "cmd_router_to_child:exit"
CMD_STATE = "cmd_child_to_router:state:"


def child_command() -> list[str]:
    """How a child starts: this interpreter running ``llama-cy serve`` (the current
    folder left off ``sys.path``, so that a checkout's sources never shadow the build)."""
    boot = "import sys; del sys.path[0]; from llama_cy.cli import main; sys.exit(main())"
    return [sys.executable, "-c", boot, "serve"]


class ChildLink:
    """A child's side of the router's pipes (server_child): state lines on what was
    stdout (the log moves to stderr), and a thread that waits for the exit command on
    stdin. A child whose stdin closes has lost its router, and exits."""

    def __init__(self) -> None:
        #: set when the router says exit (a download worker checks it)
        self.exiting = threading.Event()
        self._out: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)  # anything else printed goes to the log
        self._lock = threading.Lock()
        threading.Thread(target=self._listen, daemon=True, name="router-link").start()

    @staticmethod
    def active() -> bool:
        return "LLAMA_SERVER_ROUTER_PORT" in os.environ

    def notify(self, state: str, payload: dict[str, Any] | None = None) -> None:
        line = json.dumps({"state": state, "payload": payload or {}}, ensure_ascii=False)
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._out.write(f"{CMD_STATE}{line}\n")
            self._out.flush()

    def _listen(self) -> None:
        for line in sys.stdin:
            if CMD_EXIT in line:
                _log.info("exit command received, exiting...")
                self.exiting.set()
                if os.environ.get("LLAMA_SERVER_CHILD_MODE") != "download":
                    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown
                return
        _log.info("EOF on stdin detected, forcing shutdown...")
        os._exit(1)
