"""llama-cpp-python's ``llama_cpp.server.model``: :class:`LlamaProxy`, ``llama_cpp.Llama``
models by alias from :class:`~llama_cpp.server.settings.ModelSettings`, one loaded at a
time, and ``load_llama_from_model_settings``, the ``Llama`` that a ``ModelSettings``
describes (its chat handler, tokenizer, draft model, KV overrides and cache), as there.

llama-cy's server does not go through it (its settings become ``llama-cy serve`` flags,
:mod:`llama_cpp.server.serve_args`); programs that build models the server's way do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .. import llama_chat_format as formats
from ..llama import Llama
from ..llama_cache import LlamaDiskCache, LlamaRAMCache
from ..llama_speculative import LlamaPromptLookupDecoding
from ..llama_tokenizer import LlamaHFTokenizer
from .serve_args import VISION_FORMATS
from .settings import ModelSettings

__all__ = ["LlamaProxy"]


class LlamaProxy:
    """The models by alias (``model_alias``, else ``model``): the first is loaded now;
    calling the proxy with another alias closes the loaded one and loads that one (an
    unknown or missing alias means the first)."""

    def __init__(self, models: list[ModelSettings]) -> None:
        if not models:
            raise ValueError("No models provided!")
        self._model_settings_dict: dict[str, ModelSettings] = {}
        for settings in models:
            if not settings.model_alias:
                settings.model_alias = settings.model
            self._model_settings_dict[settings.model_alias] = settings
        self._default_model_settings = models[0]
        self._default_model_alias: str = models[0].model_alias or models[0].model
        self._current_model: Llama | None = self.load_llama_from_model_settings(models[0])
        self._current_model_alias: str | None = self._default_model_alias

    def __call__(self, model: str | None = None) -> Llama:
        if model is None or model not in self._model_settings_dict:
            model = self._default_model_alias
        if model == self._current_model_alias and self._current_model is not None:
            return self._current_model
        if self._current_model is not None:
            self._current_model.close()
        self._current_model = None
        self._current_model = self.load_llama_from_model_settings(self._model_settings_dict[model])
        self._current_model_alias = model
        return self._current_model

    def __getitem__(self, model: str) -> dict[str, Any]:
        return self._model_settings_dict[model].model_dump()

    def __setitem__(self, model: str, settings: ModelSettings | str | bytes) -> None:
        if isinstance(settings, (str, bytes)):
            settings = ModelSettings.model_validate_json(settings)
        self._model_settings_dict[model] = settings

    def __iter__(self) -> Iterator[str]:
        return iter(self._model_settings_dict)

    def free(self) -> None:
        if self._current_model is not None:
            self._current_model.close()
            self._current_model = None
            self._current_model_alias = None

    @staticmethod
    def load_llama_from_model_settings(settings: ModelSettings) -> Llama:
        """The ``Llama`` that ``settings`` describe, built as llama-cpp-python's server
        builds it."""
        s = settings
        chat_handler: Any = None
        handler_name = VISION_FORMATS.get(s.chat_format or "")
        if handler_name is not None:
            handler_class = getattr(formats, handler_name)
            if s.clip_model_path is None:
                raise ValueError(f"chat_format {s.chat_format!r} needs clip_model_path")
            if s.hf_model_repo_id is not None:
                chat_handler = handler_class.from_pretrained(
                    repo_id=s.hf_model_repo_id, filename=s.clip_model_path, verbose=s.verbose
                )
            else:
                chat_handler = handler_class(clip_model_path=s.clip_model_path, verbose=s.verbose)
        elif s.chat_format == "hf-autotokenizer":
            if s.hf_pretrained_model_name_or_path is None:
                raise ValueError(
                    "hf_pretrained_model_name_or_path must be set for hf-autotokenizer"
                )
            chat_handler = formats.hf_autotokenizer_to_chat_completion_handler(
                s.hf_pretrained_model_name_or_path
            )
        elif s.chat_format == "hf-tokenizer-config":
            if s.hf_tokenizer_config_path is None:
                raise ValueError("hf_tokenizer_config_path must be set for hf-tokenizer-config")
            with open(s.hf_tokenizer_config_path, encoding="utf-8") as f:
                config = json.load(f)
            chat_handler = formats.hf_tokenizer_config_to_chat_completion_handler(config)
        tokenizer = None
        if s.hf_pretrained_model_name_or_path is not None:
            tokenizer = LlamaHFTokenizer.from_pretrained(s.hf_pretrained_model_name_or_path)
        draft_model = None
        if s.draft_model is not None:  # any name: prompt lookup, as there
            draft_model = LlamaPromptLookupDecoding(num_pred_tokens=s.draft_model_num_pred_tokens)
        kwargs: dict[str, Any] = dict(
            n_gpu_layers=s.n_gpu_layers,
            split_mode=s.split_mode,
            main_gpu=s.main_gpu,
            tensor_split=s.tensor_split,
            vocab_only=s.vocab_only,
            use_mmap=s.use_mmap,
            use_mlock=s.use_mlock,
            kv_overrides=_kv_overrides(s.kv_overrides),
            rpc_servers=s.rpc_servers,  # a keyword llama-cpp-python's Llama ignores
            seed=s.seed,
            n_ctx=s.n_ctx,
            n_batch=s.n_batch,
            n_ubatch=s.n_ubatch,
            n_threads=s.n_threads,
            n_threads_batch=s.n_threads_batch,
            rope_scaling_type=s.rope_scaling_type,
            rope_freq_base=s.rope_freq_base,
            rope_freq_scale=s.rope_freq_scale,
            yarn_ext_factor=s.yarn_ext_factor,
            yarn_attn_factor=s.yarn_attn_factor,
            yarn_beta_fast=s.yarn_beta_fast,
            yarn_beta_slow=s.yarn_beta_slow,
            yarn_orig_ctx=s.yarn_orig_ctx,
            mul_mat_q=s.mul_mat_q,  # ignored there too
            logits_all=s.logits_all,
            embedding=s.embedding,
            offload_kqv=s.offload_kqv,
            flash_attn=s.flash_attn,
            last_n_tokens_size=s.last_n_tokens_size,
            lora_base=s.lora_base,
            lora_path=s.lora_path,
            numa=s.numa,
            chat_format=s.chat_format,
            chat_handler=chat_handler,
            draft_model=draft_model,
            type_k=s.type_k,
            type_v=s.type_v,
            tokenizer=tokenizer,
            verbose=s.verbose,
        )
        if s.chat_template_kwargs:  # the model's own template (llama.cpp's chat engine)
            kwargs["chat_template_kwargs"] = s.chat_template_kwargs
        if s.hf_model_repo_id is not None:
            llm = Llama.from_pretrained(repo_id=s.hf_model_repo_id, filename=s.model, **kwargs)
        else:
            llm = Llama(model_path=s.model, **kwargs)
        python_handler = llm._chat_function
        if s.chat_template_kwargs and python_handler is not None:
            extra = s.chat_template_kwargs  # a Python format's: its keyword arguments

            def with_kwargs(**call: Any) -> Any:
                return python_handler(**{**extra, **call})

            llm._chat_function = with_kwargs
        if s.cache:
            cache_class = LlamaDiskCache if s.cache_type == "disk" else LlamaRAMCache
            if s.verbose:
                print(f"Using {s.cache_type} cache with size {s.cache_size}")
            llm.set_cache(cache_class(capacity_bytes=s.cache_size))
        return llm


def _kv_overrides(items: list[str] | None) -> dict[str, bool | int | float | str] | None:
    """``key=type:value`` strings (type bool, int, float or str) as Llama's kv_overrides;
    an item without a type is passed over, as there."""
    if items is None:
        return None
    out: dict[str, bool | int | float | str] = {}
    for item in items:
        key, _, value = item.partition("=")
        if ":" not in value:
            continue
        kind, _, text = value.partition(":")
        if kind == "bool":
            out[key] = text.lower() in ("true", "1")
        elif kind == "int":
            out[key] = int(text)
        elif kind == "float":
            out[key] = float(text)
        elif kind == "str":
            out[key] = text
        else:
            raise ValueError(f"Unknown value type {kind}")
    return out
