"""Context checkpoints: llama-server's way (b11434, ``server-context.cpp``) to reuse a
prompt's prefix where the KV cache cannot simply be cut back to it.

The SWA layers of a model such as Gemma 3 keep only their window (unless the context
was made with ``swa_full``), and a recurrent or hybrid model keeps one state per
sequence: once the cache has moved past a prefix, cutting the rest off does not bring
the prefix's state back. So while a prompt is decoded, the parts of the state that
cannot be rolled back (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``) are copied to host
memory a few tokens before its end; a later prompt that shares the prefix restores the
latest copy it can use and decodes only from there. The policy is llama-server's:
prompts are split so that copies are taken ``4 + n_ubatch`` and ``4`` tokens before
their end, at most ``n_max`` are kept per sequence (``--ctx-checkpoints``), and copies
closer than ``min_step`` tokens to an earlier one are evicted first
(``--checkpoint-min-step``). A chat's prompt is also split at its user messages (found
by the template's message delimiters, as llama-server's message spans), and a copy is
taken at the start of the last one and of those ``min_step`` past the latest copy: a
conversation whose last message is edited restarts from there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llama_cy._context import STATE_SEQ_FLAGS_PARTIAL_ONLY, LlamaContext
from llama_cy._vocab import LlamaVocab
from llama_cy.errors import LlamaError

__all__ = ["Checkpoint", "Checkpoints", "user_starts"]

_log = logging.getLogger("llama_cy")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The sequence's state that cannot be rolled back, taken when it held the first
    ``n_tokens`` tokens of a prompt (positions ``pos_min..pos_max`` in the cache)."""

    n_tokens: int
    pos_min: int
    pos_max: int
    data: bytes
    job: int  #: which job made it (its id)
    draft: bytes = b""  #: the draft context's state, taken with it (llama-server's update_dft)

    def size(self) -> int:
        return len(self.data) + len(self.draft)


