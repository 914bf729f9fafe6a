"""The HTTP side of the server: Starlette routes with OpenAI's and llama-server's shapes.

Requests are checked (:mod:`.schema`) and prepared by ``Llama`` in the event loop, run
by the :class:`~llama_cy.server.engine.Engine`, and their chunks sent as they come
(server-sent events when ``stream`` is true). A client that goes away cancels its
request at the engine's next step, streaming or not.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hmac
import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from llama_cy._backend import LLAMA_CPP_BUILD
from llama_cy._chat import chat_builtin_templates
from llama_cy.chat import CHAT_FORMATS
from llama_cy.completion import join_chunks
from llama_cy.errors import ContextOverflowError, LlamaError
from llama_cy.grammar import json_schema_to_gbnf
from llama_cy.llama import Llama, Prepared
from llama_cy.responses import Shaper
from llama_cy.server import schema
from llama_cy.server.engine import Engine, QueueFullError, Task
from llama_cy.server.native import NativeShaper
from llama_cy.server.schema import ApiError

__all__ = ["ServerSettings", "create_app"]

_log = logging.getLogger("llama_cy.server")

Endpoint = Callable[[Request], Awaitable[Response]]

#: What a request that does not say gets: llama-server's defaults (OpenAI's temperature
#: of 1 and llama-cpp-python's chat temperature of 0.2 are not used).
SAMPLING_DEFAULTS: dict[str, float] = {
    "temperature": 0.8,
    "top_k": 40,
    "top_p": 0.95,
    "min_p": 0.05,
}

# Common request fields that are not sampler settings.
_NOT_SAMPLING = frozenset(
    ["model", "stream", "stream_options", "n", "max_tokens", "cache_prompt", "stop"]
)


@dataclass(frozen=True)
class ServerSettings:
    """What ``llama-cy serve`` takes; the names are llama-server's long flags."""

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
    chat_template: str | None = None
    metrics: bool = False
    timeout: float = 600.0
    max_queue: int = 256
    rpc: str | None = None

    @property
    def model_id(self) -> str:
        return self.alias or os.path.basename(self.model)


def load_llama(
    settings: ServerSettings, progress: Callable[[float], bool | None] | None = None
) -> Llama:
    """The ``Llama`` the server runs: one context with a sequence per slot."""
    common: dict[str, Any] = {
        "progress": progress,
        "rpc_servers": settings.rpc,
        "n_gpu_layers": settings.n_gpu_layers,
        "n_threads": settings.threads,
        "n_batch": settings.batch_size,
        "flash_attn": settings.flash_attn,
        "seed": None if settings.seed < 0 else settings.seed,
    }
    # --chat-template takes a built-in template's name or a Jinja template, as llama-server.
    template = settings.chat_template
    if template is not None:
        builtin = template in CHAT_FORMATS or template in chat_builtin_templates()
        common["chat_format" if builtin else "chat_template"] = template
    if settings.embeddings:
        return Llama(
            settings.model,
            n_ctx=settings.ctx_size,
            embedding=True,
            pooling_type=settings.pooling,
            **common,
        )
    return Llama(
        settings.model,
        n_ctx=settings.ctx_size,
        n_ubatch=settings.ubatch_size,
        n_seq_max=settings.parallel,
        **common,
    )


