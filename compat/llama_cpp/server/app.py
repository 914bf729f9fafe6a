"""llama-cpp-python's ``llama_cpp.server.app``: :func:`create_app`, its server as an ASGI
app for an ASGI server of one's own::

    MODEL=model.gguf uvicorn --factory llama_cpp.server.app:create_app

It serves llama-cy's server (llama-server's routes and fields, llama-cpp-python's
among them) over the model the settings name, loaded in this process. Several models
(a config file's) run as ``python -m llama_cpp.server`` runs them: one at a time, each in
a child server (:mod:`.several`). ``host``, ``port`` and the TLS files are the ASGI server's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from .serve_args import MODEL_SETTINGS, SERVER_SETTINGS, llama_cy_settings
from .settings import ConfigFileSettings, ModelSettings, ServerSettings, Settings

__all__ = ["create_app"]


def create_app(
    settings: Settings | None = None,
    server_settings: ServerSettings | None = None,
    model_settings: list[ModelSettings] | None = None,
) -> Starlette:
    """The server's app, as llama-cpp-python builds it: from the config file that
    ``CONFIG_FILE`` names, else from ``server_settings`` and ``model_settings`` (given
    together), else from ``settings`` (by default ``Settings()``: the environment)."""
    config_file = os.environ.get("CONFIG_FILE")
    if config_file is not None:
        config = _read_config(config_file)
        server_settings, model_settings = config, config.models
    if server_settings is None and model_settings is None:
        settings = Settings() if settings is None else settings  # type: ignore[call-arg]
        server_settings, model_settings = settings, [settings]
    if server_settings is None or model_settings is None:
        raise ValueError("server_settings and model_settings must be provided together")
    if not model_settings:
        raise ValueError("model_settings lists no models")
    server = {k: v for k, v in server_settings.model_dump().items() if k in SERVER_SETTINGS}
    models = [{k: getattr(m, k) for k in MODEL_SETTINGS} for m in model_settings]
    if len(models) > 1:
        from llama_cy.server import create_router_app

        from .several import router, router_settings

        return create_router_app(router(server, models), router_settings(server), True)
    from llama_cy.server import create_app as served_app
    from llama_cy.server import load_model

    served = llama_cy_settings(server, models[0])
    model = load_model(served)
    try:
        app = served_app(model, served, owns_model=True)
    except BaseException:
        model.close()
        raise
    app.add_middleware(_StartAtFirstRequest, outer=app)
    return app


def _read_config(path: str) -> ConfigFileSettings:
    if not os.path.exists(path):
        raise ValueError(f"Config file {path} not found!")
    with open(path, "rb") as f:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data: Any = yaml.safe_load(f)
        else:
            data = json.load(f)
    return ConfigFileSettings.model_validate(data)


class _StartAtFirstRequest:
    """llama-cpp-python's app needs no lifespan; this one's engine starts in it. Where the
    lifespan does not run (an ASGI server with lifespan off, Starlette's TestClient
    outside ``with``), the first request starts it."""

    def __init__(self, inner: ASGIApp, outer: Starlette) -> None:
        self.inner = inner
        self.server = outer.state.server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            self.server.start()
        await self.inner(scope, receive, send)
