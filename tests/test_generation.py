"""End-to-end generation on a real model: the Python loop over llama_cy's building blocks
produces exactly the tokens and text of llama.cpp's own C++ loop
(``support/reference/llama_loop.cpp``, linked against the same libllama), greedily and
with a seeded sampler chain, and stays exact when several threads generate at once on
one shared model."""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from offload import cpu_only
from reference_loop import ReferenceResult, build_reference, run_reference

import llama_cy as lc

# The settings llama_loop uses unless told otherwise (see llama_loop.cpp): n_ctx 512,
# n_batch 512 (n_ubatch keeps llama.cpp's default, also 512), every other context
# parameter at llama.cpp's default. Threads are passed explicitly on both sides.
N_CTX = 512
N_BATCH = 512
THREADS = 2
N_PREDICT = 16

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n",
    "Le café de la gare est très",
    "日本の首都は",
]
SEEDS = [1, 20240601]
DIST_PROMPTS = [PROMPTS[0], PROMPTS[2]]
TOP_K = 40
TEMP = 0.8


class Generation(NamedTuple):
    prompt_tokens: list[int]
    tokens: list[int]
    raw: bytes  # the pieces of ``tokens`` (special=False), joined


@pytest.fixture(scope="session")
def reference_binary(model_cache: Path) -> Path:
    """llama_loop compiled against the package's own libllama (built once, cached)."""
    return build_reference(model_cache / "reference")


class Reference:
    """llama_loop's results, each run once per session."""

    def __init__(self, binary: Path, model: Path) -> None:
        self.binary = binary
        self.model = model
        self._cache: dict[tuple[str, str, int], ReferenceResult] = {}

    def __call__(self, prompt: str, sampler: str = "greedy", seed: int = 0) -> ReferenceResult:
        key = (prompt, sampler, seed)
        if key not in self._cache:
            self._cache[key] = run_reference(
                self.binary,
                self.model,
                prompt,
                N_PREDICT,
                sampler=sampler,
                seed=seed,
                top_k=TOP_K,
                temp=TEMP,
                threads=THREADS,
                ctx=N_CTX,
            )
        return self._cache[key]


@pytest.fixture(scope="session")
def reference(reference_binary: Path, gemma_path: Path) -> Reference:
    return Reference(reference_binary, gemma_path)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> lc.LlamaModel:
    return lc.LlamaModel.load(gemma_path)


def generate(
    model: lc.LlamaModel,
    prompt: str,
    n_predict: int,
    sampler: lc.LlamaSampler | None = None,
    *,
    n_threads: int = THREADS,
) -> Generation:
    """The loop of llama_loop.cpp in Python: argmax over the raw logits when ``sampler``
    is None, else ``sampler.sample``; stop at an end-of-generation token (not kept);
    the last sampled token is not decoded."""
    with lc.LlamaContext(model, n_ctx=N_CTX, n_batch=N_BATCH, n_threads=n_threads) as ctx:
        prompt_tokens = model.tokenize(prompt, add_special=True, parse_special=False)
        assert 0 < len(prompt_tokens) <= N_BATCH
        batch = lc.LlamaBatch(N_BATCH)
        batch.add_sequence(prompt_tokens, 0, 0)
        ctx.decode(batch)
        one = lc.LlamaBatch(1)
        out: list[int] = []
        pos = len(prompt_tokens)
        for i in range(n_predict):
            # argmax takes the first maximum, as llama.cpp's greedy sampler does.
            token = int(np.argmax(ctx.logits(-1))) if sampler is None else sampler.sample(ctx, -1)
            if model.is_eog(token):
                break
            out.append(token)
            if i + 1 < n_predict:
                one.clear()
                one.add(token, pos, (0,), True)
                pos += 1
                ctx.decode(one)
    raw = b"".join(model.token_to_piece(t, special=False) for t in out)
    return Generation([int(t) for t in prompt_tokens], out, raw)


