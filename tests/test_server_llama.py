"""``llama-cy serve`` as llama-server: its flags, its own routes and shapes (plain HTTP),
OpenAI's routes (the ``openai`` client) and Anthropic's Messages API (the ``anthropic``
client), on tiny models the tests write."""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import numpy as np
import openai
import pytest
from offload import lavapipe_reserve_fault
from serving import Server, free_port, sse_events
from tiny_model import write_tiny_bert, write_tiny_llama, write_tiny_lora

from llama_cy import LlamaModel, cli
from llama_cy.chat import REASONING_FORMATS
from llama_cy.cli.serve import check_flags
from llama_cy.flags import FLAGS, INERT, REFUSED
from llama_cy.server.flag_settings import settings_from_args

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def tiny_fim(tmp_path_factory: pytest.TempPathFactory, llama_cpp_source: Path) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("m") / "tiny-fim.gguf", fim=True)


@pytest.fixture(scope="module")
def lora_path(tiny_fim: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = LlamaModel.load(tiny_fim)
    try:
        return write_tiny_lora(tmp_path_factory.mktemp("l") / "lora.gguf", model)
    finally:
        model.close()


@pytest.fixture(scope="module")
def slot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def server(tiny_fim: Path, lora_path: Path, slot_dir: Path) -> Iterator[Server]:
    args = ["-np", "2", "-c", "1024", "-t", "2", "--alias", "tiny,alpha", "--tags", "t1,t2"]
    args += ["--metrics", "--props", "--slot-save-path", str(slot_dir)]
    args += ["--lora", str(lora_path), "--lora-init-without-apply", "--no-warmup"]
    with Server(tiny_fim, *args) as s:
        yield s


def stream(server: Server, path: str, body: dict[str, Any]) -> list[Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    lines = resp.read().splitlines()
    conn.close()
    return sse_events(lines)


# ---- flags ---------------------------------------------------------------------------


def parse(*argv: str) -> Any:
    return cli.parser().parse_args(["serve", *argv])


def llama_server_flags(arg_cpp: str) -> set[str]:
    """Every spelling of llama-server's flags in llama.cpp's argument table (arg.cpp's
    add_opt filter: an option applies where its examples name the server or the common
    set, unless it excludes the server). Checked once against llama-server --help of
    this tree: the same 413 spellings."""
    source = re.sub(r"^\s*//[^\n]*", "", arg_cpp, flags=re.M)
    out: set[str] = set()
    for block in source.split("add_opt(common_arg(")[1:]:
        names = re.match(r"\s*\{([^{}]*)\}(\s*,\s*\{([^{}]*)\})?", block)
        if names is None:  # a positional-less form: none in b11434
            continue
        spelled = re.findall(r'"(-[^"]+)"', names.group(1) + (names.group(3) or ""))
        found = re.search(r"\.set_examples\((\{[^}]*\}|\w+)\)", block)
        examples = found.group(1) if found else "{LLAMA_EXAMPLE_COMMON}"
        if not examples.startswith("{"):  # a named list (mmproj_examples)
            named = re.search(examples + r"\s*=\s*\{([^}]*)\}", source)
            assert named is not None, examples
            examples = named.group(1)
        excluded = re.search(r"\.set_excludes\(\{([^}]*)\}\)", block)
        if ("LLAMA_EXAMPLE_SERVER" in examples or "LLAMA_EXAMPLE_COMMON" in examples) and not (
            excluded and "LLAMA_EXAMPLE_SERVER" in excluded.group(1)
        ):
            out.update(spelled)
    return out


def test_every_flag_of_llama_server_is_known(llama_cpp_source: Path) -> None:
    """Each spelling of each llama-server flag is one of serve's (used, inert or refused,
    as the table says)."""
    arg_cpp = llama_cpp_source / "common" / "arg.cpp"
    if not arg_cpp.is_file():
        pytest.skip("needs llama.cpp's common/arg.cpp (this run has only some of its tree)")
    theirs = llama_server_flags(arg_cpp.read_text())
    assert len(theirs) > 400
    assert {"--ctx-size", "-nocb", "--mmproj-device", "--adaptive-target", "--usage"} <= theirs
    subcommands = cli.parser()._subparsers
    assert subcommands is not None
    serve: Any = subcommands._group_actions[0].choices
    assert sorted(theirs - set(serve["serve"]._option_string_actions)) == []


def test_request_limits_are_server_schemas(llama_cpp_source: Path) -> None:
    """schema.LIMITS is server-schema.cpp's table of field limits (n_cmpl's is -np's, read
    where the server knows it; the #if 0 part is compiled out there)."""
    from llama_cy.server.schema import LIMITS

    path = llama_cpp_source / "tools" / "server" / "server-schema.cpp"
    if not path.is_file():
        pytest.skip("needs llama.cpp's tools/server/server-schema.cpp")
    source = re.sub(r"#if 0.*?#endif", "", path.read_text(), flags=re.S)
    source = re.sub(r"//[^\n]*", "", source)  # commented out: t_max_prompt_ms, typical_p's
    bound = {"INT32_MAX": 2**31 - 1, "std::numeric_limits<int64_t>::max()": 2**63 - 1,
             "std::numeric_limits<float>::infinity()": math.inf,
             "-std::numeric_limits<float>::max()": -math.inf}  # fmt: skip
    theirs = {}
    for name, kind, lo, hi in re.findall(
        r'field_num\("([\w.]+)"[^;]*?->set_(hard_limits|limits)\(([^,]+), ([^)]+\)?)\)', source
    ):
        if name != "n_cmpl":
            ends = [x.strip() for x in (lo, hi)]
            lo_hi = [bound[x] if x in bound else float(x.rstrip("f")) for x in ends]
            theirs[name] = (*lo_hi, kind == "hard_limits")
    assert len(theirs) > 15
    ours = {k: v for k, v in LIMITS.items() if k not in ("max_completion_tokens", "max_tokens")}
    assert ours == theirs


def test_flag_values_reach_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "777")
    monkeypatch.setenv("LLAMA_ARG_N_PARALLEL", "3")
    args = parse("-np", "2", "-ctk", "q8_0", "--alias", "b,a", "--api-key", "k1,k2", "-fa")
    s = settings_from_args(args, "m.gguf")
    assert s.ctx_size == 777  # from the environment
    assert s.n_parallel == 2  # the command line wins over it
    assert s.context["type_k"] == "q8_0"
    assert s.model_id == "a"  # llama-server's first alias in sorted order
    assert s.api_keys == ("k1", "k2")
    assert s.flash_attn is True
    monkeypatch.delenv("LLAMA_ARG_N_PARALLEL")
    auto = settings_from_args(parse(), "m.gguf")
    assert auto.n_parallel == 4  # --parallel auto
    assert auto.unified  # with a unified KV cache, as llama-server


def test_refused_and_inert_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = next(f for f in FLAGS if f.status == REFUSED and f.name == "--spec-ngram-size-n")
    with pytest.raises(SystemExit, match="--spec-ngram-size-n is not supported: removed"):
        check_flags(parse("--spec-ngram-size-n", "2"), ["--spec-ngram-size-n", "2"])
    assert refused.note
    with pytest.raises(SystemExit, match="--no-cont-batching"):
        check_flags(parse("-nocb"), ["-nocb"])
    monkeypatch.setenv("LLAMA_ARG_CONT_BATCHING", "0")  # the refused value, from the environment
    with pytest.raises(SystemExit, match="--no-cont-batching is not supported"):
        check_flags(parse(), [])
    monkeypatch.delenv("LLAMA_ARG_CONT_BATCHING")
    reasoning = next(f for f in FLAGS if f.dest == "reasoning_format")
    assert tuple(reasoning.choices or ()) == REASONING_FORMATS  # one list of the formats
    inert = [f for f in FLAGS if f.status == INERT]
    assert all(f.note for f in inert)  # each says why it is harmless
    check_flags(parse("--threads-http", "4", "--offline"), ["--threads-http", "--offline"])


def test_refused_flag_stops_the_server(tiny_fim: Path) -> None:
    with pytest.raises(RuntimeError, match="--spec-ngram-size-n is not supported"):
        Server(tiny_fim, "--spec-ngram-size-n", "2")


# ---- routes ----------------------------------------------------------------------------


def test_models_aliases_tags_and_any_model_name(server: Server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    card = client.models.list().data[0]
    assert card.id == "alpha"
    assert card.model_extra is not None
    assert card.model_extra["aliases"] == ["alpha", "tiny"]
    assert card.model_extra["tags"] == ["t1", "t2"]
    out = client.completions.create(model="whatever", prompt=PROMPT, max_tokens=2)
    assert out.choices[0].finish_reason == "length"


def test_completion_shapes(server: Server) -> None:
    status, _, body = server.request(
        "POST", "/completion", {"prompt": PROMPT, "n_predict": 4, "n_probs": 3}
    )
    assert status == 200, body
    for key in ("generation_settings", "prompt", "has_new_line", "tokens_cached", "timings"):
        assert key in body
    assert body["generation_settings"]["n_predict"] == 4
    assert body["prompt"].endswith(PROMPT)
    assert body["tokens"] == []
    probs = body["completion_probabilities"]
    assert len(probs) == 4
    assert all(len(p["top_logprobs"]) == 3 and p["logprob"] <= 0 for p in probs)
    # response_fields keeps only those (a/b reaches into objects)
    status, _, body = server.request(
        "POST",
        "/completion",
        {"prompt": PROMPT, "n_predict": 2, "response_fields": ["content", "timings/prompt_n"]},
    )
    assert set(body) == {"content", "timings/prompt_n"}


def test_completion_prompt_forms(server: Server) -> None:
    status, _, tokens = server.request("POST", "/tokenize", {"content": PROMPT})
    ids = tokens["tokens"]
    greedy = {"n_predict": 3, "temperature": 0, "cache_prompt": False}
    _, _, one = server.request("POST", "/completion", {"prompt": PROMPT, **greedy})
    _, _, several = server.request(
        "POST", "/completion", {"prompt": [PROMPT, {"prompt_string": PROMPT}], **greedy}
    )
    assert isinstance(several, list)
    assert [r["index"] for r in several] == [0, 1]
    assert several[0]["content"] == several[1]["content"] == one["content"]
    _, _, mixed = server.request("POST", "/completion", {"prompt": [1, *ids], **greedy})
    assert mixed["content"] == one["content"]  # BOS as a token, then the text's tokens
    status, _, err = server.request(
        "POST",
        "/completion",
        {"prompt": {"prompt_string": "x <__media__>", "multimodal_data": ["AAAA"]}},
    )
    assert status == 400
    assert "multimodal" in err["error"]["message"]


def test_completion_stream_tokens_timings_and_progress(server: Server) -> None:
    body = {
        "prompt": PROMPT * 20,
        "n_predict": 4,
        "stream": True,
        "timings_per_token": True,
        "return_progress": True,
        "cache_prompt": False,
    }
    events = stream(server, "/completion", body)
    progress = [e for e in events if "prompt_progress" in e]
    assert progress[0]["prompt_progress"]["processed"] == progress[0]["prompt_progress"]["cache"]
    assert progress[-1]["prompt_progress"]["processed"] == progress[-1]["prompt_progress"]["total"]
    tokens = [e for e in events if e["tokens"]]
    assert all("timings" in e for e in tokens)
    assert events[-1]["stop"] is True
    assert events[-1]["generation_settings"]["n_predict"] == 4


def test_logit_bias_forms_and_ignore_eos(server: Server) -> None:
    _, _, first = server.request(
        "POST",
        "/completion",
        {"prompt": PROMPT, "n_predict": 1, "temperature": 0, "return_tokens": True},
    )
    token = first["tokens"][0]
    for bias in ([[token, False]], {str(token): -100}):
        _, _, out = server.request(
            "POST",
            "/completion",
            {"prompt": PROMPT, "n_predict": 1, "temperature": 0, "return_tokens": True,
             "logit_bias": bias},
        )  # fmt: skip
        assert out["tokens"][0] != token
    _, _, eos = server.request(
        "POST", "/completion", {"prompt": PROMPT, "n_predict": 2, "ignore_eos": True}
    )
    bias = eos["generation_settings"]["logit_bias"]
    assert bias
    assert all(b["bias"] is None for b in bias)  # -inf is null in JSON


def test_logit_bias_on_the_openai_routes(server: Server) -> None:
    """As on /completion (llama-server reads every route's logit_bias alike): arrays and
    text keys; llama-cpp-python's logit_bias_type "tokens" makes every key a text."""
    _, _, first = server.request(
        "POST",
        "/completion",
        {"prompt": PROMPT, "n_predict": 1, "temperature": 0, "return_tokens": True},
    )
    token = first["tokens"][0]

    def first_token(**fields: Any) -> tuple[int, Any]:
        body = {"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "logprobs": 1, **fields}
        status, _, out = server.request("POST", "/v1/completions", body)
        if status != 200:
            return status, out
        return status, out["choices"][0]["text"]

    status, piece = first_token()
    assert status == 200

    def tokens_of(text: str) -> Any:
        return server.request("POST", "/tokenize", {"content": text})[2]["tokens"]

    # a text that is that token alone (SentencePiece adds the space itself)
    word = next(t for t in (piece, piece.lstrip()) if tokens_of(t) == [token])
    for bias in ([[token, False]], {word: -100}, {str(token): -100}):
        status, text = first_token(logit_bias=bias)
        assert status == 200, text
        assert text != piece, bias
    # "tokens": the key is a text, so the digits of the id bias other tokens
    assert first_token(logit_bias={str(token): -100}, logit_bias_type="tokens") == (200, piece)
    status, text = first_token(logit_bias={word: -100}, logit_bias_type="tokens")
    assert text != piece
    status, out = first_token(logit_bias={word: -100}, logit_bias_type="words")
    assert status == 400, out
    assert out["error"]["param"] == "logit_bias_type"


def test_min_tokens(server: Server, tiny_fim: Path) -> None:
    """llama-cpp-python's min_tokens: its end-of-sequence token waits that many tokens
    (here the bias makes it the first choice at every step)."""
    with LlamaModel.load(tiny_fim, vocab_only=True) as model:
        eos = model.token_eos

    def run(**fields: Any) -> Any:
        body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0,
                "logit_bias": {str(eos): 100}, **fields}  # fmt: skip
        return server.request("POST", "/v1/completions", body)

    status, _, out = run()
    assert status == 200, out
    assert (out["usage"]["completion_tokens"], out["choices"][0]["finish_reason"]) == (0, "stop")
    status, _, out = run(min_tokens=3)
    assert status == 200, out
    assert (out["usage"]["completion_tokens"], out["choices"][0]["finish_reason"]) == (3, "stop")
    status, _, out = run(min_tokens=-1)
    assert (status, out["error"]["param"]) == (400, "min_tokens")


def test_unsupported_fields_are_refused(server: Server) -> None:
    for field, value in (("chat_format", 3), ("chat_parser", "peg")):
        status, _, body = server.request(
            "POST", "/completion", {"prompt": PROMPT, "n_predict": 1, field: value}
        )
        assert status == 400, field
        assert body["error"]["param"] == field
    # honoured by /completion and the chat routes, not (yet) by /v1/completions
    status, _, body = server.request(
        "POST", "/v1/completions", {"prompt": "Hi", "post_sampling_probs": True}
    )
    assert (status, body["error"]["param"]) == (400, "post_sampling_probs")
    # their "off" values are fine
    status, _, _ = server.request("POST", "/completion", {"prompt": PROMPT, "n_predict": 1,
                                                           "chat_format": None})  # fmt: skip
    assert status == 200


def test_lazy_grammar_fields(server: Server, tiny_fim: Path) -> None:
    """/completion's grammar_lazy, grammar_triggers and preserved_tokens, as llama-server
    reads them: a lazy grammar waits for its trigger (one that never comes leaves the
    reply free), a one-token trigger word must be preserved, preserved special tokens
    show as text; a trigger type llama.cpp does not know (it asserts) is a 400."""
    body = {"prompt": PROMPT, "n_predict": 6, "samplers": ["top_k"], "top_k": 1}
    free = server.request("POST", "/completion", body)[2]["content"]
    grammar = 'root ::= "zzz" [a-z]*'
    strict = server.request("POST", "/completion", {**body, "grammar": grammar})[2]
    assert strict["content"].startswith("zzz")
    never = [{"type": 2, "value": "Q{9}W{9}"}]  # a pattern the reply does not hold
    lazy = {**body, "grammar": grammar, "grammar_lazy": True, "grammar_triggers": never}
    status, _, out = server.request("POST", "/completion", lazy)
    assert status == 200, out
    assert out["content"] == free != strict["content"]
    with LlamaModel.load(tiny_fim, vocab_only=True) as model:
        bos = model.token_bos  # a control token: no text unless shown
        piece = model.token_to_piece(bos, special=True).decode()
    forced = {**body, "logit_bias": [[bos, 100]], "n_predict": 1}
    assert server.request("POST", "/completion", forced)[2]["content"] == ""
    shown = server.request("POST", "/completion", {**forced, "preserved_tokens": [piece]})[2]
    assert shown["content"] == piece
    for extra, message in (
        ({"grammar_lazy": True}, "no triggers set for lazy grammar"),
        ({"grammar_triggers": [{"type": 1, "value": piece}]}, "marked as preserved token"),
        ({"grammar_triggers": [{"type": 9, "value": "x"}]}, "0 to 3"),
        ({"grammar_triggers": [{"type": 0, "value": "x", "token": -1}]}, "token id below"),
        ({"preserved_tokens": [1]}, "array of strings"),
    ):
        status, _, out = server.request("POST", "/completion", {**body, "grammar": grammar,
                                                                **extra})  # fmt: skip
        assert status == 400, extra
        assert message in out["error"]["message"]
    assert server.request("POST", "/completion", body)[2]["content"] == free


def test_fields_keep_llama_servers_limits(server: Server) -> None:
    """server-schema.cpp's limits: a soft one clamps the value (top_p 1.5 is 1, a negative
    temperature 0), a hard one refuses it in llama-server's words."""
    body = {"prompt": PROMPT, "n_predict": 1}
    clamped = {"top_p": 1.5, "min_p": -1.0, "temperature": -2.0, "top_k": -5, "mirostat": 7,
               "xtc_threshold": 3.0, "adaptive_target": 4.0}  # fmt: skip
    status, _, out = server.request("POST", "/completion", {**body, **clamped})
    assert status == 200, out
    got = out["generation_settings"]
    assert (got["top_p"], got["min_p"], got["temperature"], got["top_k"]) == (1.0, 0.0, 0.0, 0)
    assert (got["mirostat"], got["xtc_threshold"], got["adaptive_target"]) == (2, 1.0, 1.0)
    for field, value, shown in (
        ("repeat_last_n", -1, "0 <= value <= 2147483647, but got -1"),
        ("dry_penalty_last_n", -1, "0 <= value <= 2147483647, but got -1"),
        ("adaptive_decay", 1.5, "0.000000 <= value <= 0.990000, but got 1.500000"),
        ("n_indent", -1, "0 <= value <= 2147483647, but got -1"),
        ("n_predict", -2, "-1 <= value <= 2147483647, but got -2"),
        ("t_max_predict_ms", -3, "-1 <= value <= 9223372036854775807, but got -3"),
    ):
        status, _, out = server.request("POST", "/completion", {**body, field: value})
        assert status == 400, field
        assert out["error"]["message"] == f"Field '{field}': Value must be between {shown}"
    # of n_predict's names the first given is read: max_tokens is not looked at then
    status, _, out = server.request("POST", "/completion", {**body, "max_tokens": -9})
    assert status == 200, out


def test_post_sampling_probs_in_chat(server: Server) -> None:
    """On the chat routes too, as llama-server: "prob" and "top_probs" of what the chain
    left (top_k 3: three candidates whose probabilities add up to 1)."""
    body = {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "logprobs": True,
        "top_logprobs": 5, "top_k": 3, "temperature": 1.0, "post_sampling_probs": True,
    }  # fmt: skip
    status, _, out = server.request("POST", "/v1/chat/completions", body)
    assert status == 200, out
    for step in out["choices"][0]["logprobs"]["content"]:
        assert 0.0 < step["prob"] <= 1.0
        assert "logprob" not in step
        assert len(step["top_probs"]) == 3
        assert sum(t["prob"] for t in step["top_probs"]) == pytest.approx(1.0, abs=1e-4)
    events = stream(server, "/v1/chat/completions", {**body, "stream": True})
    chunks = [e for e in events if isinstance(e, dict)]  # not the closing [DONE]
    steps = [s for e in chunks for c in e.get("choices", []) if c.get("logprobs")
             for s in c["logprobs"]["content"]]  # fmt: skip
    assert steps
    assert all("top_probs" in s for s in steps)


def test_post_sampling_probs(server: Server) -> None:
    """llama-server's post-sampling probabilities: those of the distribution the sampler
    chain left (top_k 3 leaves 3 tokens whose probabilities add up to 1), not the
    model's over the whole vocabulary."""
    body = {"prompt": PROMPT, "n_predict": 4, "n_probs": 5, "temperature": 1.0, "top_k": 3}
    _, _, raw = server.request("POST", "/completion", body)
    _, _, post = server.request("POST", "/completion", {**body, "post_sampling_probs": True})
    assert post["generation_settings"]["post_sampling_probs"] is True
    steps = post["completion_probabilities"]
    assert len(steps) == 4
    for step in steps:
        assert "logprob" not in step
        assert 0.0 < step["prob"] <= 1.0
        top = step["top_probs"]
        assert 1 <= len(top) <= 3  # what top_k left, though 5 were asked for
        probs = [t["prob"] for t in top]
        assert probs == sorted(probs, reverse=True)
        if len(top) == 3:
            assert sum(probs) == pytest.approx(1.0, abs=1e-4)
        assert step["id"] in [t["id"] for t in top]
        assert step["prob"] == next(t["prob"] for t in top if t["id"] == step["id"])
    # without the field: the model's log-probabilities over the whole vocabulary
    first = raw["completion_probabilities"][0]
    assert len(first["top_logprobs"]) == 5
    assert all(t["logprob"] <= 0.0 for t in first["top_logprobs"])
    # streamed, the same shape
    events = stream(server, "/completion", {**body, "post_sampling_probs": True, "stream": True})
    probs = [e["completion_probabilities"] for e in events if e.get("completion_probabilities")]
    assert probs
    assert all("top_probs" in p[0] for p in probs)


def test_chat_choices_prefill_and_verbose(server: Server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    out = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Hi"}], n=2, max_tokens=2
    )
    assert [c.index for c in out.choices] == [0, 1]
    # as llama-server: at most one choice per slot (-np 2), the seed + j for choice j
    with pytest.raises(openai.BadRequestError, match="Field 'n': Value must be between 1"):
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], n=3, max_tokens=2
        )
    body = {"prompt": PROMPT, "n_predict": 6, "temperature": 1.5, "top_k": 0, "top_p": 1.0}
    pair = server.request("POST", "/completion", {**body, "seed": 7, "n_cmpl": 2})[2]
    alone = [server.request("POST", "/completion", {**body, "seed": s})[2] for s in (7, 8)]
    assert [r["index"] for r in pair] == [0, 1]
    assert [r["content"] for r in pair] == [r["content"] for r in alone]
    assert [r["generation_settings"]["seed"] for r in pair] == [7, 8]
    # A final assistant message is continued (llama-server's prefill), shown by __verbose.
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}]
    status, _, body = server.request(
        "POST", "/chat/completions", {"messages": messages, "max_tokens": 1, "verbose": True}
    )
    assert body["__verbose"]["prompt"].endswith("assistant\nHel")
    status, _, body = server.request(
        "POST",
        "/chat/completions",
        {"messages": messages, "max_tokens": 1, "add_generation_prompt": True,
         "continue_final_message": True},
    )  # fmt: skip
    assert status == 400
    status, _, body = server.request(
        "POST", "/apply-template", {"messages": messages[:1], "add_generation_prompt": False}
    )
    assert not body["prompt"].endswith("assistant\n")
    status, _, count = server.request(
        "POST", "/v1/chat/completions/input_tokens", {"messages": messages[:1]}
    )
    assert count["input_tokens"] > 3


