"""What a completion returns: typed results for :meth:`Llama.complete` and :meth:`Llama.stream`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Completion",
    "CompletionChunk",
    "PromptProgress",
    "StopReason",
    "Timings",
    "TokenLogprob",
    "join_chunks",
]

#: ``"eog"``: the model ended its turn; ``"stop"``: a stop string matched (it is not in
#: the text); ``"length"``: max_tokens reached or the context is full.
StopReason = Literal["eog", "stop", "length"]


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with its log-probability under the model (before sampling).

    ``top`` holds the most likely alternatives at that step as ``(token, piece, logprob)``,
    most likely first. ``offset`` is the character offset of the token's text in the
    completion text.
    """

    token: int
    piece: bytes
    logprob: float
    top: tuple[tuple[int, bytes, float], ...]
    offset: int

    @property
    def text(self) -> str:
        return self.piece.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Timings:
    """Where a completion spent its time, as llama-server reports it."""

    cached_n: int  #: prompt tokens reused from the KV cache
    prompt_n: int  #: prompt tokens decoded
    prompt_ms: float
    predicted_n: int  #: tokens generated
    predicted_ms: float
    draft_n: int = 0  #: tokens drafted by speculative decoding
    draft_n_accepted: int = 0  #: drafted tokens the model kept

    @property
    def prompt_per_second(self) -> float:
        return 1e3 * self.prompt_n / self.prompt_ms if self.prompt_ms > 0 else 0.0

    @property
    def predicted_steps(self) -> int:
        """Decode steps of the generation: the first token comes from the prompt's last
        batch, so it costs none (llama-server counts rates this way)."""
        return max(0, self.predicted_n - 1)

    @property
    def predicted_per_second(self) -> float:
        return 1e3 * self.predicted_steps / self.predicted_ms if self.predicted_ms > 0 else 0.0

    def as_dict(self) -> dict[str, float | int]:
        """llama-server's ``timings`` object."""
        return {
            "cache_n": self.cached_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_token_ms": self.prompt_ms / self.prompt_n if self.prompt_n else 0.0,
            "prompt_per_second": self.prompt_per_second,
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_token_ms": (
                self.predicted_ms / self.predicted_steps if self.predicted_steps else 0.0
            ),
            "predicted_per_second": self.predicted_per_second,
            # llama-server adds the draft counts only when something was drafted
            **(
                {"draft_n": self.draft_n, "draft_n_accepted": self.draft_n_accepted}
                if self.draft_n
                else {}
            ),
        }


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished completion.

    ``tokens`` are all generated tokens, including those of a matched stop string;
    ``text`` ends before the stop string. ``logprobs`` is ``None`` unless asked for and
    covers the tokens whose text starts inside ``text``.
    """

    text: str
    tokens: list[int]
    stop_reason: StopReason
    timings: Timings
    logprobs: list[TokenLogprob] | None
    prompt_tokens: int
    stop: str | None = None  #: the stop string that matched
    #: a context shift dropped part of the context on the way (llama-server's ``truncated``)
    truncated: bool = False
    #: with :attr:`Job.prompt_logprobs`: one entry per prompt token after a leading BOS,
    #: each token's log-probability given those before it (the first has no row to come
    #: from: NaN); offsets count from the start of the prompt's text
    prompt_logprobs: list[TokenLogprob] | None = None

    @property
    def finish_reason(self) -> Literal["stop", "length"]:
        """The OpenAI name of :attr:`stop_reason`."""
        return "length" if self.stop_reason == "length" else "stop"


@dataclass(frozen=True, slots=True)
class PromptProgress:
    """How far a prompt is into the KV cache (llama-server's ``prompt_progress``)."""

    total: int  #: prompt tokens
    cache: int  #: reused from the KV cache
    processed: int  #: in the cache now (reused ones included)
    time_ms: float  #: since the request started

    def as_dict(self) -> dict[str, float | int]:
        return {
            "total": self.total,
            "cache": self.cache,
            "processed": self.processed,
            "time_ms": self.time_ms,
        }


@dataclass(slots=True)  # not frozen: made once per token, and frozen init is slower
class CompletionChunk:
    """A piece of a streamed completion; the last one has ``stop_reason`` and ``timings``.

    ``text`` is never half a character nor part of a stop string; ``tokens`` are the
    tokens generated since the previous chunk. A job that asks for them gets
    ``timings`` on every chunk, and chunks with only ``progress`` while its prompt is
    decoded.
    """

    text: str
    tokens: list[int]
    logprobs: list[TokenLogprob] | None = None
    stop_reason: StopReason | None = None
    timings: Timings | None = None
    prompt_tokens: int = 0
    stop: str | None = None
    progress: PromptProgress | None = None
    truncated: bool = False  #: on the last chunk: a context shift happened
    #: on the first chunk of a job that asks for them: :attr:`Completion.prompt_logprobs`
    prompt_logprobs: list[TokenLogprob] | None = None


def join_chunks(chunks: Iterable[CompletionChunk]) -> Completion:
    """The :class:`Completion` that a stream of chunks adds up to."""
    texts: list[str] = []
    tokens: list[int] = []
    logprobs: list[TokenLogprob] | None = None
    prompt_logprobs: list[TokenLogprob] | None = None
    last: CompletionChunk | None = None
    for chunk in chunks:
        texts.append(chunk.text)
        tokens.extend(chunk.tokens)
        if chunk.logprobs is not None:
            logprobs = (logprobs or []) + chunk.logprobs
        if chunk.prompt_logprobs is not None:
            prompt_logprobs = chunk.prompt_logprobs
        last = chunk
    if last is None or last.stop_reason is None or last.timings is None:
        raise ValueError("the stream ended before its last chunk")
    text = "".join(texts)
    return Completion(
        text,
        tokens,
        last.stop_reason,
        last.timings,
        logprobs,
        last.prompt_tokens,
        last.stop,
        last.truncated,
        prompt_logprobs,
    )
