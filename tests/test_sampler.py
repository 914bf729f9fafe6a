"""LlamaSampler: every constructor, chains, state (reset, clone, seed, perf), the error
paths, and Python samplers inside native chains.

Each constructor is checked on a hand-made candidates array (``CANDIDATE_DTYPE``) against
what the sampler is documented to do, computed independently with NumPy.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import llama_cy as lc
from llama_cy.errors import ClosedError, GrammarError, LlamaError

S = lc.LlamaSampler
LLAMA_DEFAULT_SEED = 0xFFFFFFFF
LOGITS = np.array([1.0, 3.0, 2.0, 0.5, -1.0, 2.5], dtype=np.float32)

Candidates = npt.NDArray[np.void]
Floats = npt.NDArray[np.float32]


def candidates(logits: Sequence[float] | Floats, ids: Sequence[int] | None = None) -> Candidates:
    values = np.asarray(logits, dtype=np.float32)
    out = np.zeros(len(values), dtype=lc.CANDIDATE_DTYPE)
    out["id"] = np.arange(len(values)) if ids is None else np.asarray(ids)
    out["logit"] = values
    return out


def softmax(x: Floats) -> npt.NDArray[np.float64]:
    e = np.exp(x.astype(np.float64) - float(np.max(x)))
    result: npt.NDArray[np.float64] = e / e.sum()
    return result


def kept(cands: Candidates, size: int) -> set[int]:
    """Ids of the candidates a sampler left: the first ``size`` entries, finite logits."""
    head = cands[:size]
    return {int(i) for i in head["id"][np.isfinite(head["logit"])]}


def logit_of(cands: Candidates, token: int) -> float:
    (idx,) = np.nonzero(cands["id"] == token)
    assert len(idx) == 1
    return float(cands["logit"][idx[0]])


# ---- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vocab(tiny: lc.LlamaModel) -> dict[str, int]:
    """The tiny model's token texts (SentencePiece: '▁' for a space) to ids."""
    return {tiny.token_text(i): i for i in range(tiny.n_vocab)}


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> lc.LlamaModel:
    return lc.LlamaModel.load(gemma_path)


@pytest.fixture
def ctx(tiny: lc.LlamaModel) -> Iterator[lc.LlamaContext]:
    """A context whose last decode produced logits for batch entry 2 (of 3) only."""
    with lc.LlamaContext(tiny, n_ctx=64, n_batch=16, n_threads=1) as context:
        batch = lc.LlamaBatch(16)
        tokens = tiny.tokenize("Hello world", add_special=True)
        assert len(tokens) == 3
        batch.add_sequence(tokens, 0, 0)
        context.decode(batch)
        yield context


def raw_logits(ctx: lc.LlamaContext) -> Floats:
    return np.array(ctx.logits(-1), dtype=np.float32)


# ---- names -------------------------------------------------------------------------

Factory = Callable[[lc.LlamaModel], lc.LlamaSampler]

CONSTRUCTORS: list[tuple[str, Factory]] = [
    ("greedy", lambda m: S.greedy()),
    ("dist", lambda m: S.dist(1)),
    ("top-k", lambda m: S.top_k(3)),
    ("top-p", lambda m: S.top_p(0.5)),
    ("min-p", lambda m: S.min_p(0.1)),
    ("typical", lambda m: S.typical(0.5)),
    ("temp", lambda m: S.temp(0.5)),
    ("temp-ext", lambda m: S.temp_ext(0.5, 0.1, 1.0)),
    ("xtc", lambda m: S.xtc(0.5, 0.1)),
    ("top-n-sigma", lambda m: S.top_n_sigma(1.0)),
    ("mirostat", lambda m: S.mirostat(m.n_vocab, 1)),
    ("mirostat-v2", lambda m: S.mirostat_v2(1)),
    ("grammar", lambda m: S.grammar(m, 'root ::= "yes" | "no"')),
    (
        "grammar",
        lambda m: S.grammar_lazy_patterns(
            m, 'root ::= "yes"', trigger_patterns=["[\\s\\S]*?(yes)"]
        ),
    ),
    ("penalties", lambda m: S.penalties(m.n_vocab, 64, 1.1)),
    ("dry", lambda m: S.dry(m, 0.8, 1.75, 2, 64)),
    ("adaptive-p", lambda m: S.adaptive_p(0.5, 0.9, 1)),
    ("logit-bias", lambda m: S.logit_bias(m.n_vocab, {0: 1.0})),
    ("infill", lambda m: S.infill(m)),
    ("chain", lambda m: S.chain([S.top_k(3), S.greedy()])),
]


@pytest.mark.parametrize(("name", "factory"), CONSTRUCTORS)
def test_constructor_name(tiny: lc.LlamaModel, name: str, factory: Factory) -> None:
    sampler = factory(tiny)
    assert sampler.name == name
    assert repr(sampler) == f"<LlamaSampler {name!r}>"


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: S.top_k(0), "?top-k"),
        (lambda: S.top_p(1.0), "?top-p"),
        (lambda: S.temp(1.0), "?temp"),
        (lambda: S.xtc(0.0, 0.1), "?xtc"),
    ],
)
def test_disabled_samplers_are_no_ops(factory: Callable[[], lc.LlamaSampler], name: str) -> None:
    # llama.cpp turns a sampler whose parameters disable it into a named no-op.
    sampler = factory()
    assert sampler.name == name
    cands = candidates(LOGITS)
    assert sampler.apply(cands) == (len(LOGITS), -1)
    assert np.array_equal(cands, candidates(LOGITS))


def test_direct_construction_is_refused() -> None:
    with pytest.raises(TypeError):
        lc.LlamaSampler()


# ---- each constructor's effect ---------------------------------------------------------


