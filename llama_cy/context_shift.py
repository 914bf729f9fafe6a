"""llama-server's context shift: when a generation fills its sequence, drop half (or the
request's ``n_discard``) of what follows the first ``n_keep`` tokens and move the rest
back, in the context and its draft context alike."""

from __future__ import annotations

import logging

from llama_cy._context import LlamaContext
from llama_cy._speculative import Speculator

__all__ = ["shift", "shift_plan"]

_log = logging.getLogger("llama_cy")


def shift_plan(
    n_past: int,
    n_keep: int,
    n_ctx: int,
    asked: tuple[int, int | None, int] | None,
    add_bos: bool,
) -> tuple[int, int, int] | None:
    """``(n_keep, n_discard, n_past)`` for a sequence of ``n_past`` tokens and room
    ``n_ctx``, or None where nothing can go. ``asked`` is the job's ``(prompt length,
    n_keep, n_discard)``: its ``n_keep`` (-1: the whole prompt) counts after the BOS,
    as llama-server reads it, and an ``n_discard`` of 0 means half of what is left."""
    keep, n_discard = n_keep, 0
    if asked is not None:
        n_prompt, job_keep, n_discard = asked
        if job_keep is not None:
            keep = min((n_prompt if job_keep < 0 else job_keep) + int(add_bos), n_ctx - 4)
    keep = min(keep, n_past - 1)
    n_left = n_past - keep
    n_discard = min(n_discard if n_discard > 0 else n_left // 2, n_left - 1)
    return None if n_discard <= 0 else (keep, n_discard, n_past)


def shift(
    ctx: LlamaContext,
    spec: Speculator | None,
    seq_id: int,
    cache: list[int],
    keep: int,
    n_discard: int,
    n_past: int,
) -> None:
    """Drop ``n_discard`` tokens after the first ``keep`` of sequence ``seq_id`` (and of
    ``cache``, its tokens) and move the rest back."""
    line = "slot context shift, n_keep = %d, n_left = %d, n_discard = %d"  # llama-server's
    _log.info(line, keep, n_past - keep, n_discard)
    for c in (ctx, spec) if spec is not None else (ctx,):
        c.seq_rm(seq_id, keep, keep + n_discard)
        c.seq_add(seq_id, keep + n_discard, n_past, -n_discard)
    del cache[keep : keep + n_discard]