def test_slot_save_restore_erase(server: Server, slot_dir: Path) -> None:
    long = PROMPT + " and then" * 30
    body = {"prompt": long, "n_predict": 2, "id_slot": 1, "temperature": 0}
    status, _, first = server.request("POST", "/completion", body)
    assert first["id_slot"] == 1
    status, _, saved = server.request("POST", "/slots/1?action=save", {"filename": "s1.bin"})
    assert status == 200, saved
    assert saved["n_saved"] >= first["tokens_evaluated"]
    assert (slot_dir / "s1.bin").stat().st_size == saved["n_written"]
    status, _, erased = server.request("POST", "/slots/0?action=erase")
    assert status == 200
    assert "n_erased" in erased
    status, _, restored = server.request("POST", "/slots/0?action=restore", {"filename": "s1.bin"})
    assert restored["n_restored"] == saved["n_saved"]
    # slot 0 now holds slot 1's prompt: the same request there decodes only its last token
    status, _, again = server.request("POST", "/completion", {**body, "id_slot": 0})
    assert again["timings"]["cache_n"] == first["tokens_evaluated"] - 1
    assert again["content"] == first["content"]
    for bad in ("../x.bin", "a/b", ".hidden", ""):
        assert server.request("POST", "/slots/0?action=save", {"filename": bad})[0] == 400, bad
    assert server.request("POST", "/slots/9?action=erase")[0] == 400
    missing = server.request("POST", "/slots/0?action=restore", {"filename": "none.bin"})
    assert missing[0] == 404


