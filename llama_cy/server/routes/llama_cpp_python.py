"""llama-cpp-python's server extras: ``/extras/tokenize``, ``/extras/tokenize/count`` and
``/extras/detokenize``, in its shapes, so that its clients (and ``python -m
llama_cpp.server`` users) keep them. As there: text is tokenized with the model's BOS
and special tokens parsed; tokens are detokenized with special tokens left out, and
without the space SentencePiece puts after a leading BOS."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.server import schema, worker
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.inputs import is_int
from llama_cy.server.schema import ApiError

__all__ = ["routes"]

# ``model`` names any model or none (``Optional[str]`` there): one is served
# (llama-cpp-python picks its default too).
_TOKENIZE = {"input": (str,), "model": (str, type(None))}
_DETOKENIZE = {"tokens": (list,), "model": (str, type(None))}
#: Texts and token lists longer than this are handled off the event loop.
_LARGE = 32 * 1024


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    def tokenized(text: str) -> list[int]:
        tokens: list[int] = server.model.tokenize(
            text, add_special=True, parse_special=True
        ).tolist()
        return tokens

    async def tokens_of(request: Request) -> list[int]:
        body = schema.check(await worker.read_json(request), _TOKENIZE, ("input",))
        text = body["input"]
        return await worker.run(tokenized, text) if len(text) > _LARGE else tokenized(text)

    async def tokenize(request: Request) -> Response:
        tokens = await tokens_of(request)
        return await worker.json_response({"tokens": tokens}, large=len(tokens) > _LARGE)

    async def count(request: Request) -> Response:
        return JSONResponse({"count": len(await tokens_of(request))})

    async def detokenize(request: Request) -> Response:
        body = schema.check(await worker.read_json(request), _DETOKENIZE, ("tokens",))
        tokens = body["tokens"]
        if len(tokens) > _LARGE:
            return JSONResponse({"text": await worker.run(detokenized, tokens)})
        return JSONResponse({"text": detokenized(tokens)})

    def detokenized(tokens: list[Any]) -> str:
        if not all(is_int(t) for t in tokens):
            raise ApiError(400, "'tokens' must be an array of integers", param="tokens")
        if tokens:
            server.preparer.tokens(tokens)  # range check: InvalidTokenError is a 400
        m = server.model
        raw = b"".join(m.token_to_piece(t) for t in tokens)
        # llama-cpp-python's: without the space SentencePiece puts after a leading BOS
        if tokens and tokens[0] == m.token_bos and raw[:1] == b" ":
            raw = raw[1:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:  # llama-cpp-python fails too (a 500 there)
            raise ApiError(400, "these tokens are not whole UTF-8 text", param="tokens") from None
        return text

    return [
        ("/extras/tokenize", tokenize, post, False),
        ("/extras/tokenize/count", count, post, False),
        ("/extras/detokenize", detokenize, post, False),
    ]
