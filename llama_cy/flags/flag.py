"""One flag of ``llama-cy``'s table (:mod:`llama_cy.flags.table`), the value types of
llama.cpp's flags, and the three fates a llama-server flag can have in ``serve``:

- ``USED``: it does what it does in llama-server, defaults and environment variable
  (``LLAMA_ARG_*``) included; the command line wins over the environment.
- ``INERT``: accepted because it cannot change what this server does (``note`` says
  why: downloads that never happen here, llama.cpp's web UI, an HTTP thread pool that
  asyncio does not have).
- ``REFUSED``: given, it stops the start with a message that names it and says why
  (``note``), so that nothing is silently ignored.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "GENERATE",
    "INERT",
    "LOAD",
    "REFUSED",
    "SERVE",
    "USED",
    "Flag",
    "bool_env",
    "gpu_layers",
    "inert",
    "json_object",
    "log_colors",
    "non_negative",
    "on_off",
    "parallel",
    "priority",
    "refused",
    "used",
]

Status = Literal["used", "inert", "refused"]

#: The subcommands, and the sets of them that flags name.
SERVE = frozenset({"serve"})
GENERATE = frozenset({"run", "chat"})
LOAD = frozenset({"run", "chat", "serve", "bench"})
USED: Status = "used"
INERT: Status = "inert"
REFUSED: Status = "refused"


def on_off(value: str) -> str:
    v = value.lower()
    if v in ("on", "enabled", "true", "1"):
        return "on"
    if v in ("off", "disabled", "false", "0"):
        return "off"
    if v == "auto":
        return "auto"
    raise argparse.ArgumentTypeError(f"expected on, off or auto, not {value!r}")


def log_colors(value: str) -> str:
    """--log-colors: arg.cpp's truthy, falsey and auto spellings (case as there)."""
    if value in ("on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"):
        return value
    raise argparse.ArgumentTypeError(f"unknown value for --log-colors: {value!r}")


def gpu_layers(value: str) -> int:
    """llama-server's -ngl: a number, 'all', or 'auto' (every layer that fits: all, here,
    since llama_cy does not fit layers to free memory)."""
    if value in ("all", "auto"):
        return -1
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, 'all' or 'auto', not {value!r}"
        ) from None


def non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return n


def priority(lowest: int) -> Callable[[str], int]:
    """A ``--prio`` value: ``lowest`` (-1 for --prio, 0 for its -batch and -draft kin)
    to 3 (realtime), as llama.cpp checks them."""

    def parse(value: str) -> int:
        n = int(value)
        if not lowest <= n <= 3:
            raise argparse.ArgumentTypeError(f"must be {lowest} to 3")
        return n

    return parse


def parallel(value: str) -> int:
    n = int(value)
    if n == 0 or n < -1:
        raise argparse.ArgumentTypeError("--parallel must be -1 (auto) or at least 1")
    return n


def directory(value: str) -> str:
    """--slot-save-path, --media-path: an existing folder, checked at start as arg.cpp
    checks it (a missing one made every later save a server error)."""
    if not os.path.isdir(value):
        raise argparse.ArgumentTypeError(f"not a directory: {value}")
    return value


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def bool_env(value: str) -> bool:
    return value.lower() in ("1", "true", "on", "enabled", "yes")


@dataclass(frozen=True)
class Flag:
    """One flag of llama.cpp's tools, and the ``llama-cy`` subcommands that take it.

    One default serves every subcommand. llama.cpp's tools differ in three
    (``common_params_parser_init``, b11434): ``--jinja`` is off in llama-completion and
    llama-mtmd-cli (``run`` renders no template, so it does not take it); ``--temp`` is
    0.2 in llama-mtmd-cli (``run --image`` keeps llama-completion's 0.8); ``-np`` is -1
    in llama-server (only ``serve`` takes it).
    """

    names: tuple[str, ...]
    dest: str
    #: what ``serve`` does with it (the other subcommands take only flags they use)
    status: Status = USED
    metavar: str | None = None  #: None: a switch
    type: Callable[[str], Any] = str
    default: Any = None
    commands: frozenset[str] = SERVE  #: the subcommands that take it
    negative: tuple[str, ...] = ()  #: the ``--no-...`` spellings of a switch
    env: str | None = None
    choices: Sequence[str] | None = None
    optional: bool = False  #: the value may be left out (``-fa`` alone means ``on``)
    const: Any = None  #: the value when it is left out
    repeat: bool = False  #: may be given several times (values collect in a list)
    nargs: int | None = None  #: values after the flag, where more than one
    #: values also collect, as ``(dest, value)`` in command-line order (after those from
    #: the environment), in this shared list: flags whose order matters together
    #: (``-ot``, ``--cpu-moe``, ``--n-cpu-moe``: the first pattern that matches wins)
    collect: str | None = None
    note: str = ""  #: inert: why it is harmless here; refused: why it is not taken
    help: str = ""

    @property
    def name(self) -> str:
        """The flag's long name, the one messages use."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


def used(names: str, dest: str, metavar: str | None = None, **kw: Any) -> Flag:
    """A flag that does what it does in llama.cpp's tools. A switch is off unless its
    default says otherwise (None: neither given, for a tri-state one)."""
    if metavar is None:
        kw.setdefault("default", False)
    return Flag(tuple(names.split()), dest, metavar=metavar, **kw)


def inert(names: str, dest: str, metavar: str | None, note: str, **kw: Any) -> Flag:
    """A llama-server flag accepted with no effect here, and why."""
    return used(names, dest, metavar, status=INERT, note=note, **kw)


def refused(names: str, dest: str, metavar: str | None, note: str, **kw: Any) -> Flag:
    """A llama-server flag refused here, and why."""
    return used(names, dest, metavar, status=REFUSED, note=note, **kw)
