"""The server's wiring: one :class:`Server` over a model, its routes, auth and errors.

Requests are checked (:mod:`.schema`), prepared by the one
:class:`~llama_cy.prepare.Preparer` in a worker thread (chat rendering, tokenization and
grammar compilation never block the event loop), run by the
:class:`~llama_cy.server.engine.Engine` on its own context, and their chunks sent as they
come (server-sent events when ``stream`` is true) in the shape the route chooses. A
client that goes away cancels its request at the engine's next step, streaming or not.

The routes live by job: :mod:`.openai` (OpenAI's API), :mod:`.native` (llama-server's
own endpoints) and :mod:`.metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hmac
import json
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llama_cy._adapter import LoraAdapter
from llama_cy._backend import LLAMA_CPP_BUILD
from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy._mtmd import MtmdContext
from llama_cy.completion import CompletionChunk, join_chunks
from llama_cy.embedding import Embedder
from llama_cy.errors import ContextOverflowError, KVCacheFullError, LlamaError
from llama_cy.generation import Job
from llama_cy.media import MediaSource
from llama_cy.responses import Shaper
from llama_cy.server import (
    anthropic,
    embeddings,
    metrics,
    native,
    openai_api,
    proxy,
    responses_api,
    schema,
    tools,
    ui,
    vertex,
)
from llama_cy.server.engine import Engine, QueueFullError, RateWindow, Task
from llama_cy.server.inputs import lora_request
from llama_cy.server.native import NativeShaper
from llama_cy.server.schema import ApiError
from llama_cy.server.settings import ServerSettings, load_model
from llama_cy.settings import SAMPLING_SETTINGS, server_names

__all__ = ["Server", "create_app"]

_log = logging.getLogger("llama_cy.server")

Endpoint = Callable[[Request], Awaitable[Response]]
#: (path, endpoint, methods, public: no API key needed)
RouteSpec = tuple[str, Endpoint, list[str], bool]

# Request fields that are sampler settings, by any of their names -> the Python name.
_SAMPLING_FIELDS: dict[str, str] = {
    **{s.name: s.name for s in SAMPLING_SETTINGS},
    **server_names(),
    "seed": "seed",
    "grammar": "grammar",
    "logit_bias": "logit_bias",
}


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
        self.metrics_base: dict[str, float] = {}
        self.frozen_window: RateWindow | None = None
        self._wake_lock = asyncio.Lock()
        self._build()
        try:
            #: --tools and MCP servers: started once, kept while the server sleeps
            self.tools = tools.start(settings)
        except BaseException:
            self._teardown()
            raise
        self.model_card = self._model_card()
        #: GET /props as last shown (what a sleeping server answers)
        self.props_cache: dict[str, Any] = {}

    def _build(self) -> None:
        """The preparer, the adapters and the engine (or embedder) over ``self.model``."""
        model, settings = self.model, self.settings
        self.preparer = settings.preparer(model)
        context = settings.context_kwargs(model)
        if settings.mmproj is not None:
            if settings.embeddings or settings.reranking:
                raise ValueError("--mmproj cannot be combined with --embeddings or --rerank")
            if settings.speculative is not None:
                # As llama-server: a draft cannot see the image the target saw.
                raise ValueError("--mmproj cannot be combined with speculative decoding")
            self.mtmd = MtmdContext(
                model,
                settings.mmproj,
                use_gpu=settings.mmproj_offload,
                n_threads=settings.threads_batch or settings.threads,
                image_min_tokens=settings.image_min_tokens,
                image_max_tokens=settings.image_max_tokens,
            )
            self.preparer.mtmd = self.mtmd
            self.preparer.media_source = MediaSource(media_path=settings.media_path)
        #: --lora adapters, and the scales a request without ``lora`` runs with
        self.loras = [LoraAdapter(model, path) for path, _ in settings.lora]
        if settings.embeddings or settings.reranking:
            ctx = LlamaContext(model, **context)
            self.embedder = Embedder(ctx, LlamaBatch(ctx.n_batch))
        else:
            speculative = None
            if settings.speculative is not None:
                speculative = dict(settings.speculative)
                if settings.model_draft:
                    self.draft_model = LlamaModel.load(
                        settings.model_draft, n_gpu_layers=settings.n_gpu_layers_draft
                    )
                    speculative["draft_model"] = self.draft_model
            try:
                self.engine = self._engine(speculative, context)
            except BaseException:
                if self.draft_model is not None:
                    self.draft_model.close()
                    self.draft_model = None
                raise

    def _engine(self, speculative: dict[str, Any] | None, context: dict[str, Any]) -> Engine:
        model, settings = self.model, self.settings
        return Engine(
            model,
            slots=settings.n_parallel,
            n_predict=settings.n_predict,
            max_queue=settings.max_queue,
            queue_timeout=settings.queue_timeout,
            context_shift=settings.context_shift,
            # llama-server keeps --keep tokens after BOS.
            n_keep=settings.keep + int(model.add_bos),
            slot_prompt_similarity=settings.slot_prompt_similarity,
            warmup=settings.warmup,
            loras=self.loras,
            speculative=speculative,
            backend_sampling=settings.backend_sampling,
            **context,
        )

    def _model_card(self) -> dict[str, Any]:
        """What /models shows of the model (kept while the server sleeps)."""
        m = self.model
        return {
            "n_vocab": m.n_vocab,
            "n_ctx_train": m.n_ctx_train,
            "n_embd": m.n_embd,
            "n_params": m.n_params,
            "size": m.size,
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
        from llama_cy.server import metrics

        self.props_cache = native.props_dict(self)
        self.metrics_base = metrics.counters(self)
        self.frozen_window = self.engine.window if self.engine is not None else None
        self.sleeping = True
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

    def _reload(self) -> None:
        if self.owns_model:
            self.model = load_model(self.settings)
        self._build()
        self.start()
        self.frozen_window = None
        self.sleeping = False

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

    # ---- plumbing --------------------------------------------------------------------

    def routes(self) -> list[Route]:
        table = (
            openai_api.routes(self)
            + native.routes(self)
            + embeddings.routes(self)
            + anthropic.routes(self)
            + responses_api.routes(self)
            + proxy.routes(self)
            + tools.routes(self)
            + metrics.routes(self)
        )
        prefix = self.settings.api_prefix
        return [Route(prefix + p, self._wrap(fn, public), methods=m) for p, fn, m, public in table]

    def _wrap(self, fn: Endpoint, public: bool) -> Endpoint:
        """Authorization, waking a sleeping server, and every error as an OpenAI-shaped
        response."""

        async def endpoint(request: Request) -> Response:
            try:
                if not public:
                    self._authorize(request)
                if _keeps_sleeping(request, self.settings.api_prefix):
                    return await fn(request)
                self.active += 1
                try:
                    if self.sleeping or self._wake_lock.locked():  # asleep, or falling so
                        await self.wake()
                    return await fn(request)
                finally:
                    self.active -= 1
                    self.last_active = time.monotonic()
            except ApiError as exc:
                return exc.response()
            except ContextOverflowError as exc:
                return ApiError(
                    400,
                    f"the request exceeds the available context size: the prompt has "
                    f"{exc.n_tokens} tokens, a slot's context holds {exc.n_ctx}",
                    type="exceed_context_size_error",
                    n_prompt_tokens=exc.n_tokens,
                    n_ctx=exc.n_ctx,
                ).response()
            except KVCacheFullError as exc:
                # The slots share a KV cache that filled up while they generated.
                return ApiError(
                    500, f"the context size has been exceeded: {exc}", "server_error"
                ).response()
            except QueueFullError as exc:
                return ApiError(
                    503,
                    f"the server is busy: {exc}",
                    "unavailable_error",
                    headers={"Retry-After": "1"},
                ).response()
            except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
                # The request's own values (GrammarError, InvalidTokenError and llama_cy's
                # other argument errors are ValueErrors too).
                return ApiError(400, str(exc) or type(exc).__name__).response()
            except Exception as exc:  # ours, not the client's: still JSON, still alive
                _log.exception("request to %s failed", request.url.path)
                return ApiError(500, f"{type(exc).__name__}: {exc}", "server_error").response()

        return endpoint

    def _authorize(self, request: Request) -> None:
        keys = self.settings.api_keys
        if not keys:
            return
        given = request.headers.get("authorization", "")
        token = (
            given[7:]
            if given.lower().startswith("bearer ")
            else request.headers.get("x-api-key", "")
        )
        # Every key is compared, so the time taken says nothing about which one matched.
        matches = [hmac.compare_digest(token.encode(), k.encode()) for k in keys]
        if not any(matches):
            raise ApiError(401, "Invalid API Key", "authentication_error")

    async def body(
        self, request: Request, fields: Mapping[str, tuple[type, ...]], *required: str
    ) -> dict[str, Any]:
        """The request's checked fields. The ``model`` field names any
        model: one is served (as llama-server, which answers whatever name is asked)."""
        raw = schema.parse(await request.body())
        if isinstance(raw, dict):
            schema.refuse_unsupported(raw, fields)
        body = schema.check(raw, fields, required)
        stop = body.get("stop")
        if isinstance(stop, list) and not all(isinstance(x, str) for x in stop):
            raise ApiError(400, "'stop' must be a string or an array of strings", param="stop")
        return body

    def lora_for(self, value: Any) -> tuple[float, ...]:
        """The adapter scales of a request: its ``lora`` list (``[{"id", "scale"}]``,
        unnamed adapters at 0, as llama-server), else the server's current scales."""
        if value is None:
            return tuple(self.lora_scales)
        return tuple(lora_request(value, len(self.loras), base=[0.0] * len(self.loras)))

    def verbose(self, body: Mapping[str, Any]) -> bool:
        """llama-server's ``__verbose`` extra: with ``-v``, or a request's ``verbose``."""
        return self.settings.verbose or bool(body.get("verbose"))

    def generating(self) -> Engine:
        if self.engine is None:
            raise ApiError(
                501,
                "this server does not support completions: start it without --embeddings",
                "not_supported_error",
            )
        return self.engine

    def sampling(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The request's sampler settings by their Python names (the preparer fills in
        the server's defaults for the rest); ``ignore_eos`` biases every end-of-generation
        token to never, as llama-server does."""
        out: dict[str, Any] = {}
        for key, value in body.items():
            name = _SAMPLING_FIELDS.get(key)
            if name is not None:
                out[name] = value
        if body.get("ignore_eos"):
            bias = dict(out.get("logit_bias") or self.settings.sampling.get("logit_bias") or {})
            bias.update(dict.fromkeys(self.eog_tokens, float("-inf")))
            out["logit_bias"] = bias
        return out

    @functools.cached_property
    def eog_tokens(self) -> list[int]:
        """The model's end-of-generation tokens."""
        m = self.model
        return [t for t in range(m.n_vocab) if m.is_eog(t)]

    async def run(
        self,
        request: Request,
        jobs: Sequence[tuple[Job, Shaper]],
        body: Mapping[str, Any],
        combine: Callable[[list[dict[str, Any]]], Any] | None = None,
        done_marker: bool = True,
    ) -> Response:
        """Generate ``jobs`` in the engine, each shaped by its shaper: one response (the
        one job's dict, or ``combine`` of them all), or server-sent events of them all
        as they come."""
        engine = self.generating()
        # llama-server's stream extras, asked per request
        per_token = bool(body.get("timings_per_token"))
        progress = bool(body.get("return_progress")) and bool(body.get("stream"))
        # llama-server's per-request backend_sampling (its default: -bs)
        backend = body.get("backend_sampling")
        if per_token or progress or backend is not None:
            jobs = [
                (
                    dataclasses.replace(
                        job,
                        timings_per_token=per_token,
                        progress=progress,
                        backend_sampling=backend,
                    ),
                    sh,
                )
                for job, sh in jobs
            ]
        tasks: list[Task] = []
        try:
            for job, _ in jobs:
                samplers = await asyncio.to_thread(engine.samplers, job)
                tasks.append(
                    engine.submit(
                        job,
                        samplers=samplers,
                        cache_prompt=body.get("cache_prompt", self.settings.cache_prompt),
                        id_slot=body.get("id_slot", -1),
                        lora=self.lora_for(body.get("lora")),
                    )
                )
        except BaseException:
            for task in tasks:
                engine.cancel(task)
            raise
        shapers = [shaper for _, shaper in jobs]
        if body.get("stream"):
            return StreamingResponse(
                self._events(
                    request,
                    engine,
                    tasks,
                    shapers,
                    done_marker,
                    body.get("sse_ping_interval", self.settings.sse_ping_interval),
                ),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        watchers = [asyncio.create_task(_watch_disconnect(request, engine, t)) for t in tasks]
        try:
            done = await asyncio.gather(*(_collect(engine, t) for t in tasks))
        except _GoneError:  # nobody reads this answer; 499 is nginx's "client closed"
            return Response(status_code=499)
        finally:
            for w in watchers:
                w.cancel()
            for task in tasks:
                engine.cancel(task)
        out = []
        for (job, shaper), task, chunks in zip(jobs, tasks, done, strict=True):
            if isinstance(shaper, NativeShaper):
                shaper.slot = task.slot
            whole = join_chunks(chunks)
            shaped = shaper.whole(whole)
            if self.verbose(body) and not isinstance(shaper, NativeShaper):
                # llama-server's debugging extra: the request as /completion shows it.
                native_view = NativeShaper(self, job, body, index=shaper.index)
                native_view.slot = task.slot
                shaped["__verbose"] = native_view.whole(whole)
            out.append(shaped)
        if combine is not None:
            return JSONResponse(combine(out))
        return JSONResponse(out[0] if len(out) == 1 else out)

    async def _events(
        self,
        request: Request,
        engine: Engine,
        tasks: list[Task],
        shapers: list[Shaper],
        done_marker: bool,
        ping: float,
    ) -> AsyncIterator[str]:
        watchers = [asyncio.create_task(_watch_disconnect(request, engine, t)) for t in tasks]
        try:
            async for i, chunk in _merge(engine, tasks, ping if ping > 0 else None):
                if chunk is None:  # quiet for a while: some clients time out without this
                    yield ":\n\n"
                    continue
                shaper = shapers[i]
                if isinstance(shaper, NativeShaper):
                    shaper.slot = tasks[i].slot
                named = shaper.sse_event_names
                for d in shaper.chunk(chunk):
                    yield sse(d, d["type"] if named else None)
            if done_marker:
                yield "data: [DONE]\n\n"
        except _GoneError:
            return
        except Exception as exc:  # the status line is sent: the error goes in the stream
            status = 400 if isinstance(exc, ValueError) else 500
            kind = "invalid_request_error" if status == 400 else "server_error"
            yield sse(ApiError(status, str(exc), kind).body())
        finally:
            for w in watchers:
                w.cancel()
            for task in tasks:
                engine.cancel(task)

    async def embed(self, inputs: list[list[int]], normalize: bool) -> list[Any]:
        """Embed in a worker thread, one request at a time."""
        embedder = self.embedder
        assert embedder is not None

        def work() -> list[Any]:
            with self.embed_lock:
                return embedder.embed(inputs, normalize)

        return await asyncio.to_thread(work)


class _GoneError(LlamaError):
    """The client went away; its request was cancelled."""


async def _watch_disconnect(request: Request, engine: Engine, task: Task) -> None:
    """Cancel ``task`` as soon as the client disconnects."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            engine.cancel(task)
            task.queue.put_nowait(_GoneError("the client disconnected"))
            return


async def _collect(engine: Engine, task: Task) -> list[CompletionChunk]:
    return [c async for c in engine.results(task)]


async def _merge(
    engine: Engine, tasks: list[Task], ping: float | None
) -> AsyncIterator[tuple[int, CompletionChunk | None]]:
    """The chunks of several tasks as they come, with the task's index; ``(-1, None)``
    after ``ping`` seconds without any."""
    streams = {i: engine.results(t) for i, t in enumerate(tasks)}
    pending: dict[asyncio.Task[CompletionChunk | None], int] = {}
    try:
        for i, it in streams.items():
            pending[asyncio.create_task(_next(it))] = i
        while pending:
            done, _ = await asyncio.wait(pending, timeout=ping, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                yield -1, None
                continue
            for fut in sorted(done, key=lambda f: pending[f]):
                i = pending.pop(fut)
                chunk = fut.result()
                if chunk is None:  # that task has ended
                    continue
                yield i, chunk
                pending[asyncio.create_task(_next(streams[i]))] = i
    finally:
        for fut in pending:
            fut.cancel()
        for it in streams.values():
            await it.aclose()


async def _next(it: AsyncIterator[CompletionChunk]) -> CompletionChunk | None:
    try:
        return await anext(it)
    except StopAsyncIteration:
        return None


def sse(obj: Any, event: str | None = None) -> str:
    """One server-sent event with ``obj`` as JSON (and a name, as Anthropic's events)."""
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {data}\n\n" if event else f"data: {data}\n\n"


def create_app(
    model: LlamaModel,
    settings: ServerSettings,
    *,
    static_path: str | None = None,
    owns_model: bool = False,
) -> Starlette:
    """The ASGI app over ``model`` (its engine runs while the app's lifespan does, on a
    context of its own). The model stays the caller's unless ``owns_model``: then the
    server closes it, and ``--sleep-idle-seconds`` frees and reloads it. ``static_path``
    is llama-server's ``--path``: a folder served at the root instead of the chat
    page."""
    server = Server(model, settings, owns_model=owns_model)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.start()
        watcher = None
        if settings.sleep_idle_seconds > 0:
            watcher = asyncio.create_task(server.watch_idle())
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
            await asyncio.to_thread(server.close)

    routes: list[BaseRoute] = list(server.routes())
    prefix = settings.api_prefix
    if settings.ui and static_path:
        routes.append(Mount(prefix or "/", StaticFiles(directory=static_path, html=True)))
    elif settings.ui:
        routes.append(Route(prefix + "/", ui.page, methods=["GET"]))
    app = Starlette(routes=routes, lifespan=lifespan)
    if vertex.enabled():
        posts = [r.path for r in routes if isinstance(r, Route) and "POST" in (r.methods or ())]
        predict = vertex.predict_endpoint(app, posts)
        route = os.environ.get("AIP_PREDICT_ROUTE", "/predict")
        app.router.routes.append(Route(route, server._wrap(predict, False), methods=["POST"]))
        health_route = os.environ.get("AIP_HEALTH_ROUTE")
        if health_route:
            health = next(
                r for r in routes if isinstance(r, Route) and r.path == prefix + "/health"
            )
            app.router.routes.append(Route(health_route, health.endpoint, methods=["GET"]))
    app.add_middleware(Cors, settings=settings)
    app.state.server = server
    return app


#: What llama-server answers while asleep, without waking (GET only).
_SLEEP_SAFE = frozenset(["/health", "/v1/health", "/props", "/models", "/v1/models", "/metrics"])


def _keeps_sleeping(request: Request, prefix: str) -> bool:
    path = request.url.path.removeprefix(prefix)
    return request.method == "GET" and path in _SLEEP_SAFE


class Cors:
    """llama-server's CORS: ``--cors-origins`` (``*`` with credentials echoes the
    request's Origin; ``localhost`` echoes only local origins), and OPTIONS answered
    before authorization, since browsers send no key with a preflight."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings

    def _origin(self, origin: str) -> str | None:
        s = self.settings
        if s.cors_credentials and s.cors_origins == "*":
            return origin
        if s.cors_origins == "localhost":
            try:
                host = urllib.parse.urlsplit(origin).hostname
            except ValueError:
                return None
            return origin if host in ("localhost", "127.0.0.1", "::1") else None
        return s.cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        allow = self._origin(headers.get(b"origin", b"").decode("latin-1"))
        # Header names as llama-server spells them: some clients compare them exactly.
        extra = [(b"Access-Control-Allow-Origin", allow.encode("latin-1"))] if allow else []
        if scope["method"] == "OPTIONS":
            s = self.settings
            extra += [
                (b"Access-Control-Allow-Credentials", b"true" if s.cors_credentials else b"false"),
                (b"Access-Control-Allow-Methods", s.cors_methods.encode("latin-1")),
                (b"Access-Control-Allow-Headers", s.cors_headers.encode("latin-1")),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": extra})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start" and extra:
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors)
