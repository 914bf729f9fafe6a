"""``llama-cy bench``: prompt (pp) and generation (tg) speed in llama-bench's table, on
random tokens, with llama-bench's warm-up."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from llama_cy.cli.common import Bar, fetch_models, model_path, set_priority, verbose
from llama_cy.flags.values import cpu_params, flash, tensor_overrides, threads

__all__ = ["main"]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(args: argparse.Namespace) -> int:
    import numpy as np

    from llama_cy._backend import default_n_threads, devices
    from llama_cy._batch import LlamaBatch
    from llama_cy._context import LlamaContext
    from llama_cy._model import LlamaModel

    verbose(args.verbose)
    fetch_models(args, "bench")
    path = model_path(args.model)
    pps, tgs = _ints(args.n_prompt), _ints(args.n_gen)
    n_threads = threads(args.threads) or default_n_threads()
    rng = np.random.default_rng(0)
    rows = []
    set_priority(args)
    loaded = LlamaModel.load(
        path,
        n_gpu_layers=args.n_gpu_layers,
        progress=Bar("loading"),
        rpc_servers=args.rpc,
        tensor_overrides=tensor_overrides(args.tensor_overrides),
    )
    with loaded as model:
        n_ctx = max([*pps, *tgs, 1]) + 1
        ctx = LlamaContext(
            model,
            n_ctx=n_ctx,
            n_batch=args.batch_size,
            n_ubatch=args.ubatch_size,
            n_threads=n_threads,
            n_threads_batch=threads(args.threads_batch),
            flash_attn=flash(args.flash_attn),
            **cpu_params(args),
        )
        batch = LlamaBatch(args.batch_size)

        def prompt(n: int) -> None:
            tokens = rng.integers(0, model.n_vocab, n, dtype=np.int32)
            for start in range(0, n, args.batch_size):
                chunk = tokens[start : start + args.batch_size]
                batch.clear()
                batch.add_sequence(chunk, start, 0, logits_last=start + len(chunk) == n)
                ctx.decode(batch)

        def generate(n: int) -> None:
            for pos, token in enumerate(rng.integers(0, model.n_vocab, n, dtype=np.int32)):
                batch.clear()
                batch.add(int(token), pos, 0, True)
                ctx.decode(batch)

        tests: list[tuple[str, int, Callable[[int], None]]] = [
            *((f"pp{n}", n, prompt) for n in pps if n > 0),
            *((f"tg{n}", n, generate) for n in tgs if n > 0),
        ]
        for name, n, fn in tests:
            ctx.clear()
            fn(min(n, 16))  # warm-up, as llama-bench does
            speeds = []
            for _ in range(args.repetitions):
                ctx.clear()
                t0 = time.perf_counter()
                fn(n)
                ctx.synchronize()
                speeds.append(n / (time.perf_counter() - t0))
            rows.append((name, statistics.mean(speeds), statistics.pstdev(speeds)))
        desc, size, n_params = model.desc, model.size, model.n_params
        ctx.close()
        batch.close()
    gpu = any(d.type in ("gpu", "igpu") for d in devices())
    backend = "GPU" if gpu and args.n_gpu_layers != 0 else "CPU"
    head = ["model", "size", "params", "backend", "threads", "test", "t/s"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---:" if h in ("threads", "t/s") else "---" for h in head) + " |")
    for name, mean, std in rows:
        cells = [
            desc,
            f"{size / 2**20:.2f} MiB",
            f"{n_params / 1e6:.2f} M",
            backend,
            str(n_threads),
            name,
            f"{mean:.2f} ± {std:.2f}",
        ]
        print("| " + " | ".join(cells) + " |")
    return 0
