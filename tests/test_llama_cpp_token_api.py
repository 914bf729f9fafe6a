"""llama-cpp-python's token-level API as its programs drive it: ``scores`` by position,
``save_state``/``load_state``, prompt log-probabilities with ``echo=True``, and the
server's ``interrupt_requests``."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt
import pytest
from child import run_python
from serving import Server, post, start_module, stop

PROMPT = b"The history of the printing press"


def log_softmax(rows: npt.NDArray[np.single]) -> npt.NDArray[np.float64]:
    x = rows.astype(np.float64)
    peak = x.max(axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = x - peak - np.log(np.exp(x - peak).sum(axis=-1, keepdims=True))
    return out


@pytest.fixture(scope="module")
def llm(tiny_model_path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(tiny_model_path), n_ctx=256, logits_all=True, verbose=False)


def test_scores_are_indexed_by_position_across_evals(llm: llama_cpp.Llama) -> None:
    llm.reset()
    tokens = llm.tokenize(PROMPT)
    llm.eval(tokens)
    llm.eval([42])
    n = len(tokens) + 1
    assert llm.n_tokens == n
    assert llm.scores.shape == (256, llm.n_vocab())
    assert llm.scores.dtype == np.single
    assert llm._scores.shape == (n, llm.n_vocab())
    assert len(llm.eval_logits) == n
    assert list(llm.eval_tokens) == [*tokens, 42]
    # every row is the logits after that position: the same as one eval of all of them
    by_steps = llm.scores[:n].copy()
    llm.reset()
    llm.eval([*tokens, 42])
    np.testing.assert_allclose(llm.scores[:n], by_steps, atol=1e-3)
    assert not np.array_equal(by_steps[n - 1], by_steps[n - 2])
    assert llm.sample(temp=0.0) == int(np.argmax(llm.scores[n - 1]))


def test_without_logits_all_the_last_row_is_at_its_position(tiny_model_path: Path) -> None:
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=256, n_batch=64, verbose=False)
    assert llm.scores.shape == (64, llm.n_vocab())  # llama-cpp-python's n_batch rows
    tokens = llm.tokenize(PROMPT)
    llm.eval(tokens)
    row = llm.scores[llm.n_tokens - 1]
    assert llm.sample(temp=0.0) == int(np.argmax(row))


def test_load_state_gives_back_the_next_logits(llm: llama_cpp.Llama) -> None:
    llm.reset()
    llm.eval(llm.tokenize(PROMPT))
    saved_row = llm.scores[llm.n_tokens - 1].copy()
    state = llm.save_state()
    first = llm.sample(temp=0.0)
    llm.eval([first, 7, 9])
    llm.load_state(state)
    assert llm.n_tokens == state.n_tokens
    np.testing.assert_array_equal(llm.scores[llm.n_tokens - 1], saved_row)
    assert llm.sample(temp=0.0) == first


def test_load_state_restores_the_seed(tiny_model_path: Path) -> None:
    # llama-cpp-python's test_real_llama ends so (on a model its CI downloads)
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=256, verbose=False)
    llm.set_seed(1337)
    state = llm.save_state()
    kw: dict[str, Any] = {"max_tokens": 8, "top_k": 50, "top_p": 0.9, "temperature": 1.0}
    number_1 = llm.create_completion("Pick a number", **kw)["choices"][0]["text"]
    number_2 = llm.create_completion("Pick a number", **kw)["choices"][0]["text"]
    llm.load_state(state)
    number_3 = llm.create_completion("Pick a number", **kw)["choices"][0]["text"]
    assert number_1 != number_2
    assert number_1 == number_3


def _expected(llm: llama_cpp.Llama, tokens: list[int]) -> list[float]:
    """Each prompt token's log-probability given those before it, from ``scores``."""
    llm.reset()
    llm.eval(tokens)
    lsm = log_softmax(llm.scores[: len(tokens)])
    return [float(lsm[i - 1, tokens[i]]) for i in range(1, len(tokens))]


def _check_echo(lp: dict[str, Any], text: str, tokens: list[int], want: list[float]) -> None:
    n = len(tokens) - 1  # the prompt's tokens after BOS
    assert len(lp["tokens"]) == n + 1  # and the generated one
    assert lp["text_offset"][0] == 0
    assert lp["token_logprobs"][0] is None
    assert lp["top_logprobs"][0] is None
    np.testing.assert_allclose(lp["token_logprobs"][1:n], want[1:], atol=1e-3)
    for offset, piece in zip(lp["text_offset"], lp["tokens"], strict=True):
        assert text[offset : offset + len(piece)] == piece
    assert all(len(top) == 2 for top in lp["top_logprobs"][1:])


def test_echo_gives_the_prompts_logprobs(llm: llama_cpp.Llama) -> None:
    tokens = llm.tokenize(PROMPT)
    want = _expected(llm, tokens)
    out = llm.create_completion(PROMPT.decode(), echo=True, logprobs=2, max_tokens=1)
    choice = out["choices"][0]
    _check_echo(choice["logprobs"], choice["text"], tokens, want)


