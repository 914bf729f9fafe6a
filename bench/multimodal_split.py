"""Row (10)'s building-block comparison split into encode and prefill (alternating
rounds, the same Gemma 3 270M and projector as bench/rows_multimodal.py): where the time
goes, on each side. Not part of bench/run.py.

usage: python bench/multimodal_split.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))  # as bench/run.py
import multimodal
from common import WORK, prepare_models
from mtmd_reference import build_mtmd_reference, run_mtmd_reference

import llama_cy as lc


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    path = prepare_models(False)["gemma"]
    mmproj = multimodal.projector(WORK / "models")
    model = lc.LlamaModel.load(path)
    mctx = lc.MtmdContext(model, mmproj, n_threads=2, use_gpu=False)
    prompt = (
        f"<start_of_turn>user\n{mctx.marker}{multimodal.QUESTION}<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    chunks = mctx.tokenize(prompt, [mctx.bitmap(multimodal.IMAGE)])
    ctx = lc.LlamaContext(model, n_ctx=2048, n_batch=512, n_threads=2, n_threads_batch=2)
    ref = build_mtmd_reference(WORK / "loop")
    kinds = ("encode", "prefill", "eval_chunks")
    ours: dict[str, list[float]] = {k: [] for k in kinds}
    theirs: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        ctx.clear()
        t0 = time.perf_counter()
        embd = np.array(mctx.encode(chunks[1]))
        t1 = time.perf_counter()
        n = mctx.eval_chunk(ctx, chunks[0], 0)
        n = mctx.eval_chunk(ctx, chunks[1], n, embd=embd)
        mctx.eval_chunk(ctx, chunks[2], n, logits_last=True)
        ours["encode"].append((t1 - t0) * 1e3)
        ours["prefill"].append((time.perf_counter() - t1) * 1e3)
        ctx.clear()  # the row's own measure: encode inside eval_chunks
        t0 = time.perf_counter()
        mctx.eval_chunks(ctx, chunks)
        ours["eval_chunks"].append((time.perf_counter() - t0) * 1e3)
        r = run_mtmd_reference(
            ref, path, mmproj, prompt, [multimodal.IMAGE], WORK / "mtmd-ref", n_predict=0,
            threads=2, warmup=True,
        )  # fmt: skip
        theirs["encode"].append(r["encode_ms"])
        theirs["prefill"].append(r["prefill_ms"])
        theirs["eval_chunks"].append(r["encode_ms"] + r["prefill_ms"])
    for k in kinds:
        a, b = statistics.median(ours[k]), statistics.median(theirs[k])
        print(f"{k:11s} ours {a:7.1f} ms (min {min(ours[k]):.1f})  mtmd_ref {b:7.1f} ms "
              f"(min {min(theirs[k]):.1f})  ratio {b / a:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
