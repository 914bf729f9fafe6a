"""Large JSON kept off the event loop: request bodies parsed, and answers built and
encoded, in a worker thread that hands the GIL back often.

A worker thread alone is not enough: the C ``json`` codec holds the GIL for its whole
call, so one ``json.loads`` of 100 MB of numbers (seconds) stops the event loop as
surely as running it there. So a body with many values is parsed by the pure-Python
scanner (strings still by the C one), and an answer is encoded piece by piece, each
piece a short C call. Both run on one thread of their own, so that a queue of large
bodies waits behind itself, not in front of every request's ``to_thread``."""

from __future__ import annotations

import asyncio
import json
import json.scanner
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from llama_cy.server import schema

__all__ = ["SMALL_BODY", "dumps", "json_response", "parse", "read_json", "run"]

#: A body up to this size is parsed on the event loop (a few milliseconds at most).
SMALL_BODY = 256 * 1024
#: Above this many separators a body is parsed by the pure-Python scanner.
_MANY_VALUES = 200_000
#: Items of a list encoded in one C call.
_SLICE = 512

_executor = ThreadPoolExecutor(1, thread_name_prefix="llama-cy-json")
_T = TypeVar("_T")


async def run(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` on the large-JSON thread."""
    return await asyncio.get_running_loop().run_in_executor(_executor, fn, *args)


async def parse(raw: bytes) -> Any:
    """The body's JSON (:func:`schema.parse`'s errors), parsed off the loop when large."""
    if len(raw) <= SMALL_BODY:
        return schema.parse(raw)
    return await run(_parse_large, raw)


async def read_json(request: Request) -> Any:
    """The request's body, read and :func:`parse`\\ d."""
    return await parse(await request.body())


def _parse_large(raw: bytes) -> Any:
    if raw.count(b",") + raw.count(b":") < _MANY_VALUES:
        return schema.parse(raw)
    decoder = json.JSONDecoder(parse_constant=schema.no_constant)
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        return decoder.decode(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise schema.ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise schema.ApiError(400, "the request body nests too deeply") from None


def _strict(value: Any) -> str:
    # Starlette's JSONResponse settings
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _lenient(value: Any) -> str:
    # server-sent events' (respond.sse): -inf log-probabilities pass as -Infinity
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float))


def _leaf(v: Any) -> bool:
    """A scalar, or a short container of scalars (a token's ``bytes``)."""
    if _scalar(v):
        return True
    if isinstance(v, (list, tuple)):
        return len(v) <= 64 and all(_scalar(x) for x in v)
    return False


def _flat(v: Any) -> bool:
    """Small enough to encode in one C call."""
    if isinstance(v, Mapping):
        return len(v) <= 64 and all(_leaf(x) for x in v.values())
    return _leaf(v)


def _encode(value: Any, out: list[str], encode_one: Callable[[Any], str]) -> None:
    if _flat(value):
        out.append(encode_one(value))
    elif isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            out.append(encode_one(value))  # json's key conversions: rare, and kept exact
            return
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            out.append(("," if i else "") + encode_one(k) + ":")
            _encode(v, out, encode_one)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        i, n = 0, len(value)
        while i < n:
            if i:
                out.append(",")
            if _flat(value[i]):  # a run of flat items in one call
                j = i + 1
                while j < n and j - i < _SLICE and _flat(value[j]):
                    j += 1
                out.append(encode_one(value[i:j])[1:-1])
                i = j
            else:
                _encode(value[i], out, encode_one)
                i += 1
        out.append("]")
    else:
        out.append(encode_one(value))


def dumps(value: Any, *, allow_nan: bool = False) -> bytes:
    """``value`` as JSON bytes (what Starlette's JSONResponse sends; with ``allow_nan``,
    what ``json.dumps`` does), in short C calls."""
    out: list[str] = []
    _encode(value, out, _lenient if allow_nan else _strict)
    return "".join(out).encode("utf-8")


async def json_response(
    value: Any, *, large: bool, status_code: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON answer; one the caller knows to be ``large`` is encoded off the loop."""
    if not large:
        return JSONResponse(value, status_code=status_code, headers=headers)
    body = await run(dumps, value)
    return Response(body, status_code, headers, media_type="application/json")
