"""The server's state over one model: what it loaded (the engine or the embedder, the
adapters, the draft model, the projector, the tools), its lifecycle (start, close, the
sleep of ``--sleep-idle-seconds``), and what it shows of itself (``/props``, the
counters behind ``/metrics``, the model card).

This is the bottom of the server package: the request readers (:mod:`.inputs`,
:mod:`.requests`), the response streamer (:mod:`.respond`), the route modules
(:mod:`.routes`) and the app (:mod:`.app`) are built on it, never the other way round.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from llama_cy._adapter import LoraAdapter, load_control_vectors
from llama_cy._backend import LLAMA_CPP_BUILD
from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy._mtmd import MtmdContext
from llama_cy._server_tools import ServerTools
from llama_cy.embedding import Embedder
from llama_cy.media import MediaSource
from llama_cy.sampling import eog_bias
from llama_cy.sampling_settings import SAMPLING_SETTINGS
from llama_cy.server.chat_renders import ChatRenders
from llama_cy.server.engine import Engine
from llama_cy.server.engine_settings import EngineSettings
from llama_cy.server.modalities import architecture, media_marker
from llama_cy.server.rate_window import RateWindow
from llama_cy.server.schema import ApiError
from llama_cy.server.settings import (
    ServerSettings,
    load_model,
    load_model_draft,
    mmproj_device,
)
from llama_cy.server.stream_sessions import StreamSessions

__all__ = ["Endpoint", "Front", "RouteSpec", "Server", "start_tools"]

#: llama.h's enum llama_vocab_type, which /models' ``meta.vocab_type`` gives as a number
_VOCAB_TYPE_IDS = {
    n: i for i, n in enumerate(("none", "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2", "test"))
}

_log = logging.getLogger("llama_cy.server")

Endpoint = Callable[[Request], Awaitable[Response]]
#: (path, endpoint, methods, public: no API key needed)
RouteSpec = tuple[str, Endpoint, list[str], bool]


class Front(Protocol):
    """What the routes a router serves itself (``/tools``, ``/cors-proxy``) need of a
    server: a :class:`Server`, or a router's front."""

    settings: ServerSettings
    tools: ServerTools | None


