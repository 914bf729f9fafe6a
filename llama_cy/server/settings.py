"""What ``llama-cy serve`` runs with (llama-server's flags, read by
:mod:`llama_cy.cli.serve`), and what it loads."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from llama_cy._backend import Device, devices
from llama_cy._model import LlamaModel
from llama_cy.flags import default as _flag
from llama_cy.prepare import Preparer
from llama_cy.sampling import eog_bias
from llama_cy.speculative import uses_mtp

if TYPE_CHECKING:
    from llama_cy._mtmd import MtmdContext
    from llama_cy.chat_handlers import MtmdChatHandler
    from llama_cy.media import MediaSource

_log = logging.getLogger("llama_cy.server")

__all__ = [
    "ServerSettings",
    "fit",
    "fit_targets",
    "load_keywords",
    "load_model",
    "load_model_draft",
    "mmproj_device",
]


def fit_targets(value: str) -> tuple[int, ...]:
    """-fitt's value: MiB per device, separated by , or / (one value: every device)."""
    try:
        out = tuple(int(x) for x in re.split(r"[,/]+", value.strip()) if x)
    except ValueError:
        raise ValueError(f"--fit-target: expected MiB,... not {value!r}") from None
    if not out or any(x < 0 for x in out):
        raise ValueError(f"--fit-target: expected MiB >= 0, not {value!r}")
    return out


