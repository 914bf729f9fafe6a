"""JSON Schema to GBNF: structured output that llama.cpp's grammar sampler enforces.

:func:`json_schema_to_gbnf` turns a schema into a grammar whose every sentence is a
JSON document that validates against it. Keywords that a grammar cannot enforce
(``pattern``, ``multipleOf``, ``uniqueItems``, ``not``, ...) raise ``ValueError`` rather
than be ignored, so output never silently violates the schema. Numeric bounds are
enforced digit by digit; a bounded ``number`` uses a fixed-point form (no exponent).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["JSON_GBNF", "json_schema_to_gbnf"]

# Whitespace is bounded: small models left free to indent tend never to stop.
_BASE_RULES = {
    "ws": '| " " | "\\n" [ \\t]{0,20}',
    "string": '"\\"" char* "\\""',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "integral": '"0" | [1-9] [0-9]{0,15}',
    "integer": '"-"? integral',
    "number": '"-"? integral ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "boolean": '"true" | "false"',
    "null": '"null"',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}"',
    "array": '"[" ws (value ("," ws value)*)? "]"',
}

_FORMATS = {
    "date": '[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
    "time": '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? '
    '("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])',
    "uuid": '[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}',
}
_FORMATS["date-time"] = f'({_FORMATS["date"]}) "T" ({_FORMATS["time"]})'

# Keywords that only annotate: a grammar may ignore them without admitting invalid output.
_ANNOTATIONS = frozenset(
    [
        "title",
        "description",
        "examples",
        "default",
        "$schema",
        "$id",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
        "$defs",
        "definitions",
        "contentMediaType",
        "contentEncoding",
    ]
)
_HANDLED = frozenset(
    [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "format",
    ]
)


def _literal(text: str) -> str:
    """A GBNF string literal matching ``text`` exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _json_literal(value: object) -> str:
    return _literal(json.dumps(value, ensure_ascii=False))


def _repeat(item: str, lo: int, hi: int | None) -> str:
    if hi is None:
        return f"({item}){{{lo},}}"
    return f"({item}){{{lo},{hi}}}"


def _digits(lo: str, hi: str) -> str:
    """Digit strings of one width from ``lo`` to ``hi`` (inclusive)."""
    n = len(lo)
    if lo == hi:
        return _literal(lo)
    if lo == "0" * n and hi == "9" * n:
        return f"[0-9]{{{n}}}"
    if n == 1:
        return f"[{lo}-{hi}]"
    if lo[0] == hi[0]:
        return f"{_literal(lo[0])} ({_digits(lo[1:], hi[1:])})"
    parts = [f"{_literal(lo[0])} ({_digits(lo[1:], '9' * (n - 1))})"]
    if int(hi[0]) - int(lo[0]) > 1:
        parts.append(f"[{int(lo[0]) + 1}-{int(hi[0]) - 1}] [0-9]{{{n - 1}}}")
    parts.append(f"{_literal(hi[0])} ({_digits('0' * (n - 1), hi[1:])})")
    return " | ".join(parts)


def _uint_range(lo: int, hi: int | None) -> str:
    """Non-negative integers in ``[lo, hi]`` (``hi=None``: unbounded), no leading zeros."""
    top = hi if hi is not None else 10 ** max(len(str(lo)), 1) - 1
    parts = []
    for width in range(len(str(lo)), len(str(top)) + 1):
        a = max(lo, 10 ** (width - 1) if width > 1 else 0)
        b = min(top, 10**width - 1)
        if a <= b:
            parts.append(f"({_digits(str(a), str(b))})")
    if hi is None:
        parts.append(f"[1-9] [0-9]{{{len(str(top))},15}}")
    return " | ".join(parts)


