"""llama-server's prompt cache in host memory (``--cache-ram``, ``--cache-idle-slots``;
b11434's ``server_prompt_cache``).

When a slot is about to lose most of what its KV cache holds to a new prompt, its
sequence state (with its context checkpoints, its draft context's state, and any
images it holds) is copied to host memory first; and the
slot then takes the cached state that best matches the new prompt, if that keeps more
of it than the slot has. Entries go oldest first beyond a size limit (MiB) and a token
limit (the context size, raised while the average entry fits the size limit). With
``--cache-idle-slots`` every idle slot is saved when a task starts, and cleared where
the KV cache is unified.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from llama_cy._context import LlamaContext
from llama_cy.checkpoints import Checkpoint
from llama_cy.errors import LlamaError
from llama_cy.generation import KVSequence

__all__ = ["CachedPrompt", "PromptCache"]

_log = logging.getLogger("llama_cy")
_MIB = 1024 * 1024
Tokens = npt.NDArray[np.int64]  # media positions hold 56-bit stand-ins


def _tokens(tokens: Sequence[int]) -> Tokens:
    return np.asarray(tokens, dtype=np.int64)


def _prefix(a: Tokens, b: Tokens) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (compared in NumPy:
    every cached entry is compared with each prompt)."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


@dataclass(slots=True, eq=False)  # entries are told apart by identity (arrays inside)
class CachedPrompt:
    tokens: Tokens  #: media positions hold their content's stand-in (prompt_media)
    checkpoints: list[Checkpoint]
    data: bytes  #: the sequence's whole state (``state_seq_get_data``)
    draft: bytes = b""  #: the draft context's, with a speculator that has one

    def size(self) -> int:
        return len(self.data) + len(self.draft) + sum(c.size() for c in self.checkpoints)


class PromptCache:
    """The cached prompts, oldest first. ``limit_mib``: -1 no limit; ``limit_tokens``:
    the context size."""

    def __init__(self, limit_mib: int, limit_tokens: int) -> None:
        self.limit_size = limit_mib * _MIB if limit_mib > 0 else 0
        self.limit_tokens = limit_tokens
        self.states: deque[CachedPrompt] = deque()

    def size(self) -> int:
        return sum(s.size() for s in self.states)

    def n_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.states)

    @staticmethod
    def _draft(slot: KVSequence) -> LlamaContext | None:
        return slot.spec.draft_context if slot.spec is not None else None

    def save(self, slot: KVSequence) -> bool:
        """Copy ``slot``'s state (and its draft context's) into the cache
        (``prompt_save``); False if it was empty, is held already, or does not fit."""
        if not slot.cache:
            return False
        tokens = _tokens(slot.cache)
        if any(_prefix(s.tokens, tokens) == len(tokens) for s in self.states):
            return False  # held whole by an entry already
        data = slot.ctx.state_seq_get_data(slot.id)
        draft_ctx = self._draft(slot)
        draft = draft_ctx.state_seq_get_data(slot.id) if draft_ctx is not None else b""
        entry = CachedPrompt(tokens, list(slot.checkpoints.items), data, draft)
        if self.limit_size and entry.size() > self.limit_size:
            _log.warning(
                "prompt state of %.3f MiB exceeds the cache's %.3f MiB: not cached",
                entry.size() / _MIB,
                self.limit_size / _MIB,
            )
            return False
        # entries the new one holds whole are obsolete
        self.states = deque(s for s in self.states if _prefix(s.tokens, tokens) != len(s.tokens))
        while self.limit_size and self.states and self.size() + entry.size() > self.limit_size:
            self.states.popleft()
        self.states.append(entry)
        return True

    def load(self, slot: KVSequence, prompt: list[int]) -> bool:
        """Give ``slot`` the cached state that keeps the most of ``prompt``, if any keeps
        more than the slot does and at least a quarter of itself (``load``); False if
        llama.cpp rejects it (the slot is then to be cleared)."""
        asked = _tokens(prompt)
        lcp = _prefix(_tokens(slot.cache), asked)
        keep_best = lcp / len(slot.cache) if slot.cache else -1.0  # an empty slot takes any
        sim_best = lcp / len(prompt)
        best = None
        for s in self.states:
            n = _prefix(s.tokens, asked)
            keep, sim = n / len(s.tokens), n / len(prompt)
            if keep >= 0.25 and keep_best < keep and sim_best < sim:
                keep_best, sim_best, best = keep, sim, s
        if best is None:
            return True
        self.states.remove(best)
        draft_ctx = self._draft(slot)
        try:
            slot.ctx.state_seq_set_data(best.data, slot.id)
            if draft_ctx is not None:
                draft_ctx.state_seq_set_data(best.draft, slot.id)
        except LlamaError as exc:
            _log.error("failed to restore a cached prompt's state: %s", exc)
            return False
        slot.restored(best.tokens.tolist(), draft=True)
        slot.checkpoints.items = list(best.checkpoints)
        return True

    def update(self) -> None:
        """Drop the oldest entries beyond the limits: the size, then the tokens (the
        token limit is raised to what the size limit holds at the average entry's cost
        per token)."""
        while self.limit_size and self.states and self.size() > self.limit_size:
            self.states.popleft()
        per_token = max(1.0, self.size() / max(1, self.n_tokens()))
        limit = self.limit_tokens
        if self.limit_size:
            limit = max(limit, int(self.limit_size / per_token))
        while self.limit_tokens > 0 and self.states and self.n_tokens() > limit:
            self.states.popleft()
