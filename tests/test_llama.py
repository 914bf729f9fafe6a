"""The high-level ``Llama`` on Gemma 3 270M: completion, streaming, stops, logprobs, cache."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import llama_cy as lc
from llama_cy.errors import BusyError, ClosedError, ContextOverflowError, InvalidTokenError

PROMPTS = ["The capital of France is", "def fibonacci(n):", "東京は日本の"]


def fresh(llm: lc.Llama) -> lc.Llama:
    """``llm`` with its prompt cache cleared, for calls compared with each other: each then
    decodes its whole prompt in one batch. A cached prompt re-decodes only its last token,
    and a GPU's logits change with the batch's shape (``offload.LOGITS_TOL``)."""
    llm.reset()
    return llm


def greedy_loop(model: lc.LlamaModel, prompt: str, n: int) -> tuple[list[int], list[float]]:
    """The building-blocks greedy loop: tokens and each token's log-probability."""
    ctx = lc.LlamaContext(model, n_ctx=1024, n_threads=2)
    tokens = model.tokenize(prompt, parse_special=True)
    batch = lc.LlamaBatch(max(len(tokens), 1))
    batch.add_sequence(tokens, 0, 0)
    ctx.decode(batch)
    out: list[int] = []
    logprobs: list[float] = []
    pos = len(tokens)
    for _ in range(n):
        logits = ctx.logits(-1).astype(np.float64)
        token = int(np.argmax(logits))
        if model.is_eog(token):
            break
        lse = logits.max() + np.log(np.exp(logits - logits.max()).sum())
        logprobs.append(float(logits[token] - lse))
        out.append(token)
        batch.clear()
        batch.add(token, pos, 0, True)
        ctx.decode(batch)
        pos += 1
    ctx.close()
    return out, logprobs


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_create_completion_equals_the_building_blocks_loop(
    gemma_llm: lc.Llama, prompt: str
) -> None:
    expected, _ = greedy_loop(gemma_llm.model, prompt, 32)
    # From an empty cache, like the loop: a reused prefix decoded in another batch
    # shape can differ in the last bits (as in llama-server), enough to flip a near tie.
    done = gemma_llm.complete(prompt, max_tokens=32, temperature=0)
    assert done.tokens == expected
    gemma_llm.reset()
    out = gemma_llm.create_completion(prompt, max_tokens=32, temperature=0)
    assert isinstance(out, dict)
    text = b"".join(gemma_llm.model.token_to_piece(t, special=True) for t in expected)
    assert out["choices"][0]["text"] == text.decode()
    assert out["usage"]["completion_tokens"] == len(expected)
    assert out["usage"]["prompt_tokens"] == len(gemma_llm.tokenize(prompt.encode()))


@pytest.mark.parametrize("seed", [1, 7])
def test_stream_concatenates_to_the_non_stream_text(gemma_llm: lc.Llama, seed: int) -> None:
    kw: dict[str, Any] = {"max_tokens": 40, "temperature": 0.9, "seed": seed, "top_k": 100}
    whole = fresh(gemma_llm).create_completion("Once upon a time", **kw)
    assert isinstance(whole, dict)
    chunks = list(fresh(gemma_llm).create_completion("Once upon a time", stream=True, **kw))
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    typed = list(fresh(gemma_llm).stream("Once upon a time", **kw))
    assert "".join(c.text for c in typed) == whole["choices"][0]["text"]
    assert sum(len(c.tokens) for c in typed) == whole["usage"]["completion_tokens"]
    assert typed[-1].timings is not None
    assert typed[-1].stop_reason is not None


def test_stream_never_emits_half_a_character(gemma_llm: lc.Llama) -> None:
    # Characters Gemma's vocabulary spells byte by byte, forced by a grammar.
    text = "ꙮ𓀀 and 🦙"
    grammar = lc.LlamaGrammar.from_string(f'root ::= "{text}"')
    chunks = list(gemma_llm.stream("Write:", max_tokens=40, grammar=grammar, seed=1))
    assert "".join(c.text for c in chunks) == text
    assert not any("\ufffd" in c.text for c in chunks)
    tokens = [t for c in chunks for t in c.tokens]
    partial = []
    for t in tokens:
        try:
            gemma_llm.model.token_to_piece(t).decode()
        except UnicodeDecodeError:
            partial.append(t)
    assert len(partial) >= 4  # the test really did split characters over tokens
    # A character cut short by the end of generation comes out as U+FFFD, once.
    cut = gemma_llm.complete("Write:", max_tokens=2, grammar=grammar, seed=1)
    assert cut.text == "\ufffd"
    assert cut.stop_reason == "length"