def test_server_echo_gives_the_prompts_logprobs(
    llm: llama_cpp.Llama, tiny_model_path: Path
) -> None:
    tokens = llm.tokenize(PROMPT)
    want = _expected(llm, tokens)
    body = {"prompt": PROMPT.decode(), "echo": True, "logprobs": 2, "max_tokens": 1}
    with Server(tiny_model_path, "-c", "256", "-fa", "off") as server:
        status, _, out = server.request("POST", "/v1/completions", body)
        assert status == 200, out
        choice = out["choices"][0]
        _check_echo(choice["logprobs"], choice["text"], tokens, want)
        # a streamed answer: the echoed prompt's event carries them
        stream = {**body, "stream": True}
        status, _, text = server.request("POST", "/v1/completions", stream)
        events = [json.loads(e[6:]) for e in text.split("\n\n") if e.startswith("data: {")]
        first = events[0]["choices"][0]
        assert first["logprobs"]["token_logprobs"][0] is None
        np.testing.assert_allclose(first["logprobs"]["token_logprobs"][1:], want[1:], atol=1e-3)
        # a prompt that stays cached is decoded again for its rows: the same numbers
        status, _, again = server.request("POST", "/v1/completions", body)
        assert (
            again["choices"][0]["logprobs"]["token_logprobs"][:-1]
            == (out["choices"][0]["logprobs"]["token_logprobs"][:-1])
        )


def test_lora_base_is_accepted_and_passed_to_nothing(tiny_model_path: Path) -> None:
    # llama-cpp-python keeps it as an attribute only (llama.cpp dropped it)
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=64, lora_base="base.gguf", verbose=False)
    assert llm.lora_base == "base.gguf"
    plain = llama_cpp.Llama(str(tiny_model_path), n_ctx=64, verbose=False)
    kw: dict[str, Any] = {"max_tokens": 8, "temperature": 0}
    # the model answers as without it
    assert (
        llm.create_completion("Hi", **kw)["choices"]
        == plain.create_completion("Hi", **kw)["choices"]
    )


def _stream_events(port: int, body: dict[str, Any], seen: list[str]) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        for line in r:
            if line.startswith(b"data: "):
                seen.append(line[6:].decode().strip())


@pytest.mark.parametrize("interrupt", [True, False])
def test_interrupt_requests_ends_a_stream_when_another_request_waits(
    tiny_model_path: Path, interrupt: bool
) -> None:
    proc, port = start_module(
        "--model", str(tiny_model_path), "--n_ctx", "1024", "--interrupt_requests", str(interrupt)
    )  # fmt: skip
    try:
        seen: list[str] = []
        long = {"prompt": "Once", "max_tokens": 900, "ignore_eos": True, "temperature": 0}
        reader = threading.Thread(target=_stream_events, args=(port, long, seen))
        reader.start()
        while len(seen) < 3 and reader.is_alive():
            threading.Event().wait(0.01)
        out = post(port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        reader.join(timeout=120)
        assert out["choices"][0]["finish_reason"] == "length"
        assert seen[-1] == "[DONE]"
        chunks = [json.loads(e) for e in seen[:-1]]
        finished = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        if interrupt:  # cut short: no finish_reason, as llama-cpp-python's server ends it
            assert "length" not in finished
            assert len(chunks) < 900
        else:
            assert finished[-1] == "length"
    finally:
        stop(proc)


def test_scores_reserve_memory_as_rows_are_written(tiny_model_path: Path) -> None:
    # (n_ctx, n_vocab) float32 at 4096 x 32000: 500 MiB that must not be resident up front
    done = run_python(f"""
import llama_cpp, psutil
rss = lambda: psutil.Process().memory_info().rss
before = rss()
llm = llama_cpp.Llama({str(tiny_model_path)!r}, n_ctx=4096, logits_all=True, verbose=False)
made = rss()
llm.eval(llm.tokenize(b"Hello"))
for t in range(100):
    llm.eval([100 + t])
print((made - before) >> 20, (rss() - made) >> 20, llm.scores.nbytes >> 20, llm.n_vocab())
""")
    assert done.returncode == 0, done.stderr[-2000:]
    made, grew, reserved, n_vocab = map(int, done.stdout.split()[-4:])
    assert reserved == (4096 * n_vocab * 4) >> 20
    assert made < reserved // 4
    assert grew < 64  # ~105 rows of n_vocab floats (13 MiB), plus what the evals allocate


def test_a_raw_llama_cpp_python_program_runs_unchanged(tiny_model_path: Path) -> None:
    program = Path(__file__).parent / "data" / "lcp_raw_program.py"
    done = run_python(program.read_text(), str(tiny_model_path))
    assert done.returncode == 0, done.stderr[-3000:]
    said = {line.split()[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines()}
    n_tokens, n_prompt = map(int, said["n_tokens"].split())
    assert n_tokens == n_prompt  # eval() keeps count by position
    best = int(said["argmax"])
    assert int(said["sample"]) == best  # greedy picks scores[n_tokens - 1]'s argmax
    after = said["after"].split()
    assert int(after[0]) == n_tokens + 1
    # load_state: back to the saved position, its logits and its next token
    assert said["restored"].split() == [str(n_tokens), str(best), str(best)]
    assert said["forced"] == "3 True"  # a LogitsProcessorList allowing one token only
    assert said["stopped"] == "2 stop"  # StoppingCriteriaList ended it after two tokens
    vocab, n_vocab, n_ctx = map(int, said["ctypes"].split())
    assert vocab == n_vocab == 32000
    assert n_ctx == 256
    assert said["logprobs"] == "2 [3, 3] True"


def test_echo_logprobs_that_would_not_fit_are_refused(tiny_model_path: Path) -> None:
    # a long prompt times logprobs up to the vocabulary: billions of values; a 400, not
    # an out-of-memory kill, and the server goes on
    prompt = "word " * 200
    with Server(tiny_model_path, "-c", "512") as server:
        body = {"prompt": prompt, "echo": True, "logprobs": 32000, "max_tokens": 1}
        status, _, out = server.request("POST", "/v1/completions", body)
        assert status == 400
        assert "prompt tokens" in out["error"]["message"]
        body["logprobs"] = 1
        status, _, out = server.request("POST", "/v1/completions", body)
        assert status == 200
        assert len(out["choices"][0]["logprobs"]["tokens"]) > 200