def assert_same_as_reference(ours: Generation, ref: ReferenceResult) -> None:
    assert ours.prompt_tokens == ref["prompt_tokens"]
    assert ours.tokens == ref["tokens"]
    assert ours.raw == bytes.fromhex(ref["text_hex"])
    assert ours.raw.decode("utf-8", errors="replace") == ref["text"]


@cpu_only("compares with the C++ reference loop, which runs on the CPU")
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_loop_matches_reference(
    gemma: lc.LlamaModel, reference: Reference, prompt: str
) -> None:
    ref = reference(prompt)
    # A prompt that ends generation at once would compare nothing.
    assert len(ref["tokens"]) >= 4, ref
    assert_same_as_reference(generate(gemma, prompt, N_PREDICT), ref)
    assert_same_as_reference(generate(gemma, prompt, N_PREDICT, lc.LlamaSampler.greedy()), ref)


def test_non_ascii_prompts_reach_the_model_intact(gemma: lc.LlamaModel) -> None:
    non_ascii = [p for p in PROMPTS if any(ord(ch) > 127 for ch in p)]
    assert len(non_ascii) >= 2
    for prompt in non_ascii:
        assert gemma.detokenize(gemma.tokenize(prompt, add_special=False)) == prompt


def seeded_chain(seed: int) -> lc.LlamaSampler:
    """The chain llama_loop builds for ``--sampler dist``."""
    return lc.LlamaSampler.chain(
        [lc.LlamaSampler.top_k(TOP_K), lc.LlamaSampler.temp(TEMP), lc.LlamaSampler.dist(seed)]
    )


@cpu_only("compares with the C++ reference loop, which runs on the CPU")
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("prompt", DIST_PROMPTS)
def test_seeded_chain_matches_reference(
    gemma: lc.LlamaModel, reference: Reference, prompt: str, seed: int
) -> None:
    ref = reference(prompt, "dist", seed)
    assert len(ref["tokens"]) >= 4, ref
    assert_same_as_reference(generate(gemma, prompt, N_PREDICT, seeded_chain(seed)), ref)


@pytest.mark.parametrize("prompt", DIST_PROMPTS)
def test_seeded_reference_is_not_greedy(reference: Reference, prompt: str) -> None:
    # Guards the comparison above: the seeds must actually steer the sampling.
    runs = {tuple(reference(prompt, "dist", seed)["tokens"]) for seed in SEEDS}
    runs.add(tuple(reference(prompt)["tokens"]))
    assert len(runs) == len(SEEDS) + 1


@pytest.mark.parametrize(("value", "logged"), [("off", "disabled"), ("on", "enabled")])
def test_reference_loop_sets_flash_attention(
    reference_binary: Path, tiny_model_path: Path, value: str, logged: str
) -> None:
    """--flash-attn reaches the context (the bench's ceiling for llama_cpp.Llama, which
    keeps llama-cpp-python's flash_attn=False); a bad value is a usage error."""
    base = [str(reference_binary), "--lib-dir", lc.get_lib_dir(), "--model", str(tiny_model_path)]
    base += ["--prompt", "Hello", "--n-predict", "2", "--verbose"]
    run = subprocess.run([*base, "--flash-attn", value], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert re.search(rf"flash_attn\s*=\s*{logged}", run.stderr), run.stderr[-2000:]
    bad = subprocess.run([*base, "--flash-attn", "maybe"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "--flash-attn must be" in bad.stderr


def test_threads_share_one_model(gemma: lc.LlamaModel) -> None:
    """Four threads, each with its own context on one LlamaModel, decode at the same time."""
    prompts = PROMPTS[:4]
    n_predict = 12
    expected = [generate(gemma, p, n_predict, n_threads=1) for p in prompts]
    assert all(len(e.tokens) >= 4 for e in expected)

    results: list[Generation | None] = [None] * len(prompts)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(prompts))

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[i] = generate(gemma, prompts[i], n_predict, n_threads=1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert results == expected
