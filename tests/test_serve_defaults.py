"""llama-server's sampling and grammar flags, its control vectors, and the request field
``samplers``: ``--samplers``, ``--sampler-seq``, ``--grammar``, ``--grammar-file``,
``-j``, ``-jf``, ``--ignore-eos``, ``-r``, ``--control-vector*``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from serving import Server

import llama_cy as lc
from llama_cy import cli
from llama_cy.flags.values import grammar, samplers
from llama_cy.sampling import DEFAULT_SAMPLERS, SamplingParams, sampler_types
from llama_cy.server.flag_settings import settings_from_args

PROMPT = "Once upon a time"
LONG_TEXT = " ".join(["the fox ran to the river"] * 40)


def test_sampler_orders_read_as_llama_cpp_reads_them(caplog: pytest.LogCaptureFixture) -> None:
    assert sampler_types(["Top-K", "nucleus", "temp", "typ", "minp", "top_n_sigma"]) == (
        "top_k",
        "top_p",
        "temperature",
        "typ_p",
        "min_p",
        "top_n_sigma",
    )
    assert sampler_types("edskypmxt") == DEFAULT_SAMPLERS
    with caplog.at_level(logging.WARNING, "llama_cy"):
        assert sampler_types("kzt") == ("top_k", "temperature")  # skipped, as llama.cpp
        assert sampler_types(["bogus", "xtc"]) == ("xtc",)
    assert "'z'" in caplog.text
    assert "'bogus'" in caplog.text
    with pytest.raises(ValueError, match="samplers"):
        SamplingParams(samplers=("top-k",))

    def parse(*argv: str) -> Any:
        return cli.parser().parse_args(["run", *argv])

    # The last of --samplers / --sampler-seq given wins, as each replaces the list there.
    assert samplers(parse("--samplers", "top_k;temp", "--sampler-seq", "kp")) == ("top_k", "top_p")
    assert samplers(parse("--sampler-seq", "kp", "--samplers", "min_p")) == ("min_p",)
    assert samplers(parse()) is None


def test_grammar_flags_last_one_wins(tmp_path: Path) -> None:
    g = tmp_path / "g.gbnf"
    g.write_text('root ::= "a"')
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"type": "boolean"}))

    def parse(*argv: str) -> str | None:
        return grammar(cli.parser().parse_args(["serve", *argv]))

    assert parse() is None
    assert parse("--grammar", 'root ::= "b"', "--grammar-file", str(g)) == 'root ::= "a"'
    assert parse("--grammar-file", str(g), "--grammar", 'root ::= "b"') == 'root ::= "b"'
    assert "true" in (parse("-jf", str(s)) or "")
    assert "true" in (parse("--grammar", "x", "-j", '{"type": "boolean"}') or "")
    with pytest.raises(SystemExit, match="json-schema"):
        parse("-j", "{not json")
    with pytest.raises(SystemExit, match="cannot read"):
        parse("--grammar-file", str(tmp_path / "missing"))


def test_ordered_chain_follows_the_list(tiny: lc.LlamaModel) -> None:
    llm = lc.Llama.from_model(tiny, n_ctx=256, n_threads=2)

    def text(**kw: Any) -> str:
        out = llm.create_completion(PROMPT, max_tokens=12, **kw)
        return out["choices"][0]["text"]  # type: ignore[no-any-return]

    greedy = text(temperature=0)
    # top-k 1 alone picks the argmax whatever the temperature and seed.
    assert text(temperature=1.5, seed=3, samplers=["top_k"], top_k=1) == greedy
    # Without "temperature" in the list, temperature 0 does not make the draw greedy.
    drawn = {text(temperature=0, seed=s, samplers=["min_p"], min_p=0.0) for s in range(4)}
    assert drawn != {greedy}
    # The penalties apply where the list puts them, and only there (not twice).
    rep = {"temperature": 0, "top_k": 1, "repeat_penalty": 50.0, "seed": 1}
    assert text(samplers=["top_k"], **rep) == greedy
    assert text(samplers=["penalties", "top_k"], **rep) == text(
        samplers=["penalties", "penalties", "top_k"], **{**rep, "repeat_penalty": 50.0**2}
    )
    assert text(samplers=["penalties", "top_k"], **rep) != greedy
    # llama.cpp's default order is the chain without a list.
    for seed in (1, 2):
        assert text(seed=seed, samplers=list(DEFAULT_SAMPLERS)) == text(seed=seed)
    llm.close()


def write_control_vector(path: Path, layers: dict[int, np.ndarray]) -> Path:
    writer = gguf.GGUFWriter(str(path), "controlvector")
    for layer, values in layers.items():
        writer.add_tensor(f"direction.{layer}", values.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_control_vector_files(tmp_path: Path, tiny: lc.LlamaModel) -> None:
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(tiny.n_embd).astype(np.float32) for _ in range(3))
    one = write_control_vector(tmp_path / "one.gguf", {1: a, 2: b})
    two = write_control_vector(tmp_path / "two.gguf", {1: c})
    got = lc.load_control_vectors([(one, 1.0), (two, 0.5)])
    np.testing.assert_allclose(got, np.stack([a + 0.5 * c, b]), rtol=1e-6)
    bad = write_control_vector(tmp_path / "zero.gguf", {0: a})
    for items, why in (
        ([(bad, 1.0)], "no valid control vector"),
        ([(tmp_path / "missing.gguf", 1.0)], "not found"),
        ([], "no control vector files"),
    ):
        with pytest.raises(ValueError, match=why):
            lc.load_control_vectors(items)
    (tmp_path / "junk.gguf").write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="no valid control vector"):
        lc.load_control_vectors([(tmp_path / "junk.gguf", 1.0)])


def test_serve_takes_request_defaults_from_its_flags(
    tmp_path: Path, tiny_model_path: Path, tiny: lc.LlamaModel
) -> None:
    eos = tiny.token_eos
    vec = write_control_vector(
        tmp_path / "cv.gguf", {1: np.random.default_rng(2).standard_normal(tiny.n_embd)}
    )
    # The reference: the control vector on layer 1, end of generation never sampled.
    llm = lc.Llama.from_model(tiny, n_ctx=512, n_threads=2)
    llm.ctx.set_control_vector(lc.load_control_vectors([(vec, 1.0)]), 1, 1)
    eog = {t: float("-inf") for t in range(tiny.n_vocab) if tiny.is_eog(t)}
    full = llm.create_completion(PROMPT, max_tokens=24, temperature=0, logit_bias=eog)
    text = full["choices"][0]["text"]
    llm.ctx.clear_control_vector()
    plain = llm.create_completion(PROMPT, max_tokens=24, temperature=0, logit_bias=eog)
    assert plain["choices"][0]["text"] != text  # the vector steers
    llm.close()
    # -r: a piece of the reference's second half that occurs once in it
    word = next(
        text[i : i + 4]
        for i in range(len(text) // 2, len(text) - 4)
        if text[i : i + 4].strip() and text.count(text[i : i + 4]) == 1
    )
    args = ["-c", "512", "-t", "2", "--no-warmup", "--temp", "0"]
    args += ["--ignore-eos", "-l", f"{eos}+100", "-r", word]
    args += ["--control-vector", str(vec), "--control-vector-layer-range", "1", "1"]
    with Server(tiny_model_path, *args) as server:

        def complete(**body: Any) -> dict[str, Any]:
            status, _, out = server.request(
                "POST", "/completion", {"prompt": PROMPT, "n_predict": 24, **body}
            )
            assert status == 200, out
            return out  # type: ignore[no-any-return]

        # -r: the server's stop strings where a request gives none.
        out = complete()
        assert out["content"] == text[: text.index(word)]
        assert out["stop_type"] == "word"
        assert out["stopping_word"] == word
        out = complete(stop=[""])
        assert out["content"] == text[: text.index(word)]
        # A request's own stop replaces them; --ignore-eos beats -l EOS+100, so the
        # whole budget is generated.
        out = complete(stop=["zzzz"])
        assert out["content"] == text
        assert out["tokens_predicted"] == 24
        # A request's logit_bias replaces the defaults, EOG biases and all (llama-server).
        out = complete(logit_bias=[[eos, 100]])
        assert out["content"] == ""
        assert out["stop_type"] == "eos"


def test_serve_grammar_and_samplers_defaults(tmp_path: Path, tiny_model_path: Path) -> None:
    g = tmp_path / "yesno.gbnf"
    g.write_text('root ::= "yes" | "no"')
    args = ["-c", "512", "-t", "2", "--no-warmup", "--grammar-file", str(g)]
    args += ["--sampler-seq", "k", "--top-k", "1", "--temp", "1.5"]
    with Server(tiny_model_path, *args) as server:

        def complete(**body: Any) -> str:
            status, _, out = server.request(
                "POST", "/completion", {"prompt": PROMPT, "n_predict": 8, **body}
            )
            assert status == 200, out
            return out["content"]  # type: ignore[no-any-return]

        assert complete(seed=1) in ("yes", "no")
        # top-k 1 alone: the same pick whatever the seed, at temperature 1.5
        assert len({complete(seed=s, grammar="root ::= [a-z]+") for s in range(3)}) == 1
        # A request's grammar or schema replaces the server's.
        assert complete(grammar='root ::= "maybe"') == "maybe"
        assert complete(json_schema={"type": "boolean"}) in ("true", "false")
        # The request field: llama-server's names or letters (unknown ones skipped).
        drawn = {complete(seed=s, grammar="root ::= [a-z]+", samplers="zz") for s in range(4)}
        assert len(drawn) > 1  # no top-k: drawn from the whole vocabulary
        assert complete(samplers=["top_k"]) in ("yes", "no")
        status, _, err = server.request("POST", "/completion", {"prompt": "x", "samplers": 3})
        assert status == 400, err
        status, _, _ = server.request("GET", "/health")
        assert status == 200


def test_special_tokens_are_shown_with_sp_only(tiny_model_path: Path, tiny: lc.LlamaModel) -> None:
    bos = tiny.token_bos  # a control token: shown as nothing, as llama-server and
    assert tiny.token_to_piece(bos, special=True) == b"<s>"  # llama-cpp-python show it
    llm = lc.Llama.from_model(tiny, n_ctx=256, n_threads=2)
    out: Any = llm.create_completion(PROMPT, max_tokens=3, temperature=0, logit_bias={bos: 100})
    assert out["choices"][0]["text"] == ""
    assert out["usage"]["completion_tokens"] == 3
    llm.close()
    body = {"prompt": PROMPT, "n_predict": 3, "temperature": 0, "logit_bias": [[bos, 100]]}
    for flags, want in (((), ""), (("-sp",), "<s><s><s>")):
        with Server(tiny_model_path, "-c", "256", "-t", "2", "--no-warmup", *flags) as server:
            status, _, out = server.request("POST", "/completion", body)
            assert status == 200, out
            assert out["content"] == want, flags


def test_skip_chat_parsing_leaves_tool_calls_in_the_content(tiny_model_path: Path) -> None:
    template = Path(__file__).parent / "data" / "chat_template.jinja"
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {  # short, so that the tiny model's call ends
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 5}},
                "required": ["city"],
            },
        },
    }
    body = {
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "max_tokens": 64,
        "temperature": 0,
    }
    replies = {}
    for flags in ((), ("--skip-chat-parsing",)):
        args = ("-c", "512", "-t", "2", "--no-warmup", "--chat-template-file", str(template))
        with Server(tiny_model_path, *args, *flags) as server:
            status, _, out = server.request("POST", "/v1/chat/completions", body)
            assert status == 200, out
            replies[flags] = out["choices"][0]
    parsed, pure = replies[()], replies[("--skip-chat-parsing",)]
    # Parsed: the tool-call grammar forces a call, which comes back as one.
    assert parsed["finish_reason"] == "tool_calls"
    assert parsed["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    # A pure content parser: no grammar, no calls taken apart, all of it content.
    assert not pure["message"].get("tool_calls")
    assert pure["finish_reason"] == "length"
    assert pure["message"]["content"]


def test_kv_unified_per_slot(tiny_model_path: Path) -> None:
    def ctx_size(*argv: str) -> int:
        args = cli.parser().parse_args(["serve", *argv])
        args.argv = list(argv)
        return settings_from_args(args, "x.gguf").ctx_size

    # Without -c the pool is slots x N (4 slots when -np is auto); -c, even -c 0, wins.
    assert ctx_size("--kv-unified-per-slot", "300") == 1200
    assert ctx_size("--kv-unified-per-slot", "300", "-np", "2") == 600
    assert ctx_size("--kv-unified-per-slot", "300", "-c", "0") == 0
    assert ctx_size("--kv-unified-per-slot", "300", "-c", "2048") == 2048
    args = ("-np", "2", "-kvu", "-c", "1024", "-t", "2", "--no-warmup")
    with Server(tiny_model_path, *args, "--kv-unified-per-slot", "100") as server:
        assert {s["n_ctx"] for s in server.slots()} == {100}
        status, _, err = server.request("POST", "/completion", {"prompt": LONG_TEXT})
        assert status == 400, err  # over the slot's 100 tokens
        status, _, out = server.request("POST", "/completion", {"prompt": "Hi", "n_predict": 2})
        assert status == 200, out


def test_log_prompts_dir(tmp_path: Path, tiny_model_path: Path) -> None:
    folder = tmp_path / "prompts" / "deep"  # made by the server
    args = ("-c", "512", "-t", "2", "--no-warmup", "--log-prompts-dir", str(folder))
    with Server(tiny_model_path, *args) as server:
        for body in (
            {"prompt": "Hello there", "n_predict": 1},
            {"prompt": [1, 15043], "n_predict": 1},
        ):
            status, _, out = server.request("POST", "/completion", body)
            assert status == 200, out
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        status, _, out = server.request("POST", "/v1/chat/completions", chat)
        assert status == 200, out
    texts = [p.read_text() for p in sorted(folder.iterdir())]
    assert texts[0] == "Hello there"
    assert json.loads(texts[1]) == [1, 15043]  # a token prompt: as JSON
    assert "Hi" in texts[2]  # the chat as rendered
    assert len(texts) == 3


def test_log_jsonl(tiny_model_path: Path) -> None:
    args = ("-c", "512", "-t", "2", "--no-warmup", "--log-jsonl", "-v")
    with Server(tiny_model_path, *args) as server:
        status, _, _ = server.request("POST", "/completion", {"prompt": "Hi", "n_predict": 1})
        assert status == 200
        lines = [ln for ln in server.output().splitlines() if ln.startswith('{"type"')]
    entries = [json.loads(ln) for ln in lines]
    assert entries
    assert {e["type"] for e in entries} == {"log"}
    assert {e["level"] for e in entries} <= {"debug", "info", "warn", "error"}
    assert all(e["msg"].endswith("\n") and isinstance(e["time"], int) for e in entries)


def test_mmproj_device_takes_one_device() -> None:
    args = cli.parser().parse_args(["serve", "-mmdev", "CPU,CPU"])
    with pytest.raises(SystemExit, match="only one device"):
        settings_from_args(args, "x.gguf")
    args = cli.parser().parse_args(["serve", "-mmdev", "none"])
    assert settings_from_args(args, "x.gguf").mmproj_device == "none"


def test_serve_min_keep_and_adaptive_p(tiny_model_path: Path) -> None:
    """--adaptive-target/--adaptive-decay are the requests' defaults (/props), and a
    request's adaptive_target, adaptive_decay and min_keep are its own (they were a 400,
    or reported fixed), as llama-server's generation_settings show them."""
    args = ["-c", "256", "-t", "2", "--no-warmup", "--adaptive-target", "0.25"]
    with Server(tiny_model_path, *args, "--adaptive-decay", "0.5") as server:
        params = server.request("GET", "/props")[2]["default_generation_settings"]["params"]
        assert (params["adaptive_target"], params["adaptive_decay"]) == (0.25, 0.5)
        assert params["min_keep"] == 0
        body = {"prompt": "Hi", "n_predict": 2, "min_keep": 3, "adaptive_target": 0.5}
        status, _, out = server.request("POST", "/completion", body)
        assert status == 200, out
        settings = out["generation_settings"]
        assert (settings["min_keep"], settings["adaptive_target"]) == (3, 0.5)
        assert settings["adaptive_decay"] == 0.5
        status, _, out = server.request("POST", "/completion", {**body, "min_keep": -1})
        assert status == 400
        assert "min_keep" in str(out)
