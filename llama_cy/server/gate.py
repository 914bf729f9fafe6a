"""The gate every HTTP request passes before routing: the API key and the body cap.

llama-server checks the key in its pre-routing handler, so a static file of ``--path``,
an unknown route and a wrong method all answer 401 without one; only ``/health``,
``/v1/health`` and the web page are public (the app passes the set). cpp-httplib
refuses a body over 100 MiB with 413 (``CPPHTTPLIB_PAYLOAD_MAX_LENGTH``); here that
happens before the body is read when ``Content-Length`` says so, and as soon as the
count passes the cap otherwise (a chunked body)."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llama_cy.server.schema import ApiError

__all__ = ["MAX_BODY_BYTES", "UI_PATHS", "Gate", "authorized"]

MAX_BODY_BYTES = 100 * 1024 * 1024  #: CPPHTTPLIB_PAYLOAD_MAX_LENGTH
#: The web page's paths, public as llama-server's UI assets are (server-http.cpp);
#: health is the other public endpoint there, marked so in its route table.
UI_PATHS = ("/", "/index.html")


def authorized(keys: tuple[str, ...] | list[str], headers: dict[bytes, bytes]) -> bool:
    """Whether the request's ``Authorization: Bearer`` or ``X-Api-Key`` holds one of
    ``keys`` (always, without keys)."""
    if not keys:
        return True
    given = headers.get(b"authorization", b"")
    token = given[7:] if given[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
    # Every key is compared, so the time taken says nothing about which one matched.
    matches = [hmac.compare_digest(token, k.encode()) for k in keys]
    return any(matches)


def _too_large() -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than the server takes ({MAX_BODY_BYTES} bytes)",
        param="body",
    )


class Gate:
    """ASGI middleware: 401 without a valid key (``keys``) on every path but
    ``public``, 413 for a body over ``max_body`` bytes."""

    def __init__(
        self,
        app: ASGIApp,
        keys: tuple[str, ...] | list[str],
        public: frozenset[str],
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.keys = tuple(keys)
        self.public = public
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if scope["path"] not in self.public and not authorized(self.keys, headers):
            await ApiError(401, "Invalid API Key", "authentication_error").response()(
                scope, receive, send
            )
            return
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            declared = 0  # the HTTP parser has refused it already
        if declared > self.max_body:
            await _too_large().response()(scope, receive, send)
            return
        seen = 0
        cut = False

        async def counted() -> Message:
            nonlocal seen, cut
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    cut = True
                    raise _too_large()  # routes answer it as any ApiError
            return message

        # send is not wrapped: it runs once per streamed event, the body reads are few
        try:
            await self.app(scope, counted, send)
        except ApiError as exc:
            if not cut:
                raise
            await exc.response()(scope, receive, send)  # an endpoint that let it through
