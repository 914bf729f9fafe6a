"""llama-server's native response shapes: /completion and its timings."""

from __future__ import annotations

from typing import Any

from llama_cy.completion import Completion, CompletionChunk, Timings
from llama_cy.responses import Shaper

__all__ = ["NativeShaper", "timings_dict"]

_STOP_TYPES = {"eog": "eos", "stop": "word", "length": "limit"}


def timings_dict(t: Timings) -> dict[str, float | int]:
    """llama-server's ``timings`` object."""
    return {
        "cache_n": t.cached_n,
        "prompt_n": t.prompt_n,
        "prompt_ms": t.prompt_ms,
        "prompt_per_token_ms": t.prompt_ms / t.prompt_n if t.prompt_n else 0.0,
        "prompt_per_second": t.prompt_per_second,
        "predicted_n": t.predicted_n,
        "predicted_ms": t.predicted_ms,
        "predicted_per_token_ms": t.predicted_ms / t.predicted_n if t.predicted_n else 0.0,
        "predicted_per_second": t.predicted_per_second,
    }


class NativeShaper(Shaper):
    """``/completion``: ``{"content", "stop", ...}`` objects, the last with the stop type,
    counts and timings."""

    kind = "cmpl"

    def __init__(self, model: str, *, return_tokens: bool = False) -> None:
        super().__init__(model)
        self.return_tokens = return_tokens
        self.slot = -1

    def _dict(self, text: str, tokens: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {"content": text, "stop": False, "id_slot": self.slot}
        out["tokens"] = tokens if self.return_tokens else []
        return out

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        self._count(chunk)
        if chunk.stop_reason is None or chunk.timings is None:
            return [self._dict(chunk.text, chunk.tokens)]
        last = self._dict(chunk.text, chunk.tokens)
        last.update(
            self._summary(chunk.stop_reason, chunk.stop, chunk.prompt_tokens, chunk.timings)
        )
        return [last]

    def whole(self, done: Completion) -> dict[str, Any]:
        out = self._dict(done.text, done.tokens)
        out.update(self._summary(done.stop_reason, done.stop, done.prompt_tokens, done.timings))
        return out

    def _summary(
        self, reason: str, stop: str | None, n_prompt: int, timings: Timings
    ) -> dict[str, Any]:
        return {
            "stop": True,
            "model": self.model,
            "stop_type": _STOP_TYPES[reason],
            "stopping_word": stop or "",
            "tokens_predicted": timings.predicted_n,
            "tokens_evaluated": n_prompt,
            "tokens_cached": n_prompt + timings.predicted_n,
            "truncated": False,
            "timings": timings_dict(timings),
        }
