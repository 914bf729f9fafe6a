"""The routes of llama-server's router mode (tools/server/server.cpp with
server-models.cpp): ``/models`` lists the router's models and loads, unloads and
watches them (``/models/load``, ``/models/unload``, ``/models/sse``); every model route
is forwarded to the child that the request's ``"model"`` names (a GET's ``?model=``),
which is loaded first unless ``--no-models-autoload`` (or ``?autoload=false``). The
resumable-stream routes go to the child that a conversation's request went to."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llama_cy._backend import LLAMA_CPP_BUILD
from llama_cy.download import DownloadError, hf_plan
from llama_cy.server import worker
from llama_cy.server.child import CHILD_ADDR
from llama_cy.server.core import RouteSpec
from llama_cy.server.router import Model, Router, RouterError
from llama_cy.server.routes.streams import conv_id_of, lookup_ids
from llama_cy.server.schema import ApiError
from llama_cy.server.settings import ServerSettings
from llama_cy.server.stream_sessions import ConvModels, conversation_id

__all__ = ["forward", "routes"]

#: The routes forwarded to a model's child (server.cpp, router mode).
PROXY_POST = (
    "/props",
    "/completion",
    "/completions",
    "/v1/completions",
    "/chat/completions",
    "/v1/chat/completions",
    "/v1/chat/completions/control",
    "/v1/responses",
    "/responses",
    "/v1/audio/transcriptions",
    "/audio/transcriptions",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/infill",
    "/embedding",
    "/embeddings",
    "/v1/embeddings",
    "/rerank",
    "/reranking",
    "/v1/rerank",
    "/v1/reranking",
    "/v1/systemone",
    "/tokenize",
    "/detokenize",
    "/apply-template",
    "/chat/completions/input_tokens",
    "/v1/chat/completions/input_tokens",
    "/responses/input_tokens",
    "/v1/responses/input_tokens",
    "/lora-adapters",
    "/slots/{id_slot}",
)
PROXY_GET = ("/metrics", "/lora-adapters", "/slots")

#: Hop-by-hop headers, and those the router sets itself (CORS, server, date).
_DROP_REQUEST = frozenset(
    {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "expect"}
)
_DROP_RESPONSE = frozenset(
    {"server", "date", "transfer-encoding", "content-length", "keep-alive", "connection"}
)
_FIELD_NAME = re.compile(rb'(?:^|[;\s])name="model"(?:$|[;\s])', re.MULTILINE)
_BOUNDARY = re.compile(r'boundary="?([^";]+)"?')


def _validate(router: Router, name: str, autoload: bool) -> Model:
    m = router.route(name)
    if m is None and not name:
        raise ApiError(400, "model name is missing from the request")
    if m is None:
        raise ApiError(400, f"model '{name}' not found")
    if not autoload and not m.running:
        raise ApiError(400, "model is not loaded")
    return m


def _autoload(request: Request, default: bool) -> bool:
    value = request.query_params.get("autoload", "")
    return default if not value else value in ("true", "1")


async def _model_of(request: Request, body: bytes) -> str:
    """The ``"model"`` of a JSON body, or of a multipart form (a transcription)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        return _multipart_model(body, content_type)
    value = await worker.parse(body) if body else {}
    name = value.get("model", "") if isinstance(value, dict) else ""
    return name if isinstance(name, str) else ""


def _multipart_model(body: bytes, content_type: str) -> str:
    """The form's ``model`` field, found part by part with forward-only ``find``s: one
    pass over the body, however many parts or headers it holds (a regex over repeated
    headers was quadratic, and this runs on the event loop)."""
    m = _BOUNDARY.search(content_type)
    if m is None:
        return ""
    delimiter = b"--" + m.group(1).strip().encode("latin-1", "replace")
    pos = body.find(delimiter)
    while pos != -1:
        start = pos + len(delimiter)
        if body.startswith(b"--", start):  # the closing delimiter
            return ""
        head_end = body.find(b"\r\n\r\n", start)
        if head_end == -1:
            return ""
        end = body.find(b"\r\n" + delimiter, head_end + 4)
        if end == -1:
            return ""
        for line in body[start:head_end].split(b"\r\n"):
            if line.lower().startswith(b"content-disposition:") and _FIELD_NAME.search(line):
                return body[head_end + 4 : end].decode("utf-8", "replace")
        pos = end + 2
    return ""


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = []
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
    return status, headers


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The child's response body: chunked, sized, or up to the connection's end."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            chunk = await reader.read(min(left, 65536))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
    else:
        while chunk := await reader.read(65536):
            yield chunk


