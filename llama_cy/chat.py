"""Chat through llama.cpp's own chat engine (its ``common`` library, what llama-server runs).

:class:`ChatTemplate` renders a conversation with the model's template (or another) in
llama.cpp's Jinja engine and gives a :class:`ChatPrompt`: the prompt text and what the
model family needs to answer it (a grammar for tool calls or a JSON schema, the lazy
grammar's triggers, tokens to keep whole, extra stops, the format of the reply).
:class:`ChatParser` reads the reply back into a :class:`ChatMessage` (content,
``reasoning_content``, tool calls), whole or while it streams, as OpenAI deltas.

A custom sampling loop uses the two directly; ``Llama`` and the server use them for
every chat request.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any, TypeVar

from llama_cy._chat import (
    ChatOutputParser,
    ChatRenderPool,
    ChatTemplates,
    chat_builtin_templates,
)
from llama_cy._model import LlamaModel

__all__ = [
    "CHAT_FORMATS",
    "JINJA_FORMATS",
    "REASONING_FORMATS",
    "ChatDelta",
    "ChatMessage",
    "ChatParser",
    "ChatPrompt",
    "ChatRender",
    "ChatRenderPool",
    "ChatTemplate",
    "GrammarTrigger",
    "ToolCall",
    "chat_builtin_templates",
    "chat_format_names",
    "render_here",
]

T = TypeVar("T")

#: llama-cpp-python's ``chat_format`` names and the llama.cpp built-in template for each.
CHAT_FORMATS = {
    "llama-2": "llama2",
    "llama-3": "llama3",
    "chatml": "chatml",
    "mistral-instruct": "mistral-v1",
    "gemma": "gemma",
    "zephyr": "zephyr",
    "vicuna": "vicuna",
    "openchat": "openchat",
    "phi3": "phi3",
}

#: ``chat_format`` names that llama.cpp's built-in formatter cannot render (it knows no
#: tools): Jinja templates shipped with llama_cy instead.
JINJA_FORMATS = {"chatml-function-calling": "chatml-function-calling.jinja"}

#: llama-server's ``reasoning_format`` values: ``none`` leaves thoughts in the content;
#: ``auto`` and ``deepseek`` move them to ``reasoning_content``; ``deepseek-legacy`` also
#: keeps the tags in a stream's content.
REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")

_log = logging.getLogger("llama_cy")

# common_grammar_trigger_type
_TRIGGER_TOKEN, _TRIGGER_WORD, _TRIGGER_PATTERN, _TRIGGER_PATTERN_FULL = range(4)


@dataclass(frozen=True, slots=True)
class GrammarTrigger:
    """When a lazy grammar wakes: ``kind`` is ``"token"``, ``"word"``, ``"pattern"`` or
    ``"pattern_full"``; ``pattern`` is the regular expression llama.cpp's lazy grammar
    is given for it (llama-server's conversion)."""

    kind: str
    value: str
    pattern: str


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """One rendered conversation (llama.cpp's ``common_chat_params``).

    ``grammar`` (GBNF, empty for none) constrains the reply; it is ``grammar_lazy`` when
    it applies only from a ``grammar_triggers`` match on. ``preserved_tokens`` are
    special tokens the reply may contain as text (tool-call tags). ``additional_stops``
    end the reply. ``generation_prompt`` is the part of the prompt that opens the
    assistant's turn; a grammar that applies from the start covers it too and is fed it
    first, unless ``prefill`` is False (a grammar that starts at the reply's first
    token). ``grammar_root`` is the grammar's start rule. ``format`` and ``parser`` tell
    :class:`ChatParser` how to read the reply. ``reasoning_format`` is the one the
    prompt was rendered for. ``message_delimiters`` (role, text) mark where the
    template's messages start (llama-server's message spans, for context checkpoints at
    user messages); the differential autoparser finds them, other formats give none.
    """

    prompt: str
    format: int = 0
    format_name: str = "Content-only"
    grammar: str = ""
    grammar_lazy: bool = False
    grammar_triggers: tuple[GrammarTrigger, ...] = ()
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    generation_prompt: str = ""
    parser: str = field(default="", repr=False)
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: tuple[str, ...] = ()
    reasoning_format: str = "auto"
    prefill: bool = True
    grammar_root: str = "root"
    message_delimiters: tuple[tuple[str, str], ...] = ()

    def grammar_trigger_patterns(self) -> list[str]:
        """The lazy grammar's trigger patterns, as llama.cpp's ``common_sampler`` builds
        them (a pattern_full trigger anchored at both ends). Token triggers are left to
        the caller, who has the vocabulary."""
        out = []
        for t in self.grammar_triggers:
            if t.kind == "pattern_full":
                p = t.pattern
                out.append(
                    "^$"
                    if not p
                    else ("" if p[0] == "^" else "^") + p + ("" if p[-1] == "$" else "$")
                )
            elif t.kind != "token":
                out.append(t.pattern)
        return out


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call in a reply; ``arguments`` is JSON text."""

    name: str
    arguments: str
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """An assistant reply as the chat engine parses it."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    role: str = "assistant"

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> ChatMessage:
        calls = tuple(ToolCall(c["name"], c["arguments"], c["id"]) for c in d["tool_calls"])
        return cls(d["content"], d["reasoning_content"], calls, d["role"])

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's ``message``: ``content`` is None when the reply is only tool calls;
        ``reasoning_content`` and ``tool_calls`` appear when there are any."""
        out: dict[str, Any] = {
            "role": self.role,
            "content": self.content if self.content or not self.tool_calls else None,
        }
        if self.reasoning_content:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return out


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """One step of a streamed reply (llama.cpp's ``common_chat_msg_diff``): new content,
    new reasoning, or a piece of tool call ``index`` (its id and name come with its first
    piece, its arguments in pieces)."""

    content: str = ""
    reasoning_content: str = ""
    index: int | None = None
    id: str = ""
    name: str = ""
    arguments: str = ""

    def to_openai(self) -> dict[str, Any]:
        """OpenAI's ``delta`` for this step."""
        out: dict[str, Any] = {}
        if self.content:
            out["content"] = self.content
        if self.reasoning_content:
            out["reasoning_content"] = self.reasoning_content
        if self.index is not None:
            call: dict[str, Any] = {"index": self.index}
            if self.id:
                call["id"] = self.id
                call["type"] = "function"
            fn = {}
            if self.name:
                fn["name"] = self.name
            if self.arguments or not self.name:
                fn["arguments"] = self.arguments
            call["function"] = fn
            out["tool_calls"] = [call]
        return out


def chat_format_names() -> list[str]:
    """Every name :meth:`ChatTemplate.from_format` takes."""
    return sorted({*CHAT_FORMATS, *JINJA_FORMATS, *chat_builtin_templates()})


def _check_reasoning_format(value: str) -> str:
    if value not in REASONING_FORMATS:
        raise ValueError(
            f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}, not {value!r}"
        )
    return value


class ChatTemplate:
    """A model's chat template in llama.cpp's chat engine.

    ``template`` replaces the model's own: Jinja source, or ``"chatml"``. With
    ``use_jinja=False`` the template goes through llama.cpp's built-in (non-Jinja)
    formatter instead, and may also be a built-in name (:func:`chat_builtin_templates`);
    :meth:`from_format` takes llama-cpp-python's ``chat_format`` names. A model
    without a template gets ChatML, as in llama-server. ``model=None`` renders
    ``template`` with empty BOS and EOS texts. ValueError if the template does not parse.
    """

    def __init__(
        self, model: LlamaModel | None, template: str | None = None, *, use_jinja: bool = True
    ) -> None:
        self.model = model
        self.use_jinja = use_jinja
        self._tmpls = ChatTemplates(model, template)

    @classmethod
    def from_format(cls, model: LlamaModel | None, chat_format: str) -> ChatTemplate:
        """llama-cpp-python's ``chat_format`` (:data:`CHAT_FORMATS`), or a built-in
        template's name: rendered by llama.cpp's built-in formatter, but for the
        formats in :data:`JINJA_FORMATS`. ValueError for a name neither knows."""
        if chat_format in JINJA_FORMATS:
            path = resources.files("llama_cy") / "templates" / JINJA_FORMATS[chat_format]
            return cls(model, path.read_text(encoding="utf-8"))
        name = CHAT_FORMATS.get(chat_format, chat_format)
        if name not in chat_builtin_templates():
            known = ", ".join(chat_format_names())
            raise ValueError(f"unknown chat_format {chat_format!r}; known: {known}")
        return cls(model, name, use_jinja=False)

    @property
    def source(self) -> str:
        """The Jinja source in use."""
        return str(self._tmpls.source())

    @property
    def tool_use_source(self) -> str:
        """The model's separate tool-use template, if it has one ("" otherwise)."""
        return str(self._tmpls.source("tool_use"))

    @property
    def templates(self) -> ChatTemplates:
        """llama.cpp's templates object, whose ``apply`` renders a :meth:`request`."""
        return self._tmpls

    @cached_property
    def caps(self) -> dict[str, bool]:
        """What the template supports, as llama-server's ``/props`` reports it."""
        caps: dict[str, bool] = self._tmpls.caps()
        return caps

    def apply(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str = "auto",
        parallel_tool_calls: bool | None = None,
        json_schema: Mapping[str, Any] | None = None,
        grammar: str | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool | str | None = None,
        reasoning_format: str = "auto",
        enable_thinking: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        force_pure_content: bool = False,
    ) -> ChatPrompt:
        """Render ``messages`` (OpenAI's shape) for the model to answer.

        ``tools`` with ``tool_choice`` (``"auto"``, ``"required"`` or ``"none"``) and
        ``parallel_tool_calls`` (default: whether the template supports them) give the
        grammar and triggers of the family's tool-call syntax; ``json_schema`` a grammar
        for a JSON reply; ``grammar`` passes a GBNF grammar through. ``reasoning_format``,
        ``enable_thinking`` and ``chat_template_kwargs`` are llama-server's;
        ``force_pure_content`` its ``--skip-chat-parsing`` (rendered without reasoning or
        tools taken apart, and parsed as content only). ValueError
        for what the engine refuses (a malformed message, a grammar with tools, ...).
        """
        request = self.request(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            json_schema=json_schema,
            grammar=grammar,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            reasoning_format=reasoning_format,
            enable_thinking=enable_thinking,
            chat_template_kwargs=chat_template_kwargs,
            force_pure_content=force_pure_content,
        )
        return self.prompt(request, self._tmpls.apply(request))

    def request(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str = "auto",
        parallel_tool_calls: bool | None = None,
        json_schema: Mapping[str, Any] | None = None,
        grammar: str | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool | str | None = None,
        reasoning_format: str = "auto",
        enable_thinking: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        force_pure_content: bool = False,
    ) -> dict[str, Any]:
        """What :meth:`apply` asks llama.cpp's chat engine for (the arguments checked):
        give it to :meth:`ChatTemplates.apply` on :attr:`templates`, or to a
        :class:`ChatRenderPool`, and the result to :meth:`prompt`."""
        if tool_choice not in ("auto", "required", "none"):
            raise ValueError(
                f"tool_choice must be 'auto', 'required' or 'none', not {tool_choice!r}"
            )
        _check_reasoning_format(reasoning_format)
        if parallel_tool_calls is None:
            parallel_tool_calls = bool(self.caps.get("supports_parallel_tool_calls", False))
        request: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "tools": [dict(t) for t in tools] if tools else None,
            "tool_choice": tool_choice,
            "parallel_tool_calls": bool(parallel_tool_calls),
            "json_schema": dict(json_schema) if json_schema is not None else None,
            "grammar": grammar or "",
            "add_generation_prompt": add_generation_prompt,
            "use_jinja": self.use_jinja,
            "reasoning_format": reasoning_format,
            "enable_thinking": enable_thinking,
            "chat_template_kwargs": dict(chat_template_kwargs or {}),
            "force_pure_content": force_pure_content,
        }
        if continue_final_message is not None:
            request["continue_final_message"] = continue_final_message
        return request

    def prompt(self, request: Mapping[str, Any], rendered: Mapping[str, Any]) -> ChatPrompt:
        """The :class:`ChatPrompt` of ``rendered``, what the chat engine gave for
        ``request`` (:meth:`request`)."""
        kinds = {
            _TRIGGER_TOKEN: "token",
            _TRIGGER_WORD: "word",
            _TRIGGER_PATTERN: "pattern",
            _TRIGGER_PATTERN_FULL: "pattern_full",
        }
        return ChatPrompt(
            prompt=rendered["prompt"],
            format=rendered["format"],
            format_name=rendered["format_name"],
            grammar=rendered["grammar"],
            grammar_lazy=rendered["grammar_lazy"],
            grammar_triggers=tuple(
                GrammarTrigger(kinds[t["type"]], t["value"], t["pattern"])
                for t in rendered["grammar_triggers"]
            ),
            preserved_tokens=tuple(rendered["preserved_tokens"]),
            additional_stops=tuple(rendered["additional_stops"]),
            generation_prompt=rendered["generation_prompt"],
            parser=rendered["parser"],
            supports_thinking=rendered["supports_thinking"],
            thinking_start_tag=rendered["thinking_start_tag"],
            thinking_end_tags=tuple(rendered["thinking_end_tags"]),
            reasoning_format=request["reasoning_format"],
            message_delimiters=tuple(
                (d["role"], d["delimiter"]) for d in rendered["message_delimiters"]
            ),
        )


