"""``llama-cy``'s flags: one table (:mod:`.table`) of every flag of every subcommand,
the :class:`Flag` type (:mod:`.flag`), and the argparse parsers built from it
(:mod:`.parser`)."""

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from llama_cy.flags.flag import INERT, REFUSED, USED, Flag
from llama_cy.flags.parser import add_flags, flags_for, llama_server_argv, reference
from llama_cy.flags.table import COMMANDS, FLAGS

__all__ = [
    "COMMANDS",
    "FLAGS",
    "INERT",
    "REFUSED",
    "USED",
    "Flag",
    "add_flags",
    "default",
    "flags_for",
    "from_fields",
    "llama_server_argv",
    "reference",
]


T = TypeVar("T")


def default(dest: str, command: str = "serve") -> Any:
    """The table's default of the flag ``dest`` in ``command`` (the one place it is
    written: every consumer's settings object reads its defaults from here)."""
    for flag in flags_for(command):
        if flag.dest == dest:
            return flag.default
    raise KeyError(f"{command} has no flag {dest!r}")


def from_fields(cls: type[T], source: Any, **conversions: Any) -> T:
    """A settings object (a dataclass ``cls``) from ``source``: each field from its
    attribute of the same name, or from its key where ``source`` is a mapping (a key it
    lacks keeps the field's default); ``conversions`` give the fields ``source`` names or
    reckons otherwise."""
    values = dict(conversions)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in values:
            continue
        if isinstance(source, Mapping):
            if f.name in source:
                values[f.name] = source[f.name]
        else:
            values[f.name] = getattr(source, f.name)
    return cls(**values)
