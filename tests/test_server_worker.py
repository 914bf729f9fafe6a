"""The server's large-JSON worker (:mod:`llama_cy.server.worker`): its piecewise encoder
gives the bytes ``json.dumps`` gives, and its parser of bodies with many values (the
pure-Python scanner) reads what ``json.loads`` reads, with the same 400s."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_cy.server import worker
from llama_cy.server.schema import ApiError

finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers() | finite | st.text()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=80) | st.dictionaries(st.text(), inner, max_size=80),
    max_leaves=400,
)


def reference(value: Any, allow_nan: bool = False) -> bytes:
    text = json.dumps(value, ensure_ascii=False, allow_nan=allow_nan, separators=(",", ":"))
    return text.encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(values)
def test_dumps_is_json_dumps(value: Any) -> None:
    assert worker.dumps(value) == reference(value)


def test_dumps_of_large_shapes() -> None:
    top = [{"id": i, "token": f"t{i}", "logprob": -i / 7, "bytes": [116, 48]} for i in range(3000)]
    answer = {
        "choices": [{"logprobs": {"content": [{"token": "a", "top_logprobs": top}] * 5}}],
        "tuple": tuple(range(2000)),
        "keys": {1: "int key", "x": [[1, 2]] * 700},
        "vectors": [[0.5] * 1500, []],
        "": {},
    }
    assert worker.dumps(answer) == reference(answer)
    with pytest.raises(ValueError, match="not JSON compliant"):
        worker.dumps({"logprob": [-math.inf] * 2000})  # as Starlette's JSONResponse
    lenient = {"logprob": [-math.inf] * 2000}
    assert worker.dumps(lenient, allow_nan=True) == reference(lenient, allow_nan=True)


@pytest.mark.parametrize(
    "value",
    [
        {"prompt": list(range(300_000)), "n": 1.5, "s": 'é\\u00e9"', "x": [None, True, {}]},
        [{"a": [1, 2.5e-3, "b"]}] * 120_000,
    ],
)
def test_parse_of_many_values_is_json_loads(value: Any) -> None:
    raw = json.dumps(value).encode()
    assert len(raw) > worker.SMALL_BODY
    assert asyncio.run(worker.parse(raw)) == value


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" + b"1," * 300_000 + b"]", "not valid JSON"),
        (b"[" + b"1," * 300_000 + b"NaN]", "NaN is not a JSON value"),
        (b"[" * 300_000, "nests too deeply"),
        (b'["\xff' + b",1" * 300_000 + b'"]', "not valid JSON"),
    ],
)
def test_parse_of_many_values_refuses_what_json_loads_refuses(raw: bytes, message: str) -> None:
    with pytest.raises(ApiError, match=message) as info:
        asyncio.run(worker.parse(raw))
    assert info.value.status == 400
