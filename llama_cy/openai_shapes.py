"""OpenAI-shaped dicts from completions: what ``Llama.create_*`` return and the server sends.

A shaper turns the chunks of one generation into response dicts: :meth:`Shaper.chunk`
for streaming (any number of dicts per chunk), :meth:`Shaper.whole` for one response.
The same shaper serves :class:`~llama_cy.Llama`'s iterators and the server's event
streams, so both send the same bytes for the same tokens.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from llama_cy.chat import ChatMessage, ChatParser
from llama_cy.completion import Completion, CompletionChunk, Timings, TokenLogprob

__all__ = ["ChatShaper", "CompletionShaper", "Shaper"]


class Shaper:
    """The id, creation time and model name shared by every dict of one response.

    ``index`` is the choice's index (several prompts, or ``n`` choices). ``fingerprint``
    (llama-server's ``system_fingerprint``, its build) also turns on llama-server's other
    additions to OpenAI's shapes: ``timings`` on the last dict, the cached prompt tokens
    in ``usage``, and a null ``content`` beside the first chunk's role.
    """

    kind = ""
    #: a server sends each dict as an event named by its "type" (Anthropic's streams)
    sse_event_names = False

    def __init__(
        self,
        model: str,
        *,
        include_usage: bool = False,
        index: int = 0,
        fingerprint: str | None = None,
        id: str | None = None,
    ) -> None:
        self.id = id or f"{self.kind}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.index = index
        self.fingerprint = fingerprint
        #: the server slot that runs it (llama-server's ``id_slot``); -1 outside a server
        self.slot = -1
        self._n_tokens = 0

    def head(self, obj: str) -> dict[str, Any]:
        out = {"id": self.id, "object": obj, "created": self.created, "model": self.model}
        if self.fingerprint is not None:
            out["system_fingerprint"] = self.fingerprint
        return out

    def _usage(self, prompt: int, completion: int, timings: Timings | None) -> dict[str, Any]:
        out: dict[str, Any] = usage(prompt, completion)
        if self.fingerprint is not None and timings is not None:
            out["prompt_tokens_details"] = {"cached_tokens": timings.cached_n}
        return out

    def _timings(self, d: dict[str, Any], timings: Timings | None) -> dict[str, Any]:
        if self.fingerprint is not None and timings is not None:
            d["timings"] = timings.as_dict()
        return d

    def _progress(self, d: dict[str, Any], chunk: CompletionChunk) -> dict[str, Any]:
        """llama-server's ``prompt_progress`` report on ``d``."""
        assert chunk.progress is not None
        d["prompt_progress"] = chunk.progress.as_dict()
        return d

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        """The streamed dicts for one chunk (the first call also sends any preamble)."""
        raise NotImplementedError

    def whole(self, done: Completion) -> dict[str, Any]:
        """The one response dict for a finished completion."""
        raise NotImplementedError

    def stream(self, chunks: Iterable[CompletionChunk]) -> Iterator[dict[str, Any]]:
        for c in chunks:
            yield from self.chunk(c)

    def _count(self, chunk: CompletionChunk) -> None:
        self._n_tokens += len(chunk.tokens)

    def _usage_chunk(self, obj: str, chunk: CompletionChunk) -> list[dict[str, Any]]:
        """OpenAI's ``stream_options.include_usage``: a last chunk with no choices."""
        if not self.include_usage or chunk.stop_reason is None:
            return []
        counts = self._usage(chunk.prompt_tokens, self._n_tokens, chunk.timings)
        return [{**self.head(obj), "choices": [], "usage": counts}]


class CompletionShaper(Shaper):
    """Text completions (``text_completion``); ``prefix`` is the echoed prompt."""

    kind = "cmpl"

    def __init__(self, model: str, *, prefix: str = "", logprobs: bool = False, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.prefix = prefix
        self.logprobs = logprobs
        self._offset: int | None = None

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        if chunk.progress is not None:
            report = self._progress(self._dict("", None, None), chunk)
            return [self._timings(report, chunk.timings)]
        self._count(chunk)
        out = []
        if self._offset is None:
            self._offset = 0
            if self.prefix:
                echoed = chunk.prompt_logprobs if self.logprobs else None
                out.append(self._dict(self.prefix, prompt_logprobs(echoed), None))
                self._offset = len(self.prefix)
        lp = completion_logprobs(chunk.logprobs, self._offset) if self.logprobs else None
        self._offset += len(chunk.text)
        finish = None
        if chunk.stop_reason is not None:
            finish = "length" if chunk.stop_reason == "length" else "stop"
        if chunk.text or finish is not None:
            out.append(self._dict(chunk.text, lp, finish))
        out += self._usage_chunk("text_completion", chunk)
        if out:
            self._timings(out[-1], chunk.timings)
        return out

    def _dict(self, text: str, lp: dict[str, Any] | None, finish: str | None) -> dict[str, Any]:
        choice = {"text": text, "index": self.index, "logprobs": lp, "finish_reason": finish}
        return {**self.head("text_completion"), "choices": [choice]}

    def whole(self, done: Completion) -> dict[str, Any]:
        lp = completion_logprobs(done.logprobs, len(self.prefix)) if self.logprobs else None
        echoed = prompt_logprobs(done.prompt_logprobs) if self.prefix else None
        if lp is not None and echoed is not None:
            lp = {k: echoed[k] + lp[k] for k in lp}
        out = {
            **self._dict(self.prefix + done.text, lp, done.finish_reason),
            "usage": self._usage(done.prompt_tokens, len(done.tokens), done.timings),
        }
        return self._timings(out, done.timings)


class ChatShaper(Shaper):
    """Chat completions: the text is read back by a :class:`~llama_cy.chat.ChatParser`
    (content, ``reasoning_content``, tool calls); a stream sends its deltas as the text
    grows, tool calls in OpenAI's ``delta.tool_calls`` pieces."""

    kind = "chatcmpl"

    def __init__(
        self,
        model: str,
        parser: ChatParser,
        *,
        logprobs: bool = False,
        post_sampling: bool = False,
        **kw: Any,
    ) -> None:
        super().__init__(model, **kw)
        self.parser = parser
        self.logprobs = logprobs
        self.post_sampling = post_sampling
        self._started = False
        self._text = ""
        self._lps: list[TokenLogprob] = []

    def _dict(
        self, delta: Mapping[str, Any], lp: dict[str, Any] | None, finish: str | None
    ) -> dict[str, Any]:
        choice = {
            "index": self.index,
            "delta": dict(delta),
            "logprobs": lp,
            "finish_reason": finish,
        }
        return {**self.head("chat.completion.chunk"), "choices": [choice]}

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        if chunk.progress is not None:
            report = self._dict({"role": "assistant", "content": None}, None, None)
            return [self._timings(self._progress(report, chunk), chunk.timings)]
        self._count(chunk)
        out = []
        role: dict[str, Any] | None = None
        if not self._started:
            self._started = True
            # llama-server sends a null content beside the role; llama-cpp-python "".
            content = None if self.fingerprint is not None else ""
            role = self._dict({"role": "assistant", "content": content}, None, None)
            out.append(role)
        if self.logprobs and chunk.logprobs:
            self._lps.extend(chunk.logprobs)
        self._text += chunk.text
        done = chunk.stop_reason is not None
        # The whole reply so far is parsed again each time, as llama-server does.
        deltas = [d.to_openai() for d in self.parser.update(self._text, not done)]
        for delta in deltas:
            if delta:
                # A token's log-probability goes with the first delta its text shows in.
                lp = chat_logprobs(self._lps, self.post_sampling) if self._lps else None
                self._lps = []
                out.append(self._dict(delta, lp, None))
        if done:
            assert chunk.stop_reason is not None
            finish = _finish(chunk.stop_reason, self.parser.message)
            lp = chat_logprobs(self._lps, self.post_sampling) if self._lps else None
            out.append(self._dict({}, lp, finish))
        out += self._usage_chunk("chat.completion.chunk", chunk)
        if out and out[-1] is not role:  # the opening role chunk carries no timings
            self._timings(out[-1], chunk.timings)
        return out

    def whole(self, done: Completion) -> dict[str, Any]:
        message = self.parser.parse(done.text)
        choice = {
            "index": self.index,
            "message": message.to_openai(),
            "logprobs": chat_logprobs(done.logprobs, self.post_sampling) if self.logprobs else None,
            "finish_reason": _finish(done.stop_reason, message),
        }
        out = {
            **self.head("chat.completion"),
            "choices": [choice],
            "usage": self._usage(done.prompt_tokens, len(done.tokens), done.timings),
        }
        return self._timings(out, done.timings)


def _finish(stop_reason: str, message: ChatMessage) -> str:
    """OpenAI's finish_reason: "tool_calls" when a reply that ended by itself holds some."""
    if stop_reason == "length":
        return "length"
    return "tool_calls" if message.tool_calls else "stop"


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_logprobs(lps: list[TokenLogprob] | None, offset: int) -> dict[str, Any] | None:
    """llama-cpp-python's (and OpenAI's legacy) text-completion logprobs."""
    if lps is None:
        return None
    return {
        "tokens": [lp.text for lp in lps],
        "text_offset": [offset + lp.offset for lp in lps],
        "token_logprobs": [lp.logprob for lp in lps],
        "top_logprobs": [{p.decode("utf-8", "replace"): v for _, p, v in lp.top} for lp in lps],
    }


def prompt_logprobs(lps: list[TokenLogprob] | None) -> dict[str, Any] | None:
    """:func:`completion_logprobs` of an echoed prompt (offsets from its start), the first
    token's log-probability and alternatives null, as llama-cpp-python gives them."""
    out = completion_logprobs(lps, 0)
    if out is not None and lps:
        out["token_logprobs"][0] = out["top_logprobs"][0] = None
    return out


def chat_logprobs(
    lps: list[TokenLogprob] | None, post_sampling: bool = False
) -> dict[str, Any] | None:
    """OpenAI's chat logprobs: ``{"content": [{token, logprob, bytes, top_logprobs}]}``;
    with llama-server's ``post_sampling_probs``, the probabilities of what the sampler
    chain left (``prob``, ``top_probs``), as there."""
    if lps is None:
        return None
    key, top = ("prob", "top_probs") if post_sampling else ("logprob", "top_logprobs")

    def value(logprob: float) -> float:
        return math.exp(logprob) if post_sampling else logprob

    return {
        "content": [
            {
                "token": lp.text,
                key: value(lp.logprob),
                "bytes": list(lp.piece),
                top: [
                    {"token": p.decode("utf-8", "replace"), key: value(v), "bytes": list(p)}
                    for _, p, v in lp.top
                ],
            }
            for lp in lps
        ]
    }
