"""Embeddings and reranking, in llama-server's shapes: ``/embedding`` and ``/embeddings``
(its own), ``/v1/embeddings`` (OpenAI's), and ``/rerank`` with its aliases (Jina's and
TEI's shapes). They run on the server's embedding context (``--embeddings``, or
``--reranking`` with a ranking head)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import numpy as np
import numpy.typing as npt
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.embedding import Embedder
from llama_cy.server import schema, worker
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.inputs import input_prompts, is_int, prompt_parts
from llama_cy.server.requests import read_body
from llama_cy.server.schema import ApiError

__all__ = ["normalize", "routes"]


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    def embedder() -> Embedder:
        if server.embedder is None:
            raise ApiError(
                501,
                "this server does not support embeddings: start it with --embeddings",
                "not_supported_error",
            )
        return server.embedder

    async def native(request: Request) -> Response:
        emb = embedder()
        body = await read_body(server, request, schema.EMBEDDINGS)
        inputs = await asyncio.to_thread(_inputs, server, emb, body)
        norm = body.get("embd_normalize", server.settings.embd_normalize)
        pooled = emb.ctx.pooling_type != "none"
        vectors = await server.embed(inputs, False)
        data = []
        for i, v in enumerate(vectors):
            # Pooled: one normalized vector; pooling none: the raw row of every token.
            rows = [normalize(v, norm)] if pooled else list(v)
            data.append({"index": i, "embedding": [r.tolist() for r in rows]})
        return await worker.json_response(data, large=_large(vectors))

    async def openai(request: Request) -> Response:
        emb = embedder()
        body = await read_body(server, request, schema.EMBEDDINGS)
        if "input" not in body:
            raise ApiError(400, "'input' is required", param="input")
        if emb.ctx.pooling_type == "none":
            raise ApiError(
                400,
                "pooling type 'none' gives a vector per token, which OpenAI's API cannot "
                "carry: use /embedding, or start the server with --pooling mean (or cls, last)",
            )
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise ApiError(
                400, "encoding_format must be 'float' or 'base64'", param="encoding_format"
            )
        inputs = await asyncio.to_thread(_inputs, server, emb, body)
        vectors = await server.embed(inputs, False)
        norm = server.settings.embd_normalize
        data = []
        for i, v in enumerate(vectors):
            vec = normalize(v, norm)
            item: dict[str, Any] = {"object": "embedding", "index": i}
            if fmt == "base64":
                item["embedding"] = base64.b64encode(vec.astype("<f4").tobytes()).decode()
                item["encoding_format"] = "base64"
            else:
                item["embedding"] = vec.tolist()
            data.append(item)
        n = sum(len(t) for t in inputs)
        usage = {"prompt_tokens": n, "total_tokens": n}
        model = body.get("model", server.model_id)
        answer = {"model": model, "object": "list", "usage": usage, "data": data}
        return await worker.json_response(answer, large=_large(vectors))

    async def rerank(request: Request) -> Response:
        emb = embedder()
        if emb.ctx.pooling_type != "rank":
            raise ApiError(
                501,
                "this server does not support reranking: start it with --reranking and a "
                "model with a ranking head",
                "not_supported_error",
            )
        body = await read_body(server, request, schema.RERANK, "query")
        tei = "documents" not in body and "texts" in body
        docs = body.get("documents", body.get("texts"))
        if not docs or not all(isinstance(d, str) for d in docs):
            raise ApiError(400, "'documents' must be a non-empty string array", param="documents")
        top_n = body.get("top_n", len(docs))
        inputs = await asyncio.to_thread(emb.rerank_inputs, body["query"], docs)
        for tokens in inputs:
            _check_size(emb, tokens)
        scores = await server.embed(inputs, False)
        label = "score" if tei else "relevance_score"
        items = []
        for i, v in enumerate(scores):
            item: dict[str, Any] = {"index": i, label: float(v[0])}
            if tei and body.get("return_text"):
                item["text"] = docs[i]
            items.append(item)
        items.sort(key=lambda d: -d[label])
        items = items[: max(0, top_n)]
        if tei:
            return JSONResponse(items)
        n = sum(len(t) for t in inputs)
        usage = {"prompt_tokens": n, "total_tokens": n}
        model = body.get("model", server.model_id)
        return JSONResponse({"model": model, "object": "list", "usage": usage, "results": items})

    return [
        ("/embedding", native, post, False),
        ("/embeddings", native, post, False),
        ("/v1/embeddings", openai, post, False),
        ("/rerank", rerank, post, False),
        ("/reranking", rerank, post, False),
        ("/v1/rerank", rerank, post, False),
        ("/v1/reranking", rerank, post, False),
    ]


def _inputs(server: Server, emb: Embedder, body: dict[str, Any]) -> list[list[int]]:
    """``input`` (or llama-server's ``content``): prompts as /completion takes them, or
    objects of OpenAI content parts; each must fit in one micro-batch."""
    value = body.get("input", body.get("content"))
    if value is None:
        raise ApiError(400, "'input' or 'content' must be given", param="input")
    if isinstance(value, list) and not value:
        raise ApiError(400, "'input' must not be empty", param="input")
    entries = value if isinstance(value, list) and not any(is_int(x) for x in value) else [value]
    out = []
    for entry in entries:
        if isinstance(entry, dict) and "content" in entry:
            entry = prompt_parts(entry["content"])
        tokens = input_prompts(server, entry)[0]
        _check_size(emb, tokens)
        out.append(tokens)
    return out


def _check_size(emb: Embedder, tokens: list[int]) -> None:
    if len(tokens) > emb.limit:
        raise ApiError(
            400,
            f"the input ({len(tokens)} tokens) is too large to process: increase the physical "
            f"batch size (--ubatch-size, now {emb.limit})",
        )


def normalize(v: npt.NDArray[np.float32], norm: int) -> npt.NDArray[np.float32]:
    """llama.cpp's ``common_embd_normalize``: -1 none, 0 max-abs to int16's range,
    1 taxicab, 2 euclidean, > 2 p-norm."""
    v = np.asarray(v, dtype=np.float64)
    if norm < 0:
        s = 1.0
    elif norm == 0:
        s = float(np.abs(v).max()) / 32760.0
    elif norm == 2:
        s = float(np.sqrt((v * v).sum()))
    else:
        s = float((np.abs(v) ** norm).sum() ** (1.0 / norm))
    out: npt.NDArray[np.float32] = (v / s if s > 0 else v * 0.0).astype(np.float32)
    return out


def _large(vectors: Any) -> bool:
    # Many floats encode for long enough to hold the event loop: off it, in pieces.
    return sum(getattr(v, "size", 0) for v in vectors) > 100_000