async def forward(
    router: Router, m: Model, request: Request, body: bytes, update_last_used: bool
) -> Response:
    """Send the request to ``m``'s child and stream its answer back."""
    if not m.running:
        raise ApiError(400, f"model name={m.name} is not running")
    if update_last_used:
        m.last_used = time.monotonic()
    m.requests += 1
    done = False
    if router.fake_timing:  # busy while it waits, as in llama-server
        await asyncio.sleep(2)

    def release() -> None:
        nonlocal done
        if not done:
            done = True
            m.requests -= 1
            if m.requests == 0:
                router.tick()

    try:
        reader, writer = await asyncio.open_connection(CHILD_ADDR, m.port)
        writer.write(_request_head(request, m.port, len(body)) + body)
        await writer.drain()
        status, raw_headers = await _read_head(reader)
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        release()
        raise ApiError(502, f"the model's server did not answer: {exc}", "server_error") from None
    headers = {k.lower(): v for k, v in raw_headers}
    kept = {
        k: v
        for k, v in raw_headers
        if k.lower() not in _DROP_RESPONSE and not k.lower().startswith("access-control-")
    }

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in _body(reader, headers):
                yield chunk
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass  # the child went away mid-answer: the client gets what came
        finally:
            writer.close()
            release()

    return StreamingResponse(relay(), status_code=status, headers=kept)


def _request_head(request: Request, port: int, n_body: int) -> bytes:
    """The forwarded request's head, from the bytes the client sent: the path as it
    came (not decoded, so any character passes as it does through llama-server), and
    the headers but the hop-by-hop ones."""
    scope = request.scope
    target = scope.get("raw_path") or scope["path"].encode("utf-8")
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("latin-1"), target)]
    lines.append(f"Host: {CHILD_ADDR}:{port}".encode("latin-1"))
    lines += [
        k + b": " + v
        for k, v in scope["headers"]
        if k.lower().decode("latin-1") not in _DROP_REQUEST
    ]
    lines += [b"Content-Length: %d" % n_body, b"Connection: close", b"", b""]
    return b"\r\n".join(lines)


def download_plan(name: str, token: str) -> None:
    """What ``POST /models`` checks before it starts a download: the repository has a
    model (asked of the Hub; a DownloadError otherwise)."""
    plan = hf_plan(name, token=token)
    if plan.primary is None and plan.preset is None:
        raise DownloadError(f"no model in repository {name}")