def test_greedy_selects_the_argmax(ctx: lc.LlamaContext) -> None:
    cands = candidates(LOGITS)
    size, selected = S.greedy().apply(cands)
    assert size == len(LOGITS)
    assert int(cands["id"][selected]) == int(np.argmax(LOGITS))
    assert S.greedy().sample(ctx) == int(np.argmax(raw_logits(ctx)))
    # sample() skips the candidate array for a lone greedy sampler (also in a chain of
    # one, and in a clone); llama.cpp's own path through a longer chain agrees.
    fast = [S.greedy(), S.chain([S.greedy()]), S.chain([S.greedy()]).clone()]
    slow = S.chain([S.temp(1.0), S.greedy()])
    assert {s.sample(ctx) for s in fast} == {slow.sample(ctx)}


def test_candidates_are_what_the_chain_left(ctx: lc.LlamaContext) -> None:
    chain = S.chain([S.top_k(3), S.temp(1.0), S.dist(seed=5)])
    assert len(chain.candidates()) == 0  # nothing sampled yet
    token = chain.sample(ctx)
    cands = chain.candidates()
    assert cands.dtype == lc.CANDIDATE_DTYPE
    logits = raw_logits(ctx)
    assert set(cands["id"].tolist()) == set(np.argsort(-logits)[:3].tolist())
    assert token in cands["id"]
    assert list(cands["p"]) == sorted(cands["p"], reverse=True)
    expected = softmax(np.sort(logits)[::-1][:3].copy())
    assert np.allclose(cands["p"], expected, atol=1e-5)
    # a lone greedy sampler picks without the array, unless asked to keep it
    greedy = S.greedy()
    first = greedy.sample(ctx)
    assert len(greedy.candidates()) == 0
    assert greedy.sample(ctx, candidates=True) == first
    assert len(greedy.candidates()) == ctx.n_vocab


def test_sample_rows_picks_and_accepts_as_sample_does(tiny: lc.LlamaModel) -> None:
    """A step's rows sampled in one call (the GIL released once): the tokens sample()
    gives one chain at a time, each accepted (a seeded dist's draws and the penalties'
    history move alike), and what the chain left kept; a chain it cannot run (a Python
    sampler, a grammar) gets -1 and is not touched."""
    with lc.LlamaContext(tiny, n_ctx=64, n_batch=16, n_threads=1) as ctx:
        batch = lc.LlamaBatch(16)
        for i, t in enumerate(tiny.tokenize("Hello world", add_special=True)):
            batch.add(t, i, (0,), True)
        ctx.decode(batch)

        def chains() -> list[lc.LlamaSampler]:
            return [
                *(
                    S.chain([S.penalties(ctx.n_vocab, 8, 1.5), S.top_k(20), S.dist(seed=7 + i)])
                    for i in range(3)
                ),
                S.greedy(),
            ]

        rows = [0, 1, 2, 2]
        ours, theirs = chains(), chains()
        for _ in range(4):
            got = S.sample_rows(ctx, ours, rows)
            assert got == [c.sample(ctx, r) for c, r in zip(theirs, rows, strict=True)]
            for a, b in zip(ours, theirs, strict=True):
                assert np.array_equal(a.candidates(), b.candidates())
        mask = Mask(5)
        python = S.chain([S.from_python(mask), S.greedy()])
        grammar = S.chain([S.grammar(tiny, 'root ::= "yes" | "no"'), S.greedy()])
        best = int(np.argmax(raw_logits(ctx)))
        assert S.sample_rows(ctx, [python, grammar, S.greedy()], [2, 2, 2]) == [-1, -1, best]
        assert mask.calls == 0
        assert S.sample_rows(ctx, [], []) == []
        with pytest.raises(ValueError, match="2 chains for 1 rows"):
            S.sample_rows(ctx, [S.greedy(), S.greedy()], [0])
        closed = S.greedy()
        closed.close()
        with pytest.raises(ClosedError):
            S.sample_rows(ctx, [closed], [0])


@pytest.mark.parametrize(
    ("rows", "winners"),
    [
        # NaN early, ties between a vector block and the tail (32000 + 3 tokens: the
        # scan's 16-wide blocks end before the last 3); +u and -u give +s and -s, so the
        # first of a pair wins whatever the sign of s.
        ({1: "nan", 5000: 1, 31999: 1, 7000: -1, 32002: -1}, (5000, 7000)),
        # the largest logit only in the tail; NaN right before it and in each lane of
        # the last vector block (31984..31999), where no later block could displace it
        (
            {31985: "nan", 31990: "nan", 31995: "nan", 31999: "nan", 32001: "nan", 32002: 1, 3: -1},
            (32002, 3),
        ),
        # every other row is zero: the pick is index 0 unless s is the largest; a NaN
        # at index 0 is llama.cpp's pick whatever follows
        ({10: -1}, (10, 0)),
        ({0: "nan", 9: 1}, (0, 0)),
    ],
)
def test_greedy_fast_path_picks_as_llama_cpp(
    tmp_path: Path, rows: dict[int, Any], winners: tuple[int, int]
) -> None:
    """The lone-greedy path scans the logits itself (vectorised): it must give llama.cpp's
    greedy answer for ties and NaN, at block and tail positions alike."""
    from tiny_model import write_tiny_llama

    def output(n_vocab: int, n_embd: int) -> npt.NDArray[np.float32]:
        w = np.zeros((n_vocab, n_embd), dtype=np.float32)
        u = np.random.default_rng(0).standard_normal(n_embd).astype(np.float32)
        for row, how in rows.items():
            w[row] = np.nan if how == "nan" else how * u
        return w

    path = write_tiny_llama(
        tmp_path / "shaped.gguf", extra_tokens=["<a>", "<b>", "<c>"], output=output
    )
    with lc.LlamaModel.load(path) as model, lc.LlamaContext(model, n_ctx=64) as ctx:
        assert model.n_vocab == 32003
        batch = lc.LlamaBatch(8)
        batch.add_sequence(model.tokenize("Hello"), 0, 0)
        ctx.decode(batch)
        logits = raw_logits(ctx)
        cands = candidates(logits)
        _, selected = S.greedy().apply(cands)  # llama.cpp's own greedy loop
        expected = int(cands["id"][selected])
        s = float(logits[next(r for r, how in rows.items() if how != "nan")])
        assert expected == (winners[0] if s > 0 else winners[1])
        assert S.greedy().sample(ctx) == expected


