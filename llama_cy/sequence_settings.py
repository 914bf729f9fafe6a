"""How a :class:`~llama_cy.generation.KVSequence` runs every job: one frozen object,
its defaults the flag table's (written there once). The server builds it from its
``ServerSettings`` (``EngineSettings.of``), ``Llama`` from its keywords."""

from __future__ import annotations

from dataclasses import dataclass

from llama_cy.flags import default as _flag

__all__ = ["SequenceSettings"]


@dataclass(frozen=True)
class SequenceSettings:
    """How a :class:`KVSequence` runs every job, as the server flags of these names set
    it (their defaults are the flag table's). ``context_shift`` lets a generation that
    fills the sequence go on by dropping half of what follows the first ``n_keep``
    tokens (without it, it ends with "length"); ``backend_sampling`` is the default for
    jobs that do not say: their chain runs in the graph (-bs); ``ctx_checkpoints`` and
    ``checkpoint_min_step`` bound llama-server's context checkpoints; ``special`` shows
    every special token generated as text (-sp), where otherwise only those a chat format
    preserves are."""

    context_shift: bool = _flag("context_shift")
    backend_sampling: bool = _flag("backend_sampling")
    ctx_checkpoints: int = _flag("ctx_checkpoints")
    checkpoint_min_step: int = _flag("checkpoint_min_step")
    special: bool = _flag("special")
