"""What ``llama-cy serve`` takes (llama-server's long flag names), and what it loads."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llama_cy._model import LlamaModel
from llama_cy.prepare import Preparer

__all__ = ["ServerSettings", "load_model"]


@dataclass(frozen=True)
class ServerSettings:
    """The server's settings; the names are llama-server's long flags.

    ``sampling`` holds the defaults of requests that do not say, by the Python names of
    :data:`~llama_cy.settings.SAMPLING_SETTINGS` (llama-server's own defaults otherwise).
    """

    model: str
    alias: str | None = None
    ctx_size: int = 4096
    parallel: int = 4
    n_predict: int = -1
    threads: int | None = None
    n_gpu_layers: int = 0
    batch_size: int = 2048
    ubatch_size: int = 512
    flash_attn: bool | None = None
    api_key: str | None = None
    embeddings: bool = False
    pooling: str | None = None
    seed: int = -1
    chat_format: str | None = None
    chat_template: str | None = None
    use_jinja: bool = True
    reasoning_format: str = "auto"
    reasoning_budget: int = -1
    reasoning_budget_message: str = ""
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    metrics: bool = False
    timeout: float = 600.0
    max_queue: int = 256
    rpc: str | None = None
    context_shift: bool = False
    keep: int = 0
    sampling: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model_id(self) -> str:
        return self.alias or os.path.basename(self.model)

    def preparer(self, model: LlamaModel) -> Preparer:
        """How this server prepares requests: llama-server's defaults and template."""
        return Preparer(
            model,
            chat_format=self.chat_format,
            chat_template=self.chat_template,
            use_jinja=self.use_jinja,
            reasoning_format=self.reasoning_format,
            reasoning_budget=self.reasoning_budget,
            reasoning_budget_message=self.reasoning_budget_message,
            chat_template_kwargs=self.chat_template_kwargs,
            profile="server",
            seed=self.seed,
            overrides=self.sampling,
        )

    def context(self, model: LlamaModel) -> dict[str, Any]:
        """The keywords of the server's :class:`~llama_cy.LlamaContext`."""
        common: dict[str, Any] = {
            "n_ctx": self.ctx_size or model.n_ctx_train,
            "n_batch": self.batch_size,
            "n_threads": self.threads,
            "flash_attn": self.flash_attn,
        }
        if self.embeddings:
            # Inputs are packed into one batch as separate sequences, each of which must
            # fit in one micro-batch.
            return {
                **common,
                "n_ubatch": self.batch_size,
                "n_seq_max": min(64, self.batch_size),
                "kv_unified": True,
                "embeddings": True,
                "pooling_type": self.pooling,
            }
        return {**common, "n_ubatch": self.ubatch_size}


def load_model(
    settings: ServerSettings, progress: Callable[[float], bool | None] | None = None
) -> LlamaModel:
    """The model the server runs."""
    return LlamaModel.load(
        settings.model,
        n_gpu_layers=settings.n_gpu_layers,
        rpc_servers=settings.rpc,
        progress=progress,
    )