@lavapipe_reserve_fault  # the abort would take the module's server down
def test_lora_adapters_global_and_per_request(server: Server, lora_path: Path) -> None:
    _, _, adapters = server.request("GET", "/lora-adapters")
    assert adapters == [
        {"id": 0, "path": str(lora_path), "scale": 0.0, "task_name": "", "prompt_prefix": ""}
    ]
    greedy = {"prompt": PROMPT, "n_predict": 6, "temperature": 0, "return_tokens": True}
    _, _, off = server.request("POST", "/completion", greedy)
    _, _, on = server.request("POST", "/completion", {**greedy, "lora": [{"id": 0, "scale": 4}]})
    assert on["tokens"] != off["tokens"]
    # the global scale applies to requests that name none
    server.request("POST", "/lora-adapters", [{"id": 0, "scale": 4}])
    _, _, glob = server.request("POST", "/completion", greedy)
    assert glob["tokens"] == on["tokens"]
    server.request("POST", "/lora-adapters", [])
    _, _, back = server.request("POST", "/completion", greedy)
    assert back["tokens"] == off["tokens"]
    assert server.request("POST", "/completion", {**greedy, "lora": [{"id": 5}]})[0] == 400


def test_infill(server: Server) -> None:
    body = {"input_prefix": "def f(", "input_suffix": "):", "n_predict": 3, "temperature": 0}
    status, _, out = server.request("POST", "/infill", body)
    assert status == 200, out
    assert out["tokens_evaluated"] > 3
    assert out["prompt"].rstrip().endswith("<fim_middle>")