def test_the_candidate_array_holds_every_logit_in_order(tmp_path: Path) -> None:
    """sample() and sample_rows() fill the chain's array from the row themselves (four
    tokens a step where SSE2 is): every id in order, its logit exactly, p 0, through
    the last token of a vocabulary that is not a multiple of four. temp(1.0) and greedy
    leave the array as it was filled (p stays 0, so candidates() keeps its order)."""
    from tiny_model import write_tiny_llama

    path = write_tiny_llama(tmp_path / "odd.gguf", extra_tokens=["<a>", "<b>", "<c>"])
    with lc.LlamaModel.load(path) as model, lc.LlamaContext(model, n_ctx=64) as ctx:
        assert model.n_vocab == 32003
        batch = lc.LlamaBatch(8)
        batch.add_sequence(model.tokenize("Hello world"), 0, 0)
        batch.output[0] = 1  # two rows, at either end of the batch
        ctx.decode(batch)
        for row in (0, batch.n_tokens - 1):
            logits = np.array(ctx.logits(row), dtype=np.float32)
            one, rows = S.chain([S.temp(1.0), S.greedy()]), S.chain([S.temp(1.0), S.greedy()])
            one.sample(ctx, row)
            S.sample_rows(ctx, [rows], [row])
            for chain in (one, rows):
                cands = chain.candidates()
                assert np.array_equal(cands["id"], np.arange(model.n_vocab, dtype=np.int32))
                assert np.array_equal(cands["logit"], logits)
                assert not cands["p"].any()


def test_dist_draws_from_the_softmax() -> None:
    probs = np.array([0.6, 0.3, 0.1])
    logits = np.log(probs).astype(np.float32)
    sampler = S.dist(seed=7)
    cands = candidates(logits)
    size, selected = sampler.apply(cands)
    assert size == 3
    assert 0 <= selected < 3
    order = np.argsort(cands["id"])
    assert np.allclose(cands["p"][order], probs, atol=1e-6)

    counts = np.zeros(3)
    n = 4000
    for _ in range(n):
        cands = candidates(logits)
        _, selected = sampler.apply(cands)
        counts[int(cands["id"][selected])] += 1
    assert np.allclose(counts / n, probs, atol=0.04)


def test_dist_with_a_seed_is_reproducible() -> None:
    def draws(sampler: lc.LlamaSampler) -> list[int]:
        out = []
        for _ in range(50):
            cands = candidates(LOGITS)
            _, selected = sampler.apply(cands)
            out.append(int(cands["id"][selected]))
        return out

    first = draws(S.dist(123))
    assert first == draws(S.dist(123))
    assert len(set(first)) > 1
    assert first != draws(S.dist(124))


def test_top_k_keeps_the_k_best() -> None:
    cands = candidates(LOGITS)
    size, selected = S.top_k(3).apply(cands)
    assert (size, selected) == (3, -1)
    assert kept(cands, size) == {int(i) for i in np.argsort(-LOGITS)[:3]}


def test_top_p_keeps_the_smallest_nucleus() -> None:
    p = 0.5
    probs = softmax(LOGITS)
    order = np.argsort(-probs)
    n_keep = int(np.argmax(np.cumsum(probs[order]) >= p)) + 1
    cands = candidates(LOGITS)
    size, _ = S.top_p(p).apply(cands)
    assert size == n_keep < len(LOGITS)
    assert kept(cands, size) == {int(i) for i in order[:n_keep]}


def test_min_p_drops_tokens_below_the_scaled_maximum() -> None:
    p = 0.3
    probs = softmax(LOGITS)
    expected = {int(i) for i in np.nonzero(probs >= p * probs.max())[0]}
    cands = candidates(LOGITS)
    size, _ = S.min_p(p).apply(cands)
    assert kept(cands, size) == expected
    assert len(expected) < len(LOGITS)


def test_typical_keeps_the_locally_typical_set() -> None:
    mass = 0.5
    probs = softmax(LOGITS)
    entropy = -float(np.sum(probs * np.log(probs)))
    order = np.argsort(np.abs(-np.log(probs) - entropy), kind="stable")
    n_keep = int(np.argmax(np.cumsum(probs[order]) > mass)) + 1
    cands = candidates(LOGITS)
    size, _ = S.typical(mass).apply(cands)
    assert kept(cands, size) == {int(i) for i in order[:n_keep]}
    assert size == n_keep < len(LOGITS)


@pytest.mark.parametrize("factory", [lambda: S.temp(2.0), lambda: S.temp_ext(2.0, 0.0, 1.0)])
def test_temperature_divides_the_logits(factory: Callable[[], lc.LlamaSampler]) -> None:
    cands = candidates(LOGITS)
    size, _ = factory().apply(cands)
    assert size == len(LOGITS)
    for token, logit in enumerate(LOGITS):
        assert logit_of(cands, token) == pytest.approx(logit / 2.0)


def test_dynamic_temperature_follows_the_entropy() -> None:
    temp, delta, exponent = 1.0, 0.9, 1.5
    probs = softmax(LOGITS)
    normalized_entropy = -float(np.sum(probs * np.log(probs))) / np.log(len(LOGITS))
    dyn_temp = (temp - delta) + 2 * delta * normalized_entropy**exponent
    cands = candidates(LOGITS)
    S.temp_ext(temp, delta, exponent).apply(cands)
    for token, logit in enumerate(LOGITS):
        assert logit_of(cands, token) == pytest.approx(logit / dyn_temp, rel=1e-5)
    assert dyn_temp != pytest.approx(temp)


def test_xtc_removes_the_most_probable_tokens() -> None:
    # probability 1: it always fires. It removes every token at or above the threshold
    # but the least probable of them.
    threshold = 0.1
    probs = softmax(LOGITS)
    above = [int(i) for i in np.argsort(-probs) if probs[i] >= threshold]
    assert len(above) >= 2
    expected = set(range(len(LOGITS))) - set(above[:-1])
    cands = candidates(LOGITS)
    size, _ = S.xtc(1.0, threshold, 1, 5).apply(cands)
    assert size == len(expected)
    assert kept(cands, size) == expected


