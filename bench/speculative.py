"""Bench row (9): speculative decoding on an input-copying task.

The prompt holds a passage that the greedy answer copies (Gemma 3 270M repeats it), so
n-gram drafting finds its continuations in the prompt. Measured, all greedy with the
prompt already cached, one request after another:

- ``Llama``: generation tokens/s with ``draft_model=`` against the same ``Llama``
  without it (target: at least 1.5x);
- ``llama-cy serve`` against ``llama-server`` (built from the same source): each
  server's speed-up from ``--spec-type`` over its own plain decoding, and the two
  speed-ups against each other (target: at least 0.95);
- a draft-model pair (Gemma drafting for itself, the only pair with one vocabulary on
  hand): ``llama-cy serve`` against ``llama-server`` with the same ``-md`` and
  ``--spec-draft-n-max`` (target: at least 0.95).
"""

from __future__ import annotations

import time
from typing import Any

from server_load import post

import llama_cy as lc

SENTENCE = (
    "The library opens at nine in the morning and closes at six in the evening, "
    "and members may borrow five books at a time. "
)
PROMPT = "Repeat this sentence again and again.\n" + SENTENCE * 4
N = 128
SPEC_TYPE = "ngram-simple"
DRAFT_MAX = 4


def llama_speed(llm: lc.Llama, n: int = N) -> tuple[float, lc.Completion]:
    """Generation tokens/s of one greedy completion whose prompt is cached."""
    llm.complete(PROMPT, max_tokens=1, temperature=0)  # the prompt goes into the cache
    t0 = time.perf_counter()
    done = llm.complete(PROMPT, max_tokens=n, temperature=0)
    dt = time.perf_counter() - t0
    return len(done.tokens) / dt, done


def completion_speed(port: int, n: int = N, extra: dict[str, Any] | None = None) -> float:
    """Wall-clock tokens/s of one greedy /completion whose prompt is cached."""
    body = {"prompt": PROMPT, "n_predict": n, "temperature": 0, "cache_prompt": True}
    body.update(extra or {})
    post(port, "/completion", {**body, "n_predict": 1})  # the prompt goes into the cache
    t0 = time.perf_counter()
    out = post(port, "/completion", body)
    dt = time.perf_counter() - t0
    return int(out["tokens_predicted"]) / dt
