"""Performance counters of a context and of a sampler chain, as typed results."""

from __future__ import annotations

from typing import NamedTuple


class ContextPerf(NamedTuple):
    """``llama_perf_context``: times in milliseconds since the context (or last reset)."""

    t_start_ms: float
    t_load_ms: float
    t_p_eval_ms: float
    t_eval_ms: float
    n_p_eval: int
    n_eval: int
    n_reused: int


class SamplerPerf(NamedTuple):
    """``llama_perf_sampler``: time spent sampling and how many tokens were sampled."""

    t_sample_ms: float
    n_sample: int
