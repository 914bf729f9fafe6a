"""Chat prompts: the model's Jinja template, llama.cpp's built-in templates, tool calls.

A GGUF file carries its chat template as Jinja source (``tokenizer.chat_template``).
:class:`ChatFormatter` renders it in Jinja2's immutable sandbox with the Hugging Face
conventions (``messages``, ``add_generation_prompt``, ``bos_token``, ``eos_token``,
``tools``, ``raise_exception``, ``strftime_now``). A model without one, or a named
``chat_format``, uses llama.cpp's built-in template engine instead.

Tool calls use the ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` form
(Hermes, Qwen); :func:`parse_tool_calls` also reads a bare JSON call (Llama 3) and
Mistral's ``[TOOL_CALLS]``.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from llama_cy._chat import chat_apply_template, chat_builtin_templates
from llama_cy._model import LlamaModel
from llama_cy.grammar import json_schema_to_gbnf

__all__ = [
    "CHAT_FORMATS",
    "ChatFormatter",
    "parse_tool_calls",
    "tool_call_grammar",
    "tools_system_prompt",
]

#: llama-cpp-python's ``chat_format`` names and the llama.cpp built-in template for each.
CHAT_FORMATS = {
    "llama-2": "llama2",
    "llama-3": "llama3",
    "chatml": "chatml",
    "chatml-function-calling": "chatml",
    "mistral-instruct": "mistral-v1",
    "gemma": "gemma",
    "zephyr": "zephyr",
    "vicuna": "vicuna",
    "openchat": "openchat",
    "phi3": "phi3",
}

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Hugging Face's tojson: no HTML escaping, non-ASCII kept (Jinja2's own escapes both).
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def jinja_environment() -> Any:
    """The sandboxed Jinja2 environment chat templates render in (Hugging Face settings)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _text_content(content: Any) -> str:
    """Message content as text (OpenAI content parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


class ChatFormatter:
    """Renders a message list into the prompt the model was trained on.

    ``template`` (Jinja source) overrides the model's; ``chat_format`` picks a named
    format (llama-cpp-python's names or llama.cpp's built-in ones) instead.
    """

    def __init__(
        self, model: LlamaModel, chat_format: str | None = None, template: str | None = None
    ) -> None:
        self.model = model
        self.bos_token = model.token_text(model.token_bos) if model.token_bos >= 0 else ""
        self.eos_token = model.token_text(model.token_eos) if model.token_eos >= 0 else ""
        self.builtin: str | None = None
        self.template: str | None = None
        if chat_format is not None:
            name = CHAT_FORMATS.get(chat_format, chat_format)
            if name not in chat_builtin_templates():
                known = sorted({*CHAT_FORMATS, *chat_builtin_templates()})
                raise ValueError(f"unknown chat_format {chat_format!r}; known: {', '.join(known)}")
            self.builtin = name
        else:
            self.template = template if template is not None else model.chat_template()
            if self.template is None:
                self.builtin = _guess_builtin(model)
        self._compiled: Any = None

    @property
    def supports_tools(self) -> bool:
        """Whether the template itself renders a ``tools`` list."""
        return self.template is not None and "tools" in self.template

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text for ``messages`` (as the template renders it, BOS text included)."""
        if self.template is not None:
            if self._compiled is None:
                self._compiled = jinja_environment().from_string(self.template)
            variables: dict[str, Any] = {
                "messages": [dict(m) for m in messages],
                "add_generation_prompt": add_generation_prompt,
                "bos_token": self.bos_token,
                "eos_token": self.eos_token,
                **kwargs,
            }
            if tools:
                variables["tools"] = list(tools)
            text: str = self._compiled.render(**variables)
            return text
        assert self.builtin is not None
        flat = [
            {"role": m["role"] if m["role"] != "tool" else "user", "content": _flatten(m)}
            for m in messages
        ]
        return chat_apply_template(self.builtin, flat, add_generation_prompt)


