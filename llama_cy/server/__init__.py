"""An OpenAI-compatible HTTP server with continuous batching (``llama-cy serve``).

:func:`serve` loads a model and runs the app with uvicorn; :func:`create_app` gives the
ASGI app over a ``Llama`` for embedding in another server.
"""

from __future__ import annotations

from collections.abc import Callable

from llama_cy.server.app import ServerSettings, create_app, load_llama
from llama_cy.server.engine import Engine, QueueFullError

__all__ = ["Engine", "QueueFullError", "ServerSettings", "create_app", "load_llama", "serve"]


def serve(
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8080,
    progress: Callable[[float], bool | None] | None = None,
) -> None:
    """Load the model and serve until interrupted."""
    import uvicorn

    llm = load_llama(settings, progress)
    try:
        app = create_app(llm, settings)
        uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        llm.close()
