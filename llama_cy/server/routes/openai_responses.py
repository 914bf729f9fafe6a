"""OpenAI's Responses API: ``/v1/responses`` (and ``/responses``), with
``/v1/responses/input_tokens``.

A request's ``input`` items (messages, ``function_call`` and ``function_call_output``
items, reasoning) and ``instructions`` become a chat request as llama-server converts
them; it is prepared and generated as any chat, and :class:`ResponsesShaper` gives the
``response`` object or its stream of ``response.*`` events.
"""

from __future__ import annotations

import time
import uuid
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

__all__ = ["ResponsesShaper", "routes", "to_chat"]


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    async def prepare(request: Request) -> tuple[dict[str, Any], Any]:
        body = await read_converted_chat(request, to_chat)
        job = await prepare_chat(server, body)
        return body, job

    async def create(request: Request) -> Response:
        server.generating()
        body, job = await prepare(request)
        shaper = ResponsesShaper(server.model_id, chat_parser(job, body), n_prompt=len(job.tokens))
        return await respond.run(server, request, [(job, shaper)], body, done_marker=False)

    async def input_tokens(request: Request) -> Response:
        _, job = await prepare(request)
        return JSONResponse({"object": "response.input_tokens", "input_tokens": len(job.tokens)})

    return [
        ("/v1/responses", create, post, False),
        ("/responses", create, post, False),
        ("/v1/responses/input_tokens", input_tokens, post, False),
        ("/responses/input_tokens", input_tokens, post, False),
    ]


