"""llama-cpp-python's server extras: ``/extras/tokenize``, ``/extras/tokenize/count`` and
``/extras/detokenize``, in its shapes, so that its clients (and ``python -m
llama_cpp.server`` users) keep them. As there: text is tokenized with the model's BOS
and special tokens parsed; tokens are detokenized with special tokens left out, and
without the space SentencePiece puts after a leading BOS."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.server import schema
from llama_cy.server.core import RouteSpec, Server
from llama_cy.server.inputs import is_int
from llama_cy.server.schema import ApiError

__all__ = ["routes"]

# ``model`` names any model or none (``Optional[str]`` there): one is served
# (llama-cpp-python picks its default too).
_TOKENIZE = {"input": (str,), "model": (str, type(None))}
_DETOKENIZE = {"tokens": (list,), "model": (str, type(None))}


def routes(server: Server) -> list[RouteSpec]:
    post = ["POST"]

    async def tokens_of(request: Request) -> list[int]:
        body = schema.check(schema.parse(await request.body()), _TOKENIZE, ("input",))
        tokens: list[int] = server.model.tokenize(
            body["input"], add_special=True, parse_special=True
        ).tolist()
        return tokens

    async def tokenize(request: Request) -> Response:
        return JSONResponse({"tokens": await tokens_of(request)})

    async def count(request: Request) -> Response:
        return JSONResponse({"count": len(await tokens_of(request))})

    async def detokenize(request: Request) -> Response:
        body = schema.check(schema.parse(await request.body()), _DETOKENIZE, ("tokens",))
        tokens = body["tokens"]
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
        return JSONResponse({"text": text})

    return [
        ("/extras/tokenize", tokenize, post, False),
        ("/extras/tokenize/count", count, post, False),
        ("/extras/detokenize", detokenize, post, False),
    ]
