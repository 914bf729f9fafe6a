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
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy.completion import join_chunks
from llama_cy.embedding import Embedder
from llama_cy.errors import ContextOverflowError, LlamaError
from llama_cy.generation import Job
from llama_cy.responses import Shaper
from llama_cy.server import metrics, native, openai_api, schema
from llama_cy.server.engine import Engine, QueueFullError, Task
from llama_cy.server.native import NativeShaper
from llama_cy.server.schema import ApiError
from llama_cy.server.settings import ServerSettings
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

    def __init__(self, model: LlamaModel, settings: ServerSettings) -> None:
        self.model = model
        self.settings = settings
        self.model_id = settings.model_id
        self.preparer = settings.preparer(model)
        self.engine: Engine | None = None
        self.embedder: Embedder | None = None
        self.embed_lock = threading.Lock()
        context = settings.context(model)
        if settings.embeddings:
            ctx = LlamaContext(model, **context)
            self.embedder = Embedder(ctx, LlamaBatch(ctx.n_batch))
        else:
            self.engine = Engine(
                model,
                slots=settings.parallel,
                n_predict=settings.n_predict,
                max_queue=settings.max_queue,
                queue_timeout=settings.timeout,
                context_shift=settings.context_shift,
                # llama-server keeps --keep tokens after BOS.
                n_keep=settings.keep + int(model.add_bos),
                **context,
            )
        self.started = int(time.time())

    def start(self) -> None:
        if self.engine is not None:
            self.engine.start()

    def close(self) -> None:
        """Stop the engine and free the contexts (the model stays open)."""
        if self.engine is not None:
            self.engine.stop()
        if self.embedder is not None:
            with self.embed_lock:
                self.embedder.batch.close()
                self.embedder.ctx.close()

    @property
    def n_ctx(self) -> int:
        """A request's context: a slot's, or the embedding context's."""
        if self.engine is not None:
            return self.engine.n_ctx_slot
        assert self.embedder is not None
        return self.embedder.ctx.n_ctx

    # ---- plumbing --------------------------------------------------------------------

    def routes(self) -> list[Route]:
        table = openai_api.routes(self) + native.routes(self) + metrics.routes(self)
        return [Route(p, self._wrap(fn, public), methods=m) for p, fn, m, public in table]

    def _wrap(self, fn: Endpoint, public: bool) -> Endpoint:
        """Authorization, and every error as an OpenAI-shaped response."""

        async def endpoint(request: Request) -> Response:
            try:
                if not public:
                    self._authorize(request)
                return await fn(request)
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
        key = self.settings.api_key
        if key is None:
            return
        given = request.headers.get("authorization", "")
        token = (
            given[7:]
            if given.lower().startswith("bearer ")
            else request.headers.get("x-api-key", "")
        )
        if not hmac.compare_digest(token.encode(), key.encode()):
            raise ApiError(401, "Invalid API Key", "authentication_error")

    async def body(
        self, request: Request, fields: Mapping[str, tuple[type, ...]], *required: str
    ) -> dict[str, Any]:
        """The request's checked fields; 404 for another model's name, 400 for n > 1."""
        body = schema.check(schema.parse(await request.body()), fields, required)
        model = body.get("model")
        if model is not None and model not in (
            self.model_id,
            self.settings.model,
            os.path.basename(self.settings.model),
        ):
            raise ApiError(
                404,
                f"the model '{model}' does not exist (this server has '{self.model_id}')",
                "not_found_error",
                "model",
                code_name="model_not_found",
            )
        stop = body.get("stop")
        if isinstance(stop, list) and not all(isinstance(x, str) for x in stop):
            raise ApiError(400, "'stop' must be a string or an array of strings", param="stop")
        if body.get("n", 1) != 1:
            raise ApiError(400, "n must be 1: one choice per request", param="n")
        return body

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
        the server's defaults for the rest)."""
        out: dict[str, Any] = {}
        for key, value in body.items():
            name = _SAMPLING_FIELDS.get(key)
            if name is not None:
                out[name] = value
        return out

    async def run(
        self,
        request: Request,
        job: Job,
        shaper: Shaper,
        body: Mapping[str, Any],
        done_marker: bool = True,
    ) -> Response:
        """Generate ``job`` in the engine; one response, or server-sent events."""
        engine = self.generating()
        samplers = await asyncio.to_thread(engine.samplers, job)
        task = engine.submit(job, samplers=samplers, cache_prompt=body.get("cache_prompt", True))
        if body.get("stream"):
            return StreamingResponse(
                self._events(request, engine, task, shaper, done_marker),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        watcher = asyncio.create_task(_watch_disconnect(request, engine, task))
        try:
            chunks = [c async for c in engine.results(task)]
        except _GoneError:  # nobody reads this answer; 499 is nginx's "client closed"
            return Response(status_code=499)
        finally:
            watcher.cancel()
        if isinstance(shaper, NativeShaper):
            shaper.slot = task.slot
        return JSONResponse(shaper.whole(join_chunks(chunks)))

    async def _events(
        self, request: Request, engine: Engine, task: Task, shaper: Shaper, done_marker: bool
    ) -> AsyncIterator[str]:
        watcher = asyncio.create_task(_watch_disconnect(request, engine, task))
        try:
            async for chunk in engine.results(task):
                if isinstance(shaper, NativeShaper):
                    shaper.slot = task.slot
                for d in shaper.chunk(chunk):
                    yield sse(d)
            if done_marker:
                yield "data: [DONE]\n\n"
        except _GoneError:
            return
        except Exception as exc:  # the status line is sent: the error goes in the stream
            status = 400 if isinstance(exc, ValueError) else 500
            kind = "invalid_request_error" if status == 400 else "server_error"
            yield sse(ApiError(status, str(exc), kind).body())
        finally:
            watcher.cancel()
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


def sse(obj: Any) -> str:
    """One server-sent event with ``obj`` as JSON."""
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n"


def create_app(model: LlamaModel, settings: ServerSettings) -> Starlette:
    """The ASGI app over ``model`` (its engine runs while the app's lifespan does, on a
    context of its own; the model stays the caller's)."""
    server = Server(model, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.start()
        try:
            yield
        finally:
            await asyncio.to_thread(server.close)

    app = Starlette(routes=server.routes(), lifespan=lifespan)
    app.state.server = server
    return app
