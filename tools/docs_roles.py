"""A griffe extension for the docs site: the docstrings' Sphinx roles
(``:class:`~llama_cy.LlamaModel```, ``:meth:`embed```) read as code spans in Markdown."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def _short(match: re.Match[str]) -> str:
    target = match.group(1)
    return f"`{target.rsplit('.', 1)[-1] if match.group(0).count('~') else target}`"


class SphinxRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _ROLE.sub(_short, obj.docstring.value)
            obj.docstring.value = _LITERAL.sub(r"`\1`", text)
