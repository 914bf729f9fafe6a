"""OpenAI's API: ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions`` (the
last also as ``/chat/completions``), and ``/health``. Embeddings are in
:mod:`.embeddings`, the Responses API in :mod:`.openai_responses`."""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.generation import Job
from llama_cy.openai_shapes import ChatShaper, CompletionShaper, Shaper
from llama_cy.server import respond, schema
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.inputs import input_prompts, prompt
from llama_cy.server.requests import (
    chat_parser,
    choice,
    n_choices,
    off_loop_if_heavy,
    prepare_chat,
    read_body,
    sampling,
    stop,
    with_generation_fields,
)
from llama_cy.server.schema import ApiError

__all__ = ["combine_choices", "model_card", "routes"]


def model_card(server: Server) -> dict[str, Any]:
    """The model's entry in ``/v1/models`` (and what a router's child reports)."""
    return {
        "id": server.model_id,
        "object": "model",
        "created": server.started,
        "owned_by": "llama_cy",
        "aliases": sorted(server.settings.aliases),
        "tags": sorted(server.settings.tags),
        "architecture": server.architecture,
        "meta": server.model_card,
    }


def routes(server: Server) -> list[RouteSpec]:
    get, post = ["GET"], ["POST"]

    async def health(request: Request) -> Response:
        if server.engine is not None and not server.engine.alive:
            return ApiError(503, "the engine has stopped", "unavailable_error").response()
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        card = model_card(server)
        # llama-server's Ollama-style list beside OpenAI's: capabilities name the modalities.
        caps = ["completion", "multimodal"] if server.mtmd is not None else ["completion"]
        entry = {"name": server.model_id, "model": server.model_id, "capabilities": caps}
        return JSONResponse({"object": "list", "data": [card], "models": [entry]})

    async def completions(request: Request) -> Response:
        server.generating()
        body = await read_body(
            server,
            request,
            schema.COMPLETION,
            "prompt",
            defaults={"max_tokens": server.settings.completion_max_tokens},
        )
        suffix = body.get("suffix")
        value = body["prompt"]
        cmpl_id = f"cmpl-{uuid.uuid4().hex}"
        jobs: list[tuple[Job, Shaper]] = []
        n = n_choices(server, body)

        def prepare() -> list[Job]:  # the settings too: a logit_bias can be long
            if suffix is not None:  # fill-in-the-middle: one text prompt
                prompts: list[Any] = [prompt(value)]
            else:
                prompts = input_prompts(server, value)
            return [
                server.preparer.completion(
                    p,
                    suffix=suffix,
                    max_tokens=body.get("max_tokens"),
                    logprobs=body.get("logprobs"),
                    stop=stop(server, body),
                    media=getattr(p, "media", None),  # a multimodal_data prompt's images
                    # llama-cpp-python's echo with logprobs: the prompt's too (llama-server
                    # has none to give)
                    prompt_logprobs=bool(body.get("echo")),
                    **sampling(server, body),
                )
                for p in prompts
                for _ in range(n)
            ]

        ready = await off_loop_if_heavy(body, [value, suffix], prepare)
        for k, prepared in enumerate(ready):
            job = choice(with_generation_fields(prepared, body, server), k % n)
            prefix = server.preparer.text(job.tokens, job.media) if body.get("echo") else ""
            shaper = CompletionShaper(
                server.model_id,
                prefix=prefix,
                logprobs=job.n_logprobs is not None,
                include_usage=_include_usage(body),
                index=len(jobs),
                fingerprint=server.fingerprint,
                id=cmpl_id,
            )
            jobs.append((job, shaper))
        return await respond.run(server, request, jobs, body, combine=combine_choices)

    async def chat_completions(request: Request) -> Response:
        server.generating()
        body = await read_body(server, request, schema.CHAT, "messages")
        job = await prepare_chat(server, body)
        cmpl_id = f"chatcmpl-{uuid.uuid4().hex}"
        jobs: list[tuple[Job, Shaper]] = []
        for i in range(n_choices(server, body)):
            shaper = ChatShaper(
                server.model_id,
                chat_parser(job, body),
                logprobs=job.n_logprobs is not None,
                post_sampling=job.post_sampling_probs,
                include_usage=_include_usage(body),
                index=i,
                fingerprint=server.fingerprint,
                id=cmpl_id,
            )
            jobs.append((choice(job, i), shaper))
        return await respond.run(server, request, jobs, body, combine=combine_choices)

    async def chat_input_tokens(request: Request) -> Response:
        body = await read_body(server, request, schema.CHAT, "messages")
        job = await prepare_chat(server, body)
        return JSONResponse({"input_tokens": len(job.tokens)})

    return [
        ("/health", health, get, True),
        ("/v1/chat/completions/input_tokens", chat_input_tokens, post, False),
        ("/chat/completions/input_tokens", chat_input_tokens, post, False),
        ("/v1/health", health, get, True),
        ("/v1/models", models, get, False),
        ("/models", models, get, False),
        ("/v1/completions", completions, post, False),
        # llama-cpp-python's server's alias, for GitHub Copilot (its Code Completion guide)
        ("/v1/engines/copilot-codex/completions", completions, post, False),
        ("/v1/chat/completions", chat_completions, post, False),
        ("/chat/completions", chat_completions, post, False),
    ]


def _include_usage(body: dict[str, Any]) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def combine_choices(responses: list[dict[str, Any]]) -> dict[str, Any]:
    """One OpenAI response from several choices (several prompts, or ``n``): their
    choices in order, their usage added up."""
    if len(responses) == 1:
        return responses[0]
    out = dict(responses[0])
    out["choices"] = [r["choices"][0] for r in responses]
    totals: dict[str, Any] = {}
    for r in responses:
        for key, value in r.get("usage", {}).items():
            if isinstance(value, int):
                totals[key] = totals.get(key, 0) + value
    out["usage"] = {**responses[0].get("usage", {}), **totals}
    return out
