"""Several models from one config file, as llama-cpp-python's server serves them: one
loaded at a time, the first at start, swapped when a request names another (its
``model`` field, the model's ``model_alias``); an unknown or missing name means the
first model.

This is llama-cy's router (llama-server's router mode, :class:`llama_cy.server.Router`)
with room for one model (``models_max=1``: the one running is stopped for another once
its requests are done), over children that each run ``python -m llama_cpp.server`` with
that model's settings.
"""

from __future__ import annotations

import sys
from typing import Any

from llama_cy.server import Router, ServerSettings, settings_from_flags
from llama_cy.server.child import CHILD_ADDR
from llama_cy.server.presets import LOAD_ON_STARTUP, Preset
from llama_cy.server.router_models import Model

from .serve_args import given, serve_argv, settings_argv

__all__ = ["router", "router_settings"]


def router(server: dict[str, Any], models: list[dict[str, Any]]) -> Router:
    """A router over ``models`` (llama-cpp-python's settings, each with the server's):
    each model by its alias (``model_alias``, else its path), every one checked now."""
    if not models:
        raise ValueError("no models to serve")
    argv: dict[str, list[str]] = {}
    for model in models:
        alias = model.get("model_alias") or model.get("model")
        if not alias:
            raise ValueError("each model of a config file needs a model path")
        model = {**model, "model_alias": alias}
        serve_argv(server, model)  # its settings' errors now, at start, not at its first use
        # the router checks the key; a child on loopback gets none (as llama-server's)
        argv[alias] = settings_argv({**server, "api_key": None}, model)
    first = next(iter(argv))
    presets = {a: Preset(a, {LOAD_ON_STARTUP: "1"} if a == first else {}) for a in argv}

    def command(m: Model) -> list[str]:
        """The child: this interpreter's llama-cpp-python server over the model's settings
        (it reads no setting from the environment: it is a router's child)."""
        where = ["--host", CHILD_ADDR, "--port", str(m.port)]
        return [sys.executable, "-m", "llama_cpp.server", *argv[m.name], *where]

    return Router(
        Preset("*"),
        models_max=1,
        extra=presets,
        command=command,
        default_model=first,
        cached_models=False,
    )


def router_settings(server: dict[str, Any]) -> ServerSettings:
    """The router's own settings: its API key, the rest llama-server's defaults."""
    key = given(server)["api_key"]
    return settings_from_flags(["--api-key", key] if key else [], model="")