def test_infill_text_limits_as_llama_vim_sends_them(server: Server) -> None:
    """llama.vim's and llama.vscode's requests: n_indent (each line after the first
    indented that much, or the text ends before it), t_max_predict_ms (past it, the next
    newline ends it) and t_max_prompt_ms (compiled out of llama-server b11434: ignored,
    as there). They were a 400."""
    lines = "".join(f"\\n{' ' * (1 if i % 3 == 2 else 4)}x{i}" for i in range(40))
    grammar = f'root ::= "a{lines}"'  # the text the model must write
    body = {
        "input_prefix": "def f(", "input_suffix": "):", "n_predict": 400, "grammar": grammar,
        "t_max_prompt_ms": 500, "samplers": ["top_k"], "top_k": 1,
    }  # fmt: skip
    full = server.request("POST", "/infill", body)[2]
    assert full["content"] == "a" + lines.replace("\\n", "\n")
    status, _, out = server.request("POST", "/infill", {**body, "n_indent": 2})
    assert status == 200, out
    assert out["content"] == "a\n    x0\n    x1\n "  # " x2": one blank of two
    assert out["stop_type"] == "limit"
    out = server.request("POST", "/completion", {**body, "prompt": "", "t_max_predict_ms": 1})
    assert out[2]["stop_type"] == "limit"
    assert out[2]["content"].endswith("\n")
    assert full["content"].startswith(out[2]["content"])
    assert len(out[2]["content"]) < len(full["content"])
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 400}
    reply = server.request("POST", "/v1/chat/completions", {**chat, "grammar": grammar,
                                                           "n_indent": 4})[2]  # fmt: skip
    assert reply["choices"][0]["message"]["content"] == "a\n    x0\n    x1\n "
    assert reply["choices"][0]["finish_reason"] == "length"


