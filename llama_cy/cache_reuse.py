"""llama-server's ``--cache-reuse N`` (server-context.cpp): past the prefix a slot's cache
shares with a new prompt, chunks of at least ``N`` tokens that the prompt repeats further
on are moved to their new positions by shifting their KV cells (``seq_rm`` and
``seq_add``) instead of being decoded again. Editors that send a file around the cursor
(fill-in-the-middle) get most of the file from the cache after an edit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Shiftable", "can_reuse", "reuse_chunks"]


class Shiftable(Protocol):
    """A context (or a draft model's speculator) whose KV cells can move."""

    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool: ...
    def seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None: ...
    @property
    def can_shift(self) -> bool: ...


def can_reuse(
    contexts: Sequence[Shiftable], cache: Sequence[int], media: bool, checkpointed: bool
) -> bool:
    """Chunks move where every context can shift its cells, with no media in the prompt
    or the cache, and where no checkpoint is kept (an SWA window or a recurrent state
    cannot be moved): llama-server's conditions, and checkpoints'."""
    return (
        not media
        and all(t >= 0 for t in cache)
        and not checkpointed
        and all(c.can_shift for c in contexts)
    )


def reuse_chunks(
    contexts: Sequence[Shiftable],
    seq_id: int,
    cache: list[int],
    prompt: Sequence[int],
    n_past: int,
    n_min: int,
) -> int:
    """Shift the chunks of ``cache`` past ``n_past`` that match ``prompt`` for at least
    ``n_min`` tokens into place, in every context of ``contexts`` (the target's, and a
    draft model's), rewriting ``cache`` to match; the tokens now reusable. The caller
    drops what lies past them."""
    head_c = head_p = n_past
    while head_c < len(cache) and head_p < len(prompt):
        n = 0
        while (
            head_c + n < len(cache)
            and head_p + n < len(prompt)
            and cache[head_c + n] == prompt[head_p + n]
        ):
            n += 1
        if n >= n_min:
            shift = head_p - head_c
            for ctx in contexts:
                ctx.seq_rm(seq_id, head_p, head_c)
                ctx.seq_add(seq_id, head_c, head_c + n, shift)
            cache[head_p : head_p + n] = cache[head_c : head_c + n]
            n_past += n
            head_c += n
            head_p += n
        else:
            head_c += 1
    return n_past
