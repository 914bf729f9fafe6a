"""Google Cloud Vertex AI's prediction protocol, as llama-server speaks it when the
environment says ``AIP_MODE=PREDICTION``: the port from ``AIP_HTTP_PORT``, health at
``AIP_HEALTH_ROUTE`` and ``AIP_PREDICT_ROUTE`` (``/predict``) taking
``{"instances": [...]}``, each instance a request to the route its ``@requestFormat``
names (``chatCompletions`` for ``/v1/chat/completions``, or a path)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message

from llama_cy.server import worker
from llama_cy.server.schema import ApiError

__all__ = ["enabled", "format_name", "port", "predict_endpoint"]

_MAX_INSTANCES = 128


def enabled() -> bool:
    return os.environ.get("AIP_MODE", "") == "PREDICTION"


def port(default: int) -> int:
    value = os.environ.get("AIP_HTTP_PORT")
    return int(value) if enabled() and value else default


def format_name(path: str) -> str:
    """llama-server's camelCase alias of a route: ``/v1/chat/completions`` ->
    ``chatCompletions``, ``/apply-template`` -> ``applyTemplate``."""
    path = path.removeprefix("/v1").lstrip("/").split("{", 1)[0]
    parts = [p for p in re.split(r"[/\-_]", path) if p]
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else ""


def _error(message: str, status: int = 400) -> dict[str, Any]:
    kind = "invalid_request_error" if status == 400 else "server_error"
    return {"error": {"code": status, "message": message, "type": kind}}


def predict_endpoint(app: ASGIApp, paths: list[str]) -> Any:
    """The /predict handler over ``app``: each instance is sent to ``app`` in-process,
    with the original request's headers (the API key among them)."""
    aliases: dict[str, str] = {}
    for p in paths:
        aliases.setdefault(format_name(p), p)

    async def call(request: Request, path: str, payload: dict[str, Any]) -> Any:
        body = json.dumps(payload).encode()
        headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        scope = {**request.scope, "path": path, "raw_path": path.encode(), "headers": headers}
        sent = False
        status = 500
        chunks: list[bytes] = []

        async def receive() -> Message:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # nothing more: wait as a live client does
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, send)
        raw = b"".join(chunks)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace") if status < 400 else _error(raw.decode(), status)

    async def one(request: Request, instance: Any) -> Any:
        if not isinstance(instance, dict):
            return _error("each instance must be a JSON object")
        fmt = instance.get("@requestFormat")
        if not isinstance(fmt, str):
            return _error("each instance must include a string @requestFormat")
        payload = {k: v for k, v in instance.items() if k != "@requestFormat"}
        payload["stream"] = False  # the predict route does not stream
        path = aliases.get(fmt) or (fmt if fmt in paths else None)
        if path is None:
            return _error(f"no handler registered for @requestFormat: {fmt}")
        return await call(request, path, payload)

    async def predict(request: Request) -> Response:
        try:
            data = await worker.read_json(request)
        except ApiError as exc:
            return JSONResponse(_error(exc.message), 400)
        if not isinstance(data, dict) or not isinstance(data.get("instances"), list):
            return JSONResponse(
                _error("the request body must include an array field named instances"), 400
            )
        instances = data["instances"]
        if len(instances) > _MAX_INSTANCES:
            return JSONResponse(
                _error(f"instances array exceeds maximum size of {_MAX_INSTANCES}"), 400
            )
        predictions = await asyncio.gather(*(one(request, i) for i in instances))
        return JSONResponse({"predictions": predictions})

    return predict