class Server:
    """The routes over one model: an :class:`Engine` with a slot per ``--parallel``, or
    (with ``--embeddings``) an :class:`~llama_cy.embedding.Embedder`."""

    def __init__(
        self, model: LlamaModel, settings: ServerSettings, *, owns_model: bool = False
    ) -> None:
        self.model = model
        self.settings = settings
        self.model_id = settings.model_id
        #: whether the server closes (and, after sleeping, loads again) the model
        self.owns_model = owns_model
        self.engine: Engine | None = None
        self.embedder: Embedder | None = None
        self.draft_model: LlamaModel | None = None  #: -md, loaded with the engine
        self.mtmd: MtmdContext | None = None  #: --mmproj, loaded with the engine
        self.embed_lock = threading.Lock()
        self.lora_scales = [
            0.0 if settings.lora_init_without_apply else scale for _, scale in settings.lora
        ]
        self.started = int(time.time())
        #: llama-server's system_fingerprint: the llama.cpp build
        self.fingerprint = f"{LLAMA_CPP_BUILD}-llama_cy"
        # --sleep-idle-seconds: requests in flight, the last one's end, the sleep state,
        # and the counters of the engines that slept (so /metrics keeps counting).
        self.active = 0
        self.last_active = time.monotonic()
        self.sleeping = False
        #: called with "sleeping" and "ready" as the server falls asleep and wakes (a
        #: router's child tells its router so)
        self.on_state: Callable[[str], object] | None = None
        self.metrics_base: dict[str, float] = {}
        self.frozen_window: RateWindow | None = None
        self._wake_lock = asyncio.Lock()
        self._build()
        try:
            #: --tools and MCP servers: started once, kept while the server sleeps
            self.tools = start_tools(settings)
        except BaseException:
            self._teardown()
            raise
        self.model_card = self._model_card()
        #: /models' architecture: the projector's input modalities (kept while asleep)
        self.architecture = architecture(
            image=self.mtmd is not None and self.mtmd.vision,
            audio=self.mtmd is not None and self.mtmd.audio,
            video=self.mtmd is not None and self.mtmd.video,
        )
        #: GET /props as last shown (what a sleeping server answers)
        self.props_cache: dict[str, Any] = {}
        #: resumable streams by conversation id (X-Conversation-Id), kept while asleep
        self.streams = StreamSessions()
        #: chat renders on native threads, while the app's lifespan runs (None: on
        #: Python worker threads)
        self.chat_renders: ChatRenders | None = None

    def _build(self) -> None:
        """The preparer, the adapters and the engine (or embedder) over ``self.model``."""
        model, settings = self.model, self.settings
        context = settings.context_kwargs(model)
        media_source = None
        if settings.mmproj is not None:
            if settings.embeddings or settings.reranking:
                raise ValueError("--mmproj cannot be combined with --embeddings or --rerank")
            if settings.speculative is not None:
                # As llama-server: a draft cannot see the image the target saw.
                raise ValueError("--mmproj cannot be combined with speculative decoding")
            self.mtmd = MtmdContext(
                model,
                settings.mmproj,
                n_threads=settings.threads_batch or settings.threads,
                **mmproj_device(settings),
                image_min_tokens=settings.image_min_tokens,
                image_max_tokens=settings.image_max_tokens,
                batch_max_tokens=settings.mtmd_batch_max_tokens,
                video_fps=settings.video_fps,
                video_timestamp_interval_ms=settings.video_timestamp_interval,
                video_ffmpeg_dir=settings.video_ffmpeg_dir,
                media_marker=media_marker(),
            )
            media_source = MediaSource(media_path=settings.media_path)
        try:
            self.preparer = settings.preparer(model, self.mtmd, media_source)
        except BaseException:  # a bad chat template, found after the projector loaded
            if self.mtmd is not None:
                self.mtmd.close()
                self.mtmd = None
            raise
        #: --lora adapters, and the scales a request without ``lora`` runs with
        self.loras = [LoraAdapter(model, path) for path, _ in settings.lora]
        if settings.embeddings or settings.reranking:
            ctx = LlamaContext(model, **context)
            self._control_vectors(ctx)
            self.embedder = Embedder(ctx, LlamaBatch(ctx.n_batch))
        else:
            speculative = None
            if settings.speculative is not None:
                speculative = dict(settings.speculative)
                if settings.model_draft:
                    self.draft_model = load_model_draft(settings)
                    speculative["draft_model"] = self.draft_model
            try:
                self.engine = self._engine(speculative, context)
                self._control_vectors(self.engine.ctx)
            except BaseException:
                if self.draft_model is not None:
                    self.draft_model.close()
                    self.draft_model = None
                raise

    def _control_vectors(self, ctx: LlamaContext) -> None:
        """--control-vector(-scaled) on the server's context, as llama-server sets them:
        summed, over --control-vector-layer-range (a bound <= 0: the first or last
        layer)."""
        settings = self.settings
        if not settings.control_vectors:
            return
        data = load_control_vectors(settings.control_vectors)
        start, end = settings.control_vector_layer_range or (-1, -1)
        ctx.set_control_vector(
            data,
            il_start=start if start > 0 else 1,
            il_end=end if end > 0 else self.model.n_layer,
        )

    def _engine(self, speculative: dict[str, Any] | None, context: dict[str, Any]) -> Engine:
        model, settings = self.model, self.settings
        return Engine(
            model,
            slots=settings.n_parallel,
            settings=EngineSettings.of(settings),
            # --keep reaches each job (requests.with_generation_fields), a request's n_keep too
            loras=self.loras,
            speculative=speculative,
            **context,
        )

    def _model_card(self) -> dict[str, Any]:
        """What /models shows of the model (kept while the server sleeps)."""
        m = self.model
        return {
            "vocab_type": _VOCAB_TYPE_IDS.get(m.vocab_type, 0),
            "n_vocab": m.n_vocab,
            "n_ctx": self.n_ctx,
            "n_ctx_train": m.n_ctx_train,
            "n_embd": m.n_embd,
            "n_params": m.n_params,
            "size": m.size,
            "ftype": m.ftype,
        }

    def start(self) -> None:
        if self.engine is not None:
            self.engine.start()

    def close(self) -> None:
        """Stop the engine and free the contexts (and the model, if the server owns it)."""
        self._teardown()
        if self.tools is not None:
            self.tools.close()  # ends the MCP servers' processes
        if self.owns_model:
            self.model.close()

    def _teardown(self) -> None:
        if self.engine is not None:
            self.engine.stop()
        if self.embedder is not None:
            with self.embed_lock:
                self.embedder.batch.close()
                self.embedder.ctx.close()
        for adapter in self.loras:
            adapter.close()
        if self.draft_model is not None:
            self.draft_model.close()
            self.draft_model = None
        if self.mtmd is not None:
            self.mtmd.close()
            self.mtmd = None

    # ---- sleeping (--sleep-idle-seconds) ---------------------------------------------

    def sleep(self) -> None:
        """Free the engine, the contexts and the model (llama-server's sleep): /health,
        /props, /models and /metrics answer from what was kept; anything else wakes the
        server. Any thread, while nothing runs."""
        if self.sleeping:
            return
        self.props_cache = self.props()
        self.metrics_base = self.counters()
        self.frozen_window = self.engine.window if self.engine is not None else None
        self.sleeping = True
        if self.on_state is not None:
            self.on_state("sleeping")
        self._teardown()
        self.engine = None
        self.embedder = None
        if self.owns_model:
            self.model.close()
        _log.info("sleeping: the model and its contexts are freed until the next request")

    async def wake(self) -> None:
        """Load what :meth:`sleep` freed, once, however many requests arrive together."""
        async with self._wake_lock:
            if not self.sleeping:
                return
            _log.info("waking up: loading the model again")
            await asyncio.to_thread(self._reload)

    @property
    def waking(self) -> bool:
        """Whether a wake (or a fall asleep) holds the lock now."""
        return self._wake_lock.locked()

    def _reload(self) -> None:
        if self.owns_model:
            self.model = load_model(self.settings)
        self._build()
        self.start()
        self.frozen_window = None
        self.sleeping = False
        if self.on_state is not None:
            self.on_state("ready")

    async def watch_idle(self) -> None:
        """Put the server to sleep after ``--sleep-idle-seconds`` without work."""
        idle = self.settings.sleep_idle_seconds
        while True:
            await asyncio.sleep(min(0.25, idle / 4))
            engine = self.engine
            busy = self.active > 0 or (
                engine is not None and (engine.n_processing > 0 or engine.n_waiting > 0)
            )
            if busy or self.sleeping:
                continue
            if time.monotonic() - self.last_active >= idle:
                async with self._wake_lock:
                    if self.active == 0:  # no request came in while the lock was taken
                        await asyncio.to_thread(self.sleep)

    @property
    def n_ctx(self) -> int:
        """A request's context: a slot's, or the embedding context's."""
        if self.engine is not None:
            return self.engine.n_ctx_slot
        assert self.embedder is not None
        return self.embedder.ctx.n_ctx

    def generating(self) -> Engine:
        if self.engine is None:
            raise ApiError(
                501,
                "this server does not support completions: start it without --embeddings",
                "not_supported_error",
            )
        return self.engine

    @functools.cached_property
    def eog_bias(self) -> dict[int, float]:
        """A request's ``ignore_eos``: the model's end-of-generation tokens at -inf."""
        return eog_bias(self.model)

    async def embed(self, inputs: list[list[int]], normalize: bool) -> list[Any]:
        """Embed in a worker thread, one request at a time."""
        embedder = self.embedder
        assert embedder is not None

        def work() -> list[Any]:
            with self.embed_lock:
                return embedder.embed(inputs, normalize)

        return await asyncio.to_thread(work)

    # ---- what the server shows of itself ---------------------------------------------

    def props(self) -> dict[str, Any]:
        """llama-server's GET /props."""
        settings = self.settings
        sampling = self.preparer.sampling("server")
        params: dict[str, Any] = {
            "n_predict": settings.n_predict,
            "seed": settings.seed,
            "backend_sampling": settings.backend_sampling,
        }
        for s in SAMPLING_SETTINGS:
            value = getattr(sampling, s.name)
            params[s.server_name] = list(value) if isinstance(value, tuple) else value
        template = self.preparer.template
        vocab = self.model
        engine = self.engine
        props: dict[str, Any] = {
            "default_generation_settings": {"n_ctx": self.n_ctx, "params": params},
            "total_slots": len(engine.slots) if engine is not None else 1,
            "model_aliases": sorted(settings.aliases),
            "model_tags": sorted(settings.tags),
            "model_alias": self.model_id,
            "model_ftype": self.model_card["ftype"],
            "model_path": settings.model,
            "chat_template": template.source,
            "chat_template_caps": template.caps,
            "bos_token": vocab.token_text(vocab.token_bos) if vocab.token_bos >= 0 else "",
            "eos_token": vocab.token_text(vocab.token_eos) if vocab.token_eos >= 0 else "",
            "modalities": self.modalities(),
            "media_marker": media_marker(),
            "build_info": self.fingerprint,
            "endpoint_slots": settings.slots_endpoint,
            "endpoint_props": settings.props_endpoint,
            "endpoint_metrics": settings.metrics,
            "ui": settings.ui,
            "ui_settings": settings.ui_settings,
            "cors_proxy_enabled": settings.ui_mcp_proxy,
        }
        if settings.use_jinja and (tool_use := template.tool_use_source):
            props["chat_template_tool_use"] = tool_use
        return props

    def modalities(self) -> dict[str, bool]:
        """What the server takes besides text (its projector's inputs)."""
        mtmd = self.mtmd
        return {
            "vision": bool(mtmd and mtmd.vision),
            "video": bool(mtmd and mtmd.video),
            "audio": bool(mtmd and mtmd.audio),
        }

    def counters(self) -> dict[str, float]:
        """The counters so far: those of the engines that slept, plus the running one's
        (the speculative ones stay 0 without speculative decoding)."""
        now: dict[str, float] = {
            "prompt_tokens_total": 0.0,
            "prompt_tokens_cached_total": 0.0,
            "prompt_seconds_total": 0.0,
            "tokens_predicted_total": 0.0,
            "tokens_predicted_seconds_total": 0.0,
            "n_decode_total": 0.0,
            "n_tokens_max": 0.0,
            "spec_decode_num_draft_tokens_total": 0.0,
            "spec_decode_num_accepted_tokens_total": 0.0,
            "spec_decode_num_drafts_total": 0.0,
            "n_busy_slots": 0.0,  # the sum behind n_busy_slots_per_decode
        }
        e = self.engine
        emb = self.embedder
        if e is not None:
            now.update(
                prompt_tokens_total=e.n_prompt_tokens,
                prompt_tokens_cached_total=e.n_prompt_cached,
                prompt_seconds_total=e.t_prompt_s,
                tokens_predicted_total=e.n_predicted,
                tokens_predicted_seconds_total=e.t_predicted_s,
                n_decode_total=e.n_decode,
                n_tokens_max=e.n_tokens_max,
                spec_decode_num_draft_tokens_total=e.n_draft_tokens,
                spec_decode_num_accepted_tokens_total=e.n_draft_accepted,
                spec_decode_num_drafts_total=e.n_draft_steps,
                n_busy_slots=e.n_busy_slots,
            )
        elif emb is not None:  # an embedding server: its decodes are all prompt
            now.update(
                prompt_tokens_total=emb.n_tokens,
                prompt_seconds_total=emb.t_s,
                n_decode_total=emb.n_decode,
                n_busy_slots=emb.n_decode,
            )
        base = self.metrics_base
        out = {k: float(v) + base.get(k, 0.0) for k, v in now.items()}
        out["n_tokens_max"] = max(float(now["n_tokens_max"]), base.get("n_tokens_max", 0.0))
        return out


def start_tools(settings: ServerSettings) -> ServerTools | None:
    """The tools and MCP servers the settings ask for (MCP servers spawned and listed
    now, as at llama-server's start); None when none are asked for. ToolsError where
    llama-server would not start."""
    if not (settings.tools or settings.mcp_servers_config or settings.mcp_servers_json):
        return None
    return ServerTools(
        settings.tools,
        settings.tools_runtime,
        settings.mcp_servers_config,
        settings.mcp_servers_json,
    )
