"""The routes without path parameters, found by one dictionary look-up and called
straight from the app's own middleware, not through Starlette's router.

A request's fixed cost decides its time to first token at GPU token rates, and between
the app's middleware and an endpoint Starlette runs its exception middleware, its
router (a regular expression per route until one matches), the route and the
endpoint's request-response wrapper (two more exception layers), each a coroutine of
its own, and every streamed event goes back out through the wrappers' three ``send``
functions. For an exact path and method, none of them does anything the endpoint does
not do itself: the endpoints (:func:`~llama_cy.server.app.wrap`) answer every error,
and any that escaped would still reach Starlette's outermost error middleware.
Everything else (a path with parameters, another method, HEAD, a path that differs by
a slash, the web page's files) goes to Starlette as before.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from llama_cy.server.core import Endpoint

__all__ = ["ExactRoutes"]


class ExactRoutes:
    """ASGI middleware: ``(method, path)`` of ``routes`` to its endpoint, the rest to
    ``app``: the first of ``routes`` for a method and path, as Starlette's router takes
    the first that matches. A path with a ``{parameter}`` is left to ``app``."""

    def __init__(self, app: ASGIApp, routes: Iterable[tuple[str, str, Endpoint]]) -> None:
        self.app = app
        self.routes: dict[tuple[str, str], Endpoint] = {}
        for method, path, endpoint in routes:
            if "{" not in path:
                self.routes.setdefault((method, path), endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):  # as Starlette's router matches
                path = path[len(root) :]
            endpoint = self.routes.get((scope["method"], path))
            if endpoint is not None:
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