@dataclass(frozen=True)
class ServerSettings:
    """The server's settings; the names are llama-server's long flags, and the defaults
    the flag table's (:mod:`llama_cy.flags.table`), read from there.

    ``sampling`` holds the defaults of requests that do not say, by the Python names of
    :data:`~llama_cy.sampling_settings.SAMPLING_SETTINGS` (llama-server's own defaults otherwise).
    ``context`` and ``load`` are extra keywords of :class:`~llama_cy.LlamaContext` and
    :meth:`~llama_cy.LlamaModel.load` (KV cache types, RoPE, split mode, ...).
    ``speculative`` turns on speculative decoding for every slot.
    """

    model: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    ctx_size: int = _flag("ctx_size")
    parallel: int = _flag("parallel")
    kv_unified: bool | None = _flag("kv_unified")
    n_predict: int = _flag("n_predict")
    threads: int | None = None
    threads_batch: int | None = None
    n_gpu_layers: int = _flag("n_gpu_layers")  # llama-server's: -1 is auto (all that fit)
    batch_size: int = _flag("batch_size")
    ubatch_size: int = _flag("ubatch_size")
    flash_attn: bool | None = None
    api_keys: tuple[str, ...] = ()
    embeddings: bool = _flag("embeddings")
    reranking: bool = _flag("reranking")
    embd_normalize: int = _flag("embd_normalize")
    pooling: str | None = _flag("pooling")
    seed: int = _flag("seed")
    chat_format: str | None = None
    chat_template: str | None = None
    use_jinja: bool = _flag("jinja")
    reasoning_format: str = _flag("reasoning_format")
    reasoning: str = _flag("reasoning")
    reasoning_effort: str | None = None
    reasoning_budget: int = _flag("reasoning_budget")
    reasoning_budget_message: str = _flag("reasoning_budget_message")
    reasoning_preserve: bool = _flag("reasoning_preserve")
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    metrics: bool = _flag("metrics")
    slots_endpoint: bool = _flag("slots")
    slot_save_path: str | None = _flag("slot_save_path")
    props_endpoint: bool = _flag("props")
    spm_infill: bool = _flag("spm_infill")
    prefill_assistant: bool = _flag("prefill_assistant")
    skip_chat_parsing: bool = _flag("skip_chat_parsing")
    log_prompts_dir: str | None = _flag("log_prompts_dir")  #: each prompt written to a file
    ui_mcp_proxy: bool = _flag("ui_mcp_proxy")
    tools: tuple[str, ...] = ()  #: --tools: llama-server's agent tools ("all" or names)
    tools_runtime: str = ""
    mcp_servers_config: str = ""
    mcp_servers_json: str = ""
    sleep_idle_seconds: float = _flag("sleep_idle_seconds")
    #: -fit: fit -ngl, the split, the MoE weights on the CPU and -c 0 to free memory,
    #: leaving ``fit_target`` MiB free on each device (one value: all), -c at least
    #: ``fit_ctx``
    fit: bool = _flag("fit") == "on"
    fit_target: tuple[int, ...] = fit_targets(_flag("fit_target"))
    fit_ctx: int = _flag("fit_ctx")
    lora: tuple[tuple[str, float], ...] = ()
    lora_init_without_apply: bool = _flag("lora_init_without_apply")
    cache_prompt: bool = _flag("cache_prompt")
    cache_reuse: int = _flag("cache_reuse")  #: the least chunk moved by KV shifting (0: off)
    timeout: float = _flag("timeout")
    queue_timeout: float = _flag("queue_timeout")
    max_queue: int = _flag("queue_size")
    rpc: str | None = _flag("rpc")
    context_shift: bool = _flag("context_shift")
    backend_sampling: bool = _flag(
        "backend_sampling"
    )  #: -bs: requests sample in the graph unless they say
    keep: int = _flag("keep")
    warmup: bool = _flag("warmup")
    verbose: bool = _flag("verbose")
    ui: bool = _flag("ui")
    #: --ui-config(-file): the JSON value /props gives web UIs as ``ui_settings``
    ui_settings: Any = field(default_factory=dict)
    api_prefix: str = _flag("api_prefix")
    cors_origins: str = "*"
    cors_methods: str = _flag("cors_methods")
    cors_headers: str = _flag("cors_headers")
    cors_credentials: bool = _flag("cors_credentials")
    sse_ping_interval: float = _flag("sse_ping_interval")
    slot_prompt_similarity: float = _flag("slot_prompt_similarity")
    ctx_checkpoints: int = _flag("ctx_checkpoints")
    kv_unified_per_slot: int = _flag("kv_unified_per_slot")  #: a slot's most context (0: none)
    special: bool = _flag("special")  #: -sp: every special token generated shown as text
    cache_ram: int = _flag("cache_ram")  #: the prompt cache's MiB (-1: no limit, 0: off)
    cache_idle_slots: bool = _flag("cache_idle_slots")
    checkpoint_min_step: int = _flag("checkpoint_min_step")
    sampling: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    load: Mapping[str, Any] = field(default_factory=dict)
    #: :class:`~llama_cy.Speculator` keywords (speculative decoding), less the draft model
    speculative: Mapping[str, Any] | None = None
    model_draft: str | None = None  #: -md: the draft model's file
    n_gpu_layers_draft: int = _flag("n_gpu_layers_draft")
    #: extra keywords of the draft model's :meth:`~llama_cy.LlamaModel.load` (-otd, -devd)
    load_draft: Mapping[str, Any] = field(default_factory=dict)
    #: --ignore-eos: every end-of-generation token biased to -inf by default
    ignore_eos: bool = _flag("ignore_eos")
    #: -r: the stop strings of requests whose ``stop`` gives none
    reverse_prompt: tuple[str, ...] = ()
    #: --control-vector(-scaled): (file, strength) pairs, summed
    control_vectors: tuple[tuple[str, float], ...] = ()
    #: --control-vector-layer-range (None: every layer)
    control_vector_layer_range: tuple[int, int] | None = None
    mmproj: str | None = _flag("mmproj")  #: --mmproj: a multimodal projector file
    mmproj_offload: bool = _flag("mmproj_offload")
    mmproj_device: str | None = _flag("mmproj_device")  #: -mmdev: a device name, or "none"
    image_min_tokens: int = _flag("image_min_tokens")
    image_max_tokens: int = _flag("image_max_tokens")
    mtmd_batch_max_tokens: int = _flag("mtmd_batch_max_tokens")
    video_fps: float = _flag("video_fps")
    video_timestamp_interval: int = _flag("video_timestamp_interval")  #: milliseconds
    video_ffmpeg_dir: str | None = _flag("video_ffmpeg_dir")
    media_path: str | None = _flag(
        "media_path"
    )  #: --media-path: the folder file:// URLs are read under
    #: a chat handler of llama-cpp-python's vision formats (no flag: :meth:`with_chat_handler`)
    chat_handler: MtmdChatHandler | None = None
    #: the max_tokens of a /v1/completions request that gives none (no flag; None: until
    #: the end, as llama-server; llama-cpp-python's server and OpenAI's API: 16)
    completion_max_tokens: int | None = None
    #: a stream ends (with ``[DONE]`` where its route sends one) as soon as another request
    #: waits for a slot: llama-cpp-python's server's ``interrupt_requests`` (no flag)
    interrupt_requests: bool = False

    def with_chat_handler(self, handler: MtmdChatHandler) -> ServerSettings:
        """These settings serving chats as ``handler`` renders them (llama_cy.Llama's
        ``chat_handler``, for llama-cpp-python's vision formats): its projector is the
        server's, its template the chat template, and every chat's messages go through its
        ``prepare``. A projector or a chat template given as well is refused."""
        from llama_cy.chat_handlers import MtmdChatHandler

        if not isinstance(handler, MtmdChatHandler):
            raise TypeError(
                f"chat_handler must be a llama_cy chat handler, not {type(handler).__name__}"
            )
        if self.mmproj is not None and self.mmproj != handler.clip_model_path:
            raise ValueError("give --mmproj or a chat handler (its clip_model_path), not both")
        template = handler.chat_template
        if template is not None and self.chat_template is not None:
            raise ValueError(f"{type(handler).__name__} brings its chat format: no --chat-template")
        return replace(
            self,
            chat_handler=handler,
            mmproj=handler.clip_model_path,
            mmproj_offload=handler.use_gpu,
            image_min_tokens=handler.image_min_tokens,
            image_max_tokens=handler.image_max_tokens,
            chat_template=self.chat_template if template is None else template,
            use_jinja=self.use_jinja or template is not None,
        )

    @property
    def model_id(self) -> str:
        """The model's id in the API: the first alias in sorted order (llama-server keeps
        them in a sorted set), else the file name."""
        return sorted(self.aliases)[0] if self.aliases else os.path.basename(self.model)

    @property
    def n_parallel(self) -> int:
        """Slots: ``--parallel``, or llama-server's auto (4, with a unified KV cache)."""
        return 4 if self.parallel < 0 else self.parallel

    @property
    def unified(self) -> bool:
        return self.kv_unified if self.kv_unified is not None else self.parallel < 0

    def preparer(
        self,
        model: LlamaModel,
        mtmd: MtmdContext | None = None,
        media_source: MediaSource | None = None,
    ) -> Preparer:
        """How this server prepares requests: llama-server's defaults and template, and
        the projector (``mtmd``) and media places of its multimodal prompts."""
        kwargs = dict(self.chat_template_kwargs)
        if self.reasoning != "auto":
            kwargs.setdefault("enable_thinking", self.reasoning == "on")
        if not self.reasoning_preserve:
            kwargs.setdefault("preserve_reasoning", False)
        return Preparer(
            model,
            chat_format=self.chat_format,
            chat_template=self.chat_template,
            use_jinja=self.use_jinja,
            reasoning_format=self.reasoning_format,
            reasoning_budget=self.reasoning_budget,
            reasoning_budget_message=self.reasoning_budget_message,
            reasoning_effort=self.reasoning_effort,
            chat_template_kwargs=kwargs,
            profile="server",
            seed=self.seed,
            overrides=self._sampling(model),
            prefill_assistant=self.prefill_assistant,
            force_pure_content=self.skip_chat_parsing,
            mtmd=mtmd,
            media_source=media_source,
        )

    def _sampling(self, model: LlamaModel) -> dict[str, Any]:
        """The requests' default sampling: ``sampling``, with --ignore-eos's biases."""
        out = dict(self.sampling)
        if self.ignore_eos:
            out["logit_bias"] = {**dict(out.get("logit_bias") or {}), **eog_bias(model)}
        return out

    def context_kwargs(self, model: LlamaModel) -> dict[str, Any]:
        """The keywords of the server's :class:`~llama_cy.LlamaContext`."""
        common: dict[str, Any] = {
            **self.context,
            "n_ctx": self.ctx_size or model.n_ctx_train,
            "n_batch": self.batch_size,
            "n_threads": self.threads,
            "n_threads_batch": self.threads_batch,
            "flash_attn": self.flash_attn,
        }
        if self.embeddings or self.reranking:
            # Inputs are packed into one batch as separate sequences, each of which must
            # fit in one micro-batch.
            return {
                **common,
                "n_ubatch": self.batch_size,
                "n_seq_max": min(64, self.batch_size),
                "kv_unified": True,
                "embeddings": True,
                # --reranking: llama-server's ranking head on the pooled output.
                "pooling_type": "rank" if self.reranking else self.pooling,
            }
        return {**common, "n_ubatch": self.ubatch_size, "kv_unified": self.unified}


