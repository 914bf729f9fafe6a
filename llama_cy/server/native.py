"""llama-server's own endpoints and shapes: ``/completion`` (and its timings),
``/tokenize``, ``/detokenize``, ``/apply-template``, ``/props`` and ``/slots``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy._backend import LLAMA_CPP_BUILD
from llama_cy.completion import Completion, CompletionChunk, Timings
from llama_cy.grammar import json_schema_to_grammar
from llama_cy.responses import Shaper
from llama_cy.server import schema
from llama_cy.server.openai_api import messages, prompt, render_kwargs
from llama_cy.server.schema import ApiError
from llama_cy.settings import SAMPLING_SETTINGS

if TYPE_CHECKING:
    from llama_cy.server.app import RouteSpec, Server

__all__ = ["NativeShaper", "routes", "timings_dict"]


def routes(server: Server) -> list[RouteSpec]:
    get, post = ["GET"], ["POST"]

    async def completion(request: Request) -> Response:
        server.generating()
        body = await server.body(request, schema.NATIVE_COMPLETION, "prompt")
        sampling = server.sampling(body)
        bias = body.get("logit_bias")
        if isinstance(bias, list):  # llama-server's [[token, bias], ...]
            # [[token, false]] is llama-server's "never this token".
            sampling["logit_bias"] = {
                int(t): float("-inf") if b is False else float(b)
                for t, b in bias
                if isinstance(b, (int, float))
            }
        if "json_schema" in body and "grammar" not in body:
            sampling["grammar"] = json_schema_to_grammar(body["json_schema"])
        n_probs = body.get("n_probs", 0)
        job = await asyncio.to_thread(
            server.preparer.completion,
            prompt(body["prompt"]),
            max_tokens=body.get("n_predict", body.get("max_tokens")),
            stop=body.get("stop"),
            logprobs=n_probs if n_probs > 0 else None,
            **sampling,
        )
        shaper = NativeShaper(server.model_id, return_tokens=bool(body.get("return_tokens")))
        return await server.run(request, job, shaper, body, done_marker=False)

    async def tokenize(request: Request) -> Response:
        fields = {
            "content": (str,),
            "add_special": (bool,),
            "parse_special": (bool,),
            "with_pieces": (bool,),
        }
        body = schema.check(schema.parse(await request.body()), fields, ("content",))
        model = server.model
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

    async def detokenize(request: Request) -> Response:
        body = schema.check(schema.parse(await request.body()), {"tokens": (list,)}, ("tokens",))
        tokens = body["tokens"]
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ApiError(400, "'tokens' must be an array of integers", param="tokens")
        if tokens:
            server.preparer.tokens(tokens)  # range check
        text = server.model.detokenize(tokens, unparse_special=True)
        return JSONResponse({"content": text})

    async def apply_template(request: Request) -> Response:
        body = schema.check(schema.parse(await request.body()), schema.CHAT, ("messages",))
        prompt, _ = await asyncio.to_thread(
            server.preparer.chat_prompt,
            messages(body["messages"]),
            grammar=body.get("grammar"),
            **render_kwargs(body),
        )
        return JSONResponse({"prompt": prompt.prompt})

    async def props(request: Request) -> Response:
        sampling = server.preparer.sampling("server")
        params: dict[str, Any] = {
            "n_predict": server.settings.n_predict,
            "seed": server.settings.seed,
        }
        for s in SAMPLING_SETTINGS:
            value = getattr(sampling, s.name)
            params[s.server_name] = list(value) if isinstance(value, tuple) else value
        template = server.preparer.template
        vocab = server.model
        engine = server.engine
        return JSONResponse(
            {
                "default_generation_settings": {"n_ctx": server.n_ctx, "params": params},
                "total_slots": len(engine.slots) if engine is not None else 1,
                "model_alias": server.model_id,
                "model_path": server.settings.model,
                "chat_template": template.source,
                "chat_template_caps": template.caps,
                "bos_token": vocab.token_text(vocab.token_bos) if vocab.token_bos >= 0 else "",
                "eos_token": vocab.token_text(vocab.token_eos) if vocab.token_eos >= 0 else "",
                "modalities": {"vision": False, "audio": False},
                "build_info": f"{LLAMA_CPP_BUILD}-llama_cy",
                "endpoint_slots": True,
                "endpoint_metrics": server.settings.metrics,
            }
        )

    async def slots(request: Request) -> Response:
        if server.engine is None:
            raise ApiError(
                501,
                "this server has no slots: it was started with --embeddings",
                "not_supported_error",
            )
        return JSONResponse(server.engine.slots_info())

    return [
        ("/completion", completion, post, False),
        ("/tokenize", tokenize, post, False),
        ("/detokenize", detokenize, post, False),
        ("/apply-template", apply_template, post, False),
        ("/props", props, get, False),
        ("/slots", slots, get, False),
    ]


_STOP_TYPES = {"eog": "eos", "stop": "word", "length": "limit"}


def timings_dict(t: Timings) -> dict[str, float | int]:
    """llama-server's ``timings`` object."""
    return {
        "cache_n": t.cached_n,
        "prompt_n": t.prompt_n,
        "prompt_ms": t.prompt_ms,
        "prompt_per_token_ms": t.prompt_ms / t.prompt_n if t.prompt_n else 0.0,
        "prompt_per_second": t.prompt_per_second,
        "predicted_n": t.predicted_n,
        "predicted_ms": t.predicted_ms,
        "predicted_per_token_ms": t.predicted_ms / t.predicted_n if t.predicted_n else 0.0,
        "predicted_per_second": t.predicted_per_second,
    }


class NativeShaper(Shaper):
    """``/completion``: ``{"content", "stop", ...}`` objects, the last with the stop type,
    counts and timings."""

    kind = "cmpl"

    def __init__(self, model: str, *, return_tokens: bool = False) -> None:
        super().__init__(model)
        self.return_tokens = return_tokens
        self.slot = -1

    def _dict(self, text: str, tokens: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {"content": text, "stop": False, "id_slot": self.slot}
        out["tokens"] = tokens if self.return_tokens else []
        return out

    def chunk(self, chunk: CompletionChunk) -> list[dict[str, Any]]:
        self._count(chunk)
        if chunk.stop_reason is None or chunk.timings is None:
            return [self._dict(chunk.text, chunk.tokens)]
        last = self._dict(chunk.text, chunk.tokens)
        last.update(
            self._summary(chunk.stop_reason, chunk.stop, chunk.prompt_tokens, chunk.timings)
        )
        return [last]

    def whole(self, done: Completion) -> dict[str, Any]:
        out = self._dict(done.text, done.tokens)
        out.update(self._summary(done.stop_reason, done.stop, done.prompt_tokens, done.timings))
        return out

    def _summary(
        self, reason: str, stop: str | None, n_prompt: int, timings: Timings
    ) -> dict[str, Any]:
        return {
            "stop": True,
            "model": self.model,
            "stop_type": _STOP_TYPES[reason],
            "stopping_word": stop or "",
            "tokens_predicted": timings.predicted_n,
            "tokens_evaluated": n_prompt,
            "tokens_cached": n_prompt + timings.predicted_n,
            "truncated": False,
            "timings": timings_dict(timings),
        }