class Server:
    """The routes over one ``Llama`` and (unless embedding) its engine."""

    def __init__(self, llm: Llama, settings: ServerSettings) -> None:
        self.llm = llm
        self.settings = settings
        self.model_id = settings.model_id
        self.engine: Engine | None = None
        if not settings.embeddings:
            self.engine = Engine(
                llm,
                n_predict=settings.n_predict,
                max_queue=settings.max_queue,
                queue_timeout=settings.timeout,
            )
        self.started = int(time.time())

    # ---- plumbing --------------------------------------------------------------------

    def routes(self) -> list[Route]:
        get, post = ["GET"], ["POST"]
        table: list[tuple[str, Endpoint, list[str], bool]] = [
            ("/health", self.health, get, True),
            ("/v1/health", self.health, get, True),
            ("/v1/models", self.models, get, False),
            ("/models", self.models, get, False),
            ("/v1/completions", self.completions, post, False),
            ("/completions", self.completions, post, False),
            ("/v1/chat/completions", self.chat_completions, post, False),
            ("/chat/completions", self.chat_completions, post, False),
            ("/v1/embeddings", self.embeddings, post, False),
            ("/embeddings", self.embeddings, post, False),
            ("/completion", self.native_completion, post, False),
            ("/tokenize", self.tokenize, post, False),
            ("/detokenize", self.detokenize, post, False),
            ("/apply-template", self.apply_template, post, False),
            ("/props", self.props, get, False),
            ("/slots", self.slots, get, False),
            ("/metrics", self.metrics, get, False),
        ]
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

    async def _body(
        self, request: Request, fields: Mapping[str, tuple[type, ...]], *required: str
    ) -> dict[str, Any]:
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
        if body.get("n", 1) != 1:
            raise ApiError(400, "n must be 1: one choice per request", param="n")
        return body

    def _generating(self) -> Engine:
        if self.engine is None:
            raise ApiError(
                501,
                "this server does not support completions: start it without --embeddings",
                "not_supported_error",
            )
        return self.engine

    def _sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """The sampling fields, with llama-server's defaults where the request has none."""
        stop = body.get("stop")
        if isinstance(stop, list) and not all(isinstance(x, str) for x in stop):
            raise ApiError(400, "'stop' must be a string or an array of strings", param="stop")
        # A request without a seed takes --seed: it is the Llama's (load_llama).
        picked = {k: body[k] for k in schema.SAMPLING if k in body and k not in _NOT_SAMPLING}
        seed = picked.get("seed")
        if seed is not None:
            if seed == -1:  # llama-server's "a random seed", whatever --seed says
                picked["seed"] = random.getrandbits(32)
            elif not 0 <= seed < 2**32:
                raise ApiError(400, "seed must be -1 (random) or in [0, 2**32)", param="seed")
        return {**SAMPLING_DEFAULTS, **picked}

    async def _run(
        self,
        request: Request,
        job: Prepared,
        body: dict[str, Any],
        done_marker: bool = True,
    ) -> Response:
        engine = self._generating()
        stream = bool(body.get("stream"))
        task = engine.submit(job, cache_prompt=body.get("cache_prompt", True))
        if stream:
            return StreamingResponse(
                self._events(request, engine, task, job.shaper, done_marker),
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
        if isinstance(job.shaper, NativeShaper):
            job.shaper.slot = task.slot
        return JSONResponse(job.shaper.whole(join_chunks(chunks)))

    async def _events(
        self, request: Request, engine: Engine, task: Task, shaper: Shaper, done_marker: bool
    ) -> AsyncIterator[str]:
        watcher = asyncio.create_task(_watch_disconnect(request, engine, task))
        try:
            async for chunk in engine.results(task):
                if isinstance(shaper, NativeShaper):
                    shaper.slot = task.slot
                for d in shaper.chunk(chunk):
                    yield _sse(d)
            if done_marker:
                yield "data: [DONE]\n\n"
        except _GoneError:
            return
        except Exception as exc:  # the status line is sent: the error goes in the stream
            status = 400 if isinstance(exc, ValueError) else 500
            kind = "invalid_request_error" if status == 400 else "server_error"
            yield _sse(ApiError(status, str(exc), kind).body())
        finally:
            watcher.cancel()
            engine.cancel(task)

    # ---- OpenAI endpoints ------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        if self.engine is not None and not self.engine.alive:
            return ApiError(503, "the engine has stopped", "unavailable_error").response()
        return JSONResponse({"status": "ok"})

    async def models(self, request: Request) -> Response:
        m = self.llm.model
        meta = {
            "n_vocab": m.n_vocab,
            "n_ctx_train": m.n_ctx_train,
            "n_embd": m.n_embd,
            "n_params": m.n_params,
            "size": m.size,
        }
        card = {
            "id": self.model_id,
            "object": "model",
            "created": self.started,
            "owned_by": "llama_cy",
            "meta": meta,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def completions(self, request: Request) -> Response:
        self._generating()
        body = await self._body(request, schema.COMPLETION, "prompt")
        prompt = _prompt(body["prompt"])
        job = self.llm.prepare_completion(
            prompt,
            suffix=body.get("suffix"),
            max_tokens=body.get("max_tokens"),
            logprobs=body.get("logprobs"),
            echo=body.get("echo", False),
            stop=body.get("stop"),
            model=self.model_id,
            stream_options=body.get("stream_options"),
            **self._sampling(body),
        )
        return await self._run(request, job, body)

    async def chat_completions(self, request: Request) -> Response:
        self._generating()
        body = await self._body(request, schema.CHAT, "messages")
        job = self.llm.prepare_chat_completion(
            _messages(body["messages"]),
            tools=body.get("tools"),
            tool_choice=body.get("tool_choice"),
            functions=body.get("functions"),
            function_call=body.get("function_call"),
            response_format=body.get("response_format"),
            max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
            stop=body.get("stop"),
            logprobs=body.get("logprobs"),
            top_logprobs=body.get("top_logprobs"),
            chat_template_kwargs=body.get("chat_template_kwargs"),
            model=self.model_id,
            stream_options=body.get("stream_options"),
            **self._sampling(body),
        )
        return await self._run(request, job, body)

    async def embeddings(self, request: Request) -> Response:
        if self.engine is not None:
            raise ApiError(
                501,
                "this server does not support embeddings: start it with --embeddings",
                "not_supported_error",
            )
        body = await self._body(request, schema.EMBEDDINGS, "input")
        if self.llm.ctx.pooling_type == "none":
            raise ApiError(
                400,
                "pooling type 'none' gives a vector per token, which OpenAI's API cannot "
                "carry: start the server with --pooling mean (or cls, last)",
            )
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise ApiError(
                400, "encoding_format must be 'float' or 'base64'", param="encoding_format"
            )
        inputs = self._embedding_inputs(body["input"])
        vectors = await asyncio.to_thread(self.llm._embed_tokens, inputs, True)
        n = sum(len(t) for t in inputs)
        data = []
        for i, v in enumerate(vectors):
            value: Any = v.tolist()
            if fmt == "base64":
                value = base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "embedding": value, "index": i})
        usage = {"prompt_tokens": n, "total_tokens": n}
        return JSONResponse(
            {"object": "list", "data": data, "model": self.model_id, "usage": usage}
        )

    def _embedding_inputs(self, value: Any) -> list[list[int]]:
        """A string, a list of strings, a token list or a list of token lists."""
        if isinstance(value, str) or (
            isinstance(value, list) and value and all(isinstance(x, str) for x in value)
        ):
            return self.llm._embedding_inputs(value, truncate=True)
        if isinstance(value, list) and value and all(isinstance(x, int) for x in value):
            value = [value]
        if not (
            isinstance(value, list)
            and value
            and all(
                isinstance(x, list)
                and x
                and all(isinstance(t, int) and not isinstance(t, bool) for t in x)
                for x in value
            )
        ):
            raise ApiError(
                400,
                "'input' must be a string, an array of strings or an array of token arrays",
                param="input",
            )
        limit = min(self.llm.ctx.n_ctx, self.llm.ctx.n_batch)
        return [self.llm._prompt_tokens(x)[:limit] for x in value]

    # ---- llama.cpp's native endpoints -------------------------------------------------

    async def native_completion(self, request: Request) -> Response:
        self._generating()
        body = await self._body(request, schema.NATIVE_COMPLETION, "prompt")
        sampling = self._sampling(body)
        for ours, theirs in (("penalty_last_n", "repeat_last_n"), ("mirostat_mode", "mirostat")):
            if theirs in body:
                sampling[ours] = body[theirs]
        bias = body.get("logit_bias")
        if isinstance(bias, list):  # llama-server's [[token, bias], ...]
            # [[token, false]] is llama-server's "never this token".
            sampling["logit_bias"] = {
                int(t): float("-inf") if b is False else float(b)
                for t, b in bias
                if isinstance(b, (int, float))
            }
        if "json_schema" in body and "grammar" not in body:
            sampling["grammar"] = json_schema_to_gbnf(body["json_schema"])
        n_probs = body.get("n_probs", 0)
        job = self.llm.prepare_completion(
            _prompt(body["prompt"]),
            max_tokens=body.get("n_predict", body.get("max_tokens")),
            stop=body.get("stop"),
            logprobs=n_probs if n_probs > 0 else None,
            **sampling,
        )
        shaper = NativeShaper(self.model_id, return_tokens=bool(body.get("return_tokens")))
        job = dataclasses.replace(job, shaper=shaper)
        return await self._run(request, job, body, done_marker=False)

    async def tokenize(self, request: Request) -> Response:
        fields = {
            "content": (str,),
            "add_special": (bool,),
            "parse_special": (bool,),
            "with_pieces": (bool,),
        }
        body = schema.check(schema.parse(await request.body()), fields, ("content",))
        model = self.llm.model
        tokens = model.tokenize(
            body["content"],
            add_special=body.get("add_special", False),
            parse_special=body.get("parse_special", True),
        ).tolist()
        if not body.get("with_pieces"):
            return JSONResponse({"tokens": tokens})
        out = []
        for t in tokens:
            raw = model.token_to_piece(t, special=True)
            try:
                piece: Any = raw.decode("utf-8")
            except UnicodeDecodeError:
                piece = list(raw)
            out.append({"id": t, "piece": piece})
        return JSONResponse({"tokens": out})

    async def detokenize(self, request: Request) -> Response:
        body = schema.check(schema.parse(await request.body()), {"tokens": (list,)}, ("tokens",))
        tokens = body["tokens"]
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ApiError(400, "'tokens' must be an array of integers", param="tokens")
        if tokens:
            self.llm._prompt_tokens(tokens)  # range check
        text = self.llm.model.detokenize(tokens, unparse_special=True)
        return JSONResponse({"content": text})

    async def apply_template(self, request: Request) -> Response:
        body = schema.check(schema.parse(await request.body()), schema.CHAT, ("messages",))
        prompt = self.llm.apply_chat_template(_messages(body["messages"]), tools=body.get("tools"))
        return JSONResponse({"prompt": prompt})

    async def props(self, request: Request) -> Response:
        n_ctx = self.engine.n_ctx_slot if self.engine is not None else self.llm.ctx.n_ctx
        settings = {
            "n_ctx": n_ctx,
            "params": {
                "n_predict": self.settings.n_predict,
                "seed": self.settings.seed,
                **SAMPLING_DEFAULTS,
            },
        }
        formatter = self.llm.formatter
        return JSONResponse(
            {
                "default_generation_settings": settings,
                "total_slots": len(self.engine.slots) if self.engine is not None else 1,
                "model_alias": self.model_id,
                "model_path": self.settings.model,
                "chat_template": formatter.template or "",
                "bos_token": formatter.bos_token,
                "eos_token": formatter.eos_token,
                "modalities": {"vision": False, "audio": False},
                "build_info": f"{LLAMA_CPP_BUILD}-llama_cy",
                "endpoint_slots": True,
                "endpoint_metrics": self.settings.metrics,
            }
        )

    async def slots(self, request: Request) -> Response:
        if self.engine is None:
            raise ApiError(
                501,
                "this server has no slots: it was started with --embeddings",
                "not_supported_error",
            )
        return JSONResponse(self.engine.slots_info())

    async def metrics(self, request: Request) -> Response:
        if not self.settings.metrics:
            raise ApiError(
                501,
                "this server does not support the metrics endpoint: start it with --metrics",
                "not_supported_error",
            )
        e = self._generating()
        busy = sum(1 for s in e.slots if s.task is not None)
        rows = [
            (
                "prompt_tokens_total",
                "counter",
                "Number of prompt tokens processed.",
                e.n_prompt_tokens,
            ),
            ("prompt_seconds_total", "counter", "Prompt process time", e.t_prompt_s),
            (
                "tokens_predicted_total",
                "counter",
                "Number of generation tokens processed.",
                e.n_predicted,
            ),
            ("tokens_predicted_seconds_total", "counter", "Predict process time", e.t_predicted_s),
            ("n_decode_total", "counter", "Total number of llama_decode() calls", e.n_decode),
            (
                "n_busy_slots_per_decode",
                "counter",
                "Average number of busy slots per llama_decode() call",
                e.n_busy_slots / max(1, e.n_decode),
            ),
            (
                "prompt_tokens_seconds",
                "gauge",
                "Average prompt throughput in tokens/s.",
                e.n_prompt_tokens / e.t_prompt_s if e.t_prompt_s else 0.0,
            ),
            (
                "predicted_tokens_seconds",
                "gauge",
                "Average generation throughput in tokens/s.",
                e.n_predicted / e.t_predicted_s if e.t_predicted_s else 0.0,
            ),
            ("requests_processing", "gauge", "Number of requests processing.", busy),
            ("requests_deferred", "gauge", "Number of requests deferred.", e.n_waiting),
        ]
        lines = []
        for name, kind, text, value in rows:
            lines += [
                f"# HELP llamacpp:{name} {text}",
                f"# TYPE llamacpp:{name} {kind}",
                f"llamacpp:{name} {value}",
            ]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


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


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _prompt(value: Any) -> str | list[int]:
    """A prompt: a string, a token array, or a one-element array of either."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
        value = value[0]
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        return value
    raise ApiError(
        400,
        "'prompt' must be a string or an array of token ids (one prompt per request)",
        param="prompt",
    )


def _messages(value: list[Any]) -> list[dict[str, Any]]:
    """Chat messages, with OpenAI's content parts joined into text."""
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(
                400, f"messages[{i}] must be an object with a string 'role'", param="messages"
            )
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    raise ApiError(
                        400,
                        f"messages[{i}]: only text content parts are supported",
                        param="messages",
                    )
                texts.append(part["text"])
            m = {**m, "content": "".join(texts)}
        elif content is not None and not isinstance(content, str):
            raise ApiError(
                400,
                f"messages[{i}].content must be a string or an array of parts",
                param="messages",
            )
        out.append(m)
    if not out:
        raise ApiError(400, "'messages' must not be empty", param="messages")
    return out


def create_app(llm: Llama, settings: ServerSettings) -> Starlette:
    """The ASGI app over ``llm`` (the engine runs while the app's lifespan does)."""
    server = Server(llm, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if server.engine is not None:
            server.engine.start()
        try:
            yield
        finally:
            if server.engine is not None:
                await asyncio.to_thread(server.engine.stop)

    app = Starlette(routes=server.routes(), lifespan=lifespan)
    app.state.server = server
    return app
