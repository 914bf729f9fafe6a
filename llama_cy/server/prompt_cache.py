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
from llama_cy._prefix import best_match, holder_of, key_prefix, prefixes_of
from llama_cy.checkpoints import Checkpoint
from llama_cy.errors import LlamaError
from llama_cy.generation import KVSequence

__all__ = ["CachedPrompt", "PromptCache"]

_log = logging.getLogger("llama_cy")
_MIB = 1024 * 1024
Tokens = npt.NDArray[np.int64]  # media positions hold 56-bit stand-ins


def _tokens(tokens: Sequence[int]) -> Tokens:
    return np.asarray(tokens, dtype=np.int64)


@dataclass(slots=True, eq=False)  # entries are told apart by identity (arrays inside)
class CachedPrompt:
    tokens: Tokens  #: media positions hold their content's stand-in (prompt_media)
    checkpoints: list[Checkpoint]
    data: bytes  #: the sequence's whole state (``state_seq_get_data``)
    draft: bytes = b""  #: the draft context's, with a speculator that has one
    key: bytes = b""  #: ``tokens`` as bytes, for the comparisons
    cached: bool = True  #: still in the cache (False once dropped)

    def __post_init__(self) -> None:
        self.key = self.tokens.tobytes()

    def size(self) -> int:
        return len(self.data) + len(self.draft) + sum(c.size() for c in self.checkpoints)


class PromptCache:
    """The cached prompts, oldest first. ``limit_mib``: -1 no limit; ``limit_tokens``:
    the context size."""

    def __init__(self, limit_mib: int, limit_tokens: int) -> None:
        self.limit_size = limit_mib * _MIB if limit_mib > 0 else 0
        self.limit_tokens = limit_tokens
        self.states: deque[CachedPrompt] = deque()
        # Running totals (the limits are checked after every save).
        self._size = 0
        self._n_tokens = 0
        # slot id -> its tokens when last saved, and the entry that held them whole: a
        # save of the same tokens while that entry is cached is refused without comparing
        # every entry (--cache-idle-slots saves each idle slot at every task's start)
        self._held: dict[int, tuple[list[int], CachedPrompt]] = {}

    def size(self) -> int:
        return self._size

    def n_tokens(self) -> int:
        return self._n_tokens

    def _keys(self) -> list[bytes]:
        """The entries' keys, oldest first (for :mod:`llama_cy._prefix`'s scans)."""
        return [s.key for s in self.states]

    def _append(self, entry: CachedPrompt) -> None:
        self.states.append(entry)
        self._size += entry.size()
        self._n_tokens += len(entry.tokens)

    def _dropped(self, entry: CachedPrompt) -> None:
        entry.cached = False
        self._size -= entry.size()
        self._n_tokens -= len(entry.tokens)

    def _pop_oldest(self) -> None:
        self._dropped(self.states.popleft())

    @staticmethod
    def _draft(slot: KVSequence) -> LlamaContext | None:
        return slot.spec.draft_context if slot.spec is not None else None

    def save(self, slot: KVSequence) -> bool:
        """Copy ``slot``'s state (and its draft context's) into the cache
        (``prompt_save``); False if it was empty, is held already, or does not fit."""
        if not slot.cache:
            return False
        held = self._held.get(slot.id)
        if held is not None and held[1].cached and held[0] == slot.cache:
            return False
        tokens = _tokens(slot.cache)
        key = tokens.tobytes()
        keys = self._keys()
        i = holder_of(keys, key)
        if i >= 0:  # held whole by an entry already
            self._held[slot.id] = (list(slot.cache), self.states[i])
            return False
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
        obsolete = prefixes_of(keys, key)
        if obsolete:
            gone = set(obsolete)
            for i in obsolete:
                self._dropped(self.states[i])
            self.states = deque(s for i, s in enumerate(self.states) if i not in gone)
        while self.limit_size and self.states and self._size + entry.size() > self.limit_size:
            self._pop_oldest()
        self._append(entry)
        self._held[slot.id] = (list(slot.cache), entry)
        return True

    def load(self, slot: KVSequence, prompt: list[int]) -> bool:
        """Give ``slot`` the cached state that keeps the most of ``prompt``, if any keeps
        more than the slot does and at least a quarter of itself (``load``); False if
        llama.cpp rejects it (the slot is then to be cleared)."""
        asked = _tokens(prompt).tobytes()
        lcp = key_prefix(_tokens(slot.cache).tobytes(), asked)
        keep_best = lcp / len(slot.cache) if slot.cache else -1.0  # an empty slot takes any
        i = best_match(self._keys(), asked, keep_best, lcp / len(prompt))
        if i < 0:
            return True
        best = self.states[i]
        del self.states[i]
        self._dropped(best)
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

    def swap(self, slot: KVSequence, prompt: list[int]) -> None:
        """``slot``, about to lose most of its cache to ``prompt``: its state saved,
        and the cached one that keeps the most of ``prompt`` taken (llama-server's
        update of its prompt cache); the slot is cleared if llama.cpp rejects that."""
        _log.debug("updating prompt cache")
        self.save(slot)
        if not self.load(slot, prompt):
            slot.forget()
        self.update()

    def save_idle(self, idle: Sequence[KVSequence], clear: bool) -> None:
        """--cache-idle-slots: save each slot of ``idle``, and ``clear`` it (a unified
        KV cache, whose cells then serve the busy slots)."""
        for slot in idle:
            if self.save(slot):
                _log.debug("__TEST_TAG_CACHE_IDLE_SLOT__")
                self.update()
            if clear:
                slot.forget()

    def update(self) -> None:
        """Drop the oldest entries beyond the limits: the size, then the tokens (the
        token limit is raised to what the size limit holds at the average entry's cost
        per token)."""
        while self.limit_size and self.states and self._size > self.limit_size:
            self._pop_oldest()
        per_token = max(1.0, self._size / max(1, self._n_tokens))
        limit = self.limit_tokens
        if self.limit_size:
            limit = max(limit, int(self.limit_size / per_token))
        while self.limit_tokens > 0 and self.states and self._n_tokens > limit:
            self._pop_oldest()
