"""``python -m llama_cpp.server``: llama-cpp-python's server command, running llama-cy's
server (``llama-cy serve``, llama-server's routes and fields).

It takes llama-cpp-python's settings, by its names and with its defaults: ``--model``,
``--n_gpu_layers``, ``--chat_format``, ``--config_file``, and the rest of its
``ModelSettings`` and ``ServerSettings``. They are read from flags, the environment
(``MODEL``, ``N_CTX``, ...) or a JSON/YAML config file. Each becomes the llama-server flag
that does the same. A setting with no such flag is refused, with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from llama_cy import LlamaError
from llama_cy.server.child import ChildLink

from .serve_args import (
    MODEL_SETTINGS,
    SERVER_SETTINGS,
    from_environment,
    given,
    llama_cy_settings,
    read_config,
    serve_argv,
)

__all__ = ["main", "serve_argv"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m llama_cpp.server",
        description="llama-cpp-python's server command, running llama-cy's server",
    )
    for name, (kind, default, many) in {**MODEL_SETTINGS, **SERVER_SETTINGS}.items():
        help_text = None if default is None else f"(default: {default})"
        parser.add_argument(
            f"--{name}", dest=name, type=kind, nargs="*" if many else None, help=help_text
        )
    parser.add_argument("--config_file", type=str, help="Path to a config file to load.")
    return parser


def _serve_several(server: dict[str, Any], models: list[dict[str, Any]]) -> int:
    """A config file's models, one loaded at a time, as llama-cpp-python's server."""
    from llama_cy.server import serve_router

    from .several import router, router_settings

    s = given(server)
    try:
        serve_router(
            router(server, models),
            router_settings(server),
            s["host"],
            s["port"],
            ssl_keyfile=s["ssl_keyfile"],
            ssl_certfile=s["ssl_certfile"],
        )
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = vars(parser.parse_args(argv))
    # a router's child (several models) takes its settings from its flags alone
    child = ChildLink.active()
    config_file = args.pop("config_file")
    if not child:
        config_file = os.environ.get("CONFIG_FILE", config_file)
    try:
        if config_file:
            server, models = read_config(config_file)
            if not models:
                raise ValueError(f"{config_file} lists no models")
            if len(models) > 1:
                return _serve_several(server, models)
            model = models[0]
        else:
            read = args if child else from_environment(args)
            server = {k: read[k] for k in SERVER_SETTINGS}
            model = {k: read[k] for k in MODEL_SETTINGS}
        settings = llama_cy_settings(server, model)
    except ValueError as e:
        print(e, file=sys.stderr)
        parser.print_help()
        return 1
    except (LlamaError, OSError) as e:  # the model, read by -fit
        print(f"python -m llama_cpp.server: {e}", file=sys.stderr)
        return 1
    from llama_cy.server import serve

    s = given(server)
    try:
        serve(
            settings,
            s["host"],
            s["port"],
            ssl_keyfile=s["ssl_keyfile"],
            ssl_certfile=s["ssl_certfile"],
        )
    except KeyboardInterrupt:
        return 130
    except (LlamaError, OSError, ValueError) as e:
        print(f"python -m llama_cpp.server: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
