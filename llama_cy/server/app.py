"""The server's app: the route modules' routes mounted under ``--api-prefix``, behind
the :mod:`.gate` (API key, body cap) and llama-server's CORS; waking a sleeping server,
and every error as an OpenAI-shaped response.

The layers, each built only on those before it: :mod:`.core` (the :class:`Server`'s
state), :mod:`.inputs` and :mod:`.requests` (reading requests), :mod:`.worker` (large
JSON off the event loop), :mod:`.respond` (running and sending), :mod:`.routes` (one
module per API: OpenAI's, its Responses API, Anthropic's, llama-server's own,
llama-cpp-python's extras, embeddings, llama-server's agent tools, the CORS proxy,
metrics), and this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llama_cy._backend import available_cpus
from llama_cy._model import LlamaModel
from llama_cy._server_tools import ServerTools
from llama_cy.errors import ContextOverflowError, KVCacheFullError
from llama_cy.server import ui, vertex
from llama_cy.server.chat_renders import ChatRenders
from llama_cy.server.core import Endpoint, RouteSpec, Server, start_tools
from llama_cy.server.engine import QueueFullError
from llama_cy.server.exact_routes import ExactRoutes
from llama_cy.server.gate import UI_PATHS, Gate
from llama_cy.server.http_protocol import CasedName
from llama_cy.server.router import Router, RouterError
from llama_cy.server.routes import (
    anthropic,
    embeddings,
    llama_cpp_python,
    llama_server,
    metrics,
    openai,
    openai_responses,
    proxy,
    server_tools,
    streams,
    transcriptions,
)
from llama_cy.server.routes import router as router_routes
from llama_cy.server.schema import ApiError
from llama_cy.server.settings import ServerSettings

__all__ = [
    "Server",
    "create_app",
    "create_router_app",
    "public_paths",
    "route_table",
    "wrap",
]

_log = logging.getLogger("llama_cy.server")


def route_table(server: Server) -> list[RouteSpec]:
    """Every route of the API modules (path, endpoint, methods, public)."""
    return (
        openai.routes(server)
        + llama_server.routes(server)
        + embeddings.routes(server)
        + anthropic.routes(server)
        + openai_responses.routes(server)
        + proxy.routes(server)
        + server_tools.routes(server)
        + llama_cpp_python.routes(server)
        + metrics.routes(server)
        + streams.routes(server)
        + transcriptions.routes(server)
    )


def public_paths(table: list[RouteSpec], prefix: str) -> set[str]:
    """The paths answered without the API key: the table's public routes and the web
    page (llama-server's public endpoints)."""
    return (
        {prefix + p for p, _, _, public in table if public}
        | {prefix + p for p in UI_PATHS}
        | {prefix or "/"}
    )


def wrap(server: Server, fn: Endpoint) -> Endpoint:
    """Waking a sleeping server, and every error as an OpenAI-shaped response (the API
    key is the app's :class:`~llama_cy.server.gate.Gate`'s)."""

    async def endpoint(request: Request) -> Response:
        try:
            if _keeps_sleeping(request, server.settings.api_prefix):
                return await fn(request)
            server.active += 1
            try:
                if server.sleeping or server.waking:  # asleep, or falling so
                    await server.wake()
                return await fn(request)
            finally:
                server.active -= 1
                server.last_active = time.monotonic()
        except ApiError as exc:
            return exc.response()
        except ContextOverflowError as exc:
            return ApiError(
                400,
                f"the request exceeds the available context size: the prompt has "
                f"{exc.n_tokens} tokens, a slot's context holds {exc.n_ctx}",
                type="exceed_context_size_error",
                n_prompt_tokens=exc.n_tokens,
                n_ctx=exc.n_ctx,
            ).response()
        except KVCacheFullError as exc:
            # The slots share a KV cache that filled up while they generated.
            return ApiError(
                500, f"the context size has been exceeded: {exc}", "server_error"
            ).response()
        except QueueFullError as exc:
            return ApiError(
                503,
                f"the server is busy: {exc}",
                "unavailable_error",
                headers={"Retry-After": "1"},
            ).response()
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
            # The request's own values (GrammarError, InvalidTokenError and llama_cy's
            # other argument errors are ValueErrors too).
            return ApiError(400, str(exc) or type(exc).__name__).response()
        except Exception as exc:  # ours, not the client's: still JSON, still alive
            _log.exception("request to %s failed", request.url.path)
            return ApiError(500, f"{type(exc).__name__}: {exc}", "server_error").response()

    return endpoint


def create_router_app(router: Router, settings: ServerSettings, autoload: bool) -> Starlette:
    """The ASGI app of llama-server's router mode (:mod:`.router`): the models
    listed in ``router`` load on demand, or at start with ``load-on-startup``."""

    front = RouterFront(settings, start_tools(settings))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        for name in router.startup:
            _log.info("(startup) loading model %s", name)
            await router.load(name)
        try:
            yield
        finally:
            if front.tools is not None:
                front.tools.shutdown()
            await router.unload_all()
            if front.tools is not None:
                await asyncio.to_thread(front.tools.close)

    def guarded(fn: Endpoint) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except ApiError as exc:
                return exc.response()
            except RouterError as exc:
                return ApiError(exc.status, str(exc), exc.type).response()
            except (ValueError, TypeError, KeyError) as exc:
                return ApiError(400, str(exc) or type(exc).__name__).response()
            except Exception as exc:  # ours, not the client's: still JSON, still alive
                _log.exception("request to %s failed", request.url.path)
                return ApiError(500, f"{type(exc).__name__}: {exc}", "server_error").response()

        return endpoint

    prefix = settings.api_prefix
    # The router runs the agent tools, MCP servers and CORS proxy itself, as llama-server.
    table = (
        router_routes.routes(router, settings, autoload)
        + server_tools.routes(front)
        + proxy.routes(front)
    )
    mounted = [Route(prefix + p, guarded(fn), methods=m) for p, fn, m, _ in table]
    app = Starlette(routes=mounted, lifespan=lifespan)
    _add_gate(app, settings, public_paths(table, prefix), mounted)
    app.state.router = router
    app.state.tools = front.tools
    return app


@dataclass
class RouterFront:
    """What the router's own routes (tools, CORS proxy) need of a server."""

    settings: ServerSettings
    tools: ServerTools | None


def _add_gate(
    app: Starlette, settings: ServerSettings, public: set[str], mounted: list[Route]
) -> None:
    # The exact paths of ``mounted`` are called from inside the gate (ExactRoutes).
    # The gate comes before routing, so that static files, unknown routes and wrong
    # methods need the key too (llama-server's pre-routing check); CORS goes on outside it.
    exact = [(m, r.path, r.endpoint) for r in mounted for m in r.methods or () if m != "HEAD"]
    app.add_middleware(ExactRoutes, routes=exact)
    app.add_middleware(Gate, keys=settings.api_keys, public=frozenset(public))
    app.add_middleware(Cors, settings=settings)


def create_app(
    model: LlamaModel,
    settings: ServerSettings,
    *,
    static_path: str | None = None,
    owns_model: bool = False,
) -> Starlette:
    """The ASGI app over ``model`` (its engine runs while the app's lifespan does, on a
    context of its own). The model stays the caller's unless ``owns_model``: then the
    server closes it, and ``--sleep-idle-seconds`` frees and reloads it. ``static_path``
    is llama-server's ``--path``: a folder served at the root instead of the chat
    page."""
    server = Server(model, settings, owns_model=owns_model)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.start()
        server.chat_renders = ChatRenders.start(available_cpus())  # a render is CPU-bound
        watcher = None
        if settings.sleep_idle_seconds > 0:
            watcher = asyncio.create_task(server.watch_idle())
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
            server.streams.close()
            if server.chat_renders is not None:
                server.chat_renders.close()
                server.chat_renders = None
            await asyncio.to_thread(server.close)

    prefix = settings.api_prefix
    table = route_table(server)
    public = public_paths(table, prefix)
    routes = [Route(prefix + p, wrap(server, fn), methods=m) for p, fn, m, _ in table]
    mounted: list[BaseRoute] = list(routes)
    if settings.ui and static_path:
        mounted.append(Mount(prefix or "/", StaticFiles(directory=static_path, html=True)))
    elif settings.ui:
        mounted.append(Route(prefix + "/", ui.page, methods=["GET"]))
    app = Starlette(routes=mounted, lifespan=lifespan)
    if vertex.enabled():
        posts = [r.path for r in mounted if isinstance(r, Route) and "POST" in (r.methods or ())]
        predict = vertex.predict_endpoint(app, posts)
        route = os.environ.get("AIP_PREDICT_ROUTE", "/predict")
        app.router.routes.append(Route(route, wrap(server, predict), methods=["POST"]))
        health_route = os.environ.get("AIP_HEALTH_ROUTE")
        if health_route:
            health = next(
                r for r in mounted if isinstance(r, Route) and r.path == prefix + "/health"
            )
            app.router.routes.append(Route(health_route, health.endpoint, methods=["GET"]))
            public.add(health_route)
    _add_gate(app, settings, public, routes)
    app.state.server = server
    return app


# llama-server's spellings of its CORS headers (some clients compare names exactly)
_ORIGIN = CasedName(b"Access-Control-Allow-Origin")
_CREDENTIALS = CasedName(b"Access-Control-Allow-Credentials")
_METHODS = CasedName(b"Access-Control-Allow-Methods")
_HEADERS = CasedName(b"Access-Control-Allow-Headers")
#: What llama-server answers while asleep, without waking (GET only).
_SLEEP_SAFE = frozenset(["/health", "/v1/health", "/props", "/models", "/v1/models", "/metrics"])


def _keeps_sleeping(request: Request, prefix: str) -> bool:
    scope = request.scope  # not request.url: it parses a whole URL out of the scope
    return scope["method"] == "GET" and scope["path"].removeprefix(prefix) in _SLEEP_SAFE


class Cors:
    """llama-server's CORS: ``--cors-origins`` (``*`` with credentials echoes the
    request's Origin; ``localhost`` echoes only local origins), and OPTIONS answered
    before authorization, since browsers send no key with a preflight."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings

    def _origin(self, origin: str) -> str | None:
        s = self.settings
        if s.cors_credentials and s.cors_origins == "*":
            return origin
        if s.cors_origins == "localhost":
            try:
                host = urllib.parse.urlsplit(origin).hostname
            except ValueError:
                return None
            return origin if host in ("localhost", "127.0.0.1", "::1") else None
        return s.cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        allow = self._origin(headers.get(b"origin", b"").decode("latin-1"))
        # Header names as llama-server spells them: some clients compare them exactly.
        extra = [(_ORIGIN, allow.encode("latin-1"))] if allow else []
        if scope["method"] == "OPTIONS":
            s = self.settings
            extra += [
                (_CREDENTIALS, b"true" if s.cors_credentials else b"false"),
                (_METHODS, s.cors_methods.encode("latin-1")),
                (_HEADERS, s.cors_headers.encode("latin-1")),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": extra})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors if extra else send)
