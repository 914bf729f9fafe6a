"""An OpenAI-compatible HTTP server with continuous batching (``llama-cy serve``).

:func:`serve` loads a model and runs the app with uvicorn; :func:`create_app` gives the
ASGI app over a loaded model for embedding in another server. :class:`ServerSettings` are
made in Python, or from llama-server's flags (:func:`settings_from_flags`), and fitted to
the devices' memory (:func:`fit`, llama-server's -fit) before :func:`load_model`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cy.server.app import create_app, create_router_app
    from llama_cy.server.core import Server
    from llama_cy.server.engine import Engine, QueueFullError
    from llama_cy.server.flag_settings import settings_from_flags
    from llama_cy.server.router import Router
    from llama_cy.server.settings import ServerSettings, fit, load_model

# Imported when first used: the command line reads llama_cy.server.flags without
# loading Starlette and the engine.
_LAZY = {
    "Server": "core",
    "create_app": "app",
    "create_router_app": "app",
    "Router": "router",
    "Engine": "engine",
    "QueueFullError": "engine",
    "ServerSettings": "settings",
    "fit": "settings",
    "load_model": "settings",
    "settings_from_flags": "flag_settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llama_cy.server' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"llama_cy.server.{module}"), name)


__all__ = [
    "Engine",
    "QueueFullError",
    "Router",
    "Server",
    "ServerSettings",
    "create_app",
    "create_router_app",
    "fit",
    "load_model",
    "serve",
    "serve_router",
    "settings_from_flags",
]


def serve(
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8080,
    progress: Callable[[float], bool | None] | None = None,
    *,
    reuse_port: bool = False,
    ssl_keyfile: str | None = None,
    ssl_certfile: str | None = None,
    static_path: str | None = None,
) -> None:
    """Load the model and serve until interrupted.

    ``host`` is llama-server's: addresses separated by commas, or UNIX socket paths
    ending in ``.sock``; all of them serve the same app.
    """
    from llama_cy.server import vertex
    from llama_cy.server.app import create_app
    from llama_cy.server.child import ChildLink
    from llama_cy.server.routes.openai import model_card
    from llama_cy.server.settings import load_model

    port = vertex.port(port)  # Vertex AI's AIP_HTTP_PORT wins, as in llama-server
    sockets = [_bind(h, port, reuse_port) for h in host.split(",") if h.strip()]
    link = ChildLink() if ChildLink.active() else None  # a router's child
    if link is not None:
        link.notify("loading")
    model = load_model(settings, progress)
    try:
        # The server owns the model: it closes it, and frees and reloads it to sleep.
        app = create_app(model, settings, static_path=static_path, owns_model=True)
        if link is not None:
            app.state.server.on_state = link.notify
            link.notify("ready", model_card(app.state.server))
        where = ", ".join(_where(s, ssl_keyfile is not None) for s in sockets)
        print(f"llama-cy: serving {settings.model_id} on {where}", file=sys.stderr, flush=True)
        _hand_over_the_gil_sooner(settings)
        _run(
            app,
            sockets,
            app.state.server.tools,
            ssl_keyfile,
            ssl_certfile,
            timeout_keep_alive=max(1, int(settings.timeout)),
        )
    finally:
        model.close()
        for s in sockets:
            s.close()


#: The longest the engine thread waits for the GIL once its step's compute is done,
#: instead of Python's 5 ms, where the model runs on a GPU: the event loop holds it while
#: it writes to the clients, and at GPU token rates a step takes about 1 ms (an H200 gave
#: 11-15% more tokens/s at 0.5 ms: bench/results/2026-11-28-gpu-NVIDIA-H200-probe.md).
SWITCH_INTERVAL_S = 0.0005
_PYTHON_SWITCH_INTERVAL_S = 0.005


def _hand_over_the_gil_sooner(settings: ServerSettings) -> None:
    """:data:`SWITCH_INTERVAL_S` for this process where its model runs on a GPU, unless it
    set an interval of its own. Not on a CPU: llama.cpp's threads fill the cores there,
    and each forced hand-over waits for the OS to run the other thread (on 2 cores the
    time to first token of one client went from 3-5 ms to 7.5)."""
    from llama_cy import devices

    if settings.n_gpu_layers == 0 or not any(d.type in ("gpu", "igpu") for d in devices()):
        return
    if sys.getswitchinterval() == _PYTHON_SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)


def serve_router(
    router: Router,
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    autoload: bool = True,
    reuse_port: bool = False,
    ssl_keyfile: str | None = None,
    ssl_certfile: str | None = None,
) -> None:
    """llama-server's router mode: serve ``router``'s models, each in a child server
    started on demand, until interrupted."""
    from llama_cy.server.app import create_router_app

    sockets = [_bind(h, port, reuse_port) for h in host.split(",") if h.strip()]
    router.router_port = port
    try:
        app = create_router_app(router, settings, autoload)
        where = ", ".join(_where(s, ssl_keyfile is not None) for s in sockets)
        print(
            f"llama-cy: router mode on {where}: models load on demand", file=sys.stderr, flush=True
        )
        _run(app, sockets, app.state.tools, ssl_keyfile, ssl_certfile)
    finally:
        for s in sockets:
            s.close()


def _run(
    app: Any,
    sockets: list[socket.socket],
    tools: Any,
    ssl_keyfile: str | None,
    ssl_certfile: str | None,
    timeout_keep_alive: int = 5,
) -> None:
    """Run ``app`` with uvicorn on ``sockets`` until interrupted. As llama-server, the
    agent tools and MCP servers (``tools``) are let go first at shutdown, so that a tool
    call in flight ends now instead of holding up the graceful shutdown."""
    import uvicorn

    from llama_cy.server.http_protocol import http_protocol

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if tools is not None:
                tools.shutdown()
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app,
        http=http_protocol(),
        log_level="warning",
        access_log=False,  # at level warning its lines never show; their arguments cost
        timeout_graceful_shutdown=5,
        timeout_keep_alive=timeout_keep_alive,
        ssl_keyfile=ssl_keyfile,
        ssl_certfile=ssl_certfile,
    )
    _quiet_gc()
    Server(config).run(sockets=sockets)


#: The least threshold of the cyclic GC's youngest generation in a serving process
#: (Python's: 700, 2,000 from 3.13).
GC_THRESHOLD = 20_000


def _quiet_gc() -> None:
    """Fewer and shorter stops of the cyclic GC in a serving process: everything loaded so
    far (modules, the app, the engine) is frozen out of later collections (``gc.freeze``),
    and the youngest generation is collected every :data:`GC_THRESHOLD` allocations at
    least (a threshold of 0, or a higher one, is kept). A collection holds the GIL, so it
    stops the event loop and the engine's steps together: on the tiny model over row
    (7b)'s loads (1 to 64 clients, 23 s), Python's defaults made 4 full collections of
    about 19 ms each and 160 ms of collections in all; frozen and at 20,000, none and
    34 ms. The freeze keeps only what lives as long as the process anyway; the native
    memory of a sleeping server's engine is freed by its close, not by the GC."""
    import gc

    gc.freeze()
    young, *older = gc.get_threshold()
    if 0 < young < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *older)


def _bind(host: str, port: int, reuse_port: bool) -> socket.socket:
    """A listening socket: TCP on ``host:port`` (IPv6 for an address with ':'), or a UNIX
    socket for a path ending in ``.sock``."""
    host = host.strip()
    if host.endswith(".sock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(host)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(host)
    else:
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port and hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:  # '::' serves IPv6 only, as llama-server
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise SystemExit(f"llama-cy serve: cannot listen on {host}:{port}: {exc}") from None
    sock.listen(2048)
    return sock  # not inheritable: a tool's or MCP server's process must not hold it


def _where(sock: socket.socket, tls: bool) -> str:
    name = sock.getsockname()
    if isinstance(name, str):
        return f"unix:{name}"
    host = f"[{name[0]}]" if sock.family == socket.AF_INET6 else name[0]
    return f"{'https' if tls else 'http'}://{host}:{name[1]}"
