"""llama-server's own response shapes: ``/completion``'s objects (content, stop type,
counts, ``generation_settings``, timings) and its token probabilities."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from llama_cy.completion import Completion, CompletionChunk, Timings, TokenLogprob
from llama_cy.generation import Job
from llama_cy.openai_shapes import Shaper
from llama_cy.sampling_settings import SAMPLING_SETTINGS
from llama_cy.server.core import Server

__all__ = ["LlamaServerShaper", "generation_settings", "pick", "probabilities"]

_STOP_TYPES = {"eog": "eos", "stop": "word", "length": "limit"}


def probabilities(lps: list[TokenLogprob], post_sampling: bool) -> list[dict[str, Any]]:
    """llama-server's ``completion_probabilities``: log-probabilities, or post-sampling
    probabilities (``prob``, ``top_probs``)."""

    def one(token: int, piece: bytes, logprob: float) -> dict[str, Any]:
        value = math.exp(logprob) if post_sampling else logprob
        return {
            "id": token,
            "token": piece.decode("utf-8", "ignore"),
            "bytes": list(piece),
            "prob" if post_sampling else "logprob": value,
        }

    top = "top_probs" if post_sampling else "top_logprobs"
    return [{**one(lp.token, lp.piece, lp.logprob), top: [one(*t) for t in lp.top]} for lp in lps]


def generation_settings(server: Server, job: Job, body: Mapping[str, Any]) -> dict[str, Any]:
    """llama-server's ``generation_settings``: the request's sampling as it ran."""
    p = job.params
    out: dict[str, Any] = {
        "seed": p.seed if p.seed is not None else -1,
        "n_predict": job.max_tokens if job.max_tokens is not None else -1,
        "max_tokens": job.max_tokens if job.max_tokens is not None else -1,
        "stream": bool(body.get("stream")),
        "n_probs": job.n_logprobs or 0,
        "post_sampling_probs": job.post_sampling_probs,
        "backend_sampling": (
            bool(body["backend_sampling"])
            if body.get("backend_sampling") is not None
            else server.settings.backend_sampling
        ),
        "stop": list(job.stop),
        "ignore_eos": bool(body.get("ignore_eos")),
        "n_keep": job.n_keep if job.n_keep is not None else server.settings.keep,
        "n_discard": job.n_discard,
        "grammar": job.params.grammar if isinstance(job.params.grammar, str) else "",
        # -inf (never) is null in JSON, as llama-server writes it
        "logit_bias": [
            {"token": t, "bias": b if b != float("-inf") else None}
            for t, b in (p.logit_bias or {}).items()
        ],
        "speculative.types": (
            server.engine.spec.types
            if server.engine is not None and server.engine.spec is not None
            else "none"
        ),
    }
    for s in SAMPLING_SETTINGS:
        value = getattr(p, s.name)
        out[s.server_name] = list(value) if isinstance(value, tuple) else value
    return out


class LlamaServerShaper(Shaper):
    """``/completion``: ``{"content", "stop", ...}`` objects, the last with the stop
    type, counts, settings and timings, in llama-server's shapes."""

    kind = "cmpl"

    def __init__(
        self, server: Server, job: Job, body: Mapping[str, Any], *, index: int = 0
    ) -> None:
        super().__init__(server.model_id)
        self.server = server
        self.job = job
        self.index = index
        self.return_tokens = bool(body.get("return_tokens"))
        self.per_token = bool(body.get("timings_per_token"))
        self.streaming = bool(body.get("stream"))
        self.backend_sampling = body.get("backend_sampling")
        self.fields = body.get("response_fields") or []
        self.slot = -1
        self._n = 0
        self._new_line = False

    def _partial(self, chunk: CompletionChunk) -> dict[str, Any]:
        self._n += len(chunk.tokens)
        self._new_line = self._new_line or "\n" in chunk.text
        out: dict[str, Any] = {
            "index": self.index,
            "content": chunk.text,
            "tokens": chunk.tokens,
            "stop": False,
            "id_slot": self.slot,
            "tokens_predicted": self._n,
            "tokens_evaluated": len(self.job.tokens),
        }
        if chunk.logprobs:
            out["completion_probabilities"] = self._probabilities(chunk.logprobs)
        if chunk.timings is not None and (self.per_token or chunk.stop_reason is None):
            out["timings"] = chunk.timings.as_dict()
        if chunk.progress is not None:
            out["prompt_progress"] = chunk.progress.as_dict()
        return out

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        out = []
        if chunk.text or chunk.tokens or chunk.stop_reason is None:
            out.append(self._partial(chunk))
        if chunk.stop_reason is not None and chunk.timings is not None:
            final = self._final(
                "", [], chunk.stop_reason, chunk.stop, chunk.timings, chunk.truncated
            )
            out.append(final)
        return out

    def whole(self, done: Completion) -> dict[str, Any]:
        self._n = len(done.tokens)
        self._new_line = "\n" in done.text
        tokens = done.tokens if self.return_tokens else []
        out = self._final(
            done.text, tokens, done.stop_reason, done.stop, done.timings, done.truncated
        )
        if done.logprobs:
            out["completion_probabilities"] = self._probabilities(done.logprobs)
        return pick(out, self.fields) if self.fields else out

    def _probabilities(self, lps: list[TokenLogprob]) -> list[dict[str, Any]]:
        return probabilities(lps, self.job.post_sampling_probs)

    def _final(
        self,
        text: str,
        tokens: list[int],
        reason: str,
        stop: str | None,
        timings: Timings,
        truncated: bool,
    ) -> dict[str, Any]:
        n_prompt = len(self.job.tokens)
        model = self.server.model
        return {
            "index": self.index,
            "content": text,
            "tokens": tokens,
            "id_slot": self.slot,
            "stop": True,
            "model": self.model,
            "tokens_predicted": self._n,
            "tokens_evaluated": n_prompt,
            "generation_settings": generation_settings(
                self.server,
                self.job,
                {"stream": self.streaming, "backend_sampling": self.backend_sampling},
            ),
            "prompt": (
                model.detokenize(self.job.tokens, unparse_special=True)
                if self.job.media is None
                else self.job.media.detokenize(self.job.tokens)
            ),
            "has_new_line": self._new_line,
            "truncated": truncated,
            "stop_type": _STOP_TYPES[reason],
            "stopping_word": stop or "",
            "tokens_cached": n_prompt + self._n,
            "timings": timings.as_dict(),
        }


def pick(obj: dict[str, Any], fields: list[Any]) -> dict[str, Any]:
    """llama-server's ``response_fields``: only those fields, ``a/b`` reaching into
    nested objects (the key stays ``a/b``)."""
    out = {}
    for path in fields:
        if not isinstance(path, str):
            continue
        value: Any = obj
        for part in path.split("/"):
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            out[path] = value
    return out
