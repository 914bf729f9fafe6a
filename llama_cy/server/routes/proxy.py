"""llama-server's CORS proxy (``--ui-mcp-proxy``): ``/cors-proxy?url=...`` forwards a GET
or POST to an http(s) URL, so that a browser page can reach a server that sends no CORS
headers (an MCP server, say). Only the headers a client names with the
``x-llama-server-proxy-header-`` prefix are forwarded: the client's own credentials
(``Authorization``, cookies, ``x-api-key``) never are. Off by default: 403."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.parse
import urllib.request

from starlette.requests import Request
from starlette.responses import Response

from llama_cy.server.core import Front, RouteSpec
from llama_cy.server.schema import ApiError

__all__ = ["routes"]

_PREFIX = "x-llama-server-proxy-header-"
_TIMEOUT = 600.0  # seconds, llama-server's read and write timeouts for the proxy


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are the client's to follow (as llama-server's proxy returns them)."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def routes(server: Front) -> list[RouteSpec]:
    async def proxy(request: Request) -> Response:
        if not server.settings.ui_mcp_proxy:
            raise ApiError(
                403,
                "the CORS proxy is off: start the server with --ui-mcp-proxy",
                "permission_error",
            )
        url = request.query_params.get("url", "")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ApiError(400, f"unsupported URL scheme in target URL: {parts.scheme!r}")
        if not parts.hostname:
            raise ApiError(400, "invalid target URL: missing host")
        if parts.password is not None or parts.username is not None:
            raise ApiError(400, "authentication in target URL is not supported")
        headers = {
            k[len(_PREFIX) :]: v
            for k, v in request.headers.items()
            if k.lower().startswith(_PREFIX) and len(k) > len(_PREFIX)
        }
        body = await request.body() if request.method == "POST" else None
        forward = urllib.request.Request(url, data=body, headers=headers, method=request.method)
        status, out_headers, content = await asyncio.to_thread(_fetch, forward)
        return Response(content, status_code=status, media_type=out_headers.get("content-type"))

    return [("/cors-proxy", proxy, ["GET", "POST"], False)]


def _fetch(req: urllib.request.Request) -> tuple[int, dict[str, str], bytes]:
    try:
        with _OPENER.open(req, timeout=_TIMEOUT) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:  # the target's own error: passed on as it is
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ApiError(502, f"the proxied request failed: {exc}", "server_error") from None
