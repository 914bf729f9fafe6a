"""llama-cpp-python's ``llama_cpp.llama_grammar``: GBNF grammars and JSON schemas."""

from __future__ import annotations

import json
from typing import Any

from llama_cy.grammar import json_schema_to_grammar as _schema_to_gbnf
from llama_cy.sampling import LlamaGrammar

__all__ = ["JSON_GBNF", "LlamaGrammar", "json_schema_to_gbnf"]


def json_schema_to_gbnf(schema: str | dict[str, Any], prop_order: list[str] | None = None) -> str:
    """The GBNF of a JSON schema (llama.cpp's own converter). ``prop_order``: the
    properties it names come first in every object, in that order, the others after
    them in the schema's order (llama-cpp-python's converter orders them so; llama.cpp's
    keeps the order of the schema, so the schema is reordered)."""
    value = json.loads(schema) if isinstance(schema, str) else schema
    if prop_order:
        rank = {name: i for i, name in enumerate(prop_order)}
        value = _ordered(value, rank)
    return _schema_to_gbnf(value)


def _ordered(node: Any, rank: dict[str, int]) -> Any:
    """``node`` with every ``properties`` object's keys sorted by ``rank`` (then kept in
    their order)."""
    if isinstance(node, list):
        return [_ordered(v, rank) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _ordered(v, rank) for k, v in node.items()}
    props = out.get("properties")
    if isinstance(props, dict):
        keys = sorted(enumerate(props), key=lambda ik: (rank.get(ik[1], len(rank)), ik[0]))
        out["properties"] = {k: props[k] for _, k in keys}
    return out


#: Any JSON value (llama-cpp-python's ``JSON_GBNF``).
JSON_GBNF = _schema_to_gbnf({})
