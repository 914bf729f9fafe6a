"""Anthropic's Messages API: ``/v1/messages`` and ``/v1/messages/count_tokens``.

A request is converted to an OpenAI chat body as llama-server converts it (system
blocks, ``tool_use``/``tool_result`` blocks, ``thinking``, tools and ``tool_choice``),
then prepared and generated as any chat; :class:`AnthropicShaper` gives the reply as a
``message`` with content blocks, or as Anthropic's stream of named events.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.chat import ChatParser
from llama_cy.completion import Completion, CompletionChunk
from llama_cy.openai_shapes import Shaper
from llama_cy.server import respond
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.requests import chat_parser, prepare_chat, read_converted_chat
from llama_cy.server.schema import ApiError

__all__ = ["AnthropicShaper", "routes", "to_openai"]


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    async def create(request: Request) -> Response:
        server.generating()
        body = await read_converted_chat(request, to_openai)
        job = await prepare_chat(server, body, allow_empty=True)
        shaper = AnthropicShaper(server.model_id, chat_parser(job, body), n_prompt=len(job.tokens))
        return await respond.run(server, request, [(job, shaper)], body, done_marker=False)

    async def count_tokens(request: Request) -> Response:
        body = await read_converted_chat(request, to_openai)
        job = await prepare_chat(server, body, allow_empty=True)
        return JSONResponse({"input_tokens": len(job.tokens)})

    return [
        ("/v1/messages", create, post, False),
        ("/v1/messages/count_tokens", count_tokens, post, False),
    ]


def _image(source: Any) -> dict[str, Any] | None:
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64":
        media = source.get("media_type", "image/jpeg")
        url = f"data:{media};base64,{source.get('data', '')}"
    elif source.get("type") == "url":
        url = source.get("url", "")
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def to_openai(body: Any) -> dict[str, Any]:
    """An Anthropic Messages request as an OpenAI chat request (llama-server's
    conversion)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str):
        out.append({"role": "system", "content": system})
    elif isinstance(system, list):
        text = "".join(
            b.get("text", "") for b in system if isinstance(b, dict) and b.get("type") == "text"
        )
        out.append({"role": "system", "content": text})
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise ApiError(400, "'messages' is required and must be an array", param="messages")
    for msg in msgs:
        if not isinstance(msg, dict):
            raise ApiError(400, "each message must be an object", param="messages")
        content = msg.get("content")
        if not isinstance(content, list):
            if content is not None or msg.get("role") != "assistant":
                out.append(msg)
            continue
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        thinking = ""
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append(block)
            elif kind == "thinking":
                thinking += block.get("thinking", "")
            elif kind == "image":
                image = _image(block.get("source"))
                if image is not None:
                    parts.append(image)
            elif kind == "tool_use":
                calls.append(
                    {
                        "id": block.get("id", ""),
                        "type": "function",
                        "function": {
                            "name": block.get("name", ""),
                            "arguments": json.dumps(block.get("input", {})),
                        },
                    }
                )
            elif kind == "tool_result":
                results.append(_tool_result(block))
        if parts or calls or thinking:
            new: dict[str, Any] = {"role": msg.get("role"), "content": parts or ""}
            if calls:
                new["tool_calls"] = calls
            if thinking:
                new["reasoning_content"] = thinking
            out.append(new)
        out += results
    oai: dict[str, Any] = {"messages": out}
    tools = body.get("tools")
    if isinstance(tools, list):
        oai["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.get("name", ""),
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {}),
                },
            }
            for t in tools
            if isinstance(t, dict)
        ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "auto":
            oai["tool_choice"] = "auto"
        elif kind == "none":
            oai["tool_choice"] = "none"
        elif kind == "tool" and isinstance(choice.get("name"), str):
            oai["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif kind in ("any", "tool"):
            oai["tool_choice"] = "required"
    if "stop_sequences" in body:
        oai["stop"] = body["stop_sequences"]
    oai["max_tokens"] = body.get("max_tokens", 4096)
    for key in ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs", "model"):
        if key in body:
            oai[key] = body[key]
    thinking_opt = body.get("thinking")
    if isinstance(thinking_opt, dict) and thinking_opt.get("type") == "enabled":
        oai["thinking_budget_tokens"] = thinking_opt.get("budget_tokens", 10000)
    return oai


def _tool_result(block: Mapping[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    call_id = block.get("tool_use_id", "")
    if isinstance(content, str):
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    if not isinstance(content, list):
        return {"role": "tool", "tool_call_id": call_id, "content": ""}
    parts: list[dict[str, Any]] = []
    for c in content:
        if isinstance(c, dict) and c.get("type") == "text":
            parts.append({"type": "text", "text": c.get("text", "")})
        elif isinstance(c, dict) and c.get("type") == "image":
            image = _image(c.get("source"))
            if image is not None:
                parts.append(image)
    if all(p["type"] == "text" for p in parts):
        text = "".join(p["text"] for p in parts)
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    return {"role": "tool", "tool_call_id": call_id, "content": parts}


def _stop_reason(reason: str, has_calls: bool) -> str:
    if reason == "length":
        return "max_tokens"
    if has_calls:
        return "tool_use"
    return "stop_sequence" if reason == "stop" else "end_turn"


class AnthropicShaper(Shaper):
    """A Messages reply: one ``message`` with thinking, text and ``tool_use`` blocks, or
    the events of a stream (``message_start``, ``content_block_*``, ``message_delta``,
    ``message_stop``)."""

    kind = "msg"
    sse_event_names = True

    def __init__(self, model: str, parser: ChatParser, *, n_prompt: int) -> None:
        super().__init__(model, id=f"msg_{uuid.uuid4().hex}")
        self.parser = parser
        self.n_prompt = n_prompt
        self._text = ""
        self._started = False
        self._open: int | None = None  # the content block being streamed
        self._blocks: dict[tuple[str, int], int] = {}  # (kind, tool index) -> block index

    def _counts(self, cached: int, output: int) -> dict[str, int]:
        return {
            "cache_read_input_tokens": cached,
            "input_tokens": self.n_prompt - cached,
            "output_tokens": output,
        }

    def whole(self, done: Completion) -> dict[str, Any]:
        msg = self.parser.parse(done.text)
        blocks: list[dict[str, Any]] = []
        if msg.reasoning_content:
            blocks.append({"type": "thinking", "thinking": msg.reasoning_content, "signature": ""})
        if msg.content:
            blocks.append({"type": "text", "text": msg.content})
        for call in msg.tool_calls:
            try:
                args = json.loads(call.arguments)
            except ValueError:
                args = {}
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args})
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": blocks,
            "model": self.model,
            "stop_reason": _stop_reason(done.stop_reason, bool(msg.tool_calls)),
            "stop_sequence": done.stop,
            "usage": self._counts(done.timings.cached_n, len(done.tokens)),
        }

    def _block(self, key: tuple[str, int], start: dict[str, Any]) -> list[dict[str, Any]]:
        """Events that open block ``key`` (closing the one before) if it is new."""
        if key in self._blocks:
            return []
        out = self._close()
        index = len(self._blocks)
        self._blocks[key] = index
        self._open = index
        out.append({"type": "content_block_start", "index": index, "content_block": start})
        return out

    def _close(self) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [{"type": "content_block_stop", "index": index}]

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        self._count(chunk)
        out: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            message: dict[str, Any] = {
                "id": self.id,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": self.model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": self._counts(0, 0),
            }
            out.append({"type": "message_start", "message": message})
        self._text += chunk.text
        done = chunk.stop_reason is not None
        for d in self.parser.update(self._text, not done):
            if d.reasoning_content:
                out += self._block(("thinking", 0), {"type": "thinking", "thinking": ""})
                delta = {"type": "thinking_delta", "thinking": d.reasoning_content}
                out.append({"type": "content_block_delta", "index": self._open, "delta": delta})
            if d.content:
                out += self._block(("text", 0), {"type": "text", "text": ""})
                delta = {"type": "text_delta", "text": d.content}
                out.append({"type": "content_block_delta", "index": self._open, "delta": delta})
            if d.index is not None:
                start = {"type": "tool_use", "id": d.id, "name": d.name, "input": {}}
                out += self._block(("tool", d.index), start)
                if d.arguments:
                    delta = {"type": "input_json_delta", "partial_json": d.arguments}
                    index = self._blocks[("tool", d.index)]
                    out.append({"type": "content_block_delta", "index": index, "delta": delta})
        if done:
            assert chunk.stop_reason is not None
            assert chunk.timings is not None
            out += self._close()
            calls = any(kind == "tool" for kind, _ in self._blocks)
            reason = _stop_reason(chunk.stop_reason, calls)
            out.append(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": chunk.stop},
                    "usage": self._counts(chunk.timings.cached_n, self._n_tokens),
                }
            )
            out.append({"type": "message_stop"})
        return out