def test_stop_strings_cut_across_tokens_and_are_never_emitted(gemma_llm: lc.Llama) -> None:
    free = fresh(gemma_llm).complete("The capital of France is", max_tokens=40, temperature=0)
    pieces = [gemma_llm.model.token_to_piece(t, special=True).decode() for t in free.tokens]
    # A stop string that starts inside one token and ends inside a later one.
    start = len(pieces[0]) + len(pieces[1]) - 2
    stop = free.text[start : start + len(pieces[2]) + 4]
    assert len(stop) >= 4
    first = free.text.index(stop)
    done = fresh(gemma_llm).complete(
        "The capital of France is", max_tokens=40, temperature=0, stop=[stop]
    )
    assert done.text == free.text[:first]
    assert done.stop_reason == "stop"
    assert done.stop == stop
    assert done.finish_reason == "stop"
    chunks = list(
        fresh(gemma_llm).stream("The capital of France is", max_tokens=40, temperature=0, stop=stop)
    )
    assert "".join(c.text for c in chunks) == free.text[:first]
    assert not any(stop in c.text for c in chunks)
    never = fresh(gemma_llm).complete(
        "The capital of France is", max_tokens=40, temperature=0, stop=["#@!"]
    )
    assert never.text == free.text
    assert never.stop_reason == "length"
    out = fresh(gemma_llm)(
        "The capital of France is", max_tokens=40, temperature=0, stop=[stop, "zzz"]
    )
    assert isinstance(out, dict)
    assert out["choices"][0]["text"] == free.text[:first]
    assert out["choices"][0]["finish_reason"] == "stop"


def test_logprobs_come_from_the_live_logits(gemma_llm: lc.Llama) -> None:
    prompt = "The capital of France is"
    tokens, expected = greedy_loop(gemma_llm.model, prompt, 12)
    done = gemma_llm.complete(prompt, max_tokens=12, temperature=0, logprobs=3)
    assert done.logprobs is not None
    assert len(done.logprobs) == len(tokens)
    for lp, token, want in zip(done.logprobs, tokens, expected, strict=True):
        assert lp.token == token
        assert lp.logprob == pytest.approx(want, abs=1e-3)
        assert len(lp.top) == 3
        assert lp.top[0][0] == token  # greedy: the pick is the most likely token
        assert [v for _, _, v in lp.top] == sorted((v for _, _, v in lp.top), reverse=True)
        assert sum(np.exp(v) for _, _, v in lp.top) <= 1.0 + 1e-6
    gemma_llm.reset()
    out = gemma_llm.create_completion(prompt, max_tokens=12, temperature=0, logprobs=2)
    assert isinstance(out, dict)
    lps = out["choices"][0]["logprobs"]
    text = out["choices"][0]["text"]
    assert (
        len(lps["tokens"]) == len(lps["token_logprobs"]) == len(lps["top_logprobs"]) == len(tokens)
    )
    assert "".join(lps["tokens"]) == text
    assert all(
        text[o:].startswith(t) for o, t in zip(lps["text_offset"], lps["tokens"], strict=True)
    )
    assert all(len(top) <= 2 for top in lps["top_logprobs"])


def test_a_shared_prefix_decodes_only_the_suffix(gemma_llm: lc.Llama) -> None:
    base = "Here is a list of the planets of the solar system, in order from the sun:"
    first = gemma_llm.complete(base, max_tokens=4, temperature=0)
    assert first.timings.cached_n == 0
    assert first.timings.prompt_n == first.prompt_tokens
    suffix = " Mercury, Venus, Earth, Mars and then"
    gemma_llm.ctx.perf_reset()
    second = gemma_llm.complete(base + suffix, max_tokens=4, temperature=0)
    n_base = len(gemma_llm.tokenize(base.encode()))
    n_new = second.prompt_tokens - n_base
    assert second.timings.cached_n >= n_base - 1
    assert second.timings.prompt_n == second.prompt_tokens - second.timings.cached_n
    perf = gemma_llm.ctx.perf()
    # Prompt tokens decoded: the suffix only (plus at most the one re-decoded boundary token).
    assert n_new <= perf.n_p_eval <= n_new + 1
    # The same prompt again: only its last token is decoded (its logits start generation).
    gemma_llm.ctx.perf_reset()
    third = gemma_llm.complete(base + suffix, max_tokens=4, temperature=0)
    assert third.timings.prompt_n == 1
    assert third.tokens == second.tokens