def test_props_and_models_give_llama_servers_fields(server: Server, tiny_fim: Path) -> None:
    with LlamaModel.load(tiny_fim) as model:
        ftype, vocab = model.ftype, model.vocab_type
    props = server.request("GET", "/props")[2]
    assert props["model_ftype"] == ftype
    assert ftype in ("all F32", "F16", "BF16") or ftype.startswith("Q")
    assert props["endpoint_props"] is True  # --props
    assert props["ui"] is True
    assert props["ui_settings"] == {}
    assert props["cors_proxy_enabled"] is False
    assert "chat_template_tool_use" not in props  # the tiny model has one template
    meta = server.request("GET", "/v1/models")[2]["data"][0]["meta"]
    assert meta["ftype"] == ftype
    assert meta["vocab_type"] == {"spm": 1, "bpe": 2}[vocab]  # llama_vocab_type's number
    assert meta["n_ctx"] == 512  # a slot's: -c 1024 over two


def test_props_metrics_and_cors(server: Server) -> None:
    assert server.request("POST", "/props", {})[2] == {"success": True}
    assert server.request("POST", "/props", {"n_ctx": 9})[0] == 400
    status, headers, text = server.request("GET", "/metrics")
    assert "process-start-time-unix" in headers
    for name in ("prompt_tokens_cached_total", "n_tokens_max", "n_busy_slots_per_decode"):
        assert f"llamacpp:{name} " in text
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("OPTIONS", "/completion", headers={"Origin": "http://example.org"})
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("Access-Control-Allow-Origin") == "http://example.org"
    assert resp.getheader("Access-Control-Allow-Methods") == "GET, POST, DELETE, OPTIONS"
    # Spelled as llama-server spells them: its own tests read them from a plain dict.
    names = {name for name, _ in resp.getheaders()}
    assert {"Access-Control-Allow-Origin", "Access-Control-Allow-Methods"} <= names
    resp.read()
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    assert "Process-Start-Time-Unix" in {name for name, _ in resp.getheaders()}
    resp.read()
    conn.close()
    status, _, page = server.request("GET", "/")
    assert status == 200
    assert page.lower().startswith("<!doctype html>")