def _flatten(message: Mapping[str, Any]) -> str:
    """A message as plain text for templates that know nothing of tools."""
    text = _text_content(message.get("content"))
    if message.get("role") == "tool":
        return f"<tool_response>\n{text}\n</tool_response>"
    for call in message.get("tool_calls") or ():
        fn = call.get("function", call)
        args = fn.get("arguments", {})
        args = json.loads(args) if isinstance(args, str) else args
        call_json = json.dumps({"name": fn["name"], "arguments": args})
        text += f"{TOOL_CALL_OPEN}{call_json}{TOOL_CALL_CLOSE}"
    return text


def _guess_builtin(model: LlamaModel) -> str:
    """A built-in template for a model without one: Gemma's for Gemma (its GGUFs are often
    published without a template), else ChatML, as llama.cpp's tools fall back to."""
    arch = model.metadata.get("general.architecture", "")
    return "gemma" if arch.startswith("gemma") else "chatml"


def tools_system_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """Instructions for a template that cannot render tools itself."""
    specs = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return (
        "You can call these functions:\n"
        f"{specs}\n"
        f"To call one, reply with {TOOL_CALL_OPEN}"
        '{"name": <function name>, "arguments": <arguments as a JSON object>}'
        f"{TOOL_CALL_CLOSE} and nothing else."
    )


def tool_call_grammar(
    tools: Sequence[Mapping[str, Any]], name: str | None = None, tagged: bool = True
) -> str:
    """GBNF for one call of one of ``tools`` (or of the tool ``name``).

    ``tagged`` wraps the JSON in ``<tool_call>...</tool_call>`` (the form a lazy
    grammar is triggered by); untagged it is the JSON object alone.
    """
    options = []
    for tool in tools:
        fn = tool.get("function", tool)
        if name is not None and fn["name"] != name:
            continue
        params = fn.get("parameters") or {"type": "object"}
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": params},
                "required": ["name", "arguments"],
            }
        )
    if not options:
        raise ValueError(f"tool_choice names {name!r}, which is not among the tools")
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    gbnf = json_schema_to_gbnf(schema)
    if not tagged:
        return gbnf
    return gbnf.replace("root ::= ", "call ::= ", 1) + (
        f'root ::= "{TOOL_CALL_OPEN}" call "{TOOL_CALL_CLOSE}"\n'
    )


_TAGGED = re.compile(re.escape(TOOL_CALL_OPEN) + r"\s*(.*?)\s*" + re.escape(TOOL_CALL_CLOSE), re.S)


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split generated text into (content, OpenAI ``tool_calls``).

    Reads ``<tool_call>`` blocks, Mistral's ``[TOOL_CALLS] [...]``, and a reply that is
    one JSON call (``{"name": ..., "arguments"|"parameters": {...}}``). Text that holds
    no well-formed call comes back as content with no calls.
    """
    calls: list[dict[str, Any]] = []
    content = text
    if TOOL_CALL_OPEN in text:
        for raw in _TAGGED.findall(text):
            calls.extend(_calls_from_json(raw))
        if calls:
            content = _TAGGED.sub("", text)
    elif "[TOOL_CALLS]" in text:
        head, _, raw = text.partition("[TOOL_CALLS]")
        calls = _calls_from_json(raw)
        if calls:
            content = head
    elif text.strip().startswith(("{", "[")):
        calls = _calls_from_json(text.strip())
        if calls:
            content = ""
    content = content.strip()
    return (content or None) if calls else text, calls


def _calls_from_json(raw: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return []
        args = item.get("arguments", item.get("parameters", {}))
        calls.append(
            {
                "id": "call_" + uuid.uuid4().hex[:24],
                "type": "function",
                "function": {
                    "name": item["name"],
                    "arguments": args
                    if isinstance(args, str)
                    else json.dumps(args, ensure_ascii=False),
                },
            }
        )
    return calls
