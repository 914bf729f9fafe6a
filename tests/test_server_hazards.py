"""Hostile requests against ``llama-cy serve``: each gets a 4xx JSON error (or a normal
answer), and the server goes on serving with every slot free.

The second half is a seeded fuzz test: hypothesis writes request bodies for every
endpoint (``LLAMA_CY_FUZZ_COUNT`` examples per endpoint, default 100).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from serving import Server

import llama_cy as lc
from llama_cy.server import schema

MESSAGES = [{"role": "user", "content": "Say hi"}]


@pytest.fixture(scope="module")
def server(gemma_path: Path) -> Iterator[Server]:
    # -n 8 caps a request that gives no limit; one that asks for more (a fuzzed max_tokens
    # such as 2**31 - 1) gets it, as from llama-server, until its slot's context is full:
    # -c 512 keeps that to 256 tokens (a Gemma token takes about a second on lavapipe).
    with Server(gemma_path, "-np", "2", "-c", "512", "-t", "2", "-n", "8") as s:
        yield s


def assert_error(status: int, body: Any, code: int = 400) -> None:
    assert status == code, body
    assert isinstance(body, dict), body
    error = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)


def assert_serves(server: Server) -> None:
    """/health answers, a greedy request completes and every slot is free."""
    status, _, body = server.request("GET", "/health")
    assert status == 200, body
    status, _, body = server.request(
        "POST",
        "/v1/completions",
        {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0},
    )
    assert status == 200, body
    assert body["usage"]["completion_tokens"] >= 1
    server.wait_idle(5)


def test_hostile_sampler_settings(server: Server) -> None:
    huge = 2**31 - 1
    for body in (
        {"prompt": "hi", "repeat_penalty": 1.1, "repeat_last_n": huge},
        {"prompt": "hi", "dry_multiplier": 0.8, "dry_penalty_last_n": huge},
        {"prompt": "hi", "seed": -1, "temperature": 1.0},
    ):
        status, _, out = server.request("POST", "/completion", body)
        assert status == 200, (body, out)
        assert out["tokens_predicted"] >= 1
    status, _, out = server.request("POST", "/completion", {"prompt": "hi", "seed": 2**40})
    assert_error(status, out)
    for window in (-1, -7):  # llama-server b11434's hard limit: 0 and up (the flag takes -1)
        status, _, out = server.request(
            "POST", "/completion", {"prompt": "hi", "repeat_penalty": 1.1, "repeat_last_n": window}
        )
        assert_error(status, out)
    assert_serves(server)


def test_grammars_that_cannot_be_met(server: Server, gemma_path: Path) -> None:
    deep = "root ::= " + "(" * 20000 + '"a"' + ")" * 20000
    status, _, out = server.request("POST", "/completion", {"prompt": "hi", "grammar": deep})
    assert_error(status, out)
    assert "deeper" in out["error"]["message"]

    grammar = 'root ::= "x"'
    with lc.LlamaModel.load(gemma_path, vocab_only=True) as model:
        g = lc.LlamaSampler.grammar(model, grammar)
        only = [t for t in range(model.n_vocab) if g.allows(t)]
    assert only
    never = [[t, False] for t in only]  # llama-server's "never this token"
    for stream in (False, True):
        status, _, out = server.request(
            "POST",
            "/completion",
            {"prompt": "hi", "grammar": grammar, "logit_bias": never, "stream": stream},
        )
        if stream:  # the status line went out first: the error is the stream's last event
            assert status == 200
            events = [
                json.loads(line[6:]) for line in out.splitlines() if line.startswith("data: ")
            ]
            assert_error(400, events[-1])
        else:
            assert_error(status, out)
            assert "grammar" in out["error"]["message"]
    status, _, out = server.request(
        "POST", "/completion", {"prompt": "hi", "grammar": grammar, "repeat_penalty": -1.0}
    )
    assert status in (200, 400), out
    assert_serves(server)


def test_malformed_structures(server: Server) -> None:
    cases: list[tuple[str, Any]] = [
        ("/v1/chat/completions", {"messages": MESSAGES, "tools": [1]}),
        ("/v1/chat/completions", {"messages": MESSAGES, "tools": [{"type": "function"}]}),
        (
            "/v1/chat/completions",
            {
                "messages": MESSAGES,
                "tool_choice": {"function": 3},
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            },
        ),
        (
            "/v1/chat/completions",
            {
                "messages": MESSAGES,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": {"type": "object", "properties": ["a", "b"]}},
                },
            },
        ),
        ("/completion", {"prompt": "hi", "json_schema": {"properties": [1]}}),
        ("/completion", {"prompt": "hi", "logit_bias": [[1]]}),
    ]
    for path, body in cases:
        status, _, out = server.request("POST", path, body)
        assert_error(status, out)
    # a soft limit of llama-server's clamps: top_k 2**64 is its largest int32
    body = {"prompt": "hi", "top_k": 2**64, "n_predict": 2}
    status, _, out = server.request("POST", "/completion", body)
    assert status == 200, out
    assert out["generation_settings"]["top_k"] == 2**31 - 1
    for raw in (
        b"[" * 100000 + b"]" * 100000,
        b'{"prompt": NaN}',
        b'{"prompt": "hi", "temperature": Infinity}',
    ):
        status, _, out = server.request("POST", "/v1/completions", raw=raw)
        assert_error(status, out)
    assert_serves(server)


def test_stop_strings_on_v1_completions(server: Server) -> None:
    for path in ("/v1/completions", "/v1/chat/completions"):
        body: dict[str, Any] = {"stop": ["\n"], "max_tokens": 4, "temperature": 0}
        body |= {"prompt": "hi"} if path == "/v1/completions" else {"messages": MESSAGES}
        status, _, out = server.request("POST", path, body)
        assert status == 200, out
    assert_serves(server)


# ---- fuzzing -----------------------------------------------------------------------

FUZZ_COUNT = int(os.environ.get("LLAMA_CY_FUZZ_COUNT", "100"))

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Values of one JSON type: edge numbers included, for fields of that declared type.
_BY_TYPE: dict[type, st.SearchStrategy[Any]] = {
    int: st.integers(-1, 64) | st.sampled_from([-(2**31), 2**31 - 1, 2**32, 2**64]),
    float: st.floats(-2.0, 4.0) | st.sampled_from([0.0, -1e30, 1e30, 5e-324]),
    str: st.text(max_size=20),
    bool: st.booleans(),
    list: st.lists(json_scalars, max_size=4),
    dict: st.dictionaries(st.text(max_size=8), json_scalars, max_size=3),
    type(None): st.none(),
}


def typed(types: tuple[type, ...]) -> st.SearchStrategy[Any]:
    """A value of one of a field's declared JSON types (``schema``'s tables), or, one
    time in four, any JSON at all."""
    kinds = [int, float] if float in types else [t for t in types if t in _BY_TYPE]
    return st.one_of(*(_BY_TYPE[t] for t in kinds), json_values)


messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "user", "system", "assistant", "tool", "x"]),
            "content": st.text(max_size=30) | st.text(max_size=30) | json_values,
        }
    ),
    min_size=1,
    max_size=3,
)
#: endpoint -> (its required fields' strategies, its field table from ``schema``)
ENDPOINTS: dict[str, tuple[dict[str, st.SearchStrategy[Any]], Mapping[str, tuple[type, ...]]]] = {
    "/v1/completions": (
        {"prompt": st.text(max_size=40) | st.lists(st.integers(-5, 300000), max_size=8)},
        schema.COMPLETION,
    ),
    "/v1/chat/completions": ({"messages": messages | json_values}, schema.CHAT),
    "/completion": ({"prompt": st.text(max_size=40) | json_values}, schema.NATIVE_COMPLETION),
    "/tokenize": (
        {"content": st.text(max_size=40) | json_values},
        {"add_special": (bool,), "parse_special": (bool,), "with_pieces": (bool,)},
    ),
    "/detokenize": (
        {"tokens": st.lists(st.integers(-(2**40), 2**40), max_size=8) | json_values},
        {},
    ),
    "/apply-template": ({"messages": messages | json_values}, {}),
}
EMBEDDING_ENDPOINTS: dict[
    str, tuple[dict[str, st.SearchStrategy[Any]], Mapping[str, tuple[type, ...]]]
] = {
    "/v1/embeddings": ({"input": st.text(max_size=40) | json_values}, schema.EMBEDDINGS),
}


def bodies(path: str) -> st.SearchStrategy[Any]:
    """Mostly the endpoint's own fields (the required ones, then up to four others with
    values of their declared types), sometimes any JSON at all."""
    required, table = {**ENDPOINTS, **EMBEDDING_ENDPOINTS}[path]
    known = st.fixed_dictionaries(required)
    optional = sorted(set(table) - set(required))
    if optional:
        extra = st.sampled_from(optional).flatmap(
            lambda name: st.tuples(st.just(name), typed(table[name]))
        )
        known = st.builds(lambda a, b: {**dict(b), **a}, known, st.lists(extra, max_size=4))
    return st.one_of(known, known, known, json_values)


@pytest.fixture(scope="module")
def embedding_server(gemma_path: Path) -> Iterator[Server]:
    with Server(gemma_path, "--embeddings", "--pooling", "mean", "-c", "512", "-t", "2") as s:
        yield s


def fuzz(server: Server, path: str) -> None:
    """FUZZ_COUNT seeded bodies for ``path``: each answered 2xx or 4xx, errors as JSON."""
    seen: list[int] = []

    @seed(0)
    @settings(
        max_examples=FUZZ_COUNT,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(body=bodies(path))
    def check(body: Any) -> None:
        status, headers, out = server.request("POST", path, body)
        seen.append(status)
        assert 200 <= status < 300 or 400 <= status < 500, (status, body, out)
        if headers.get("content-type", "").startswith("text/event-stream"):
            return
        assert isinstance(out, (dict, list)), (status, body, out)
        if status >= 400:
            assert_error(status, out, status)

    check()
    # The bodies reach both sides: some are served, some refused.
    assert any(200 <= s < 300 for s in seen), seen
    assert any(400 <= s < 500 for s in seen), seen


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_fuzzed_requests(server: Server, path: str) -> None:
    fuzz(server, path)
    assert_serves(server)


@pytest.mark.slow
def test_fuzzed_embedding_requests(embedding_server: Server) -> None:
    fuzz(embedding_server, "/v1/embeddings")
    status, _, out = embedding_server.request("POST", "/v1/embeddings", {"input": "hello"})
    assert status == 200, out
    assert len(out["data"][0]["embedding"]) > 0