def routes(router: Router, settings: ServerSettings, autoload: bool) -> list[RouteSpec]:
    get, post = ["GET"], ["POST"]
    convs = ConvModels()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def proxy_get(request: Request) -> Response:
        load = _autoload(request, autoload)
        m = _validate(router, request.query_params.get("model", ""), load)
        if load:
            await _ready(router, m, request)
        return await forward(router, m, request, b"", False)

    async def proxy_post(request: Request) -> Response:
        body = await request.body()
        load = _autoload(request, autoload)
        m = _validate(router, await _model_of(request, body), load)
        # a resumable stream's conversation: which child holds it, kept before the load
        # so that a stop during the load cancels this request
        conv = conversation_id(request)
        ticket = convs.remember(conv, m.name)
        if load:
            if ticket:  # a session request waits for its load whatever its client does
                try:
                    await router.ensure_ready(m.name, _stopped(convs, conv, ticket))
                except RouterError:
                    if convs.alive(conv, ticket):
                        raise
                if not convs.alive(conv, ticket):
                    raise ApiError(400, "request cancelled by a stop while the model was loading")
            else:
                await _ready(router, m, request)
        return await forward(router, m, request, body, True)

    def owner(conv: str) -> Model | None:
        """The ready child holding ``conv``'s session (resolve_child_for_conv)."""
        name = convs.lookup(conv)
        m = router.get(name) if name is not None else None
        return m if m is not None and m.status in ("loaded", "sleeping") else None

    async def stream_get(request: Request) -> Response:
        conv = conv_id_of(request)
        m = owner(conv)
        if m is None:
            name = convs.lookup(conv)
            tracked = router.get(name) if name is not None else None
            if tracked is not None and tracked.status in ("loading", "downloading", "downloaded"):
                raise ApiError(
                    503, "Stream owner model is loading, retry later", "unavailable_error"
                )
            raise ApiError(404, "Stream not found or expired", "not_found_error")
        return await forward(router, m, request, b"", False)

    async def stream_lookup(request: Request) -> Response:
        ids = await lookup_ids(await request.body())
        if isinstance(ids, Response):  # not JSON: llama-server's router answers []
            return JSONResponse([])
        per_child: dict[int, list[str]] = {}
        for conv in ids:
            if (m := owner(conv)) is not None:
                per_child.setdefault(m.port, []).append(conv)
        found: list[Any] = []
        for port, owned in per_child.items():
            answer = await _child_call(port, "POST", "/v1/streams/lookup",
                                       {"conversation_ids": owned})  # fmt: skip
            if isinstance(answer, list):
                found += [entry for entry in answer if isinstance(entry, dict)]
        return await worker.json_response(found, large=len(found) > 1000)

    async def stream_delete(request: Request) -> Response:
        conv = conv_id_of(request)
        m = owner(conv)
        if m is not None:
            await _child_call(m.port, "DELETE", "/v1/stream?" + urlencode({"conv_id": conv}))
        convs.forget(conv)  # a request still waiting for its model's load is cancelled
        return Response(status_code=204, media_type="application/json")

    async def props(request: Request) -> Response:
        if request.query_params.get("model"):
            return await proxy_get(request)
        return JSONResponse(
            {
                "role": "router",
                "max_instances": router.models_max,
                "models_autoload": autoload,
                "model_alias": "llama-server",
                "model_path": "none",
                "default_generation_settings": {"params": None, "n_ctx": 0},
                "ui_settings": settings.ui_settings,
                "build_info": f"{LLAMA_CPP_BUILD}-llama_cy",
                "cors_proxy_enabled": settings.ui_mcp_proxy,
            }
        )

    async def models(request: Request) -> Response:
        if request.query_params.get("reload"):
            await router.reload()
        elif router.need_reload:
            router.load_models()
        data = [m.listing() for m in router.models.values() if not m.hidden]
        return JSONResponse({"data": data, "object": "list"})

    async def load(request: Request) -> Response:
        name = _name(await worker.read_json(request))
        m = router.get(name)
        if m is None:
            raise ApiError(404, "model is not found", "not_found_error")
        if m.running:
            raise ApiError(400, "model is already running")
        await router.load(m.name)
        return JSONResponse({"success": True})

    async def unload(request: Request) -> Response:
        name = _name(await worker.read_json(request))
        m = router.get(name)
        if m is None:
            raise ApiError(400, "model is not found")
        if not m.running:
            raise ApiError(400, "model is not running")
        await router.unload(m.name)
        return JSONResponse({"success": True})

    async def events(request: Request) -> Response:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        router.listeners.add(queue)

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b": connected\n\n"  # the headers go out now, so the client knows
                while True:
                    event = await queue.get()
                    yield f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
            finally:
                router.listeners.discard(queue)

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def download(request: Request) -> Response:
        name = _name(await worker.read_json(request))
        if not name:
            raise ApiError(400, "model must be a non-empty string")
        try:
            await asyncio.to_thread(download_plan, name, router.hf_token)
        except (DownloadError, ValueError) as exc:
            raise ApiError(400, f"model validation failed, unable to download: {exc}") from None
        if router.get(name) is not None:
            raise ApiError(400, f"model '{name}' already exists")
        await router.download(name)
        return JSONResponse({"success": True})

    async def remove(request: Request) -> Response:
        name = request.query_params.get("model", "")
        if not name:
            raise ApiError(400, "model must be a non-empty string")
        router.get(name)  # a finished download is listed first
        await router.remove(name)
        return JSONResponse({"success": True})

    table: list[RouteSpec] = [
        ("/health", health, get, True),
        ("/v1/health", health, get, True),
        ("/props", props, get, False),
        ("/models", models, get, False),
        ("/v1/models", models, get, False),
        ("/models", download, post, False),
        ("/models", remove, ["DELETE"], False),
        ("/models/load", load, post, False),
        ("/models/unload", unload, post, False),
        ("/models/sse", events, get, False),
        ("/v1/stream", stream_get, get, False),
        ("/v1/streams/lookup", stream_lookup, post, False),
        ("/v1/stream", stream_delete, ["DELETE"], False),
    ]
    table += [(p, proxy_post, post, False) for p in PROXY_POST]
    table += [(p, proxy_get, get, False) for p in PROXY_GET]
    return table


def _name(body: Any) -> str:
    value = body.get("model", "") if isinstance(body, dict) else ""
    return value if isinstance(value, str) else ""


def _stopped(convs: ConvModels, conv: str, ticket: int) -> Callable[[], Awaitable[bool]]:
    async def stopped() -> bool:  # a stop (DELETE /v1/stream) ended the registration
        return not convs.alive(conv, ticket)

    return stopped


async def _child_call(port: int, method: str, path: str, body: Any = None) -> Any:
    """A child's JSON answer to a small request (None: no answer within 250 ms, as the
    router's STREAM_LOOKUP_TIMEOUT_MS, or not JSON)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = [f"{method} {path} HTTP/1.1", f"Host: {CHILD_ADDR}:{port}", "Connection: close"]
    head += ["Content-Type: application/json", f"Content-Length: {len(data)}", "", ""]
    try:
        async with asyncio.timeout(0.25):
            reader, writer = await asyncio.open_connection(CHILD_ADDR, port)
            try:
                writer.write("\r\n".join(head).encode("latin-1") + data)
                status, raw = await _read_head(reader)
                answer = b"".join([c async for c in _body(reader, {k.lower(): v for k, v in raw})])
            finally:
                writer.close()
        return json.loads(answer) if status == 200 and answer else None
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError):
        return None


async def _ready(router: Router, m: Model, request: Request) -> None:
    async def gone() -> bool:
        return await request.is_disconnected()

    await router.ensure_ready(m.name, gone)