def test_xtc_inside_a_chain_removes_the_most_probable_tokens() -> None:
    seen: list[set[int]] = []

    class Observer:
        def apply(self, cands: Candidates) -> None:
            seen.append({int(i) for i in cands["id"]})

    probs = softmax(LOGITS)
    above = [int(i) for i in np.argsort(-probs) if probs[i] >= 0.1]
    chain = S.chain([S.xtc(1.0, 0.1, 1, 5), S.from_python(Observer())])
    chain.apply(candidates(LOGITS))
    assert seen == [set(range(len(LOGITS))) - set(above[:-1])]


def test_top_n_sigma_masks_logits_far_below_the_maximum() -> None:
    n = 1.0
    limit = float(LOGITS.max()) - n * float(np.std(LOGITS))
    cands = candidates(LOGITS)
    size, _ = S.top_n_sigma(n).apply(cands)
    assert kept(cands, size) == {i for i, x in enumerate(LOGITS) if x >= limit}
    assert len(kept(cands, size)) < len(LOGITS)


@pytest.mark.parametrize(
    "factory",
    [lambda seed: S.mirostat(len(LOGITS), seed), lambda seed: S.mirostat_v2(seed)],
)
def test_mirostat_selects_seeded_tokens(factory: Callable[[int], lc.LlamaSampler]) -> None:
    def run(sampler: lc.LlamaSampler, logits: Floats) -> list[int]:
        out = []
        for _ in range(20):
            cands = candidates(logits)
            size, selected = sampler.apply(cands)
            assert 0 <= selected < size
            token = int(cands["id"][selected])
            sampler.accept(token)
            out.append(token)
        return out

    first = run(factory(3), LOGITS)
    assert first == run(factory(3), LOGITS)
    assert len(set(first)) > 1
    peaked = np.zeros(6, dtype=np.float32)
    peaked[4] = 30.0
    assert set(run(factory(3), peaked)) == {4}


def test_mirostat_v2_with_a_low_target_surprise_picks_the_top_token() -> None:
    sampler = S.mirostat_v2(seed=1, tau=0.1, eta=0.1)
    cands = candidates(LOGITS)
    size, selected = sampler.apply(cands)
    assert size == 1
    assert int(cands["id"][selected]) == int(np.argmax(LOGITS))


def test_penalties_lower_the_logits_of_accepted_tokens() -> None:
    repeat, freq, present = 1.5, 0.1, 0.2
    sampler = S.penalties(len(LOGITS), 64, repeat, freq, present)
    for token in (1, 1, 4):
        sampler.accept(token)
    cands = candidates(LOGITS)
    sampler.apply(cands)
    assert logit_of(cands, 1) == pytest.approx(3.0 / repeat - 2 * freq - present)
    assert logit_of(cands, 4) == pytest.approx(-1.0 * repeat - freq - present)
    for token in (0, 2, 3, 5):
        assert logit_of(cands, token) == LOGITS[token]

    sampler.reset()
    cands = candidates(LOGITS)
    sampler.apply(cands)
    assert np.array_equal(cands, candidates(LOGITS))


def dry_tokens(vocab: dict[str, int]) -> list[int]:
    return [vocab[w] for w in ("▁red", "▁green", "▁blue", "▁dog", "▁cat")]


def test_dry_penalizes_the_continuation_of_a_repeat(
    tiny: lc.LlamaModel, vocab: dict[str, int]
) -> None:
    a, b, c, d, e = dry_tokens(vocab)
    multiplier, base, allowed = 0.8, 1.75, 2
    sampler = S.dry(tiny, multiplier, base, allowed, 64)
    for token in (a, b, c, d, a, b, c):
        sampler.accept(token)
    cands = candidates(np.zeros(5, dtype=np.float32), [a, b, c, d, e])
    sampler.apply(cands)
    # "a b c" repeats (length 3); d would extend it.
    assert logit_of(cands, d) == pytest.approx(-multiplier * base ** (3 - allowed))
    assert [logit_of(cands, t) for t in (a, b, c, e)] == [0.0] * 4

    sampler.reset()
    cands = candidates(np.zeros(5, dtype=np.float32), [a, b, c, d, e])
    sampler.apply(cands)
    assert logit_of(cands, d) == 0.0


def test_dry_with_the_default_penalty_window_is_active(
    tiny: lc.LlamaModel, vocab: dict[str, int]
) -> None:
    # penalty_last_n defaults to -1, which llama.cpp's own tools read as "the whole
    # context"; a multiplier > 0 asks for DRY, so the default must not turn it off.
    a, b, c, d, e = dry_tokens(vocab)
    sampler = S.dry(tiny, 0.8)
    assert sampler.name == "dry"
    for token in (a, b, c, d, a, b, c):
        sampler.accept(token)
    cands = candidates(np.zeros(5, dtype=np.float32), [a, b, c, d, e])
    sampler.apply(cands)
    assert logit_of(cands, d) < 0.0


def test_adaptive_p_favours_tokens_near_the_target_probability() -> None:
    target = 0.3
    probs = softmax(LOGITS)
    nearest = int(np.argmin(np.abs(probs - target)))
    assert nearest != int(np.argmax(LOGITS))
    cands = candidates(LOGITS)
    size, selected = S.adaptive_p(target, 0.9, seed=1).apply(cands)
    assert 0 <= selected < size
    transformed = np.array([logit_of(cands, t) for t in range(len(LOGITS))])
    assert int(np.argmax(transformed)) == nearest