def _raw(server: Server, data: bytes, *, pause: float = 0.0) -> bytes:
    """``data`` sent on a fresh connection (in 1 KiB pieces ``pause`` seconds apart, if
    given), then all that comes back until the server closes it."""
    step = 1024 if pause else len(data)
    out = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        try:
            for i in range(0, len(data), step):
                sock.sendall(data[i : i + step])
                time.sleep(pause)
        except OSError:  # closed by the server mid-head: its answer is read below
            pass
        while piece := sock.recv(65536):
            out += piece
    return out


def test_a_request_head_is_bounded(server: Server) -> None:
    """A head over 16 KiB, sent at once or in pieces that never end it, gets 400 and the
    connection closed (llhttp keeps a head's bytes with no bound of its own); a body of
    any size is not a head; the server serves on."""
    big = b"X-Big: " + b"a" * 20_000 + b"\r\n"
    whole = _raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + big + b"\r\n")
    assert whole.startswith(b"HTTP/1.1 400 ")
    many = b"".join(b"X-%d: %s\r\n" % (i, b"b" * 40) for i in range(400))  # 20 KiB, unended
    piecemeal = _raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + many, pause=0.002)
    assert piecemeal.startswith(b"HTTP/1.1 400 ")
    body = json.dumps({"content": "a" * 100_000}).encode()
    head = b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    assert _raw(server, head + body).startswith(b"HTTP/1.1 200 ")
    fits = b"X-Fits: " + b"c" * 12_000 + b"\r\nConnection: close\r\n"
    assert _raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + fits + b"\r\n").startswith(
        b"HTTP/1.1 200 "
    )
    assert server.request("GET", "/health")[0] == 200


def test_anthropic_messages(server: Server) -> None:
    client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    msg = client.messages.create(
        model="m", max_tokens=4, system="Be brief.", messages=[{"role": "user", "content": "Hi"}]
    )
    assert msg.type == "message"
    assert msg.content[0].type == "text"
    assert msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 4
    with client.messages.stream(
        model="m", max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
    ) as s:
        kinds = [e.type for e in s]
        final = s.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert final.content[0].type == "text"
    count = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert count.input_tokens > 0


