"""JSON Schema to GBNF: structured output that llama.cpp's grammar sampler enforces.

The conversion is llama.cpp's own ``json_schema_to_grammar`` (its ``common`` library,
what llama-server runs), ``pattern`` and ``format`` included. What that converter
does not enforce is refused here instead of ignored, so output never silently violates
the schema: bounds on non-integer numbers, ``multipleOf``, ``uniqueItems``, ``not``,
conditionals and the object-size and ``contains`` keywords raise ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from llama_cy._chat import json_schema_to_grammar as _convert

__all__ = ["check_schema", "json_schema_to_grammar"]

# Keywords llama.cpp's converter passes over: a grammar made without them would admit
# output the schema forbids.
_UNENFORCED = frozenset(
    [
        "multipleOf",
        "uniqueItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
        "patternProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedItems",
        "unevaluatedProperties",
    ]
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# Where subschemas sit: one schema, a list of them, or a mapping of them.
_ONE = ("items", "additionalProperties")
_LIST = ("prefixItems", "anyOf", "oneOf", "allOf")
_MAP = ("properties", "$defs", "definitions")


def check_schema(schema: Any, path: str = "#") -> None:
    """Raise ValueError for what llama.cpp's converter would not enforce in ``schema``."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, Mapping):
        raise ValueError(f"JSON schema at {path} must be an object or a boolean")
    unenforced = sorted(_UNENFORCED & set(schema))
    if unenforced:
        raise ValueError(
            f"JSON schema keyword {unenforced[0]!r} at {path} cannot be enforced by a grammar"
        )
    bounds = [k for k in _BOUNDS if k in schema]
    if bounds and schema.get("type") != "integer":
        raise ValueError(
            f"JSON schema bounds ({', '.join(bounds)}) at {path} are enforced only on integers"
        )
    if bounds:
        lo = schema.get("minimum", _plus_one(schema.get("exclusiveMinimum")))
        hi = schema.get("maximum", _minus_one(schema.get("exclusiveMaximum")))
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"JSON schema at {path} allows no integer: [{lo}, {hi}] is empty")
    for key in _ONE:
        if key in schema and not isinstance(schema[key], list):
            check_schema(schema[key], f"{path}/{key}")
    for key in _LIST:
        subs = schema.get(key, [])
        if not isinstance(subs, list):
            raise ValueError(f"JSON schema {key!r} at {path} must be an array of schemas")
        for i, sub in enumerate(subs):
            check_schema(sub, f"{path}/{key}/{i}")
    if isinstance(schema.get("items"), list):  # the older array form of prefixItems
        for i, sub in enumerate(schema["items"]):
            check_schema(sub, f"{path}/items/{i}")
    for key in _MAP:
        subs = schema.get(key, {})
        if not isinstance(subs, Mapping):
            raise ValueError(f"JSON schema {key!r} at {path} must be an object of schemas")
        for name, sub in subs.items():
            check_schema(sub, f"{path}/{key}/{name}")


def _plus_one(x: Any) -> Any:
    return None if x is None else x + 1


def _minus_one(x: Any) -> Any:
    return None if x is None else x - 1


def json_schema_to_grammar(schema: Mapping[str, Any] | str | None) -> str:
    """GBNF whose sentences are the JSON documents valid under ``schema`` (a mapping or
    its JSON text; None or ``{}``: any JSON object, as llama-server). ValueError for a
    schema that cannot be enforced or converted."""
    if isinstance(schema, str):
        schema = json.loads(schema)
    if schema is None or schema == {}:
        schema = {"type": "object"}
    check_schema(schema)
    grammar: str = _convert(schema)
    return grammar
