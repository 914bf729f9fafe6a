"""What the server's :class:`~llama_cy.server.engine.Engine` runs with: one frozen object,
its defaults the flag table's (written there once), built from ``ServerSettings`` by a
loop over its fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llama_cy.flags import default as _flag
from llama_cy.flags import from_fields
from llama_cy.sequence_settings import SequenceSettings

__all__ = ["EngineSettings"]


@dataclass(frozen=True)
class EngineSettings:
    """``n_predict`` (> 0) caps every request's tokens; ``max_queue`` bounds the requests
    waiting for a slot and ``queue_timeout`` how long one waits (both end in
    ``QueueFullError``). ``slot_prompt_similarity`` is how much of a prompt an idle
    slot's cache must hold to be chosen for it; ``warmup`` decodes once at start;
    ``cache_ram`` (MiB; -1: no limit, 0: off) keeps prompts in host memory, and
    ``cache_idle_slots`` saves an idle slot's there; ``kv_unified_per_slot`` caps a
    slot's context (0: no cap). ``sequence`` is how every slot runs its jobs."""

    n_predict: int = _flag("n_predict")
    max_queue: int = _flag("queue_size")
    queue_timeout: float | None = _flag("queue_timeout")
    slot_prompt_similarity: float = _flag("slot_prompt_similarity")
    warmup: bool = _flag("warmup")
    cache_ram: int = _flag("cache_ram")
    cache_idle_slots: bool = _flag("cache_idle_slots")
    kv_unified_per_slot: int = _flag("kv_unified_per_slot")
    sequence: SequenceSettings = field(default_factory=SequenceSettings)

    @classmethod
    def of(cls, settings: Any) -> EngineSettings:
        """From an object with these fields' names (the server's ``ServerSettings``)."""
        return from_fields(cls, settings, sequence=from_fields(SequenceSettings, settings))
