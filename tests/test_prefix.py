"""llama_cy._prefix: the common prefixes and the prompt cache's scans in C give what
llama-server's rule gives, written out plainly in Python over token lists."""

from __future__ import annotations

import random

import numpy as np

from llama_cy._prefix import best_match, common_prefix, holder_of, key_prefix, prefixes_of


def key(tokens: list[int]) -> bytes:
    return np.asarray(tokens, dtype=np.int64).tobytes()


def lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def rule(entries: list[list[int]], prompt: list[int], keep_best: float, sim_best: float) -> int:
    """llama-server's server_prompt_cache::load: in order, an entry that keeps at least
    a quarter of itself and more of itself and of the prompt than the best so far."""
    best = -1
    for i, tokens in enumerate(entries):
        n = lcp(tokens, prompt)
        keep, sim = n / len(tokens), n / len(prompt)
        if keep >= 0.25 and keep_best < keep and sim_best < sim:
            keep_best, sim_best, best = keep, sim, i
    return best


def test_the_scans_agree_with_the_rule_written_out() -> None:
    rng = random.Random(7)
    base = [1] + [rng.randint(0, 5) for _ in range(60)]

    def variant() -> list[int]:
        cut = rng.randint(1, len(base))
        return base[:cut] + [rng.randint(0, 5) for _ in range(rng.randint(0, 40))]

    picked = 0
    for _ in range(5000):
        entries = [variant() for _ in range(rng.randint(0, 10))]
        keys = [key(t) for t in entries]
        prompt = variant()
        slot = variant() if rng.random() < 0.8 else []
        n = lcp(slot, prompt)
        assert key_prefix(key(slot), key(prompt)) == n
        assert common_prefix(slot, prompt) == n
        keep_best = n / len(slot) if slot else -1.0  # an empty slot takes any
        want = rule(entries, prompt, keep_best, n / len(prompt))
        assert best_match(keys, key(prompt), keep_best, n / len(prompt)) == want
        picked += want >= 0
        starts = [i for i, t in enumerate(entries) if t[: len(prompt)] == prompt]
        assert holder_of(keys, key(prompt)) == (starts[0] if starts else -1)
        assert prefixes_of(keys, key(prompt)) == [
            i for i, t in enumerate(entries) if prompt[: len(t)] == t
        ]
    assert 500 < picked < 4500  # both outcomes were exercised


def test_edges() -> None:
    assert best_match([], key([1, 2]), -1.0, 0.0) == -1
    assert best_match([key([1, 2])], b"", -1.0, 0.0) == -1
    # a quarter kept is enough; less is not
    assert best_match([key([1, 9, 9, 9])], key([1, 2]), -1.0, 0.0) == 0
    assert best_match([key([1, 9, 9, 9, 9])], key([1, 2]), -1.0, 0.0) == -1
    # not better than what the slot holds already
    assert best_match([key([1, 2])], key([1, 2, 3]), 1.0, 2 / 3) == -1
    assert key_prefix(b"", key([1])) == 0
    # token sequences: lists (a subclass too), tuples, ranges; large ids
    assert common_prefix([], [1]) == 0
    assert common_prefix((5, 2**40, 7), range(5, 9)) == 1
    assert common_prefix(type("Tokens", (list,), {})([1, 2]), [1, 2]) == 2
    assert holder_of([key([1, 2, 3])], key([1, 2, 3])) == 0
    assert prefixes_of([key([1, 2, 3]), key([1])], key([1, 2])) == [1]
