"""Which idle slot a new prompt goes to.

llama-server's choice is the idle slot whose cache shares the largest fraction of the
prompt (above ``--slot-prompt-similarity``), else the least recently used one. A step's
attention reads every KV stream from its lowest busy slot to its highest
(``llama_kv_cache::get_n_kv`` views ``s1 - s0 + 1`` streams), so after a busy spell
that choice scatters a few requests over all the slots, and each step costs as much
as if every slot were busy. Here, where each slot has its own KV stream and some are
busy, the choice also keeps the busy slots together; with one unified stream, or none
busy, it is llama-server's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llama_cy.generation import KVSequence, common_prefix

__all__ = ["NEARLY_AS_MUCH", "choose_slot"]

#: a slot whose cache holds at least this share of the most any idle slot holds of a
#: prompt is as good a choice for it, if it keeps the busy slots closer together
NEARLY_AS_MUCH = 0.9


def choose_slot(
    idle: Sequence[KVSequence],
    busy: Sequence[int],
    prompt: list[int],
    similarity: float,
    unified: bool,
) -> tuple[KVSequence, bool]:
    """The slot of ``idle`` for ``prompt`` while the slots ``busy`` (ids) run, and
    whether it is about to lose most of its cache (then it swaps it through the prompt
    cache, as llama-server's does).

    Of the slots that hold more than ``similarity`` of the prompt, the one that holds
    the most (ties to the lowest id, as in llama-server), unless another that holds at
    least :data:`NEARLY_AS_MUCH` of that widens the busy slots' span less: a few prompt
    tokens decoded once cost less than every step reading the streams between
    far-apart slots. Else the least recently used slot (ties to the highest id, as
    llama-server's ``<=`` scan) among those that widen the span the least."""
    widen = _widening(busy, unified)
    if similarity > 0.0:
        least = similarity * len(prompt)
        held = [(n, s) for s in idle if (n := common_prefix(s.cache, prompt)) > least]
        if held:
            n_best = max(n for n, _ in held)
            n, best = min(
                ((n, s) for n, s in held if n >= NEARLY_AS_MUCH * n_best),
                key=lambda x: (widen(x[1]), -x[0], x[1].id),
            )
            return best, n / len(best.cache) < 0.5
    return min(reversed(idle), key=lambda s: (widen(s), s.last_used)), True


def _widening(busy: Sequence[int], unified: bool) -> Callable[[KVSequence], int]:
    """How much a slot would widen the span of the ``busy`` slots' KV streams (0 for
    every slot with one unified stream, or none busy)."""
    if not busy or unified:
        return lambda s: 0
    lo, hi = min(busy), max(busy)
    return lambda s: max(hi, s.id) - min(lo, s.id) - (hi - lo)
