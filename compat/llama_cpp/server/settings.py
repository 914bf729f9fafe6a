"""llama-cpp-python's server settings as its pydantic-settings classes: ``ModelSettings``,
``ServerSettings``, ``Settings`` (both) and ``ConfigFileSettings`` (a config file: server
settings and ``models``), by its names, with its defaults and bounds, read from keyword
arguments or the environment (``MODEL``, ``N_CTX``, ...) as there.

The names and defaults are :mod:`llama_cpp.server.serve_args`' tables, which the command
line reads without pydantic; ``tests/test_llama_cpp_server.py`` checks that the two agree.
What each setting does is the ``llama-cy serve`` flag that ``serve_args`` gives it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .serve_args import CPUS, MODEL_SETTINGS, SERVER_SETTINGS

__all__ = ["ConfigFileSettings", "ModelSettings", "ServerSettings", "Settings"]

_M = {name: default for name, (_, default, _) in MODEL_SETTINGS.items()}
_S = {name: default for name, (_, default, _) in SERVER_SETTINGS.items()}


class ModelSettings(BaseSettings):
    """What loads and runs the model (llama_cpp.Llama's parameters, by their names)."""

    # "model" and "model_*" are setting names here, as in llama-cpp-python
    model_config = SettingsConfigDict(protected_namespaces=())

    model: str
    model_alias: str | None = None
    n_gpu_layers: int = Field(default=_M["n_gpu_layers"], ge=-1)
    split_mode: int = _M["split_mode"]
    main_gpu: int = Field(default=_M["main_gpu"], ge=0)
    tensor_split: list[float] | None = None
    vocab_only: bool = False
    use_mmap: bool = _M["use_mmap"]
    use_mlock: bool = _M["use_mlock"]
    kv_overrides: list[str] | None = None
    rpc_servers: str | None = None
    seed: int = _M["seed"]
    n_ctx: int = Field(default=_M["n_ctx"], ge=0)
    n_batch: int = Field(default=_M["n_batch"], ge=1)
    n_ubatch: int = Field(default=_M["n_ubatch"], ge=1)
    n_threads: int = Field(default=_M["n_threads"], ge=1)
    n_threads_batch: int = Field(default=_M["n_threads_batch"], ge=0)
    rope_scaling_type: int = _M["rope_scaling_type"]
    rope_freq_base: float = _M["rope_freq_base"]
    rope_freq_scale: float = _M["rope_freq_scale"]
    yarn_ext_factor: float = _M["yarn_ext_factor"]
    yarn_attn_factor: float = _M["yarn_attn_factor"]
    yarn_beta_fast: float = _M["yarn_beta_fast"]
    yarn_beta_slow: float = _M["yarn_beta_slow"]
    yarn_orig_ctx: int = _M["yarn_orig_ctx"]
    mul_mat_q: bool = _M["mul_mat_q"]
    logits_all: bool = _M["logits_all"]
    embedding: bool = _M["embedding"]
    offload_kqv: bool = _M["offload_kqv"]
    flash_attn: bool = _M["flash_attn"]
    last_n_tokens_size: int = Field(default=_M["last_n_tokens_size"], ge=0)
    lora_base: str | None = None
    lora_path: str | None = None
    numa: bool | int = False
    chat_format: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    clip_model_path: str | None = None
    cache: bool = False
    cache_type: Literal["ram", "disk"] = "ram"
    cache_size: int = _M["cache_size"]
    hf_tokenizer_config_path: str | None = None
    hf_pretrained_model_name_or_path: str | None = None
    hf_model_repo_id: str | None = None
    draft_model: str | None = None
    draft_model_num_pred_tokens: int = _M["draft_model_num_pred_tokens"]
    type_k: int | None = None
    type_v: int | None = None
    verbose: bool = _M["verbose"]

    @model_validator(mode="before")
    @classmethod
    def _all_cpus(cls, values: Any) -> Any:
        """-1 threads: every CPU, before the bounds are checked (as there)."""
        if isinstance(values, dict):
            for name in ("n_threads", "n_threads_batch"):
                if values.get(name) in (-1, "-1"):
                    values[name] = CPUS
        return values


class ServerSettings(BaseSettings):
    """Where and how the server listens (uvicorn's and the app's)."""

    host: str = _S["host"]
    port: int = _S["port"]
    ssl_keyfile: str | None = None
    ssl_certfile: str | None = None
    api_key: str | None = None
    interrupt_requests: bool = _S["interrupt_requests"]
    disable_ping_events: bool = _S["disable_ping_events"]
    root_path: str = _S["root_path"]


class Settings(ServerSettings, ModelSettings):
    """One model and the server: what ``create_app()`` reads from the environment."""


class ConfigFileSettings(ServerSettings):
    """A config file: the server settings and the models it serves (one at a time)."""

    models: list[ModelSettings] = Field(default_factory=list)
