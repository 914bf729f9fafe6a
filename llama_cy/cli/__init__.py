"""``llama-cy``: run, chat, serve, info, bench, quantize and rpc-server from the command
line, one module per subcommand.

Flags follow llama.cpp's tools (llama-cli, llama-server, llama-bench, llama-quantize,
rpc-server), so a command line written for them mostly works here; every subcommand's
flags come from one table (:mod:`llama_cy.flags.table`). Without ``-m``, ``run``,
``chat``, ``serve`` and ``bench`` use the Gemma 3 270M demo model when its package is
installed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from llama_cy.flags import add_flags, llama_server_argv
from llama_cy.flags.presets import expand_presets

__all__ = ["expand_presets", "main", "parse", "parser"]


def _positionals_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="GGUF model file")


def _positionals_quantize(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="GGUF model to read")
    p.add_argument("output", help="GGUF file to write")
    p.add_argument("type", help="Q4_K_M, Q8_0, Q5_K_M, F16, ... (see llama-quantize)")


#: subcommand -> (its module, help, description, its positional arguments)
_COMMANDS: dict[str, tuple[str, str, str, Callable[[argparse.ArgumentParser], None] | None]] = {
    "run": (
        "run",
        "complete one prompt, streamed to stdout",
        "Complete one prompt, streamed to stdout (llama-cli's flags).",
        None,
    ),
    "chat": (
        "chat",
        "talk with the model (its chat template, with history)",
        "Interactive chat with the model's chat template; /clear forgets, /exit ends.",
        None,
    ),
    "serve": (
        "serve",
        "an OpenAI-compatible server with continuous batching",
        "An OpenAI-compatible HTTP server with llama-server's flags and endpoints. Every "
        "flag of llama-server is known: used as there, accepted with no effect (where it "
        "cannot apply), or refused with the reason.",
        None,
    ),
    "info": (
        "info",
        "a model's metadata, architecture, tensor types and size",
        "Show a GGUF model's metadata, architecture, tensor type counts and size.",
        _positionals_info,
    ),
    "bench": (
        "bench",
        "prompt and generation speed, as llama-bench",
        "Prompt (pp) and generation (tg) speed, in llama-bench's table.",
        None,
    ),
    "quantize": (
        "quantize",
        "write a model again in another weight type",
        "Quantize a GGUF model (llama_model_quantize), with progress.",
        _positionals_quantize,
    ),
    "rpc-server": (
        "rpc_server",
        "lend this machine's devices to llama.cpp's RPC backend",
        "Serve this machine's devices to ggml RPC clients (llama-cy ... --rpc). "
        "Unauthenticated: keep it on loopback or a private network.",
        None,
    ),
}


def parser() -> argparse.ArgumentParser:
    """The ``llama-cy`` parser: a subparser per subcommand, its flags from the table."""
    from llama_cy import __version__
    from llama_cy._backend import LLAMA_CPP_BUILD

    top = argparse.ArgumentParser(
        prog="llama-cy",
        description="llama.cpp from Python: run, chat, serve, inspect, bench, quantize.",
    )
    top.add_argument(
        "--version",
        action="version",
        version=f"llama-cy {__version__} (llama.cpp {LLAMA_CPP_BUILD})",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text, description, positionals) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=description)
        # llama.cpp's tools spell -h three ways: -h, --help, --usage
        p.add_argument("--usage", action="help", help=argparse.SUPPRESS)
        if positionals is not None:
            positionals(p)
        add_flags(p, name)
        p.set_defaults(module=module)
    return top


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """``llama-cy ARGV`` parsed (serve's llama-server spellings and presets expanded);
    ``args.argv`` is what the subcommand was given, for the flags refused when given."""
    argv = list(argv)
    if argv[:1] == ["serve"]:
        argv = ["serve", *expand_presets(llama_server_argv(argv[1:]))]
    args = parser().parse_args(argv)
    args.argv = argv[1:]
    return args


def main(argv: Sequence[str] | None = None, *, adjust: Callable[[Any], Any] | None = None) -> int:
    """The ``llama-cy`` command. ``adjust`` (Python only) changes the ServerSettings that
    ``serve``'s flags give (``python -m llama_cpp.server``'s chat handlers and request
    defaults, which no flag sets)."""
    from llama_cy.errors import LlamaError

    args = parse(sys.argv[1:] if argv is None else argv)
    command = importlib.import_module(f"llama_cy.cli.{args.module}")
    try:
        if adjust is not None:
            if args.command != "serve":
                raise ValueError("adjust is for serve")
            code: int = command.main(args, adjust)
        else:
            code = command.main(args)
    except KeyboardInterrupt:
        return 130
    except (LlamaError, OSError, ValueError) as exc:
        print(f"llama-cy {args.command}: {exc}", file=sys.stderr)
        return 1
    return code
