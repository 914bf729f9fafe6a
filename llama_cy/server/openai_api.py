"""OpenAI's API: ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``,
``/v1/embeddings`` (each also without ``/v1``), and ``/health``."""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Any

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.chat import ChatParser
from llama_cy.responses import ChatShaper, CompletionShaper
from llama_cy.server import schema
from llama_cy.server.schema import ApiError

if TYPE_CHECKING:
    from llama_cy.server.app import RouteSpec, Server

__all__ = ["chat_kwargs", "render_kwargs", "routes"]


def render_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``Preparer.chat_prompt`` for a chat request's body (checked
    against ``schema.CHAT``), as llama-server reads them."""
    return {
        "tools": body.get("tools"),
        "tool_choice": body.get("tool_choice"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "functions": body.get("functions"),
        "function_call": body.get("function_call"),
        "response_format": body.get("response_format"),
        "chat_template_kwargs": body.get("chat_template_kwargs"),
        "reasoning_format": body.get("reasoning_format"),
        "reasoning_effort": body.get("reasoning_effort"),
    }


def chat_kwargs(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``Preparer.chat`` for a chat request's body."""
    return {
        **render_kwargs(body),
        "max_tokens": body.get("max_completion_tokens", body.get("max_tokens")),
        "stop": body.get("stop"),
        "logprobs": body.get("logprobs"),
        "top_logprobs": body.get("top_logprobs"),
        # llama-server's names (and its alias)
        "reasoning_budget": body.get("reasoning_budget_tokens", body.get("thinking_budget_tokens")),
        "reasoning_budget_message": body.get("reasoning_budget_message"),
        **server.sampling(body),
    }


def routes(server: Server) -> list[RouteSpec]:
    get, post = ["GET"], ["POST"]

    async def health(request: Request) -> Response:
        if server.engine is not None and not server.engine.alive:
            return ApiError(503, "the engine has stopped", "unavailable_error").response()
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        m = server.model
        meta = {
            "n_vocab": m.n_vocab,
            "n_ctx_train": m.n_ctx_train,
            "n_embd": m.n_embd,
            "n_params": m.n_params,
            "size": m.size,
        }
        card = {
            "id": server.model_id,
            "object": "model",
            "created": server.started,
            "owned_by": "llama_cy",
            "meta": meta,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def completions(request: Request) -> Response:
        server.generating()
        body = await server.body(request, schema.COMPLETION, "prompt")
        job = await asyncio.to_thread(
            server.preparer.completion,
            prompt(body["prompt"]),
            suffix=body.get("suffix"),
            max_tokens=body.get("max_tokens"),
            logprobs=body.get("logprobs"),
            stop=body.get("stop"),
            **server.sampling(body),
        )
        prefix = server.preparer.text(job.tokens) if body.get("echo") else ""
        shaper = CompletionShaper(
            server.model_id,
            prefix=prefix,
            logprobs=job.n_logprobs is not None,
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        )
        return await server.run(request, job, shaper, body)

    async def chat_completions(request: Request) -> Response:
        server.generating()
        body = await server.body(request, schema.CHAT, "messages")
        job = await asyncio.to_thread(
            server.preparer.chat, messages(body["messages"]), **chat_kwargs(server, body)
        )
        assert job.chat is not None
        stream = bool(body.get("stream"))
        shaper = ChatShaper(
            server.model_id,
            ChatParser(job.chat, parse_tool_calls=job.parse_tool_calls, stream=stream),
            logprobs=job.n_logprobs is not None,
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        )
        return await server.run(request, job, shaper, body)

    async def embeddings(request: Request) -> Response:
        embedder = server.embedder
        if embedder is None:
            raise ApiError(
                501,
                "this server does not support embeddings: start it with --embeddings",
                "not_supported_error",
            )
        body = await server.body(request, schema.EMBEDDINGS, "input")
        if embedder.ctx.pooling_type == "none":
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
        inputs = embedding_inputs(server, body["input"])
        vectors = await server.embed(inputs, True)
        n = sum(len(t) for t in inputs)
        data = []
        for i, v in enumerate(vectors):
            value: Any = v.tolist()
            if fmt == "base64":
                value = base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "embedding": value, "index": i})
        usage = {"prompt_tokens": n, "total_tokens": n}
        return JSONResponse(
            {"object": "list", "data": data, "model": server.model_id, "usage": usage}
        )

    return [
        ("/health", health, get, True),
        ("/v1/health", health, get, True),
        ("/v1/models", models, get, False),
        ("/models", models, get, False),
        ("/v1/completions", completions, post, False),
        ("/completions", completions, post, False),
        ("/v1/chat/completions", chat_completions, post, False),
        ("/chat/completions", chat_completions, post, False),
        ("/v1/embeddings", embeddings, post, False),
        ("/embeddings", embeddings, post, False),
    ]


def embedding_inputs(server: Server, value: Any) -> list[list[int]]:
    """A string, a list of strings, a token list or a list of token lists."""
    embedder = server.embedder
    assert embedder is not None
    if isinstance(value, str):
        return embedder.inputs([value], truncate=True)
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        return embedder.inputs(value, truncate=True)
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
    return [server.preparer.tokens(x)[: embedder.limit] for x in value]


def prompt(value: Any) -> str | list[int]:
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


def messages(value: list[Any]) -> list[dict[str, Any]]:
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