def test_responses_api(server: Server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    r = client.responses.create(
        model="m", input="Hi", instructions="Be brief.", max_output_tokens=4
    )
    assert r.id.startswith("resp_")
    item_id = r.output[0].id
    assert item_id is not None
    assert item_id.startswith("msg_")
    text = ""
    completed = None
    for event in client.responses.create(model="m", input="Hi", max_output_tokens=4, stream=True):
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            completed = event.response
    assert completed is not None
    assert completed.output_text == text
    status, _, _ = server.request(
        "POST", "/v1/responses", {"input": "x", "previous_response_id": "r"}
    )
    assert status == 400


# ---- other servers ---------------------------------------------------------------------


def test_embedding_and_rerank_servers(tmp_path: Path, llama_cpp_source: Path) -> None:
    bert = write_tiny_bert(tmp_path / "bert.gguf")
    with Server(bert, "--embeddings", "-b", "128", "-ub", "128", "-t", "2", "--metrics") as s:
        status, _, native = s.request("POST", "/embedding", {"content": ["hello", "world"]})
        assert [e["index"] for e in native] == [0, 1]
        vec = np.array(native[0]["embedding"][0])
        assert abs(np.linalg.norm(vec) - 1.0) < 1e-5  # euclidean by default
        _, _, raw = s.request("POST", "/embedding", {"content": "hello", "embd_normalize": -1})
        assert abs(np.linalg.norm(raw[0]["embedding"][0]) - 1.0) > 1e-3
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        oai = client.embeddings.create(model="m", input=["hello", "world"])
        assert np.allclose(oai.data[0].embedding, vec, atol=1e-5)
        status, _, err = s.request("POST", "/v1/embeddings", {"input": "word " * 200})
        assert status == 400
        assert "too large" in err["error"]["message"]
        status, _, err = s.request("POST", "/v1/embeddings", {"input": {"content": "string"}})
        assert status == 400
        status, _, text = s.request("GET", "/metrics")
        assert "llamacpp:prompt_tokens_total 0" not in text
        assert s.request("POST", "/props", {})[0] == 501  # no --props
    ranker = write_tiny_bert(tmp_path / "rank.gguf", rank=True)
    with Server(ranker, "--reranking", "-t", "2") as s:
        docs = ["a cat", "machine learning is a field", "paris"]
        status, _, out = s.request(
            "POST", "/rerank", {"query": "machine learning", "documents": docs}
        )
        assert status == 200, out
        scores = [r["relevance_score"] for r in out["results"]]
        assert scores == sorted(scores, reverse=True)
        assert {r["index"] for r in out["results"]} == {0, 1, 2}
        _, _, tei = s.request(
            "POST", "/rerank", {"query": "q", "texts": docs, "return_text": True, "top_n": 2}
        )
        assert len(tei) == 2
        assert {"index", "score", "text"} <= set(tei[0])


def test_hosts_prefix_ui_and_vertex(tiny_fim: Path, tmp_path: Path) -> None:
    sock = str(tmp_path / "s.sock")
    args = ("--host", f"127.0.0.1,{sock}", "--api-prefix", "/api", "--no-ui")
    with Server(tiny_fim, *args, health="/api/health") as s:
        assert s.request("GET", "/api/health")[0] == 200
        assert s.request("GET", "/")[0] == 404
        unix = socket.socket(socket.AF_UNIX)
        unix.connect(sock)
        unix.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert unix.recv(100).startswith(b"HTTP/1.1 200")
        unix.close()
    port = free_port()
    env = {"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": str(port)}
    with Server(tiny_fim, "-t", "2", env=env, port=port) as s:
        instances = [
            {"@requestFormat": "chatCompletions", "max_tokens": 2,
             "messages": [{"role": "user", "content": "Hi"}]},
            {"@requestFormat": "/completion", "prompt": PROMPT, "n_predict": 2},
            {"@requestFormat": "nothing"},
        ]  # fmt: skip
        status, _, out = s.request("POST", "/predict", {"instances": instances})
        assert status == 200
        chat, native, bad = out["predictions"]
        assert chat["choices"][0]["message"]["role"] == "assistant"
        assert native["tokens_predicted"] == 2
        assert "error" in bad


def test_server_log_flags(tiny_fim: Path, tmp_path: Path) -> None:
    import re

    log = tmp_path / "server.log"
    with Server(tiny_fim, "-t", "2", "--log-file", str(log), "-lv", "3"):
        pass
    plain = log.read_text()
    assert "llama_context" in plain
    assert not re.search(r"^(I|W|\x1b)", plain, re.M)  # llama-server's plain lines
    # llama-server's --log-prefix, --log-timestamps and --log-colors (common/log.cpp)
    flags = ["--log-prefix", "--log-timestamps", "--log-colors", "on"]
    with Server(tiny_fim, "-t", "2", "--log-file", str(log), "-lv", "3", *flags):
        pass
    lines = log.read_text().splitlines()
    stamp = r"\x1b\[34m\d+\.\d\d\.\d{3}\.\d{3}\x1b\[0m "
    info = [ln for ln in lines if re.match(stamp + r"\x1b\[32mI \x1b\[0m\S", ln)]
    assert any("llama_context" in ln for ln in info)
    assert len(info) > len(lines) // 2


def test_log_line_format() -> None:
    import logging

    from llama_cy.cli.log_format import CommonLogFormatter, colors_wanted

    def line(level: int, **kw: bool) -> str:
        record = logging.LogRecord("llama_cy", level, __file__, 1, "a %s\n", ("b",), None)
        return CommonLogFormatter(**kw).format(record)

    assert line(logging.INFO) == "a b"  # llama-server's default: the message alone
    assert line(logging.WARNING, prefix=True) == "W a b"
    assert line(logging.ERROR, timestamps=True) == "a b"  # the time goes with the prefix
    assert line(logging.DEBUG, prefix=True, colors=True) == "\x1b[33mD a b\x1b[0m"
    assert line(logging.INFO, prefix=True, colors=True) == "\x1b[32mI \x1b[0ma b"
    assert colors_wanted("on")
    assert colors_wanted("1")
    assert not colors_wanted("off")
    with pytest.raises(SystemExit):  # arg.cpp's spellings only
        parse("--log-colors", "maybe")


def test_ui_config_reaches_props(tiny_fim: Path, tmp_path: Path) -> None:
    conf = tmp_path / "ui.json"
    conf.write_text('{"theme": "from-file"}')

    def ui(*argv: str) -> Any:
        args = parse(*argv)
        args.argv = list(argv)
        return settings_from_args(args, "m.gguf").ui_settings

    assert ui() == {}
    assert ui("--ui-config-file", str(conf), "--ui-config", '{"theme": 1}') == {"theme": 1}
    assert ui("--webui-config", "[1]", "--ui-config-file", str(conf)) == {"theme": "from-file"}
    with pytest.raises(SystemExit, match="failed to parse UI config"):
        ui("--ui-config", "{nope")
    with pytest.raises(SystemExit, match="--ui-config-file"):
        ui("--ui-config-file", str(tmp_path / "missing.json"))
    with Server(tiny_fim, "-t", "2", "--ui-config-file", str(conf)) as s:
        assert s.request("GET", "/props")[2]["ui_settings"] == {"theme": "from-file"}
    with pytest.raises(RuntimeError, match="failed to parse UI config"):
        Server(tiny_fim, "-t", "2", "--ui-config", "{nope")


def test_version_and_list_devices() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "llama_cy", "serve", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert "llama.cpp b" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "llama_cy", "serve", "--list-devices"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert out.returncode == 0
    assert out.stdout.startswith("Available devices:")


def test_cors_proxy(server: Server, tiny_fim: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    assert server.request("GET", "/cors-proxy?url=http://127.0.0.1:1/")[0] == 403  # off
    seen: dict[str, str] = {}

    class Target(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.update({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"from the target")

        def do_POST(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{target.server_port}/x"
    try:
        with Server(tiny_fim, "-t", "2", "--ui-mcp-proxy", api_key="k") as s:
            status, _, text = s.request(
                "GET",
                f"/cors-proxy?url={url}",
                headers={"Cookie": "c=1", "x-llama-server-proxy-header-accept": "text/x"},
            )
            assert (status, text) == (200, "from the target")
            assert seen["accept"] == "text/x"
            assert "cookie" not in seen
            assert "authorization" not in seen  # the client's own key stays here
            assert s.request("POST", f"/cors-proxy?url={url}", {})[0] == 204
            assert s.request("GET", "/cors-proxy?url=file:///etc/passwd")[0] == 400
    finally:
        target.shutdown()
        target.server_close()


def test_sleep_frees_the_model_and_the_next_request_wakes_it(tiny_fim: Path) -> None:
    import time

    def sleeping(s: Server) -> bool:
        status, _, props = s.request("GET", "/props")
        assert status == 200
        return bool(props["is_sleeping"])

    def wait_asleep(s: Server) -> None:
        deadline = time.monotonic() + 15
        while not sleeping(s):
            assert time.monotonic() < deadline, "the server did not fall asleep"
            time.sleep(0.1)

    def predicted(s: Server) -> float:
        text = s.request("GET", "/metrics")[2]
        line = next(
            ln for ln in text.splitlines() if ln.startswith("llamacpp:tokens_predicted_total")
        )
        return float(line.split()[1])

    with Server(tiny_fim, "-t", "2", "--sleep-idle-seconds", "1", "--metrics", "-a", "m") as s:
        _, _, first = s.request("POST", "/completion", {"prompt": PROMPT, "n_predict": 4})
        assert first["tokens_predicted"] == 4
        wait_asleep(s)
        # read-only routes answer from what was kept, and do not wake the server
        assert s.request("GET", "/health")[0] == 200
        assert s.request("GET", "/v1/models")[2]["data"][0]["id"] == "m"
        assert predicted(s) == 4
        assert sleeping(s)
        # anything else wakes it, and the counters go on from where they were
        assert s.request("POST", "/tokenize", {"content": "hi"})[0] == 200
        assert not sleeping(s)
        _, _, again = s.request(
            "POST", "/completion", {"prompt": PROMPT, "n_predict": 3, "temperature": 0}
        )
        assert again["tokens_predicted"] == 3
        assert predicted(s) == 7
        wait_asleep(s)
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        out = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
        assert out.choices[0].finish_reason == "length"


def test_http_flags(tiny_fim: Path, tmp_path: Path) -> None:
    """--cors-methods, --cors-headers, --cors-credentials, --api-key-file, --no-slots and
    --no-cache-prompt, each seen from a client."""
    keys = tmp_path / "keys.txt"
    keys.write_text("# the keys\nk1\n\nk2\n")
    args = ["--cors-methods", "GET, POST", "--cors-headers", "X-Test", "--cors-credentials"]
    args += ["--api-key-file", str(keys), "--no-slots", "--no-cache-prompt", "-np", "1"]
    with Server(tiny_fim, *args) as s:
        origin = {"Origin": "http://a.example"}
        status, headers, _ = s.request("OPTIONS", "/v1/models", headers=origin, auth=False)
        assert status == 200
        assert headers["access-control-allow-methods"] == "GET, POST"
        assert headers["access-control-allow-headers"] == "X-Test"
        assert headers["access-control-allow-credentials"] == "true"
        assert headers["access-control-allow-origin"] == "http://a.example"  # echoed
        assert s.request("GET", "/v1/models", auth=False)[0] == 401
        for key in ("k1", "k2"):
            bearer = {"Authorization": f"Bearer {key}"}
            assert s.request("GET", "/v1/models", headers=bearer, auth=False)[0] == 200
        bearer = {"Authorization": "Bearer k1"}
        assert s.request("GET", "/slots", headers=bearer, auth=False)[0] == 501
        body = {"prompt": "Once upon a time there was", "n_predict": 1}
        for _ in range(2):  # the same prompt twice: decoded whole both times
            status, _, out = s.request("POST", "/completion", body, headers=bearer, auth=False)
            assert status == 200, out
            assert out["timings"]["cache_n"] == 0
            assert out["timings"]["prompt_n"] == out["tokens_evaluated"]


def test_lora_scaled(tiny_fim: Path, lora_path: Path) -> None:
    """--lora-scaled FNAME:SCALE loads the adapter at that scale, applied to requests
    that name none (as llama-server's --lora at its scale)."""
    greedy = {"prompt": PROMPT, "n_predict": 6, "temperature": 0, "return_tokens": True}
    with Server(tiny_fim, "-np", "1", "-c", "256", "--lora-scaled", f"{lora_path}:4") as s:
        adapters = s.request("GET", "/lora-adapters")[2]
        assert [(a["id"], a["scale"]) for a in adapters] == [(0, 4.0)]
        scaled = s.request("POST", "/completion", greedy)[2]["tokens"]
        off = s.request("POST", "/completion", {**greedy, "lora": []})[2]["tokens"]
        named = {**greedy, "lora": [{"id": 0, "scale": 4}]}
        assert s.request("POST", "/completion", named)[2]["tokens"] == scaled
    assert scaled != off
