"""What each side of a comparison runs: llama_cy's loops, in this process or a child.

Every function returns a rate (tokens/s) or a figure measured the way its native
counterpart measures it, so the two can be compared round by round.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import llama_cy as lc


def _context(model: lc.LlamaModel, threads: int, n_ctx: int, **kw: Any) -> lc.LlamaContext:
    return lc.LlamaContext(model, n_ctx=n_ctx, n_batch=512, n_threads=threads, **kw)


def _generate(
    model: lc.LlamaModel,
    prompt: str,
    n: int,
    threads: int,
    n_ctx: int,
    pick: Callable[[npt.NDArray[np.float32]], int] | None,
    *,
    read: Callable[[lc.LlamaContext], int] | None = None,
    samplers: dict[int, lc.LlamaSampler] | None = None,
    repeat: int = 1,
) -> dict[str, Any]:
    """A Python generation loop over the zero-copy logits, timed like llama_loop.cpp:
    n picks and n - 1 decodes after the prompt's decode, stopping at end of generation.
    With ``samplers`` (backend sampling) ``read(ctx)`` picks from what the graph left.
    With ``repeat`` > 1 the run repeats in the same context (llama_loop's ``--repeat``):
    the first warms the backend, the rate is the mean of the others.

    ``overhead_us`` is the time per token spent outside llama_decode (llama.cpp's own
    perf counter): picking, batch filling and the Python loop itself.
    """
    if read is None:
        assert pick is not None
        logits_pick = pick

        def read(ctx: lc.LlamaContext) -> int:
            return logits_pick(ctx.logits(-1))

    ctx = _context(model, threads, n_ctx, samplers=samplers)
    batch = lc.LlamaBatch(512)
    tokens = model.tokenize(prompt)
    rates: list[float] = []
    for run in range(repeat):
        ctx.clear()
        for sampler in (samplers or {}).values():
            sampler.reset()
        batch.clear()
        batch.add_sequence(tokens, 0, 0)
        ctx.decode(batch)
        ctx.perf_reset()
        out: list[int] = []
        pos = len(tokens)
        t0 = time.perf_counter()
        for i in range(n):
            token = read(ctx)
            if model.is_eog(token):
                break
            out.append(token)
            if i == n - 1:
                break
            batch.clear()
            batch.add(token, pos, (0,), True)
            ctx.decode(batch)
            pos += 1
        gen_s = time.perf_counter() - t0
        if run > 0 or repeat == 1:
            rates.append(len(out) / gen_s)
    decode_ms = ctx.perf().t_eval_ms
    ctx.close()
    return {
        "tokens": out,
        "gen_ms": gen_s * 1e3,
        "tokens_per_s": sum(rates) / len(rates),
        "overhead_us": (gen_s * 1e3 - decode_ms) / max(1, len(out)) * 1e3,
    }


def tg(
    model: lc.LlamaModel,
    n: int,
    threads: int,
    read: Callable[[lc.LlamaContext], int],
    *,
    samplers: dict[int, lc.LlamaSampler] | None = None,
    reps: int = 3,
    n_ctx: int | None = None,
) -> float:
    """A real generation loop under llama-bench's tg conditions: n_ctx = n, one warm-up
    token, then ``reps`` runs from an empty cache, each n single-token decodes from
    position 0 with a sync per token, and the mean of their rates (avg_ts). Where
    llama-bench feeds a random token, this loop feeds back the one ``read`` picks.
    ``n_ctx`` other than n: the same loop in a larger context."""
    ctx = _context(model, threads, n_ctx or n, samplers=samplers)
    batch = lc.LlamaBatch(1)
    start = model.token_bos if model.add_bos else 0
    rates = []
    for run in range(reps + 1):
        ctx.clear(data=False)
        for sampler in (samplers or {}).values():
            sampler.reset()
        token = start
        t0 = time.perf_counter()
        for pos in range(n if run else 1):  # run 0: llama-bench's one-token warm-up
            batch.clear()
            batch.add(token, pos, (0,), True)
            ctx.decode(batch)
            token = read(ctx)
        if run:
            rates.append(n / (time.perf_counter() - t0))
    ctx.close()
    return sum(rates) / len(rates)


def greedy(
    model: lc.LlamaModel, prompt: str, n: int, threads: int, n_ctx: int, repeat: int = 1
) -> dict[str, Any]:
    """The C++ loop's greedy generation, in Python: argmax over the logits."""

    def pick(logits: npt.NDArray[np.float32]) -> int:
        return int(np.argmax(logits))

    return _generate(model, prompt, n, threads, n_ctx, pick, repeat=repeat)


def draw(logits: npt.NDArray[np.float32], rng: np.random.Generator) -> int:
    """An index drawn from softmax(logits / 0.8): one uniform number against the running
    sum, as llama.cpp's dist does (Generator.choice with p= costs ~20 us a call)."""
    p = np.exp((logits - logits.max()) / 0.8)
    c = np.cumsum(p)
    return int(np.searchsorted(c, rng.random() * c[-1], side="right"))


def numpy_sampling(
    model: lc.LlamaModel,
    prompt: str,
    n: int,
    threads: int,
    n_ctx: int,
    seed: int,
    repeat: int = 1,
) -> dict[str, Any]:
    """A custom sampling loop over raw logits: top-k 40, temperature 0.8, softmax, draw."""
    rng = np.random.default_rng(seed)

    def pick(logits: npt.NDArray[np.float32]) -> int:
        top = np.argpartition(logits, -40)[-40:]
        return int(top[draw(logits[top], rng)])

    return _generate(model, prompt, n, threads, n_ctx, pick, repeat=repeat)


def sampled_token(ctx: lc.LlamaContext) -> int:
    """The token sequence 0's backend chain sampled at the last decode."""
    token = ctx.sampled_token(-1)
    assert token is not None
    return token


def backend_greedy(
    model: lc.LlamaModel, prompt: str, n: int, threads: int, n_ctx: int, repeat: int = 1
) -> dict[str, Any]:
    """Greedy with the argmax in the graph (backend sampling): with token_only, one token
    id comes back per step instead of n_vocab logits."""
    chain = lc.LlamaSampler.chain([lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only()])
    return _generate(
        model, prompt, n, threads, n_ctx, None, read=sampled_token, samplers={0: chain},
        repeat=repeat,
    )  # fmt: skip


def backend_top_k_numpy(
    model: lc.LlamaModel,
    prompt: str,
    n: int,
    threads: int,
    n_ctx: int,
    seed: int,
    repeat: int = 1,
) -> dict[str, Any]:
    """The NumPy top-k 40 / temperature 0.8 loop of :func:`numpy_sampling`, with the
    top-k made in the graph: Python sees 40 candidates a step, not the vocabulary."""
    rng = np.random.default_rng(seed)
    chain = lc.LlamaSampler.chain([lc.LlamaSampler.top_k(40)])

    def read(ctx: lc.LlamaContext) -> int:
        return int(ctx.sampled_candidates(-1)[draw(ctx.sampled_logits(-1), rng)])

    return _generate(
        model, prompt, n, threads, n_ctx, None, read=read, samplers={0: chain}, repeat=repeat
    )


def backend_dist(
    model: lc.LlamaModel,
    prompt: str,
    n: int,
    threads: int,
    n_ctx: int,
    seed: int,
    repeat: int = 1,
) -> dict[str, Any]:
    """llama.cpp's top-k 40 / temp 0.8 / dist chain, all of it in the graph (the token
    alone comes back: token_only)."""
    chain = lc.LlamaSampler.chain(
        [
            lc.LlamaSampler.top_k(40),
            lc.LlamaSampler.temp(0.8),
            lc.LlamaSampler.dist(seed),
            lc.LlamaSampler.token_only(),
        ]
    )

    def read(ctx: lc.LlamaContext) -> int:
        return chain.sample(ctx, -1)

    return _generate(
        model, prompt, n, threads, n_ctx, None, read=read, samplers={0: chain}, repeat=repeat
    )


def prompt_processing(model: lc.LlamaModel, n_prompt: int, threads: int, reps: int = 3) -> float:
    """pp tokens/s as llama-bench measures it: random tokens, one decode, last logits only;
    a warm-up decode, then the mean rate of ``reps`` timed ones (llama-bench's avg_ts)."""
    ctx = _context(model, threads, max(n_prompt, 512))
    rng = np.random.default_rng(0)
    batch = lc.LlamaBatch(n_prompt)
    batch.add_sequence(rng.integers(0, model.n_vocab, n_prompt, dtype=np.int32), 0, 0)
    ctx.decode(batch)
    rates = []
    for _ in range(reps):
        ctx.clear(data=False)  # as llama-bench clears between repetitions
        t0 = time.perf_counter()
        ctx.decode(batch)
        ctx.synchronize()
        rates.append(n_prompt / (time.perf_counter() - t0))
    ctx.close()
    return sum(rates) / len(rates)


def batched(model: lc.LlamaModel, n_seq: int, pp: int, tg: int, threads: int) -> float:
    """Aggregate generation tokens/s for n_seq sequences in one context, as
    llama-batched-bench measures it: random tokens, every token an output, no sampling."""
    ctx = _context(model, threads, n_seq * (pp + tg), n_seq_max=n_seq)
    rng = np.random.default_rng(0)
    batch = lc.LlamaBatch(max(512, n_seq), n_seq_max=1)
    batch.add_sequence(rng.integers(0, model.n_vocab, 16, dtype=np.int32), 0, 0, logits_last=False)
    ctx.decode(batch)  # warm-up
    ctx.clear()
    for s in range(n_seq):
        batch.clear()
        batch.add_sequence(rng.integers(0, model.n_vocab, pp, dtype=np.int32), 0, s)
        ctx.decode(batch)
    t0 = time.perf_counter()
    for i in range(tg):
        batch.clear()
        for s in range(n_seq):
            batch.add(int(rng.integers(0, model.n_vocab)), pp + i, (s,), True)
        ctx.decode(batch)
    ctx.synchronize()
    rate = n_seq * tg / (time.perf_counter() - t0)
    ctx.close()
    return rate


def completion(llm: lc.Llama, prompt: str, n: int) -> dict[str, Any]:
    """Greedy ``create_completion`` from an empty prompt cache, timed end to end (prompt,
    generation, text and the response dict), as llama-cpp-python's is timed."""
    llm.reset()
    t0 = time.perf_counter()
    out = llm.create_completion(prompt, max_tokens=n, temperature=0)
    wall = time.perf_counter() - t0
    n_gen = int(out["usage"]["completion_tokens"])
    return {"n_gen": n_gen, "tokens_per_s": n_gen / wall}


LOAD_CHILD = """
import json, os, sys, time
import numpy as np
t0 = time.perf_counter()
import llama_cy as lc
t_import = time.perf_counter()
model = lc.LlamaModel.load(sys.argv[1])
ctx = lc.LlamaContext(model, n_ctx=int(sys.argv[2]), n_batch=512, n_threads=int(sys.argv[3]))
t_load = time.perf_counter()
batch = lc.LlamaBatch(512)
batch.add_sequence(model.tokenize(sys.argv[4]), 0, 0)
ctx.decode(batch)
int(np.argmax(ctx.logits(-1)))
print(json.dumps({"load_ms": (t_load - t_import) * 1e3, "import_ms": (t_import - t0) * 1e3}))
"""


# ru_maxrss survives exec: a child forked from this (large) process starts with our
# peak. A small launcher forks the real child from its own small image and reports
# that grandchild's peak alone.
RSS_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\nLLAMA_CY_MAXRSS_KB {usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[str, int]:
    """Run a child to completion; its stdout and its own peak RSS in KiB."""
    proc = subprocess.run(
        [sys.executable, "-c", RSS_LAUNCHER, *cmd], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rss = int(proc.stderr.rsplit("LLAMA_CY_MAXRSS_KB", 1)[1])
    return proc.stdout, rss


def load_in_child(model: Path, n_ctx: int, threads: int, prompt: str) -> dict[str, float]:
    """Model load + context creation time, and peak RSS, of a fresh Python process."""
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    out, rss = run_child(
        [sys.executable, "-c", LOAD_CHILD, str(model), str(n_ctx), str(threads), prompt], env
    )
    result: dict[str, float] = json.loads(out)
    result["rss_mb"] = rss / 1024
    return result
