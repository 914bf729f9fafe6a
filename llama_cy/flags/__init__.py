"""``llama-cy``'s flags: one table (:mod:`.table`) of every flag of every subcommand,
the :class:`Flag` type (:mod:`.flag`), and the argparse parsers built from it
(:mod:`.parser`)."""

from typing import Any

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
    "llama_server_argv",
    "reference",
]


def default(dest: str, command: str = "serve") -> Any:
    """The table's default of the flag ``dest`` in ``command`` (the one place it is
    written: the server's settings and engine read theirs from here)."""
    for flag in flags_for(command):
        if flag.dest == dest:
            return flag.default
    raise KeyError(f"{command} has no flag {dest!r}")
