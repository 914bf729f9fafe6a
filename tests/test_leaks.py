"""No leaks: creating, using and freeing contexts, batches and samplers over and over
keeps the process's memory flat and leaves no handle (or Python sampler) behind."""

from __future__ import annotations

import gc
import sys
from collections import Counter

import numpy as np
import numpy.typing as npt
import psutil

import llama_cy as lc

WARMUP = 20
CYCLES = 300
MAX_RSS_GROWTH = 20 * 1024 * 1024
# Large enough that leaking one of each per cycle would show in RSS: a batch of this
# capacity holds about 100 kB, a sampler that has sampled keeps an n_vocab candidate
# buffer (12 bytes per token), a context its KV cache, output and compute buffers.
BATCH_CAPACITY = 4096
N_CTX = 256


class Nudge:
    """A Python sampler in the chain: exercises the reference the chain holds on it."""

    def __init__(self) -> None:
        self.accepted = 0

    def apply(self, candidates: npt.NDArray[np.void]) -> None:
        candidates["logit"][:8] += 0.5

    def accept(self, token: int) -> None:
        self.accepted += 1


HANDLE_TYPES = (lc.LlamaContext, lc.LlamaBatch, lc.LlamaSampler, Nudge)


def rss_bytes() -> int:
    """This process's resident memory now (psutil: Linux, macOS and Windows alike)."""
    rss: int = psutil.Process().memory_info().rss
    return rss


def live_handles() -> Counter[str]:
    """Instances of the handle types, by type name.

    Objects the garbage collector tracks are found directly (even unreachable ones kept
    by a stray reference count); objects it does not track (LlamaBatch holds no Python
    references) are found through what the tracked objects refer to.
    """
    gc.collect()
    tracked = gc.get_objects()
    found = {id(o): o for o in tracked if isinstance(o, HANDLE_TYPES)}
    for o in gc.get_referents(*tracked):
        if isinstance(o, HANDLE_TYPES):
            found[id(o)] = o
    return Counter(type(o).__name__ for o in found.values())


def cycle(model: lc.LlamaModel, prompt: npt.NDArray[np.int32], i: int) -> int:
    """Create a context, a batch and a sampler chain; decode a few tokens; free them.

    Half the cycles free explicitly (close / with), half leave it to reference counting.
    """
    ctx = lc.LlamaContext(model, n_ctx=N_CTX, n_batch=64, n_threads=1)
    batch = lc.LlamaBatch(BATCH_CAPACITY)
    sampler = lc.LlamaSampler.chain(
        [
            lc.LlamaSampler.top_k(40),
            lc.LlamaSampler.from_python(Nudge()),
            lc.LlamaSampler.temp(0.9),
            lc.LlamaSampler.dist(i),
        ]
    )
    batch.add_sequence(prompt, 0, 0)
    ctx.decode(batch)
    pos = len(prompt)
    token = 0
    for _ in range(3):
        token = sampler.sample(ctx)
        assert 0 <= token < model.n_vocab
        batch.clear()
        batch.add(token, pos, (0,), True)
        pos += 1
        ctx.decode(batch)
    assert np.isfinite(ctx.logits(-1)).all()
    if i % 2:
        sampler.close()
        batch.close()
        ctx.close()
    return token


def run_cycles(model: lc.LlamaModel, n: int) -> None:
    prompt = model.tokenize("The quick brown fox", add_special=True)
    for i in range(n):
        cycle(model, prompt, i)


def test_rss_stays_flat_over_many_cycles(tiny: lc.LlamaModel) -> None:
    run_cycles(tiny, WARMUP)
    gc.collect()
    before = rss_bytes()
    run_cycles(tiny, CYCLES)
    gc.collect()
    growth = rss_bytes() - before
    assert growth < MAX_RSS_GROWTH, f"RSS grew by {growth / 2**20:.1f} MiB over {CYCLES} cycles"


def test_the_handle_census_sees_live_handles(tiny: lc.LlamaModel) -> None:
    # Guards the test below: the census must be able to see each type while it lives.
    base = live_handles()
    held: list[object] = [
        lc.LlamaContext(tiny, n_ctx=N_CTX, n_batch=64, n_threads=1),
        lc.LlamaBatch(8),
        lc.LlamaSampler.greedy(),
        Nudge(),
    ]
    now = live_handles()
    for name in ("LlamaContext", "LlamaBatch", "LlamaSampler", "Nudge"):
        assert now[name] == base[name] + 1, name
    del held
    assert live_handles() == base


def test_no_handles_survive_the_cycles(tiny: lc.LlamaModel) -> None:
    base = live_handles()
    run_cycles(tiny, CYCLES)
    after = live_handles()
    assert after == base, f"left behind: {after - base}"


def test_chains_release_their_python_samplers(tiny: lc.LlamaModel) -> None:
    obj = Nudge()
    # (Counts are taken outside assert statements: pytest's rewriting keeps temporaries.)
    refs = sys.getrefcount(obj)
    chain = lc.LlamaSampler.chain([lc.LlamaSampler.from_python(obj), lc.LlamaSampler.greedy()])
    clone = chain.clone()
    nested = lc.LlamaSampler.chain([clone.clone(), lc.LlamaSampler.temp(0.5)])
    held = sys.getrefcount(obj)
    assert held > refs
    chain.close()
    del chain
    del clone
    del nested
    gc.collect()
    released = sys.getrefcount(obj)
    assert released == refs
