"""OpenAI's speech-to-text route, ``/v1/audio/transcriptions`` (and
``/audio/transcriptions``), as llama-server answers it.

The form's ``file`` is transcribed by a chat with the projector's audio input
(convert_transcriptions_to_chatcmpl): the user asks "Transcribe audio to text" (or the
form's ``prompt``), naming ``language`` if given, with the audio after it; LFM2's
template gets its own preset. The reply is a ``transcript.text.done`` object, or, with
``stream=true``, ``transcript.text.delta`` events before it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from llama_cy.chat import ChatParser
from llama_cy.completion import Completion, CompletionChunk
from llama_cy.openai_shapes import Shaper
from llama_cy.server import respond, schema, worker
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.requests import chat_parser, prepare_chat
from llama_cy.server.schema import ApiError

__all__ = ["TranscriptionShaper", "routes"]


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    async def transcribe(request: Request) -> Response:
        server.generating()
        if server.mtmd is None or not server.mtmd.audio:
            raise ApiError(
                501, "The current model does not support audio input.", "not_supported_error"
            )
        fields, files = await read_form(request)
        body = schema.check(chat_body(server, fields, files), schema.CHAT, ("messages",))
        job = await prepare_chat(server, body)
        shaper = TranscriptionShaper(server.model_id, chat_parser(job, body))
        return await respond.run(server, request, [(job, shaper)], body)

    return [
        ("/v1/audio/transcriptions", transcribe, post, False),
        ("/audio/transcriptions", transcribe, post, False),
    ]


async def read_form(request: Request) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    """A multipart form's text fields (a repeated name: a list, as llama-server's
    server-http) and files by field name (file name, bytes). Any other body is read
    as JSON fields, with no files."""
    raw = await request.body()
    kind = request.headers.get("content-type", "")
    if not kind.lower().startswith("multipart/form-data"):
        parsed = await worker.parse(raw)
        if not isinstance(parsed, dict):
            raise ApiError(400, "the request body must be a JSON object or a multipart form")
        return parsed, {}
    # The email parser is Python: a large form would hold the event loop.
    return await worker.run(_form, kind, raw)


def _form(kind: str, raw: bytes) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + kind.encode("latin-1") + b"\r\n\r\n" + raw
    )
    if not message.is_multipart():
        raise ApiError(400, "the multipart form could not be read")
    fields: dict[str, Any] = {}
    files: dict[str, tuple[str, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        data = part.get_payload(decode=True)
        content = data if isinstance(data, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = (filename, content)
        elif name in fields:
            old = fields[name]
            fields[name] = (
                [*old, content.decode()] if isinstance(old, list) else [old, content.decode()]
            )
        else:
            fields[name] = content.decode("utf-8", "replace")
    return fields, files


def chat_body(
    server: Server, fields: Mapping[str, Any], files: Mapping[str, tuple[str, bytes]]
) -> dict[str, Any]:
    """The chat request a transcription is (convert_transcriptions_to_chatcmpl)."""
    if "file" not in files:
        raise ApiError(400, "No input file found for transcription", param="file")
    if fields.get("response_format", "json") != "json":
        raise ApiError(
            400,
            "Only 'json' response_format is supported for transcription",
            param="response_format",
        )
    source = server.preparer.template.source
    lfm2 = "<|tool_list_start|>" in source and "<|tool_list_end|>" in source
    system, user = ("Perform ASR.", "") if lfm2 else ("", "Transcribe audio to text")
    prompt = fields.get("prompt") or user
    if fields.get("language"):
        prompt += f" (language: {fields['language']})"
    filename, data = files["file"]
    audio = {
        "data": base64.b64encode(data).decode(),
        "format": os.path.splitext(filename)[1].lstrip(".").lower() or "wav",
    }
    content = [{"type": "text", "text": prompt}, {"type": "input_audio", "input_audio": audio}]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {**fields, "messages": messages}
    # form fields are text: these three are read as their types, as there
    body["stream"] = fields.get("stream", "false") == "true"
    for name, kind in (("max_tokens", int), ("temperature", float)):
        if name in fields:
            try:
                body[name] = kind(fields[name])
            except (TypeError, ValueError):
                raise ApiError(400, f"'{name}' must be a number", param=name) from None
    return body


class TranscriptionShaper(Shaper):
    """The transcript: ``{"type": "transcript.text.done", "text", "usage"}``, streamed
    as ``transcript.text.delta`` events of the reply's content before it."""

    kind = "transcript"

    def __init__(self, model: str, parser: ChatParser, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.parser = parser
        self._text = ""

    def _done(self, text: str, prompt: int, completion: int, cached: int) -> dict[str, Any]:
        return {
            "type": "transcript.text.done",
            "text": text,
            "usage": {
                "type": "tokens",
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
                "input_tokens_details": {"cached_tokens": cached},
            },
        }

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        if chunk.progress is not None:
            return []
        self._count(chunk)
        self._text += chunk.text
        done = chunk.stop_reason is not None
        out = [
            {"type": "transcript.text.delta", "delta": d.content}
            for d in self.parser.update(self._text, not done)
            if d.content
        ]
        if done:
            cached = chunk.timings.cached_n if chunk.timings is not None else 0
            content = self.parser.message.content
            out.append(self._done(content, chunk.prompt_tokens, self._n_tokens, cached))
        return out

    def whole(self, done: Completion) -> dict[str, Any]:
        message = self.parser.parse(done.text)
        return self._done(
            message.content, done.prompt_tokens, len(done.tokens), done.timings.cached_n
        )