def test_logit_bias_changes_the_argmax(ctx: lc.LlamaContext, tiny: lc.LlamaModel) -> None:
    cands = candidates(LOGITS)
    S.logit_bias(len(LOGITS), {4: 10.0, 1: -0.5}).apply(cands)
    assert logit_of(cands, 4) == pytest.approx(9.0)
    assert logit_of(cands, 1) == pytest.approx(2.5)
    assert [logit_of(cands, t) for t in (0, 2, 3, 5)] == [LOGITS[t] for t in (0, 2, 3, 5)]

    logits = raw_logits(ctx)
    target = int(np.argmin(logits))
    chain = S.chain([S.logit_bias(tiny.n_vocab, {target: 1000.0}), S.greedy()])
    assert chain.sample(ctx) == target != int(np.argmax(logits))


def test_logit_bias_rejects_tokens_outside_the_vocabulary() -> None:
    with pytest.raises(ValueError, match="out of range"):
        S.logit_bias(6, {6: 1.0})
    with pytest.raises(ValueError, match="out of range"):
        S.logit_bias(6, {-1: 1.0})


def test_infill_merges_tokens_sharing_a_prefix(tiny: lc.LlamaModel, vocab: dict[str, int]) -> None:
    hel, hello, the, colon = vocab["hel"], vocab["hello"], vocab["▁the"], vocab[":"]
    logits = np.array([1.0, 0.0, 1.6, -1.0], dtype=np.float32)
    probs = softmax(logits)
    cands = candidates(logits, [hel, hello, the, colon])
    size, _ = S.infill(tiny).apply(cands)
    # "hello" folds into "hel" (the likelier of the two); ":" is below 0.2 and goes;
    # "hel" and "the" both stay above 1 / (2 + 1) after renormalising.
    assert size == 2
    assert {int(i) for i in cands["id"][:size]} == {hel, the}
    p_hel = float(cands["p"][:size][cands["id"][:size] == hel][0])
    assert p_hel == pytest.approx(
        (probs[0] + probs[1]) / (probs[0] + probs[1] + probs[2]), rel=1e-4
    )


def test_infill_picks_end_of_generation_when_it_dominates(
    tiny: lc.LlamaModel, vocab: dict[str, int]
) -> None:
    eos = tiny.token_eos
    cands = candidates([3.0, 1.0, 1.0], [eos, vocab["hel"], vocab["▁the"]])
    size, _ = S.infill(tiny).apply(cands)
    assert size == 1
    assert int(cands["id"][0]) == eos
    assert float(cands["p"][0]) == pytest.approx(1.0)


# ---- grammars ----------------------------------------------------------------------


YES_NO = 'root ::= "yes" | "no"'


def allowed_ids(sampler: lc.LlamaSampler, logits: Floats) -> set[int]:
    cands = candidates(logits)
    size, _ = sampler.apply(cands)
    assert size == len(logits)  # a grammar masks, it does not shrink
    return {int(t) for t in cands["id"][np.isfinite(cands["logit"])]}


def allowed_pieces(model: lc.LlamaModel, sampler: lc.LlamaSampler, logits: Floats) -> set[bytes]:
    return {model.token_to_piece(t) for t in allowed_ids(sampler, logits)}


def test_grammar_restricts_candidates_on_gemma(gemma: lc.LlamaModel) -> None:
    with lc.LlamaContext(gemma, n_ctx=128, n_batch=64, n_threads=2) as ctx:
        batch = lc.LlamaBatch(64)
        batch.add_sequence(gemma.tokenize("Is the sky blue? Answer yes or no:"), 0, 0)
        ctx.decode(batch)
        logits = raw_logits(ctx)
    pieces = allowed_pieces(gemma, S.grammar(gemma, YES_NO), logits)
    assert {b"yes", b"no"} <= pieces
    assert all(p and (b"yes".startswith(p) or b"no".startswith(p)) for p in pieces)
    assert gemma.token_to_piece(int(np.argmax(logits))) not in pieces  # it did restrict


def test_grammar_sampling_on_gemma_yields_a_sentence_of_the_grammar(gemma: lc.LlamaModel) -> None:
    chain = S.chain([S.grammar(gemma, YES_NO), S.greedy()])
    with lc.LlamaContext(gemma, n_ctx=128, n_batch=64, n_threads=2) as ctx:
        prompt = gemma.tokenize("Is the sky blue? Answer yes or no:")
        batch = lc.LlamaBatch(64)
        batch.add_sequence(prompt, 0, 0)
        ctx.decode(batch)
        out: list[int] = []
        for _ in range(8):
            token = chain.sample(ctx)
            if gemma.is_eog(token):
                break
            out.append(token)
            batch.clear()
            batch.add(token, len(prompt) + len(out) - 1, (0,), True)
            ctx.decode(batch)
        else:
            pytest.fail(f"no end of generation after {out}: the grammar should force it")
    assert b"".join(gemma.token_to_piece(t) for t in out) in (b"yes", b"no")


def test_grammar_state_follows_accept_and_reset(tiny: lc.LlamaModel, vocab: dict[str, int]) -> None:
    logits = np.zeros(tiny.n_vocab, dtype=np.float32)
    sampler = S.grammar(tiny, YES_NO)
    start = allowed_ids(sampler, logits)
    assert {vocab["y"], vocab["n"], vocab["yes"], vocab["no"]} <= start
    assert not any(tiny.is_eog(t) for t in start)
    sampler.accept(vocab["yes"])
    done = allowed_ids(sampler, logits)
    # The sentence is complete: only end of generation is left.
    assert done
    assert all(tiny.is_eog(t) for t in done)
    clone = sampler.clone()
    sampler.reset()
    assert allowed_ids(sampler, logits) == start
    assert allowed_ids(clone, logits) == done


@pytest.mark.parametrize(
    ("grammar", "root"),
    [
        ('root ::= "unterminated', "root"),
        ("root ::= undefined-rule", "root"),
        ('root := "x"', "root"),
        ('root ::= root "a" | "a"', "root"),
        ('root ::= "x"', "start"),
    ],
)
def test_invalid_grammar_raises_grammar_error(
    tiny: lc.LlamaModel, vocab: dict[str, int], grammar: str, root: str
) -> None:
    with pytest.raises(GrammarError):
        S.grammar(tiny, grammar, root)
    with pytest.raises(GrammarError):
        S.grammar_lazy_patterns(tiny, grammar, root, trigger_tokens=[vocab["▁Answer"]])


