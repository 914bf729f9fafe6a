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


def _routed(*routes: tuple[str, str, str]) -> tuple[Behind, ExactRoutes]:
    """ExactRoutes over ``(method, path, name)`` routes, each answering with its name,
    and the app behind it."""
    behind = Behind()
    return behind, ExactRoutes(behind, [(m, p, _endpoint(name)) for m, p, name in routes])


def _run(app: Any, scope: Scope, incoming: Message) -> list[Message]:
    """What ``app`` sends for ``scope``, each receive answered with ``incoming``."""
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def _call(app: Any, method: str, path: str, root_path: str = "") -> str:
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": root_path,
        "query_string": b"",
        "headers": [],
    }
    sent = _run(app, scope, {"type": "http.request", "body": b"", "more_body": False})
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()


def test_an_exact_method_and_path_goes_to_its_first_endpoint() -> None:
    behind, app = _routed(
        ("POST", "/completion", "first"),
        ("POST", "/completion", "second"),
        ("GET", "/health", "health"),
    )
    assert _call(app, "POST", "/completion") == "first POST /completion"
    assert _call(app, "GET", "/health") == "health GET /health"
    assert behind.scopes == []


def test_everything_else_reaches_the_app_behind() -> None:
    behind, app = _routed(
        ("POST", "/completion", "completion"),
        ("GET", "/slots/{id_slot}", "slot"),
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
    _run(app, {"type": "lifespan"}, {"type": "lifespan.shutdown"})
    assert behind.scopes[-1]["type"] == "lifespan"


def test_a_root_path_is_taken_off_the_path_as_the_router_does() -> None:
    behind, app = _routed(("POST", "/completion", "completion"))
    assert _call(app, "POST", "/api/completion", root_path="/api") == (
        "completion POST /api/completion"
    )
    assert _call(app, "POST", "/completion", root_path="/api") == "completion POST /completion"
    assert behind.scopes == []
