"""llama-server's resumable-stream routes (server-stream.cpp's handlers), over the
server's :class:`~llama_cy.server.stream_sessions.StreamSessions`: ``GET /v1/stream``
(replay and follow), ``POST /v1/streams/lookup`` and ``DELETE /v1/stream`` (stop). The
conversation id travels in the query string, since it may hold a model name with
slashes."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from llama_cy.server import worker
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.schema import ApiError
from llama_cy.server.stream_sessions import MAX_READERS

__all__ = ["conv_id_of", "lookup_ids", "routes"]

_OFFSET = re.compile(r"\s*([+-]?)(\d+)")


def conv_id_of(request: Request) -> str:
    conv = request.query_params.get("conv_id", "")
    if not conv:
        raise ApiError(400, "Missing conversation id in path")
    return conv


async def lookup_ids(body: bytes) -> list[str] | Response:
    """The ``conversation_ids`` of a lookup body (non-empty strings), or the 400 that
    llama-server gives a body that is not JSON."""
    try:
        value: Any = await worker.parse(body)
    except ApiError as exc:
        reason = exc.message.removeprefix("the request body is not valid JSON: ")
        return JSONResponse(
            {"error": {"message": f"invalid body: {reason}", "type": "invalid_request_error"}},
            status_code=400,
        )
    ids = value.get("conversation_ids") if isinstance(value, dict) else None
    return [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []


def routes(server: Server) -> list[RouteSpec]:
    streams = server.streams

    async def stream_get(request: Request) -> Response:
        session = streams.get(conv_id_of(request))
        if session is None:
            raise ApiError(404, "Stream not found or expired", "not_found_error")
        offset = 0
        given = request.query_params.get("from", "")
        if given:
            m = _OFFSET.match(given)  # std::stoull: leading digits; "-N" wraps past the end
            if m is None:
                raise ApiError(400, "Invalid 'from' offset")
            offset = int(m.group(2)) if m.group(1) != "-" else 1 << 64
        if offset < session.dropped:
            raise ApiError(400, "Stream offset lost, please restart")
        if session.readers >= MAX_READERS:
            raise ApiError(429, f"the stream has {MAX_READERS} readers already", "rate_limit_error")
        return StreamingResponse(session.read(offset), media_type="text/event-stream")

    async def stream_lookup(request: Request) -> Response:
        ids = await lookup_ids(await request.body())
        if isinstance(ids, Response):
            return ids
        found = await worker.run(streams.lookup, ids) if len(ids) > 1000 else streams.lookup(ids)
        return await worker.json_response(found, large=len(found) > 1000)

    async def stream_delete(request: Request) -> Response:
        streams.stop(conv_id_of(request))  # idempotent: 204 either way
        return Response(status_code=204, media_type="application/json")

    return [
        ("/v1/stream", stream_get, ["GET"], False),
        ("/v1/streams/lookup", stream_lookup, ["POST"], False),
        ("/v1/stream", stream_delete, ["DELETE"], False),
    ]