def fit(settings: ServerSettings) -> ServerSettings:
    """``settings`` after llama-server's ``-fit`` (:func:`llama_cy.fit_params`): the
    arguments left at their defaults chosen so that the model and its context leave
    ``--fit-target`` MiB free on each device. Unchanged with ``-fit off``."""
    if not settings.fit:
        return settings
    from llama_cy._fit import fit_params

    load = load_keywords(settings.load, settings.rpc)  # -fit sees --rpc's devices too
    margins = [m * 1024 * 1024 for m in settings.fit_target]
    if settings.mmproj and os.path.isfile(settings.mmproj) and settings.mmproj_offload:
        margins[0] += os.path.getsize(settings.mmproj)  # the projector goes there too
    ctx = settings.context
    out = fit_params(
        settings.model,
        n_gpu_layers=settings.n_gpu_layers,
        **{k: load[k] for k in _FIT_LOAD if load.get(k) is not None},
        n_ctx=settings.ctx_size,
        n_batch=settings.batch_size,
        n_ubatch=settings.batch_size if settings.embeddings else settings.ubatch_size,
        n_seq_max=settings.n_parallel,
        flash_attn=settings.flash_attn,
        type_k=ctx.get("type_k"),
        type_v=ctx.get("type_v"),
        offload_kqv=ctx.get("offload_kqv"),
        swa_full=ctx.get("swa_full"),
        kv_unified=settings.unified,
        embeddings=settings.embeddings or settings.reranking,
        margins=margins,
        n_ctx_min=settings.fit_ctx,
        **_fit_draft(settings),
    )
    _log.info(
        "fit (%s): -ngl %d, -c %d, %d tensor overrides",
        out["status"],
        out["n_gpu_layers"],
        out["n_ctx"],
        len(out["tensor_overrides"]),
    )
    fitted = dict(settings.load)
    if out["tensor_split"] is not None:
        fitted["tensor_split"] = out["tensor_split"]
    fitted["tensor_overrides"] = out["tensor_overrides"] or None
    return replace(settings, n_gpu_layers=out["n_gpu_layers"], ctx_size=out["n_ctx"], load=fitted)