def _text_parts(content: list[Any], kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in kinds:
            if not isinstance(part.get("text"), str):
                raise ApiError(400, f"a '{kind}' part needs a string 'text'", param="input")
            out.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            if "image_url" not in part:
                raise ApiError(400, "'image_url' is required", param="input")
            out.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        elif kind == "refusal":
            out.append({"type": "text", "text": part.get("refusal", "")})
        else:
            raise ApiError(400, f"input part of type {kind!r} is not supported", param="input")
    return out


def to_chat(body: Any) -> dict[str, Any]:
    """A Responses request as a chat request (llama-server's conversion)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if "input" not in body:
        raise ApiError(400, "'input' is required", param="input")
    if body.get("previous_response_id"):
        raise ApiError(
            400,
            "previous_response_id is not supported: responses are not stored here",
            param="previous_response_id",
        )
    out = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools")}
    msgs: list[dict[str, Any]] = []
    if "instructions" in body:
        msgs.append({"role": "system", "content": body["instructions"]})
    value = body["input"]
    if isinstance(value, str):
        msgs.append({"role": "user", "content": value})
    elif isinstance(value, list):
        for item in value:
            _add_item(msgs, item)
    else:
        raise ApiError(400, "'input' must be a string or an array of items", param="input")
    out["messages"] = msgs
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise ApiError(400, "'tools' must be an array", param="tools")
        fns = []
        for tool in tools:
            if not isinstance(tool, dict) or tool.get("type") != "function":
                kind = tool.get("type") if isinstance(tool, dict) else None
                raise ApiError(400, f"tools of type {kind!r} are not supported", param="tools")
            fn = {k: v for k, v in tool.items() if k != "type"}
            fns.append({"type": "function", "function": fn})
        if fns:
            out["tools"] = fns
    if "max_output_tokens" in out:
        out["max_tokens"] = out.pop("max_output_tokens")
    reasoning = out.pop("reasoning", None)
    if isinstance(reasoning, dict) and "effort" in reasoning:
        out["reasoning_effort"] = reasoning["effort"]
    text = out.pop("text", None)
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = {"type": "json_schema", "json_schema": fmt}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    return out


def _add_item(msgs: list[dict[str, Any]], item: Any) -> None:
    if not isinstance(item, dict):
        raise ApiError(400, "'input' items must be objects", param="input")
    after_assistant = bool(msgs) and msgs[-1].get("role") == "assistant"
    kind = item.get("type")
    role = item.get("role")
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    if role in ("user", "system", "developer") and isinstance(content, list):
        msgs.append({"role": role, "content": _text_parts(content, ("input_text",))})
    elif role == "assistant" and kind in ("message", None):
        parts = _text_parts(content or [], ("output_text", "input_text"))
        if after_assistant:
            prev = msgs[-1]
            prev["content"] = [*(prev.get("content") or []), *parts]
        else:
            msgs.append({"role": "assistant", "content": parts})
    elif kind == "function_call":
        call = {
            "id": item.get("call_id", ""),
            "type": "function",
            "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")},
        }
        if after_assistant:
            msgs[-1].setdefault("tool_calls", []).append(call)
        else:
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
    elif kind == "function_call_output":
        output = item.get("output", "")
        if isinstance(output, list):
            output = _text_parts(output, ("input_text",))
        msgs.append({"role": "tool", "tool_call_id": item.get("call_id", ""), "content": output})
    elif kind == "reasoning":
        parts = item.get("content") or []
        text = parts[0].get("text", "") if parts and isinstance(parts[0], dict) else ""
        if after_assistant:
            msgs[-1]["reasoning_content"] = text
        else:
            msgs.append({"role": "assistant", "content": "", "reasoning_content": text})
    else:
        raise ApiError(400, "cannot tell what kind of input item this is", param="input")


class ResponsesShaper(Shaper):
    """A ``response`` object with its output items (reasoning, message, function calls),
    or the ``response.*`` events of a stream."""

    kind = "resp"
    sse_event_names = True

    def __init__(self, model: str, parser: ChatParser, *, n_prompt: int) -> None:
        super().__init__(model, id=f"resp_{uuid.uuid4().hex}")
        self.parser = parser
        self.n_prompt = n_prompt
        self.msg_id = f"msg_{uuid.uuid4().hex}"
        self.rs_id = f"rs_{uuid.uuid4().hex}"
        self._text = ""
        self._seq = 0
        self._started = False
        self._message_open = False
        self._reasoning_open = False

    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        now = int(time.time())
        out: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
        }
        if status == "completed":
            out["completed_at"] = now
        return out

    def _counts(self, cached: int, n: int) -> dict[str, Any]:
        return {
            "input_tokens": self.n_prompt,
            "output_tokens": n,
            "total_tokens": self.n_prompt + n,
            "input_tokens_details": {"cached_tokens": cached},
        }

    def _items(self, text: str) -> list[dict[str, Any]]:
        msg = self.parser.parse(text)
        items: list[dict[str, Any]] = []
        if msg.reasoning_content:
            items.append(
                {
                    "id": self.rs_id,
                    "type": "reasoning",
                    "summary": [],
                    "content": [{"type": "reasoning_text", "text": msg.reasoning_content}],
                    "encrypted_content": "",
                    "status": "completed",
                }
            )
        if msg.content:
            items.append(
                {
                    "id": self.msg_id,
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [_output_text(msg.content)],
                }
            )
        for call in msg.tool_calls:
            items.append(
                {
                    "id": f"fc_{call.id}",
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments,
                    "call_id": call.id,
                    "name": call.name,
                }
            )
        return items

    def whole(self, done: Completion) -> dict[str, Any]:
        out = self._response("completed", self._items(done.text))
        out["usage"] = self._counts(done.timings.cached_n, len(done.tokens))
        return out

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self._seq += 1
        return {"type": kind, "sequence_number": self._seq, **fields}

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self._started:
            self._started = True
            out.append(self._event("response.created", response=self._response("in_progress", [])))
            out.append(
                self._event("response.in_progress", response=self._response("in_progress", []))
            )
        if chunk.progress is not None:
            event = self._event("response.in_progress", response=self._response("in_progress", []))
            event["prompt_progress"] = chunk.progress.as_dict()
            return [*out, event]
        self._count(chunk)
        self._text += chunk.text
        done = chunk.stop_reason is not None
        for d in self.parser.update(self._text, not done):
            if d.reasoning_content:
                if not self._reasoning_open:
                    self._reasoning_open = True
                    item = {"id": self.rs_id, "type": "reasoning", "summary": []}
                    out.append(self._event("response.output_item.added", item=item))
                out.append(
                    self._event(
                        "response.reasoning_text.delta",
                        item_id=self.rs_id,
                        delta=d.reasoning_content,
                    )
                )
            if d.content:
                if not self._message_open:
                    self._message_open = True
                    item = {
                        "id": self.msg_id,
                        "type": "message",
                        "status": "in_progress",
                        "role": "assistant",
                        "content": [],
                    }
                    out.append(self._event("response.output_item.added", item=item))
                    out.append(
                        self._event(
                            "response.content_part.added",
                            item_id=self.msg_id,
                            output_index=0,
                            content_index=0,
                            part=_output_text(""),
                        )
                    )
                out.append(
                    self._event(
                        "response.output_text.delta",
                        item_id=self.msg_id,
                        output_index=0,
                        content_index=0,
                        delta=d.content,
                    )
                )
        if chunk.timings is not None and out and not done:
            out[-1]["timings"] = chunk.timings.as_dict()
        if done:
            assert chunk.timings is not None
            items = self._items(self._text)
            for done_item in items:
                if done_item["type"] == "message":
                    text = done_item["content"][0]["text"]
                    out.append(
                        self._event(
                            "response.output_text.done",
                            item_id=self.msg_id,
                            output_index=0,
                            content_index=0,
                            text=text,
                        )
                    )
                    out.append(
                        self._event(
                            "response.content_part.done",
                            item_id=self.msg_id,
                            output_index=0,
                            content_index=0,
                            part=_output_text(text),
                        )
                    )
                out.append(self._event("response.output_item.done", item=done_item))
            response = self._response("completed", items)
            response["usage"] = self._counts(chunk.timings.cached_n, self._n_tokens)
            completed = self._event("response.completed", response=response)
            completed["timings"] = chunk.timings.as_dict()
            out.append(completed)
        return out


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
