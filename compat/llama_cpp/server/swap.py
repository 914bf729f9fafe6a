"""Several models from one config file, as llama-cpp-python's server serves them: one
loaded at a time, swapped when a request names another (its ``model`` field, the model's
``model_alias``); an unknown or missing name means the first model.

Each model runs in its own ``python -m llama_cpp.server`` child (llama-cy's server over
that model's settings), started when it is asked for and stopped when another is.
This front relays each request to the running child, one request at a time, as
llama-cpp-python's server runs them.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .serve_args import (
    MODEL_SETTINGS,
    SERVER_SETTINGS,
    serve_argv,
    settings_argv,
)

__all__ = ["Swapper", "create_app"]

# Headers that describe one hop, not the message (RFC 9110, 7.6.1).
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Swapper:
    """The models by alias, and the one child server that runs."""

    def __init__(self, models: dict[str, list[str]], api_key: str | None) -> None:
        if not models:
            raise ValueError("no models to serve")
        self.models = models  # alias -> the child's Python arguments (without host and port)
        self.default = next(iter(models))
        self.api_key = api_key
        self.lock = threading.Lock()  # one request at a time
        self.alias: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @classmethod
    def from_settings(cls, server: dict[str, Any], models: list[dict[str, Any]]) -> Swapper:
        """Models by llama-cpp-python's settings (each alias its ``model_alias``, else its
        path), the first one running, as that server loads it at start."""
        by_alias: dict[str, list[str]] = {}
        for model in models:
            alias = model.get("model_alias") or model.get("model")
            if not alias:
                raise ValueError("each model of a config file needs a model path")
            model = {**model, "model_alias": alias}
            serve_argv(server, model)  # checked here, at start, for every model
            by_alias[alias] = ["-m", "llama_cpp.server", *settings_argv(server, model)]
        swapper = cls(by_alias, server.get("api_key"))
        atexit.register(swapper.stop)  # an app whose lifespan never ends leaves no child
        swapper.ensure(None)
        return swapper

    def ensure(self, alias: str | None) -> None:
        """Run the child for ``alias`` (the first model's for an unknown one)."""
        alias = alias if alias in self.models else self.default
        if alias == self.alias and self.proc is not None and self.proc.poll() is None:
            return
        self.stop()
        self.port = _free_port()
        cmd = [sys.executable, *self.models[alias], "--host", "127.0.0.1", "--port", str(self.port)]
        # the child's settings are its flags: none from this environment (CONFIG_FILE, MODEL...)
        names = {"CONFIG_FILE", *(n.upper() for n in (*MODEL_SETTINGS, *SERVER_SETTINGS))}
        env = {k: v for k, v in os.environ.items() if k.upper() not in names}
        self.proc = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, env=env)
        self.alias = alias
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server for {alias!r} exited ({self.proc.returncode})")
            try:
                status, _, _ = self.fetch("GET", "/health", b"", {})
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server for {alias!r} did not start")

    def fetch(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request(method, path, body, headers)
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def open(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        conn.request(method, path, body, headers)
        return conn, conn.getresponse()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc, self.alias = None, None


def create_app(swapper: Swapper) -> Starlette:
    def authorized(request: Request) -> bool:
        if swapper.api_key is None:
            return True
        return request.headers.get("authorization") == f"Bearer {swapper.api_key}"

    async def models(request: Request) -> Response:
        if not authorized(request):
            return JSONResponse({"error": {"message": "Invalid API Key"}}, status_code=401)
        data = [
            {"id": alias, "object": "model", "owned_by": "me", "permissions": []}
            for alias in swapper.models
        ]
        return JSONResponse({"object": "list", "data": data})

    async def relay(request: Request) -> Response:
        body = await request.body()
        alias = None
        if body and request.method == "POST":
            try:
                payload: Any = json.loads(body)
                alias = payload.get("model") if isinstance(payload, dict) else None
            except ValueError:
                pass
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")

        done = threading.Event()

        def release() -> None:
            """Once per request, however it ends (a client gone mid-stream included)."""
            if not done.is_set():
                done.set()
                swapper.lock.release()

        def start() -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, bytes | None]:
            swapper.lock.acquire()
            try:
                swapper.ensure(alias)
                conn, upstream = swapper.open(request.method, path, body, headers)
                if upstream.getheader("content-type", "").startswith("text/event-stream"):
                    return conn, upstream, None
                data = upstream.read()  # a whole answer: relayed at once, the lock let go
                conn.close()
                release()
                return conn, upstream, data
            except BaseException:
                release()
                raise

        conn, upstream, data = await asyncio.to_thread(start)
        out = {k: v for k, v in upstream.getheaders() if k.lower() not in _HOP}
        if data is not None:
            return Response(data, status_code=upstream.status, headers=out)

        def chunks() -> Iterator[bytes]:
            try:
                while chunk := upstream.read1(65536):
                    yield chunk
            finally:
                conn.close()
                release()

        return StreamingResponse(
            chunks(), status_code=upstream.status, headers=out, background=BackgroundTask(release)
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        swapper.stop()

    methods = ["GET", "POST", "PUT", "DELETE", "OPTIONS"]
    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/{path:path}", relay, methods=methods),
        ],
        lifespan=lifespan,
    )
