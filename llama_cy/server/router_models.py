"""The models of llama-server's router mode (:mod:`.router`): one :class:`Model` per model
the router knows (where it comes from, its preset, its child while one runs, and its
``GET /models`` entry), and what a child never inherits from the router's flags."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from llama_cy.server.modalities import architecture
from llama_cy.server.presets import Preset

__all__ = ["DEFAULT_STOP_TIMEOUT", "MODEL_ARGS", "RESERVED", "Model", "names"]

DEFAULT_STOP_TIMEOUT = 10  # seconds

#: What a child never inherits from the router's flags (unset_reserved_args): its
#: address, keys and certificates, and the router's own flags; and, from the router's
#: command line only, the model.
RESERVED = (
    "ssl_key_file",
    "ssl_cert_file",
    "api_key",
    "api_key_file",
    "models_dir",
    "models_max",
    "models_preset",
    "models_autoload",
)
MODEL_ARGS = ("model", "mmproj", "alias", "hf_repo")


def names(text: str | None) -> list[str]:
    """The distinct names of a comma-separated preset value, sorted."""
    return sorted({x.strip() for x in (text or "").split(",") if x.strip()})


@dataclass
class Model:
    """One model the router knows, and its child while one runs."""

    name: str
    source: str  #: "preset", "models_dir" or "cache"
    preset: Preset
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    status: str = "unloaded"
    port: int = 0
    last_used: float = 0.0
    args: list[str] = field(default_factory=list)
    loaded_info: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0
    stop_timeout: int = DEFAULT_STOP_TIMEOUT
    hidden: bool = False
    requests: int = 0  #: requests being forwarded to it now
    proc: asyncio.subprocess.Process | None = None
    stopping: bool = False
    architecture: dict[str, Any] = field(default_factory=architecture)

    @property
    def running(self) -> bool:
        return self.status in ("loading", "loaded", "sleeping")

    @property
    def failed(self) -> bool:
        return self.status == "unloaded" and self.exit_code != 0

    def listing(self) -> dict[str, Any]:
        """Its ``GET /models`` entry."""
        status: dict[str, Any] = {"value": self.status, "args": self.args}
        if self.source == "preset":
            shown = self.preset.copy()
            shown.unset(*RESERVED, "host", "port", "alias", "tags")
            status["preset"] = shown.to_ini()
        if self.failed:
            status["exit_code"] = self.exit_code
            status["failed"] = True
        entry: dict[str, Any] = {
            "id": self.name,
            "aliases": self.aliases,
            "tags": self.tags,
            "object": "model",
            "owned_by": "llamacpp",
            "created": int(time.time()),
            "status": status,
            "architecture": self.architecture,
            "source": self.source,
            "can_remove": self.source == "cache",
        }
        if self.running:  # what the child reports, its architecture over the projector's
            entry.update(
                {k: v for k, v in self.loaded_info.items() if k not in entry or k == "architecture"}
            )
        return entry