class Checkpoints:
    """The context checkpoints of one sequence of ``ctx`` (``n_max <= 0``: none)."""

    def __init__(
        self, ctx: LlamaContext, seq_id: int, *, n_max: int = 32, min_step: int = 8192
    ) -> None:
        self.ctx = ctx
        self.seq_id = seq_id
        self.n_max = n_max
        self.min_step = min_step
        model = ctx.model
        #: the window of the SWA layers (0: none, or kept whole)
        self.n_swa = 0 if ctx.swa_full else model.n_swa
        #: whether the cache can be cut back at all
        self.cuttable = not (model.is_recurrent or model.is_hybrid)
        #: whether this sequence takes checkpoints (llama-server: memory that cannot be cut
        #: back, or SWA layers that keep only their window)
        self.enabled = n_max > 0 and (not self.cuttable or self.n_swa > 0)
        self.items: list[Checkpoint] = []
        #: where the running prompt's user messages start (see :func:`user_starts`)
        self.user_starts: tuple[int, ...] = ()
        #: a speculator's draft context, which holds what ``ctx`` holds: checkpointed and
        #: restored with it
        self.draft: LlamaContext | None = None

    def clear(self) -> None:
        self.items = []

    def _user_stop(self, start: int, end: int) -> int:
        """The first user message start in ``(start, end)`` that a prompt chunk stops at
        (llama-server: the last user message, or any while there is no checkpoint or
        ``min_step`` past the latest); else ``end``."""
        last = self.user_starts[-1] if self.user_starts else -1
        for s in self.user_starts:
            if start < s < end and (
                s == last or not self.items or s > self.items[-1].n_tokens + self.min_step
            ):
                return s
        return end

    # ---- a prompt's start ------------------------------------------------------------

    def usable_prefix(self, n_past: int, n_prompt: int, *, restore: bool = True) -> int:
        """How many of the ``n_past`` cached tokens shared with a prompt of ``n_prompt``
        tokens can be kept: all of them if the cache still holds what decoding past them
        needs; else up to the latest checkpoint that does, restored here (none:
        ``restore=False``); else 0.
        Checkpoints past the kept prefix are dropped."""
        pos_next = n_past
        if n_past > 0:
            pos_min = self.ctx.seq_pos_min(self.seq_id)
            # the smallest position the cache must still hold (llama-server's pos_min_thold)
            needed = max(0, pos_next - self.n_swa - (0 if n_past < n_prompt else 1))
            if pos_min >= needed:
                found = next(
                    (
                        c
                        for c in reversed(self.items)
                        if c.pos_max <= pos_next and (c.pos_min < needed or c.pos_min == 0)
                    ),
                    None,
                )
                if found is not None and restore and self._load(found):
                    pos_next = min(pos_next, max(found.pos_min + 1, found.pos_max))
                    n_past = min(pos_next, found.n_tokens)
                else:
                    pos_next = n_past = 0
        self.items = [c for c in self.items if c.pos_max <= pos_next]
        return n_past

    def _load(self, c: Checkpoint) -> bool:
        try:
            self.ctx.state_seq_set_data(c.data, self.seq_id, STATE_SEQ_FLAGS_PARTIAL_ONLY)
            if self.draft is not None:
                self.draft.state_seq_set_data(c.draft, self.seq_id, STATE_SEQ_FLAGS_PARTIAL_ONLY)
        except LlamaError as exc:  # a state llama.cpp rejects: decode the prompt again
            _log.warning("could not restore a context checkpoint (%s): reprocessing", exc)
            self.items.remove(c)
            return False
        return True

    # ---- while a prompt is decoded ---------------------------------------------------

    def chunk_end(self, start: int, end: int, n_prompt: int) -> int:
        """Where a prompt chunk ``[start, end)`` must stop so that checkpoints can be
        taken ``4 + n_ubatch`` and ``4`` tokens before the prompt's end."""
        if not self.enabled:
            return end
        end = self._user_stop(start, end)
        for offset in (4 + self.ctx.n_ubatch, 4):
            stop = n_prompt - min(self.ctx.n_batch, offset)
            if start < stop < end:
                return stop
        return end

    def before_chunk(self, start: int, end: int, n_prompt: int, job: int) -> None:
        """Take a checkpoint of the first ``start`` tokens before the chunk
        ``[start, end)`` of a prompt is decoded, if llama-server would: for the chunks
        within ``n_ubatch`` tokens of the prompt's end, and those that start a user
        message (the last one, or ``min_step`` past the latest checkpoint)."""
        near_end = n_prompt < end + self.ctx.n_ubatch
        if not self.enabled or not (near_end or start in self.user_starts):
            return
        last_user = self.user_starts[-1] if self.user_starts else -1
        if not (near_end or start == last_user or not self.items) and (
            start <= self.items[-1].n_tokens + self.min_step
        ):
            return
        pos_min = self.ctx.seq_pos_min(self.seq_id)
        if pos_min < 0:  # nothing decoded yet
            return
        pos_max = self.ctx.seq_pos_max(self.seq_id)
        items = self.items
        # Evict checkpoints within min_step of an earlier one (made by other jobs), while
        # the list is full; then the oldest; and one at the same point is superseded.
        i, last = 0, -1
        while len(items) + 1 >= self.n_max and i < len(items):
            c = items[i]
            if c.job != job and last >= 0 and c.n_tokens <= last + self.min_step:
                del items[i]
                continue
            last = c.n_tokens
            i += 1
        while len(items) >= self.n_max:
            del items[0]
        items[:] = [c for c in items if c.n_tokens != start]
        data = self.ctx.state_seq_get_data(self.seq_id, STATE_SEQ_FLAGS_PARTIAL_ONLY)
        draft = b""
        if self.draft is not None:
            draft = self.draft.state_seq_get_data(self.seq_id, STATE_SEQ_FLAGS_PARTIAL_ONLY)
        items.append(Checkpoint(start, pos_min, pos_max, data, job, draft))


def user_starts(
    vocab: LlamaVocab,
    tokens: Sequence[int],
    delimiters: Sequence[tuple[str, str]],
    skips: Mapping[int, int] | None = None,
) -> tuple[int, ...]:
    """Where user messages start in a prompt's ``tokens``, as llama-server's message spans
    find them (``common_chat_msg_delimiters::split``): at each index the first
    delimiter whose tokens follow there names a message's role; ``skips`` (start:
    length) are media the search jumps over."""
    delims = [
        (role, vocab.tokenize(text.encode(), add_special=False, parse_special=True).tolist())
        for role, text in delimiters
    ]
    delims = [(role, toks) for role, toks in delims if toks]
    if not any(role == "user" for role, _ in delims):
        return ()
    arr = np.asarray(tokens, dtype=np.int64)
    skipped = np.zeros(len(arr), dtype=bool)
    for start, n in (skips or {}).items():
        skipped[start : start + n] = True
    # Only where some delimiter's first token is can one start.
    firsts = np.array(sorted({toks[0] for _, toks in delims}), dtype=np.int64)
    starts: list[int] = []
    for i in np.flatnonzero(np.isin(arr, firsts) & ~skipped).tolist():
        for role, toks in delims:
            if arr[i : i + len(toks)].tolist() == toks:
                if role == "user":
                    starts.append(i)
                break
    return tuple(starts)
