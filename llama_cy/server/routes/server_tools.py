"""llama-server's ``/tools`` (``--tools``, ``--tools-runtime``, ``--mcp-servers-config``,
``--mcp-servers-json``, ``--agent``): its built-in agent tools and its MCP servers, run
by llama-server's own code (:class:`llama_cy._server_tools.ServerTools`). ``GET`` lists the
tools, ``POST`` runs one (``{"tool", "params", "stream"}``); without tools both answer
403, as llama-server does. Do not enable where untrusted clients reach the server: the
tools read, write and run things on this machine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from llama_cy._server_tools import ToolResponse
from llama_cy.server.core import Front, RouteSpec
from llama_cy.server.schema import ApiError

__all__ = ["routes"]

# The request headers llama-server's tools read (all others stay here).
_HEADERS = ("x-tool-cwd", "x-tool-runtime", "x-resp-type")


def routes(server: Front) -> list[RouteSpec]:
    async def endpoint(request: Request) -> Response:
        t = server.tools
        if t is None or not t.active:
            raise ApiError(403, "this feature is disabled", "feature_disabled")
        if request.method == "GET":
            return _answer(await asyncio.to_thread(t.get))
        body = await request.body()
        headers = {k: request.headers[k] for k in _HEADERS if k in request.headers}
        # A tool that is not streamed runs to its end in the call (a shell command).
        return _answer(await asyncio.to_thread(t.post, body, headers))

    return [("/tools", endpoint, ["GET", "POST"], False)]


def _answer(r: ToolResponse) -> Response:
    if not r.stream:
        return Response(r.body, status_code=r.status, media_type=r.content_type)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while (chunk := await asyncio.to_thread(r.next_chunk)) is not None:
                if chunk:
                    yield chunk
        finally:  # a client gone mid-stream: the tool is told to stop
            await asyncio.to_thread(r.close)

    return StreamingResponse(chunks(), status_code=r.status, media_type=r.content_type)
