"""Where a generation loop's time goes against llama-bench's tg128, on a device.

usage: python bench/gpu_probe.py   (on the device, after ``tools/gpu_check.sh run`` set it
up: PYTHONPATH=/tmp/lcy-site LCY_BIN=/tmp/lcy-bin; PROBE_T threads, PROBE_ROUNDS rounds,
PROBE_TINY_ONLY=1 for the tiny model alone)

Each row is one way of making 128 tokens under llama-bench's conditions
(:func:`cases.tg`), so the steps between llama-bench and a full loop can be told apart:
a loop that only waits for the decode and feeds a fixed token (llama-bench's own loop in
Python), the same in a 2048-token context, an argmax over the logits on the host, greedy
in the graph (llama.cpp's one argmax, with and without token_only, and the split one),
and llama_loop.cpp with backend greedy (contexts of 128 and 2048) and with
llama.cpp's CPU greedy chain. Prints one JSON object of rates (tokens/s) per model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import llama_cy as lc
from llama_cy import _cuda_packs, _sampler

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "support")]
import cases  # noqa: E402
from reference_loop import build_reference  # noqa: E402
from tiny_model import write_tiny_llama  # noqa: E402

WORK = Path("/tmp/probe")
THREADS = os.environ.get("PROBE_T", "4")
TOKEN_ONLY = lc.LlamaSampler.token_only


def llama_bench(path: Path, *extra: str) -> list[float]:
    bench = Path(os.environ["LCY_BIN"]) / "llama-bench"
    cmd = [str(bench), "-m", str(path), "-ngl", "99", "-r", "5", "-p", "0", "-n", "128"]
    r = subprocess.run(
        [*cmd, "-t", THREADS, "-o", "json", *extra], capture_output=True, text=True, check=True
    )
    return [round(x["avg_ts"], 1) for x in json.loads(r.stdout)]


def cpp(loop: Path, path: Path, n_ctx: int, *extra: str) -> float | str:
    plugin = ["--plugin", str(_cuda_packs.selected)] if _cuda_packs.selected else []
    cmd = [
        str(loop), "--lib-dir", lc.get_lib_dir(), "--model", str(path), "--prompt", "Hello",
        "--n-predict", "128", "--threads", THREADS, "--ctx", str(n_ctx), "--ngl", "99",
        "--repeat", "4", *plugin, *extra,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True)
    return round(json.loads(r.stdout)["tokens_per_s"], 1) if r.returncode == 0 else r.stderr[-300:]


def fixed_token(ctx: lc.LlamaContext) -> int:
    ctx.synchronize()
    return 7


def argmax(ctx: lc.LlamaContext) -> int:
    return int(np.argmax(ctx.logits(-1)))


def probe_round(model: lc.LlamaModel, path: Path, loop: Path, th: int) -> list[tuple[str, object]]:
    rows: list[tuple[str, object]] = [
        ("llama-bench tg128 fa auto", llama_bench(path)),
        ("llama-bench tg128 fa 0,1", llama_bench(path, "-fa", "0,1")),
        ("py tg sync-only (fixed token)", round(cases.tg(model, 128, th, fixed_token), 1)),
        (
            "py tg sync-only n_ctx 2048",
            round(cases.tg(model, 128, th, fixed_token, n_ctx=2048), 1),
        ),
        ("py tg argmax", round(cases.tg(model, 128, th, argmax), 1)),
    ]
    for split, tail in [(False, []), (False, [TOKEN_ONLY]), (True, [TOKEN_ONLY])]:
        # split off: llama.cpp's one-argmax graph; on: the default on a device
        old = _sampler._split_greedy_setup(100000 if split else 1 << 40, False)
        chain = lc.LlamaSampler.chain([lc.LlamaSampler.greedy(), *(t() for t in tail)])
        rate = cases.tg(model, 128, th, cases.sampled_token, samplers={0: chain})
        _sampler._split_greedy_setup(*old)
        name = f"py tg backend greedy ({'split' if split else 'one argmax'})"
        rows.append((name + (" + token_only" if tail else ""), round(rate, 1)))
    rows += [
        ("cpp ctx 128 backend greedy", cpp(loop, path, 128, "--backend-sampling")),
        ("cpp ctx 2048 backend greedy", cpp(loop, path, 2048, "--backend-sampling")),
        ("cpp ctx 128 greedy chain on logits", cpp(loop, path, 128)),
    ]
    return rows


def main() -> None:
    WORK.mkdir(exist_ok=True)
    models = {"tiny": write_tiny_llama(WORK / "tiny.gguf")}
    if not os.environ.get("PROBE_TINY_ONLY"):
        models["262k"] = write_tiny_llama(
            WORK / "t262.gguf", vocab="gemma-4", n_embd=256, n_layer=4, n_ff=512
        )
    loop = build_reference(WORK / "loop")
    th = int(THREADS)
    for name, path in models.items():
        model = lc.LlamaModel.load(path, n_gpu_layers=-1)
        out: dict[str, list[object]] = {}
        for _ in range(int(os.environ.get("PROBE_ROUNDS", "2"))):
            for key, value in probe_round(model, path, loop, th):
                out.setdefault(key, []).append(value)
        model.close()
        print(name, json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