def _int_range(lo: int | None, hi: int | None) -> str:
    """Integers in ``[lo, hi]``, either side possibly unbounded."""
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    parts = []
    if hi is None or hi >= 0:
        parts.append(_uint_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = max(1, -hi) if hi is not None else 1
        parts.append(f'"-" ({_uint_range(mag_lo, -lo if lo is not None else None)})')
    return " | ".join(f"({p})" for p in parts)


class _Converter:
    def __init__(self, root_schema: Mapping[str, Any]) -> None:
        self.root = root_schema
        self.rules: dict[str, str] = {}
        self.refs: dict[str, str] = {}

    def rule(self, hint: str, body: str) -> str:
        """Name ``body`` (reusing the name of an identical rule)."""
        for name, existing in self.rules.items():
            if existing == body:
                return name
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, i = base, 1
        while name in self.rules or name in _BASE_RULES:
            i += 1
            name = f"{base}-{i}"
        self.rules[name] = body
        return name

    def base(self, name: str) -> str:
        """Use one of the generic JSON rules (and what it depends on)."""
        deps = {
            "string": ["char"],
            "integer": ["integral"],
            "number": ["integral"],
            "value": ["object", "array", "string", "number", "boolean", "null"],
            "object": ["ws", "string", "value"],
            "array": ["ws", "value"],
        }
        if name not in self.rules:
            self.rules[name] = _BASE_RULES[name]
            for dep in deps.get(name, []):
                self.base(dep)
        return name

    def resolve(self, ref: str) -> Mapping[str, Any]:
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref ('#/...') is supported, not {ref!r}")
        node: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise ValueError(f"$ref {ref!r} does not resolve")
            node = node[part]
        if not isinstance(node, Mapping):
            raise ValueError(f"$ref {ref!r} is not a schema")
        return node

    def visit(self, schema: Mapping[str, Any] | bool, hint: str) -> str:
        """A GBNF expression for ``schema``."""
        if schema is True or schema == {}:
            return self.base("value")
        if schema is False:
            raise ValueError(f"schema at {hint!r} is false: nothing validates")
        if not isinstance(schema, Mapping):
            raise ValueError(f"schema at {hint!r} must be an object, not {type(schema).__name__}")
        unknown = set(schema) - _HANDLED - _ANNOTATIONS
        if unknown:
            raise ValueError(
                f"JSON schema keyword(s) {sorted(unknown)} at {hint!r} cannot be enforced "
                "by a grammar"
            )
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref not in self.refs:
                name = self.rule(ref.rsplit("/", 1)[-1] or "ref", f"<pending {ref}>")
                self.refs[ref] = name
                self.rules[name] = self.visit(self.resolve(ref), name)
            return self.refs[ref]
        if "const" in schema:
            return _json_literal(schema["const"])
        if "enum" in schema:
            return " | ".join(_json_literal(v) for v in schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k != key}
                alts = [self.visit({**rest, **s}, f"{hint}-{i}") for i, s in enumerate(schema[key])]
                return " | ".join(f"({a})" for a in alts)
        if "allOf" in schema:
            return self.visit(_merge_all_of(self, schema), hint)
        kind = schema.get("type")
        if isinstance(kind, list):
            rest = {k: v for k, v in schema.items() if k != "type"}
            return " | ".join(f"({self.visit({**rest, 'type': t}, f'{hint}-{t}')})" for t in kind)
        if kind is None:
            if "properties" in schema or "additionalProperties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
            else:
                return self.base("value")
        visit = getattr(self, "visit_" + str(kind), None)
        if visit is None:
            raise ValueError(f"unknown JSON schema type {kind!r} at {hint!r}")
        expr: str = visit(schema, hint)
        return expr

    def visit_null(self, schema: Mapping[str, Any], hint: str) -> str:
        return self.base("null")

    def visit_boolean(self, schema: Mapping[str, Any], hint: str) -> str:
        return self.base("boolean")

    def visit_string(self, schema: Mapping[str, Any], hint: str) -> str:
        fmt = schema.get("format")
        if fmt in _FORMATS:
            return f'"\\"" ({_FORMATS[fmt]}) "\\""'
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        if lo == 0 and hi is None:
            return self.base("string")
        self.base("char")
        return f'"\\"" {_repeat("char", lo, None if hi is None else int(hi))} "\\""'

    def visit_integer(self, schema: Mapping[str, Any], hint: str) -> str:
        lo, hi = _bounds(schema)
        if lo is None and hi is None:
            return self.base("integer")
        lo_i = None if lo is None else (math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0]))
        hi_i = None if hi is None else (math.ceil(hi[0]) - 1 if hi[1] else math.floor(hi[0]))
        return self.rule(f"{hint}-int", _int_range(lo_i, hi_i))

    def visit_number(self, schema: Mapping[str, Any], hint: str) -> str:
        lo, hi = _bounds(schema)
        if lo is None and hi is None:
            return self.base("number")
        whole = self.visit_integer(schema, hint)
        # A fraction that ends in a non-zero digit lies strictly between i and i + 1, so
        # "i.f" is in range when [i, i + 1] is (for "-i.f": when [-(i + 1), -i] is).
        frac = '"." [0-9]{0,5} [1-9]'
        lo_v = None if lo is None else lo[0]
        hi_v = None if hi is None else hi[0]
        parts = [f"({whole})"]
        pos_lo = max(0, math.ceil(lo_v)) if lo_v is not None else 0
        pos_hi = math.floor(hi_v) - 1 if hi_v is not None else None
        if pos_hi is None or pos_lo <= pos_hi:
            parts.append(f"({_uint_range(pos_lo, pos_hi)}) {frac}")
        neg_lo = max(0, math.ceil(-hi_v)) if hi_v is not None else 0
        neg_hi = math.floor(-lo_v) - 1 if lo_v is not None else None
        if neg_hi is None or neg_lo <= neg_hi:
            parts.append(f'"-" ({_uint_range(neg_lo, neg_hi)}) {frac}')
        return self.rule(f"{hint}-num", " | ".join(parts))

    def visit_array(self, schema: Mapping[str, Any], hint: str) -> str:
        ws = self.base("ws")
        if "prefixItems" in schema:
            items = [self.visit(s, f"{hint}-{i}") for i, s in enumerate(schema["prefixItems"])]
            if schema.get("items", False) is not False:
                raise ValueError(f"prefixItems with extra items at {hint!r} is not supported")
            inner = f' "," {ws} '.join(f"({e})" for e in items)
            return f'"[" {ws} {inner} "]"' if items else f'"[" {ws} "]"'
        item = self.rule(f"{hint}-item", self.visit(schema.get("items", True), f"{hint}-item"))
        lo, hi = int(schema.get("minItems", 0)), schema.get("maxItems")
        if hi is not None and int(hi) < lo:
            raise ValueError(f"maxItems < minItems at {hint!r}")
        if hi is not None and int(hi) == 0:
            return f'"[" {ws} "]"'
        more = _repeat(f'"," {ws} {item}', max(lo - 1, 0), None if hi is None else int(hi) - 1)
        body = f"{item} {more}"
        return f'"[" {ws} {body if lo > 0 else f"({body})?"} "]"'

    def visit_object(self, schema: Mapping[str, Any], hint: str) -> str:
        ws = self.base("ws")
        props: Mapping[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", []))
        missing = [r for r in required if r not in props]
        extra = schema.get("additionalProperties", not props)
        if missing and extra is False:
            raise ValueError(f"required properties {missing} at {hint!r} are not defined")
        pairs = {
            name: f'{_json_literal(name)} {ws} ":" {ws} '
            f"({self.visit(props.get(name, extra), f'{hint}-{name}')})"
            for name in [*props, *missing]
        }
        req = [pairs[name] for name in required]
        opt = [pairs[name] for name in pairs if name not in required]
        if extra is not False and not props:
            value = self.visit(extra, f"{hint}-value")
            kv = self.rule(f"{hint}-kv", f'{self.base("string")} {ws} ":" {ws} ({value})')
            opt = []
            tail = f'({kv} ("," {ws} {kv})*)?' if not req else f'("," {ws} {kv})*'
        else:
            tail = ""
        # Required properties first, in order; then each optional one, in order, at most once.
        body = f' "," {ws} '.join(f"({p})" for p in req)
        if opt:
            rest = self._optional_chain(opt, hint)
            body = f'{body} ("," {ws} {rest})?' if req else f"({rest})?"
        return f'"{{" {ws} {body} {tail} "}}"'

    def _optional_chain(self, opt: list[str], hint: str) -> str:
        """Any ordered subset of ``opt``, comma-separated: one rule per suffix."""
        ws = self.base("ws")
        name = ""
        for i in range(len(opt) - 1, -1, -1):
            body = f"({opt[i]})" if not name else f'({opt[i]}) ("," {ws} {name})? | {name}'
            name = self.rule(f"{hint}-opt-{i}", body)
        return name


def _bounds(
    schema: Mapping[str, Any],
) -> tuple[tuple[float, bool] | None, tuple[float, bool] | None]:
    """(value, exclusive) for the lower and upper bound, or None where there is none."""
    lo = hi = None
    if "minimum" in schema:
        lo = (float(schema["minimum"]), False)
    if isinstance(schema.get("exclusiveMinimum"), int | float) and not isinstance(
        schema["exclusiveMinimum"], bool
    ):
        v = float(schema["exclusiveMinimum"])
        lo = (v, True) if lo is None or v >= lo[0] else lo
    if "maximum" in schema:
        hi = (float(schema["maximum"]), False)
    if isinstance(schema.get("exclusiveMaximum"), int | float) and not isinstance(
        schema["exclusiveMaximum"], bool
    ):
        v = float(schema["exclusiveMaximum"])
        hi = (v, True) if hi is None or v <= hi[0] else hi
    return lo, hi


def _merge_all_of(conv: _Converter, schema: Mapping[str, Any]) -> dict[str, Any]:
    """``allOf`` of object schemas as one schema (properties and required merged)."""
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = conv.resolve(part["$ref"]) if "$ref" in part else part
        if "allOf" in part:
            part = _merge_all_of(conv, part)
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required":
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def json_schema_to_gbnf(schema: Mapping[str, Any] | bool | None = None) -> str:
    """A GBNF grammar (root rule ``root``) for JSON documents valid under ``schema``.

    ``None`` means any JSON object (OpenAI's ``json_object`` response format).
    ValueError for a schema the grammar cannot enforce.
    """
    if schema is None:
        schema = {"type": "object"}
    if not isinstance(schema, (Mapping, bool)):
        raise ValueError(
            f"a JSON schema must be an object or a boolean, not {type(schema).__name__}"
        )
    conv = _Converter(schema if isinstance(schema, Mapping) else {})
    try:
        root = conv.visit(schema, "root")
    except ValueError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, RecursionError) as exc:
        # A schema of the wrong shape somewhere inside ("properties": [...], a "$ref"
        # to nowhere, a cycle): the request's fault, told as such.
        raise ValueError(f"invalid JSON schema: {type(exc).__name__}: {exc}") from None
    conv.rules = {"root": root, **conv.rules}
    return "\n".join(f"{name} ::= {body}" for name, body in conv.rules.items()) + "\n"


JSON_GBNF = json_schema_to_gbnf(None)