@dataclass(frozen=True)
class ChatRender:
    """One render a preparation asks for: ``templates.apply(request)``. A preparation
    written as a generator yields these and is sent each result back, so that the
    caller chooses where the render runs (:func:`render_here`, or a server's native
    threads)."""

    templates: ChatTemplates
    request: dict[str, Any]


def render_here(steps: Generator[ChatRender, dict[str, Any], T]) -> T:
    """What ``steps`` returns, each render done in this thread (the GIL released)."""
    try:
        render = next(steps)
        while True:
            try:
                rendered = render.templates.apply(render.request)
            except ValueError as exc:
                render = steps.throw(exc)
            else:
                render = steps.send(rendered)
    except StopIteration as stop:
        result: T = stop.value
        return result


class ChatParser:
    """Reads one reply to ``prompt`` into a :class:`ChatMessage`.

    ``parse(text)`` reads a whole reply; ``update(text)`` takes the reply so far (each
    call the whole text, longer than the last) and gives the :class:`ChatDelta` steps
    since the previous call, so a stream of them adds up to the parsed message. Tool
    calls get an id at their first appearance, kept for the rest of the reply.
    ``reasoning_format`` defaults to the prompt's; ``stream`` with ``deepseek-legacy``
    keeps the thinking tags in the content, as llama-server does.
    """

    def __init__(
        self,
        prompt: ChatPrompt,
        *,
        reasoning_format: str | None = None,
        parse_tool_calls: bool = True,
        stream: bool = False,
    ) -> None:
        fmt = _check_reasoning_format(reasoning_format or prompt.reasoning_format)
        self._parser = ChatOutputParser(
            {
                "format": prompt.format,
                "parser": prompt.parser,
                "generation_prompt": prompt.generation_prompt,
                "reasoning_format": fmt,
                "reasoning_in_content": stream and fmt == "deepseek-legacy",
                "parse_tool_calls": parse_tool_calls,
            }
        )
        self._message: ChatMessage | None = ChatMessage()

    @property
    def message(self) -> ChatMessage:
        """The message of the text last given to :meth:`update` (read from the parser
        when asked: a streamed token does not pay for the whole reply's)."""
        if self._message is None:
            self._message = ChatMessage._from(self._parser.message())
        return self._message

    def parse(self, text: str, partial: bool = False) -> ChatMessage:
        """The message ``text`` holds (``partial``: the reply may go on). A final text
        that does not match the family's format is all content, as the model wrote it."""
        try:
            return ChatMessage._from(self._parser.parse(text, partial))
        except ValueError:
            if partial:
                raise
            _log.warning("the reply does not match the chat format; it is returned as content")
            return ChatMessage(text)

    def update(self, text: str, partial: bool = True) -> list[ChatDelta]:
        """The steps from the previous call's message to this text's (``partial=False``
        for the final text); :attr:`message` becomes this text's message."""
        try:
            diffs = self._parser.update(text, partial)
        except ValueError:
            # Only a final text raises: it becomes content, after what was sent already.
            _log.warning("the reply does not match the chat format; it is returned as content")
            sent = self.message.content
            self._message = ChatMessage(text)
            return [ChatDelta(text[len(sent) :])] if text.startswith(sent) else []
        self._message = None
        return [ChatDelta(*d) for d in diffs]