def test_prompt_longer_than_the_context_names_both_sizes(gemma_path: Path) -> None:
    with lc.Llama(gemma_path, n_ctx=64) as llm:
        n_ctx = llm.n_ctx()  # llama.cpp rounds the size up
        with pytest.raises(
            ContextOverflowError, match=rf"has \d+ tokens but the context holds {n_ctx}"
        ):
            llm.complete("word " * (n_ctx + 10))
        # A stream says so when it is made, not at its first next().
        with pytest.raises(ContextOverflowError):
            llm.stream("word " * (n_ctx + 10))
        with pytest.raises(lc.errors.GrammarError):
            llm.stream("hi", grammar="root ::= (")
        # Nothing was lost: the next call works.
        assert llm.complete("Hello", max_tokens=2, temperature=0).tokens


def test_generation_stops_at_a_full_context_unless_shift_is_on(tiny_model_path: Path) -> None:
    with lc.Llama(tiny_model_path, n_ctx=48, n_batch=48) as llm:
        done = llm.complete(
            "hello world", max_tokens=2000, temperature=0, logit_bias={1: -1e9, 2: -1e9}
        )
        n_ctx = llm.n_ctx()
        assert done.stop_reason == "length"
        assert done.prompt_tokens + len(done.tokens) == n_ctx + 1  # the last pick is never decoded
    with lc.Llama(tiny_model_path, n_ctx=48, n_batch=48, context_shift=True) as llm:
        n = 2 * llm.n_ctx()
        done = llm.complete(
            "hello world", max_tokens=n, temperature=0, logit_bias={1: -1e9, 2: -1e9}
        )
        assert done.stop_reason == "length"
        assert len(done.tokens) == n


def test_bad_input_gets_clear_errors(gemma_llm: lc.Llama, gemma_path: Path) -> None:
    with pytest.raises(InvalidTokenError):
        gemma_llm.complete([2, gemma_llm.n_vocab() + 5])
    with pytest.raises(ValueError, match="mirostat_mode"):
        gemma_llm.complete("hi", mirostat_mode=3)
    with pytest.raises(TypeError):
        gemma_llm.complete("hi", no_such_sampler=1.0)
    with pytest.raises(TypeError, match="no_such_param"):
        lc.Llama(gemma_path, no_such_param=1)
    with pytest.raises(ValueError, match="chat_format"):
        lc.Llama.from_model(gemma_llm.model, chat_format="no-such-format").create_chat_completion(
            [{"role": "user", "content": "hi"}]
        )
    with pytest.raises(ValueError, match="embedding=True"):
        gemma_llm.create_embedding("hi")
    with pytest.raises(lc.errors.ModelLoadError):
        lc.Llama("/nonexistent/model.gguf")
    for numa in (5, -1):  # ggml_numa_strategy has 0 to 4 (-1 indexed the table's end)
        with pytest.raises(ValueError, match="ggml_numa_strategy"):
            lc.Llama(gemma_path, numa=numa)
    # After all of that the object still works.
    assert gemma_llm.complete("Hello", max_tokens=2, temperature=0).tokens


def test_closed_llama_raises(gemma_path: Path) -> None:
    llm = lc.Llama(gemma_path, n_ctx=128)
    llm.close()
    llm.close()
    with pytest.raises(ClosedError):
        llm.complete("hi")


def test_from_model_leaves_the_model_open(gemma_llm: lc.Llama) -> None:
    other = lc.Llama.from_model(gemma_llm.model, n_ctx=256)
    a = other.complete("The sky is", max_tokens=6, temperature=0)
    other.close()
    assert not gemma_llm.model.closed
    assert gemma_llm.complete("The sky is", max_tokens=6, temperature=0).tokens == a.tokens


def test_an_open_stream_holds_the_llama(gemma_llm: lc.Llama) -> None:
    stream = gemma_llm.stream("Count: one, two,", max_tokens=20, temperature=0)
    next(stream)
    with pytest.raises(BusyError):
        gemma_llm.complete("hi")
    # Another thread waits until the stream is closed, then runs.
    result: list[lc.Completion] = []
    t = threading.Thread(target=lambda: result.append(gemma_llm.complete("hi", max_tokens=2)))
    t.start()
    time.sleep(0.3)
    assert not result
    stream.close()
    t.join(30)
    assert result
    assert result[0].tokens


def test_sampling_is_reproducible_with_a_seed(gemma_llm: lc.Llama) -> None:
    kw: dict[str, Any] = {
        "max_tokens": 20,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "min_p": 0.0,
    }
    runs = []
    for seed in (3, 3, 4):
        gemma_llm.reset()  # the same KV cache state each time (see the greedy test)
        runs.append(gemma_llm.complete("My favourite animal is", seed=seed, **kw))
    a, b, c = runs
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens


@pytest.mark.parametrize(
    "extra",
    [
        {"repeat_penalty": 1.3, "frequency_penalty": 0.5, "presence_penalty": 0.5},
        {"dry_multiplier": 0.8},
        {"xtc_probability": 0.5, "xtc_threshold": 0.1},
        {"top_n_sigma": 1.0},
        {"mirostat_mode": 1},
        {"mirostat_mode": 2},
        {"typical_p": 0.9},
        {"dynatemp_range": 0.5},
    ],
)
def test_every_sampler_runs(gemma_llm: lc.Llama, extra: dict[str, Any]) -> None:
    done = gemma_llm.complete("The weather today is", max_tokens=12, seed=5, **extra)
    assert done.tokens
    assert done.stop_reason in ("eog", "length", "stop")


def test_repeat_penalty_changes_greedy_output(gemma_llm: lc.Llama) -> None:
    plain = gemma_llm.complete("The capital of France is", max_tokens=40, temperature=0)
    penalised = gemma_llm.complete(
        "The capital of France is", max_tokens=40, temperature=0, repeat_penalty=1.5
    )
    assert plain.tokens != penalised.tokens
    # The plain greedy text repeats itself; the penalised one repeats fewer tokens.
    assert len(set(penalised.tokens)) > len(set(plain.tokens))


def test_logit_bias_and_grammar(gemma_llm: lc.Llama) -> None:
    yes = gemma_llm.tokenize(b" yes", add_bos=False)[0]
    done = gemma_llm.complete("Answer:", max_tokens=1, temperature=0, logit_bias={yes: 100.0})
    assert done.tokens == [yes]
    grammar = lc.LlamaGrammar.from_string('root ::= ("yes" | "no") "."')
    done = gemma_llm.complete("Is the sky blue? Answer:", max_tokens=10, grammar=grammar, seed=1)
    assert done.text in ("yes.", "no.")
    assert done.stop_reason == "eog"


def test_logits_processor_and_stopping_criteria(gemma_llm: lc.Llama) -> None:
    banned = gemma_llm.tokenize(b" the", add_bos=False)[0]
    seen: list[int] = []

    def ban(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        seen.append(len(ids))
        scores[banned] = -np.inf
        return scores

    out = gemma_llm.create_completion(
        "The capital of France is", max_tokens=10, temperature=0, logits_processor=[ban]
    )
    assert isinstance(out, dict)
    assert " the" not in out["choices"][0]["text"]
    assert seen[0] == out["usage"]["prompt_tokens"]
    assert seen[1] == seen[0] + 1

    calls: list[int] = []

    def after_three(ids: np.ndarray, logits: np.ndarray) -> bool:
        calls.append(1)
        return len(calls) >= 3

    done = gemma_llm.create_completion(
        "The capital of France is", max_tokens=10, temperature=0, stopping_criteria=[after_three]
    )
    assert isinstance(done, dict)
    assert done["usage"]["completion_tokens"] == 3


def test_echo_and_call(gemma_llm: lc.Llama) -> None:
    out = gemma_llm(
        "Q: Name the planets in the solar system? A: ", max_tokens=8, echo=True, temperature=0
    )
    assert isinstance(out, dict)
    assert out["choices"][0]["text"].startswith("Q: Name the planets in the solar system? A: ")


def test_async_streaming_keeps_the_event_loop_free(gemma_llm: lc.Llama) -> None:
    expected = fresh(gemma_llm).complete("The capital of France is", max_tokens=24, temperature=0)

    async def main() -> tuple[str, int, lc.Completion]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        text = ""
        async for chunk in fresh(gemma_llm).astream(
            "The capital of France is", max_tokens=24, temperature=0
        ):
            text += chunk.text
        whole = await fresh(gemma_llm).acomplete(
            "The capital of France is", max_tokens=24, temperature=0
        )
        done.set()
        await task
        return text, ticks, whole

    text, ticks, whole = asyncio.run(main())
    assert text == expected.text == whole.text
    assert ticks >= 10  # the loop ran while tokens were generated


def test_leaving_an_async_stream_early_frees_the_llama(gemma_llm: lc.Llama) -> None:
    async def main() -> int:
        n = 0
        async for _ in gemma_llm.astream("Count: one, two,", max_tokens=200, temperature=0):
            n += 1
            if n == 3:
                break
        chunks = await gemma_llm.acreate_chat_completion(
            [{"role": "user", "content": "Say hi"}], max_tokens=4, stream=True
        )
        return n + len([c async for c in chunks])

    assert asyncio.run(main()) > 3
    assert gemma_llm.complete("Hello", max_tokens=2, temperature=0).tokens
