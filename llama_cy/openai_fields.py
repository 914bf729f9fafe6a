"""OpenAI's chat request fields that shape the prompt and its grammar: ``tools``,
``tool_choice`` and ``response_format``, read and checked before templates and grammars
see them (:class:`~llama_cy.prepare.Preparer` is their user)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_tools", "response_format_schema", "tool_choice_name"]


def tool_choice_name(
    tools: Sequence[Mapping[str, Any]] | None, choice: str | Mapping[str, Any] | None
) -> str:
    """ "none", "auto", "required" or the name of the one function to call."""
    if not tools:
        return "none"
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise ValueError(
                f"tool_choice must be 'none', 'auto', 'required' or a function, not {choice!r}"
            )
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str):
        raise ValueError(
            "tool_choice must name a function: {'type': 'function', 'function': {'name': ...}}"
        )
    return name


def check_tools(tools: Sequence[Mapping[str, Any]] | None) -> None:
    """OpenAI's tool list shape, checked before templates and grammars see it."""
    if tools is None:
        return
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise ValueError("tools must be an array of {'type': 'function', 'function': {...}}")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("parameters", {}), (Mapping, bool))
        ):
            raise ValueError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': str, "
                "'parameters': a JSON schema}}"
            )


def response_format_schema(fmt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema OpenAI's ``response_format`` asks for (None for plain text); an
    absent or empty schema means any JSON object, as in llama-server."""
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping):
        raise ValueError("response_format must be an object")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = fmt.get("schema")
    elif kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema", fmt.get("schema")) if isinstance(spec, Mapping) else None
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
    else:
        raise ValueError(
            f"response_format type must be text, json_object or json_schema, not {kind!r}"
        )
    if isinstance(schema, str):
        schema = json.loads(schema)
    if schema is not None and not isinstance(schema, Mapping):
        raise ValueError("response_format's schema must be a JSON object")
    return dict(schema) if schema else {"type": "object"}