def test_lazy_grammar_waits_for_its_trigger_token(
    tiny: lc.LlamaModel, vocab: dict[str, int]
) -> None:
    logits = np.zeros(tiny.n_vocab, dtype=np.float32)
    sampler = S.grammar_lazy_patterns(
        tiny, 'root ::= " Answer: " ("yes" | "no")', trigger_tokens=[vocab["▁Answer"]]
    )
    assert len(allowed_pieces(tiny, sampler, logits)) > 1000
    sampler.accept(vocab["▁The"])
    assert len(allowed_pieces(tiny, sampler, logits)) > 1000
    sampler.accept(vocab["▁Answer"])
    assert allowed_pieces(tiny, sampler, logits) == {b":"}


def test_lazy_grammar_waits_for_its_trigger_pattern(
    tiny: lc.LlamaModel, vocab: dict[str, int]
) -> None:
    logits = np.zeros(tiny.n_vocab, dtype=np.float32)
    sampler = S.grammar_lazy_patterns(
        tiny,
        'root ::= "Answer: " ("yes" | "no")',
        trigger_patterns=[r"[\s\S]*?(Answer:[\s\S]*)"],
    )
    for token in ("▁The", "▁Answer"):
        sampler.accept(vocab[token])
        assert len(allowed_pieces(tiny, sampler, logits)) > 1000
    sampler.accept(vocab[":"])
    pieces = allowed_pieces(tiny, sampler, logits)
    assert {b" ", b" y", b" n"} <= pieces
    assert all(b" yes".startswith(p) or b" no".startswith(p) for p in pieces)


# Misuse that makes llama.cpp throw a C++ exception or abort runs in a child process, so
# a crash fails one test instead of ending the run.
CHILD_PRELUDE = """
import sys
import llama_cy as lc
from llama_cy.errors import LlamaError, GrammarError
model = lc.LlamaModel.load(sys.argv[1])
vocab = {model.token_text(i): i for i in range(model.n_vocab)}
def expect(exc_type, fn):
    try:
        fn()
    except exc_type as exc:
        print("RAISED", type(exc).__name__, flush=True)
    else:
        print("NOTHING RAISED", flush=True)
"""


def run_child(model: Path, body: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", CHILD_PRELUDE + body, str(model)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (
        f"the process died (status {result.returncode}):\n{result.stderr[-3000:]}"
    )
    return result.stdout


def test_grammar_accept_of_a_forbidden_token_raises(tiny_model_path: Path) -> None:
    out = run_child(
        tiny_model_path,
        """
g = lc.LlamaSampler.grammar(model, 'root ::= "yes" | "no"')
expect(LlamaError, lambda: g.accept(vocab["▁hello"]))
""",
    )
    assert out.startswith("RAISED")


def test_grammar_accept_of_end_of_generation_too_early_raises(tiny_model_path: Path) -> None:
    out = run_child(
        tiny_model_path,
        """
g = lc.LlamaSampler.grammar(model, 'root ::= "yes" | "no"')
expect(LlamaError, lambda: g.accept(model.token_eos))
""",
    )
    assert out.startswith("RAISED")


def test_lazy_grammar_with_an_invalid_trigger_pattern_raises(tiny_model_path: Path) -> None:
    out = run_child(
        tiny_model_path,
        """
expect(GrammarError, lambda: lc.LlamaSampler.grammar_lazy_patterns(
    model, 'root ::= "yes"', trigger_patterns=["(unclosed"]))
""",
    )
    assert out == "RAISED GrammarError\n"


# ---- chains ------------------------------------------------------------------------


def test_chain_applies_its_members_in_order() -> None:
    chain = S.chain([S.top_k(3), S.temp(2.0)])
    assert len(chain) == 2
    cands = candidates(LOGITS)
    size, selected = chain.apply(cands)
    assert (size, selected) == (3, -1)
    top3 = [int(i) for i in np.argsort(-LOGITS)[:3]]
    assert kept(cands, size) == set(top3)
    for token in top3:
        assert logit_of(cands[:size], token) == pytest.approx(LOGITS[token] / 2.0)


def test_chain_moves_its_members(ctx: lc.LlamaContext) -> None:
    member = S.top_k(3)
    selector = S.greedy()
    chain = S.chain([member, selector])
    for moved in (member, selector):
        with pytest.raises(ClosedError):
            _ = moved.name
        with pytest.raises(ClosedError):
            moved.apply(candidates(LOGITS))
        with pytest.raises(ClosedError):
            moved.sample(ctx)
        with pytest.raises(ClosedError):
            moved.accept(1)
        with pytest.raises(ClosedError):
            moved.clone()
        with pytest.raises(ClosedError):
            S.chain([moved])
        assert repr(moved) == "<LlamaSampler closed>"
    assert chain.sample(ctx) == int(np.argmax(raw_logits(ctx)))


def test_chain_refuses_the_same_sampler_twice() -> None:
    member = S.temp(0.5)
    with pytest.raises(ValueError, match="twice"):
        S.chain([member, member])
    assert member.name == "temp"  # still usable: nothing was moved


def test_chain_without_a_selecting_sampler_raises(ctx: lc.LlamaContext) -> None:
    with pytest.raises(LlamaError, match="selected no token"):
        S.chain([S.top_k(5), S.temp(0.7)]).sample(ctx)
    with pytest.raises(LlamaError):
        S.chain([]).sample(ctx)
    with pytest.raises(LlamaError):
        S.top_k(5).sample(ctx)


def test_len() -> None:
    assert len(S.greedy()) == 0
    assert len(S.chain([])) == 0
    inner = S.chain([S.top_k(3), S.temp(0.5)])
    assert len(inner) == 2
    assert len(S.chain([inner, S.min_p(0.1), S.dist(1)])) == 3


