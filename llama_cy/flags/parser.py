"""The argparse parser of a subcommand, built from the flag table: its flags, their
environment variables as defaults (the command line wins), and the sampling flags."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from typing import Any

from llama_cy.flags.flag import INERT, REFUSED, USED, Flag, bool_env
from llama_cy.flags.table import COMMANDS, FLAGS, SAMPLING_ALIASES
from llama_cy.sampling_settings import SAMPLING_SETTINGS

__all__ = [
    "add_flags",
    "bash_completion",
    "flags_for",
    "llama_server_argv",
    "process_escapes",
    "reference",
    "reverse_prompts",
    "sampling_values",
]

#: The subcommands that take the sampling flags (llama-server's request defaults in serve).
SAMPLING_COMMANDS = frozenset({"run", "chat", "serve"})


def flags_for(command: str) -> list[Flag]:
    """The table's flags that ``command`` takes, in the table's order."""
    if command not in COMMANDS:
        raise ValueError(f"no subcommand {command!r} takes flags")
    return [f for f in FLAGS if command in f.commands]


def _default(flag: Flag) -> Any:
    """The flag's default, or its environment variable's value where one is set."""
    if flag.env and flag.status == USED and flag.env in os.environ:
        raw = os.environ[flag.env]
        return bool_env(raw) if flag.metavar is None else flag.type(raw)
    return flag.default


class _Collect(argparse.Action):
    """Stores the flag's value as usual, and appends ``(dest, value)`` to the shared
    list ``collect`` names."""

    def __init__(self, *args: Any, collect: str, switch: bool, **kw: Any) -> None:
        self.collect = collect
        self.switch = switch
        kw["nargs"] = 0 if switch else None
        super().__init__(*args, **kw)

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        value = True if self.switch else values
        setattr(namespace, self.dest, value)
        entries = list(getattr(namespace, self.collect, None) or [])
        entries.append((self.dest, value))
        setattr(namespace, self.collect, entries)


def _add(group: Any, flag: Flag, help_text: str) -> None:
    default = _default(flag)
    if flag.collect is not None:
        valued = {"type": flag.type, "metavar": flag.metavar} if flag.metavar is not None else {}
        group.add_argument(
            *flag.names,
            dest=flag.dest,
            action=_Collect,
            collect=flag.collect,
            switch=flag.metavar is None,
            default=default,
            help=help_text,
            **valued,
        )
        return
    if flag.metavar is None:
        group.add_argument(
            *flag.names, dest=flag.dest, action="store_true", default=default, help=help_text
        )
        if flag.negative:
            group.add_argument(
                *flag.negative, dest=flag.dest, action="store_false", help=argparse.SUPPRESS
            )
        return
    kw: dict[str, Any] = {
        "dest": flag.dest,
        "metavar": flag.metavar.strip("<>[]").replace(" ", "_") or "VALUE",
        "type": flag.type,
        "help": help_text,
    }
    if flag.choices is not None:
        kw["choices"] = flag.choices
        kw.pop("metavar")
    if flag.nargs:
        group.add_argument(*flag.names, nargs=flag.nargs, default=default, **kw)
    elif flag.repeat:
        group.add_argument(*flag.names, action="append", default=None, **kw)
    elif flag.optional:
        group.add_argument(*flag.names, nargs="?", const=flag.const, default=default, **kw)
    else:
        group.add_argument(*flag.names, default=default, **kw)


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """``command``'s flags on ``parser``. ``serve`` groups llama-server's flags by their
    fate here; a flag refused or inert in ``serve`` says why in its help there."""
    flags = flags_for(command)
    if command == "serve":
        groups = {
            USED: parser.add_argument_group("llama-server's flags"),
            INERT: parser.add_argument_group("accepted, with no effect here (each says why)"),
            REFUSED: parser.add_argument_group("refused: given, they stop the start and say why"),
        }
        for flag in flags:
            _add(groups[flag.status], flag, flag.help if flag.status == USED else flag.note)
    else:
        for flag in flags:
            _add(parser, flag, flag.help)
    if command in SAMPLING_COMMANDS:
        _add_sampling(parser, serving=command == "serve")
    # A shared list starts with what the environment sets, in the table's order (llama.cpp
    # applies its LLAMA_ARG_* variables before the command line).
    collected: dict[str, list[tuple[str, Any]]] = {}
    for flag in flags:
        if flag.collect is not None:
            entries = collected.setdefault(flag.collect, [])
            value = _default(flag)
            if flag.env and flag.env in os.environ and value not in (None, False):
                entries.append((flag.dest, value))
    parser.set_defaults(**collected)


def _add_sampling(parser: argparse.ArgumentParser, serving: bool) -> None:
    title = "default sampling of requests (llama-server's)" if serving else "sampling"
    group = parser.add_argument_group(title)
    for s in SAMPLING_SETTINGS:
        if not s.flag:  # a request field and keyword only
            continue
        names = (s.flag, *SAMPLING_ALIASES.get(s.flag, ()))
        if s.type is tuple:  # repeatable; None: the default list
            group.add_argument(*names, dest=s.name, action="append", default=None, help=s.help)
        else:
            group.add_argument(
                *names, dest=s.name, type=s.type, default=s.default, help=f"{s.help} ({s.default})"
            )


_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"'": b"'", b'"': b'"', b"\\": b"\\"}
_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|.)", re.S)


def process_escapes(text: str) -> str:
    """llama.cpp's ``-e`` (``string_process_escapes``): ``\\n``, ``\\r``, ``\\t``,
    ``\\'``, ``\\"``, ``\\\\`` and ``\\xNN`` (a byte); any other backslash stays."""

    def one(m: re.Match[bytes]) -> bytes:
        code = m.group(1)
        if code[:1] == b"x" and len(code) == 3:
            return bytes([int(code[1:], 16)])
        return _ESCAPES.get(code, m.group(0))

    return _ESCAPE.sub(one, text.encode()).decode("utf-8", "replace")


