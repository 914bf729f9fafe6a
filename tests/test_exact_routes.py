"""The routes called without Starlette's router (``llama_cy/server/exact_routes.py``):
an exact method and path goes straight to its endpoint, the first route given for it;
anything else (another method, HEAD, a path parameter, a path under the root path's
prefix only) reaches the app behind, unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from llama_cy.server.exact_routes import ExactRoutes


def _endpoint(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return PlainTextResponse(f"{name} {request.method} {request.url.path}")

    return endpoint


class Behind:
    """The app behind: records the scopes it is given and answers 'behind'."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        if scope["type"] == "http":
            await PlainTextResponse("behind")(scope, receive, send)


def _call(app: Any, method: str, path: str, root_path: str = "") -> str:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": root_path,
        "query_string": b"",
        "headers": [],
    }
    asyncio.run(app(scope, receive, send))
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()


def test_an_exact_method_and_path_goes_to_its_first_endpoint() -> None:
    behind = Behind()
    app = ExactRoutes(
        behind,
        [
            ("POST", "/completion", _endpoint("first")),
            ("POST", "/completion", _endpoint("second")),
            ("GET", "/health", _endpoint("health")),
        ],
    )
    assert _call(app, "POST", "/completion") == "first POST /completion"
    assert _call(app, "GET", "/health") == "health GET /health"
    assert behind.scopes == []


def test_everything_else_reaches_the_app_behind() -> None:
    behind = Behind()
    app = ExactRoutes(
        behind,
        [
            ("POST", "/completion", _endpoint("completion")),
            ("GET", "/slots/{id_slot}", _endpoint("slot")),
        ],
    )
    assert _call(app, "GET", "/completion") == "behind"  # Starlette answers 405 there
    assert _call(app, "HEAD", "/completion") == "behind"
    assert _call(app, "POST", "/completion/") == "behind"  # its slash redirect
    assert _call(app, "GET", "/slots/{id_slot}") == "behind"  # parameters: the router's
    assert [s["path"] for s in behind.scopes] == [
        "/completion",
        "/completion",
        "/completion/",
        "/slots/{id_slot}",
    ]

    async def lifespan() -> None:
        async def receive() -> Message:
            return {"type": "lifespan.shutdown"}

        async def send(message: Message) -> None:
            pass

        await app({"type": "lifespan"}, receive, send)

    asyncio.run(lifespan())
    assert behind.scopes[-1]["type"] == "lifespan"


def test_a_root_path_is_taken_off_the_path_as_the_router_does() -> None:
    behind = Behind()
    app = ExactRoutes(behind, [("POST", "/completion", _endpoint("completion"))])
    assert _call(app, "POST", "/api/completion", root_path="/api") == (
        "completion POST /api/completion"
    )
    assert _call(app, "POST", "/completion", root_path="/api") == "completion POST /completion"
    assert behind.scopes == []
