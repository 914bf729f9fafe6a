"""A small chat page at ``/`` (llama-server serves its web UI there; ``--no-ui`` turns
it off, ``--path`` serves a folder instead)."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

__all__ = ["page"]


async def page(request: Request) -> Response:
    return HTMLResponse(files("llama_cy.server").joinpath("ui.html").read_text("utf-8"))
