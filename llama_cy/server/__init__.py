"""An OpenAI-compatible HTTP server with continuous batching (``llama-cy serve``).

:func:`serve` loads a model and runs the app with uvicorn; :func:`create_app` gives the
ASGI app over a loaded model for embedding in another server.
"""

from __future__ import annotations

from collections.abc import Callable

from llama_cy.server.app import Server, create_app
from llama_cy.server.engine import Engine, QueueFullError
from llama_cy.server.settings import ServerSettings, load_model

__all__ = [
    "Engine",
    "QueueFullError",
    "Server",
    "ServerSettings",
    "create_app",
    "load_model",
    "serve",
]


def serve(
    settings: ServerSettings,
    host: str = "127.0.0.1",
    port: int = 8080,
    progress: Callable[[float], bool | None] | None = None,
) -> None:
    """Load the model and serve until interrupted."""
    import uvicorn

    model = load_model(settings, progress)
    try:
        app = create_app(model, settings)
        uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
    finally:
        model.close()
