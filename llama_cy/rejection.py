"""A sampled draft token verified by rejection sampling, as llama.cpp's
``common_sampler_sample_and_accept_n_rejection`` does for llama-server's
``--spec-draft-sampling probabilistic`` (at a temperature above 0): the target keeps the
drafted token ``x`` with probability ``min(1, p(x) / q(x))``, else draws from
``max(0, p - q)`` renormalised. Its tokens then follow its own distribution ``p``
exactly, and it keeps more of a sampled draft than matching would."""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

from llama_cy._context import LlamaContext
from llama_cy._sampler import LlamaSampler

__all__ = ["verify"]


def verify(
    chain: LlamaSampler,
    ctx: LlamaContext,
    row: int,
    drafted: int,
    q: tuple[npt.NDArray[np.intc], npt.NDArray[np.float32]],
    draws: random.Random,
) -> tuple[int, bool]:
    """The token at output ``row`` (accepted by ``chain``), and whether it is the
    ``drafted`` one, which the drafter sampled from ``q`` (ids, probabilities)."""
    sampled = chain.sample(ctx, row, accept=False, candidates=True)
    cand = chain.candidates()  # the target's distribution after its whole chain
    ids, p = cand["id"], cand["p"].astype(np.float64)
    q_ids, q_p = q
    q_x = float(q_p[q_ids == drafted].sum())
    at = np.flatnonzero(ids == drafted)
    p_x = float(p[at[0]]) if at.size else 0.0
    if q_x > 0.0 and (p_x >= q_x or draws.random() < p_x / q_x):
        chain.accept(drafted)
        return drafted, True
    # Rejected: the residual max(0, p - q); tokens outside q's support keep all of p.
    q_on = np.zeros_like(p)
    for token, prob in zip(q_ids.tolist(), q_p.tolist(), strict=True):
        q_on[ids == token] = prob
    residual = np.maximum(p - q_on, 0.0)
    total = float(residual.sum())
    token = sampled  # no mass left over (rounding): the target's own sample
    if total > 0.0:
        cum = np.cumsum(residual)
        i = int(np.searchsorted(cum, draws.random() * total, side="right"))
        token = int(ids[min(i, len(ids) - 1)])
    chain.accept(token)
    return token, False