@pytest.mark.parametrize("idx", [0, 1, 3, 15, 64, 10_000, -2, -4, -100_000])
def test_sample_with_an_invalid_index_raises_index_error(ctx: lc.LlamaContext, idx: int) -> None:
    sampler = S.chain([S.greedy()])
    with pytest.raises(IndexError):
        sampler.sample(ctx, idx)
    # Neither the sampler nor the context is harmed.
    assert sampler.sample(ctx, 2) == sampler.sample(ctx, -1) == int(np.argmax(raw_logits(ctx)))


def test_sample_before_any_decode_raises_index_error(tiny: lc.LlamaModel) -> None:
    with (
        lc.LlamaContext(tiny, n_ctx=32, n_batch=8, n_threads=1) as fresh,
        pytest.raises(IndexError),
    ):
        S.greedy().sample(fresh, -1)


def test_sample_accepts_unless_told_not_to(ctx: lc.LlamaContext) -> None:
    # A repeat penalty sees only accepted tokens.
    chain = S.chain([S.penalties(ctx.n_vocab, 64, 1e6), S.greedy()])
    first = chain.sample(ctx, accept=False)
    assert chain.sample(ctx, accept=True) == first
    assert chain.sample(ctx) != first


def test_reset_restarts_a_seeded_sampler() -> None:
    def draws(sampler: lc.LlamaSampler) -> list[int]:
        out = []
        for _ in range(30):
            cands = candidates(LOGITS)
            _, selected = sampler.apply(cands)
            out.append(int(cands["id"][selected]))
        return out

    chain = S.chain([S.top_k(4), S.dist(99)])
    first = draws(chain)
    assert draws(chain) != first
    chain.reset()
    assert draws(chain) == first


def test_clone_of_a_seeded_dist_continues_identically() -> None:
    def draws(sampler: lc.LlamaSampler) -> list[int]:
        out = []
        for _ in range(40):
            cands = candidates(LOGITS)
            _, selected = sampler.apply(cands)
            out.append(int(cands["id"][selected]))
        return out

    original = S.dist(2024)
    draws(original)  # advance the RNG
    clone = original.clone()
    assert clone.name == "dist"
    clone_draws = draws(clone)  # the clone first: the two must not share state
    assert draws(original) == clone_draws
    assert clone_draws != draws(S.dist(2024))


def test_seed() -> None:
    assert S.dist(1234).seed == 1234
    assert S.chain([S.top_k(40), S.temp(0.8), S.dist(77)]).seed == 77
    assert S.greedy().seed == LLAMA_DEFAULT_SEED
    drawn = S.dist().seed
    assert drawn != LLAMA_DEFAULT_SEED
    assert S.dist(drawn).seed == drawn


def test_perf_counts_samples_on_chains(ctx: lc.LlamaContext) -> None:
    class Slow:  # each sample takes at least 5 ms, which the chain's timer must see
        def apply(self, cands: Candidates) -> None:
            time.sleep(0.005)

    chain = S.chain([Slow(), S.top_k(10), S.dist(1)])
    for _ in range(3):
        chain.sample(ctx)
    perf = chain.perf()
    assert isinstance(perf, lc.SamplerPerf)
    assert perf.n_sample == 3
    assert 15.0 <= perf.t_sample_ms < 10_000.0
    chain.perf_reset()
    assert chain.perf().n_sample == 0
    with pytest.raises(TypeError):
        S.greedy().perf()
    with pytest.raises(TypeError):
        S.greedy().perf_reset()


def test_close_and_context_manager(ctx: lc.LlamaContext) -> None:
    with S.greedy() as sampler:
        assert sampler.sample(ctx) == int(np.argmax(raw_logits(ctx)))
    with pytest.raises(ClosedError):
        sampler.sample(ctx)
    sampler.close()  # idempotent
    other = S.dist(1)
    other.close()
    for call in (other.reset, other.clone, other.perf, lambda: len(other)):
        with pytest.raises(ClosedError):
            call()


def test_apply_checks_its_array() -> None:
    sampler = S.greedy()
    with pytest.raises(TypeError):
        sampler.apply(LOGITS)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sampler.apply([(0, 1.0, 0.0)])  # type: ignore[arg-type]
    readonly = candidates(LOGITS)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        sampler.apply(readonly)
    with pytest.raises(ValueError, match="contiguous"):
        sampler.apply(candidates(np.arange(12, dtype=np.float32))[::2])


# ---- Python samplers ---------------------------------------------------------------