def _escaped(args: argparse.Namespace, values: Sequence[str]) -> list[str]:
    """``values`` as llama.cpp keeps them after reading its flags: escapes processed
    unless ``--no-escape`` (common_params_parse, for -r, --in-prefix/--in-suffix and the
    DRY sequence breakers)."""
    if getattr(args, "escape", True):
        return [process_escapes(v) for v in values]
    return list(values)


def reverse_prompts(args: argparse.Namespace) -> list[str]:
    """``-r``'s stop strings (escapes processed, as llama.cpp's antiprompts)."""
    return _escaped(args, args.reverse_prompt or ())


def sampling_values(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags' values by Python name (the repeatable ones only if given).
    ``--dry-sequence-breaker none`` clears the breakers given so far, as there."""
    out = {s.name: getattr(args, s.name) for s in SAMPLING_SETTINGS if s.flag}
    breakers = out.get("dry_sequence_breakers")
    if breakers is not None:
        kept: list[str] = []
        for b in breakers:
            kept = [] if b == "none" else [*kept, b]
        out["dry_sequence_breakers"] = _escaped(args, kept)
    return {k: v for k, v in out.items() if v is not None}


def llama_server_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` as llama-server reads it: in a ``--`` flag, ``_`` means ``-``
    (``--backend_sampling`` is ``--backend-sampling``; common/arg.cpp)."""
    out = []
    for a in argv:
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            a = name.replace("_", "-") + eq + value
        out.append(a)
    return out


def reference(command: str = "serve") -> str:
    """``command``'s flags as a Markdown table: spellings, default, environment
    variable, and (for ``serve``) the fate of each and why."""
    rows = ["| flag | default | env | here | what it does, or why not |", "|---|---|---|---|---|"]
    for flag in flags_for(command):
        spell = ", ".join(f"`{n}`" for n in (*flag.names, *flag.negative))
        status = flag.status if command == "serve" else USED
        text = flag.help if status == USED else flag.note
        default = "" if flag.default is None else f"`{flag.default}`"
        env = f"`{flag.env}`" if flag.env else ""
        rows.append(f"| {spell} | {default} | {env} | {status} | {_cell(text)} |")
    return "\n".join(rows)


def bash_completion() -> str:
    """A bash completion script for ``llama-cy`` (llama-server's --completion-bash):
    the subcommands, then each one's flags; model, grammar and template files by their
    extensions."""
    cases = []
    for command in sorted(COMMANDS):
        names = [n for f in flags_for(command) for n in (*f.names, *f.negative)]
        if command in SAMPLING_COMMANDS:
            names += [
                n
                for s in SAMPLING_SETTINGS
                if s.flag
                for n in (s.flag, *SAMPLING_ALIASES.get(s.flag, ()))
            ]
        cases.append(f'        {command}) opts="{" ".join(names)}" ;;')
    files = {"--model|-m": "*.gguf", "--grammar-file": "*.gbnf", "--chat-template-file": "*.jinja"}
    by_ext = "\n".join(
        f"        {flag})\n            COMPREPLY=( $(compgen -f -X '!{ext}' -- \"$cur\") "
        f'$(compgen -d -- "$cur") )\n            return 0\n            ;;'
        for flag, ext in files.items()
    )
    return "\n".join([
        "_llama_cy_completions() {",
        "    local cur prev opts",
        "    COMPREPLY=()",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    if [ \"$COMP_CWORD\" -eq 1 ]; then",
        f'        COMPREPLY=( $(compgen -W "{" ".join(sorted(COMMANDS))}" -- "$cur") )',
        "        return 0",
        "    fi",
        '    case "${COMP_WORDS[1]}" in',
        *cases,
        "    esac",
        '    case "$prev" in',
        by_ext,
        "        *)",
        '            COMPREPLY=( $(compgen -W "${opts}" -- "$cur") )',
        "            return 0",
        "            ;;",
        "    esac",
        "}",
        "",
        "complete -F _llama_cy_completions llama-cy",
        "",
    ])  # fmt: skip


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
