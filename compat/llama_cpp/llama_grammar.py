"""llama-cpp-python's ``llama_cpp.llama_grammar``: GBNF grammars and JSON schemas."""

from __future__ import annotations

import json
from typing import Any

from llama_cy.grammar import json_schema_to_grammar as _schema_to_gbnf
from llama_cy.sampling import LlamaGrammar

__all__ = ["JSON_GBNF", "LlamaGrammar", "json_schema_to_gbnf"]


def json_schema_to_gbnf(schema: str | dict[str, Any], prop_order: list[str] | None = None) -> str:
    """The GBNF of a JSON schema (llama.cpp's own converter)."""
    if prop_order:
        raise NotImplementedError("prop_order: llama.cpp's converter keeps the schema's order")
    return _schema_to_gbnf(json.loads(schema) if isinstance(schema, str) else schema)


#: Any JSON value (llama-cpp-python's ``JSON_GBNF``).
JSON_GBNF = _schema_to_gbnf({})