class Mask:
    """Sets every logit but ``keep``'s to -inf."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.calls = 0

    def apply(self, cands: Candidates) -> None:
        self.calls += 1
        cands["logit"][cands["id"] != self.keep] = -np.inf


class Pick:
    """Selects the candidate at a fixed index."""

    name = "pick"

    def __init__(self, index: int) -> None:
        self.index = index
        self.picked: list[int] = []

    def apply(self, cands: Candidates) -> int:
        self.picked.append(int(cands["id"][self.index]))
        return self.index


def test_python_sampler_mask_changes_the_sampled_token(ctx: lc.LlamaContext) -> None:
    logits = raw_logits(ctx)
    target = int(np.argsort(logits)[len(logits) // 2])  # a middling token, not the argmax
    mask = Mask(target)
    chain = S.chain([S.top_k(ctx.n_vocab), S.from_python(mask), S.greedy()])
    assert chain.sample(ctx) == target
    assert mask.calls == 1
    assert S.chain([S.greedy()]).sample(ctx) != target


def test_python_sampler_can_select(ctx: lc.LlamaContext) -> None:
    pick = Pick(17)
    alone = S.from_python(pick)
    assert alone.name == "pick"
    token = alone.sample(ctx)
    assert token == pick.picked[-1] == 17  # sample() lays the logits out in id order
    chain = S.chain([S.top_k(40), S.from_python(Pick(5))])
    top40 = set(np.argsort(-raw_logits(ctx))[:40].tolist())
    assert chain.sample(ctx) in top40


def test_python_sampler_name_defaults_to_its_class_name() -> None:
    assert S.from_python(Mask(1)).name == "Mask"


def test_chain_wraps_plain_python_objects(ctx: lc.LlamaContext) -> None:
    # chain() accepts objects with apply() and wraps them with from_python itself.
    logits = raw_logits(ctx)
    target = int(np.argmin(logits))
    mask = Mask(target)
    chain = S.chain([S.top_k(ctx.n_vocab), mask, S.greedy()])
    assert len(chain) == 3
    assert chain.sample(ctx) == target
    assert mask.calls == 1


def test_python_sampler_needs_apply() -> None:
    class NoApply:
        pass

    with pytest.raises(TypeError):
        S.from_python(NoApply())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        S.chain([S.greedy(), NoApply()])  # type: ignore[list-item]


def test_python_sampler_sees_a_writable_zero_copy_view(ctx: lc.LlamaContext) -> None:
    logits = raw_logits(ctx)
    target = int(np.argmin(logits))
    seen: dict[str, Any] = {}

    class Writer:
        def apply(self, cands: Candidates) -> None:
            seen["writer_address"] = cands.ctypes.data
            seen["dtype"] = cands.dtype
            seen["writeable"] = cands.flags.writeable
            seen["ids"] = cands["id"].copy()
            seen["logits"] = cands["logit"].copy()
            cands["logit"][cands["id"] == target] = 1e9
            cands["p"][cands["id"] == target] = 0.25

    class Reader:
        def apply(self, cands: Candidates) -> None:
            seen["reader_address"] = cands.ctypes.data
            row = cands[cands["id"] == target][0]
            seen["read"] = (float(row["logit"]), float(row["p"]))

    chain = S.chain([S.from_python(Writer()), S.from_python(Reader()), S.greedy()])
    assert chain.sample(ctx) == target
    assert seen["dtype"] == lc.CANDIDATE_DTYPE
    assert seen["dtype"].names == ("id", "logit", "p")
    assert seen["writeable"] is True
    assert np.array_equal(seen["ids"], np.arange(ctx.n_vocab))
    assert np.array_equal(seen["logits"], logits)
    assert seen["read"] == (1e9, 0.25)
    assert seen["reader_address"] == seen["writer_address"]  # one buffer, no copies


def test_python_sampler_sees_what_native_samplers_did() -> None:
    seen: list[Candidates] = []

    class Reader:
        def apply(self, cands: Candidates) -> None:
            seen.append(cands.copy())

    chain = S.chain([S.top_k(3), S.temp(2.0), S.from_python(Reader())])
    chain.apply(candidates(LOGITS))
    (view,) = seen
    assert len(view) == 3
    top3 = [int(i) for i in np.argsort(-LOGITS)[:3]]
    assert sorted(int(i) for i in view["id"]) == sorted(top3)
    for token in top3:
        assert logit_of(view, token) == pytest.approx(LOGITS[token] / 2.0)


def test_python_sampler_accept_and_reset_are_called(ctx: lc.LlamaContext) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.accepted: list[int] = []
            self.resets = 0

        def apply(self, cands: Candidates) -> None:
            pass

        def accept(self, token: int) -> None:
            self.accepted.append(token)

        def reset(self) -> None:
            self.resets += 1

    rec = Recorder()
    chain = S.chain([S.from_python(rec), S.greedy()])
    token = chain.sample(ctx)
    assert rec.accepted == [token]
    chain.sample(ctx, accept=False)
    assert rec.accepted == [token]
    chain.accept(42)
    assert rec.accepted == [token, 42]
    chain.reset()
    assert rec.resets == 1

    # A clone shares the Python object and keeps it alive after the original is closed.
    clone = chain.clone()
    chain.close()
    assert clone.sample(ctx) == token
    assert rec.accepted == [token, 42, token]


class CustomSamplerError(RuntimeError):
    pass


def test_exception_in_python_apply_reaches_the_caller(ctx: lc.LlamaContext) -> None:
    class Flaky:
        def __init__(self) -> None:
            self.error: BaseException | None = None
            self.calls = 0

        def apply(self, cands: Candidates) -> None:
            self.calls += 1
            if self.error is not None:
                raise self.error

    flaky = Flaky()
    chain = S.chain([S.top_k(20), S.from_python(flaky), S.greedy()])
    expected = int(np.argmax(raw_logits(ctx)))
    for error in (CustomSamplerError("boom: 42"), KeyError("missing")):
        flaky.error = error
        with pytest.raises(type(error)) as info:
            chain.sample(ctx)
        assert info.value is error
        with pytest.raises(type(error)):
            chain.apply(candidates(LOGITS))
        flaky.error = None
        assert chain.sample(ctx) == expected  # works again
    assert flaky.calls == 6


def test_exception_in_python_accept_reaches_the_caller(ctx: lc.LlamaContext) -> None:
    class FailingAccept:
        fail = True

        def apply(self, cands: Candidates) -> None:
            pass

        def accept(self, token: int) -> None:
            if self.fail:
                raise CustomSamplerError(f"cannot accept {token}")

    obj = FailingAccept()
    chain = S.chain([S.from_python(obj), S.greedy()])
    expected = int(np.argmax(raw_logits(ctx)))
    with pytest.raises(CustomSamplerError, match=f"^cannot accept {expected}$"):
        chain.sample(ctx)
    with pytest.raises(CustomSamplerError, match=r"^cannot accept 7$"):
        chain.accept(7)
    obj.fail = False
    assert chain.sample(ctx) == expected


def test_python_sampler_selecting_an_invalid_index_raises(ctx: lc.LlamaContext) -> None:
    chain = S.chain([S.top_k(5), S.from_python(Pick(5))])
    with pytest.raises(IndexError):
        chain.sample(ctx)
    with pytest.raises(IndexError):
        S.from_python(Pick(-1)).sample(ctx)
    assert (
        S.chain([S.top_k(5), S.from_python(Pick(4))]).sample(ctx)
        in np.argsort(-raw_logits(ctx))[:5]
    )