def _fit_draft(settings: ServerSettings) -> dict[str, Any]:
    """The draft model (-md), fitted alongside as llama-server fits it."""
    if not settings.model_draft or not os.path.isfile(settings.model_draft):
        return {}
    load = load_keywords(settings.load_draft, settings.rpc)
    return {
        "draft": settings.model_draft,
        "draft_n_gpu_layers": settings.n_gpu_layers_draft,
        "draft_devices": load.get("devices"),
        "draft_tensor_overrides": load.get("tensor_overrides"),
    }


#: The load keywords that fit_params takes (those that change what goes where).
_FIT_LOAD = (
    "split_mode",
    "main_gpu",
    "tensor_split",
    "tensor_overrides",
    "devices",
    "load_mode",
    "no_host",
)


def load_model(
    settings: ServerSettings, progress: Callable[[float], bool | None] | None = None
) -> LlamaModel:
    """The model the server runs (with its MTP layers for --spec-type draft-mtp, as
    common_model_params_to_llama sets load_mtp)."""
    load = load_keywords(settings.load, settings.rpc)
    return LlamaModel.load(
        settings.model,
        n_gpu_layers=settings.n_gpu_layers,
        rpc_servers=_rpc_unless_devices(settings, load),
        progress=progress,
        load_mtp=uses_mtp(settings.speculative or {}),
        **load,
    )


def load_model_draft(settings: ServerSettings) -> LlamaModel:
    """The draft model (-md), placed by -ngld, -devd and -otd."""
    assert settings.model_draft is not None
    load = load_keywords(settings.load_draft, settings.rpc)
    return LlamaModel.load(
        settings.model_draft,
        n_gpu_layers=settings.n_gpu_layers_draft,
        rpc_servers=_rpc_unless_devices(settings, load),
        **load,
    )


def _rpc_unless_devices(settings: ServerSettings, load: Mapping[str, Any]) -> str | None:
    """--rpc's servers for the load to add to the local GPUs, unless -dev named the
    devices: then they are those alone (an RPC device among them by its name)."""
    return settings.rpc if load.get("devices") is None else None


def mmproj_device(settings: ServerSettings) -> dict[str, Any]:
    """``MtmdContext``'s ``use_gpu``/``device`` from --mmproj-offload and -mmdev (one
    device, or none: the CPU), as llama-server reads them."""
    name = settings.mmproj_device
    if name is None:
        return {"use_gpu": settings.mmproj_offload}
    if name == "none":
        return {"use_gpu": False}
    (device,) = load_keywords({"devices": [name]}, settings.rpc)["devices"]
    return {"use_gpu": True, "device": device}


def load_keywords(load: Mapping[str, Any], rpc: str | None = None) -> dict[str, Any]:
    """``load`` with device names (-dev) turned into :class:`~llama_cy.Device` objects.
    ``rpc`` (--rpc) registers its servers' devices first, as llama-server does while it
    reads its flags, so that their names (``RPC0``...) resolve."""
    if rpc:
        from llama_cy._rpc import rpc_devices

        rpc_devices([s.strip() for s in rpc.split(",") if s.strip()])
    out = dict(load)
    names = out.get("devices")
    if names is not None and not all(isinstance(d, Device) for d in names):
        known = {d.name: d for d in devices()}
        missing = [n for n in names if n not in known]
        if missing:
            raise ValueError(
                f"unknown device(s) {', '.join(missing)}; available: {', '.join(known)}"
            )
        out["devices"] = [known[n] for n in names]
    return out
