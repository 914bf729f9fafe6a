"""Rows (1) to (5) and (8): greedy decoding, the thread count, sampling, completions
against llama-cpp-python, prompt processing and model load."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cases
import native
from common import LCP_VERSION, PEERS, PROMPT, Comparison, alternate, lcp, peer
from reference_loop import run_reference

import llama_cy as lc


def bench_greedy(
    rows: list[Comparison],
    loop: Path,
    models: dict[str, Path],
    args: Any,
    peers: dict[str, Path] | None = None,
) -> None:
    """(1) a greedy Python loop over the raw logits against the C++ loop, and against
    the same loop on cyllama's token-level API (``peers``; xllamacpp has none)."""
    for name, path in models.items():
        n = 16 if args.quick else (128 if name == "gemma" else 256)
        model = lc.LlamaModel.load(path)

        overheads: list[float] = []

        def ours(
            model: lc.LlamaModel = model, n: int = n, overheads: list[float] = overheads
        ) -> float:
            r = cases.greedy(model, PROMPT, n, args.threads, 512)
            overheads.append(r["overhead_us"])
            return float(r["tokens_per_s"])

        def cpp(path: Path = path, n: int = n) -> float:
            return run_reference(loop, path, PROMPT, n, threads=args.threads, ctx=512)[
                "tokens_per_s"
            ]

        c = alternate(
            Comparison(
                f"(1) greedy tg, {name}",
                "tok/s",
                "≥ 0.98" if name == "gemma" else "≥ 0.95",
                "C++ loop",
            ),
            args.rounds,
            ours,
            cpp,
        )
        rows.append(c)
        if peers and "cyllama" in peers:

            def cyllama(path: Path = path, n: int = n, py: Path = peers["cyllama"]) -> float:
                kw = {"model": str(path), "prompt": PROMPT, "n": n, "threads": args.threads}
                r = peer(py, peer="cyllama", case="greedy", n_ctx=512, **kw)
                return float(r["tokens_per_s"])

            rows.append(
                alternate(
                    Comparison(f"(1) greedy tg, {name}", "tok/s", "-", PEERS["cyllama"]),
                    args.rounds,
                    ours,
                    cyllama,
                )
            )
        rows.append(
            Comparison(
                f"(1) time per token outside llama_decode, {name}",
                "µs",
                "-",
                "(argmax, batch, Python loop)",
                overheads[1:],
                [0.0] * len(overheads[1:]),
                difference=True,
            )
        )
        model.close()


def bench_threads(rows: list[Comparison], simple: Path, models: dict[str, Path], args: Any) -> None:
    """(8) More threads than CPUs: llama_cy with llama-simple's thread count (4) against
    llama-simple from llama.cpp's default (OpenMP) build. Meaningful where 4 exceeds the
    CPUs (2x cores on a 2-core machine)."""
    path = models["gemma"]
    n = 64
    model = lc.LlamaModel.load(path)

    def ours() -> float:
        return float(cases.greedy(model, PROMPT, n, 4, 512)["tokens_per_s"])

    def theirs() -> float:
        return native.run_simple(simple, path, PROMPT, n)

    name = f"(8) greedy tg, 4 threads on {lc.available_cpus()} CPUs, gemma"
    rows.append(
        alternate(
            Comparison(name, "tok/s", "≥ 0.95", "llama-simple (OpenMP)"), args.rounds, ours, theirs
        )
    )
    model.close()


def bench_sampling(
    rows: list[Comparison], loop: Path, models: dict[str, Path], args: Any, python: Path | None
) -> None:
    path = models.get("gemma", models["tiny"])
    model = lc.LlamaModel.load(path)
    n = 16 if args.quick else 128

    def ours() -> float:
        return float(cases.numpy_sampling(model, PROMPT, n, args.threads, 512, 1)["tokens_per_s"])

    def cpp() -> float:
        return run_reference(
            loop,
            path,
            PROMPT,
            n,
            sampler="dist",
            seed=1,
            top_k=40,
            temp=0.8,
            threads=args.threads,
            ctx=512,
        )["tokens_per_s"]

    rows.append(
        alternate(
            Comparison(
                "(2) NumPy top-k/temp/draw loop vs C++ chain",
                "tok/s",
                "≥ 0.95",
                "C++ top_k+temp+dist",
            ),
            args.rounds,
            ours,
            cpp,
        )
    )
    if python is not None:

        def theirs() -> float:
            return float(
                lcp(
                    python,
                    case="sampling",
                    model=str(path),
                    prompt=PROMPT,
                    n=n,
                    threads=args.threads,
                    n_ctx=512,
                    seed=1,
                )["tokens_per_s"]
            )

        rows.append(
            alternate(
                Comparison(
                    "(2) same NumPy loop vs llama-cpp-python",
                    "tok/s",
                    "≥ 1.0",
                    f"llama-cpp-python {LCP_VERSION}",
                ),
                args.rounds,
                ours,
                theirs,
            )
        )
    model.close()


def bench_completion(
    rows: list[Comparison],
    loop: Path,
    models: dict[str, Path],
    args: Any,
    python: Path | None,
    peers: dict[str, Path] | None = None,
) -> None:
    """(4) the high-level greedy completion, end to end, against the C++ loop (prompt
    decode + generation, after a warm-up), llama-cpp-python's create_completion, and the
    other bindings' nearest call (``peers``: name -> the Python of its environment)."""
    for name, path in models.items():
        n = 16 if args.quick else (128 if name == "gemma" else 256)
        llm = lc.Llama(path, n_ctx=512, n_batch=512, n_threads=args.threads)

        def ours(llm: lc.Llama = llm, n: int = n) -> float:
            return float(cases.completion(llm, PROMPT, n)["tokens_per_s"])

        def cpp_rate(path: Path, n: int, flash_attn: str) -> float:
            r = run_reference(
                loop, path, PROMPT, n, threads=args.threads, ctx=512, warmup=True,
                flash_attn=flash_attn,
            )  # fmt: skip
            return 1e3 * r["n_gen"] / (r["prompt_ms"] + r["gen_ms"])

        def cpp(path: Path = path, n: int = n) -> float:
            return cpp_rate(path, n, "auto")

        def cpp_fa_off(path: Path = path, n: int = n) -> float:
            return cpp_rate(path, n, "off")

        rows.append(
            alternate(
                Comparison(f"(4) greedy create_completion, {name}", "tok/s", "≥ 0.97", "C++ loop"),
                args.rounds,
                ours,
                cpp,
            )
        )
        for peer_name, peer_python in (peers or {}).items():

            def other(
                path: Path = path, n: int = n, who: str = peer_name, py: Path = peer_python
            ) -> float:
                kw = {"model": str(path), "prompt": PROMPT, "n": n, "threads": args.threads}
                return float(peer(py, peer=who, case="completion", n_ctx=512, **kw)["tokens_per_s"])

            rows.append(
                alternate(
                    Comparison(f"(4) greedy completion, {name}", "tok/s", "-", PEERS[peer_name]),
                    args.rounds,
                    ours,
                    other,
                )
            )
        if python is not None:

            def theirs(path: Path = path, n: int = n) -> float:
                return float(
                    lcp(
                        python,
                        case="completion",
                        model=str(path),
                        prompt=PROMPT,
                        n=n,
                        threads=args.threads,
                        n_ctx=512,
                    )["tokens_per_s"]
                )

            rows.append(
                alternate(
                    Comparison(
                        f"(4) greedy create_completion, {name}",
                        "tok/s",
                        "-",
                        f"llama-cpp-python {LCP_VERSION}",
                    ),
                    args.rounds,
                    ours,
                    theirs,
                )
            )
            # The most any wrapper of this llama.cpp can reach against llama-cpp-python:
            # the C++ loop itself against it, in alternating rounds of its own.
            rows.append(
                alternate(
                    Comparison(
                        f"(4) ceiling of the row above: the C++ loop, {name}",
                        "tok/s",
                        "-",
                        f"llama-cpp-python {LCP_VERSION}",
                    ),
                    args.rounds,
                    cpp,
                    theirs,
                )
            )
        bench_compat(rows, path, name, n, args, cpp_fa_off)
        llm.close()


def bench_compat(
    rows: list[Comparison], path: Path, name: str, n: int, args: Any, cpp: Callable[[], float]
) -> None:
    """(4b) The same call through llama-cpp-python's name (compat/): ``llama_cpp.Llama``
    against ``llama_cy.Llama`` with the same settings (llama-cpp-python's context
    defaults: flash attention off among them), and both against the C++ loop under those
    settings (``cpp``)."""
    try:
        import llama_cpp
    except ImportError:
        print("  (4b) left out: llama_cpp (pip install ./compat) is not installed", flush=True)
        return

    kw: dict[str, Any] = {"n_ctx": 512, "n_batch": 512, "n_threads": args.threads}
    compat = llama_cpp.Llama(str(path), n_threads_batch=args.threads, verbose=False, **kw)
    same = lc.Llama(path, flash_attn=False, n_threads_batch=args.threads, **kw)
    for llm in (compat, same):
        llm.create_completion(PROMPT, max_tokens=4, temperature=0)  # warm-up

    def through_compat() -> float:
        return float(cases.completion(compat, PROMPT, n)["tokens_per_s"])

    def direct() -> float:
        return float(cases.completion(same, PROMPT, n)["tokens_per_s"])

    base = f"greedy create_completion, flash attention off, {name}"
    rows.append(
        alternate(
            Comparison(f"(4b) llama_cpp.Llama, {base}", "tok/s", "≥ 0.98", "llama_cy.Llama"),
            args.rounds,
            through_compat,
            direct,
        )
    )
    for who, fn in (("llama_cpp.Llama", through_compat), ("llama_cy.Llama", direct)):
        rows.append(
            alternate(
                Comparison(f"(4b) {who}, {base}", "tok/s", "≥ 0.97", "C++ loop"),
                args.rounds,
                fn,
                cpp,
            )
        )
    compat.close()
    same.close()


def bench_pp(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    path = models["gemma"]
    model = lc.LlamaModel.load(path)

    def ours() -> float:
        return cases.prompt_processing(model, 512, args.threads)

    def llama_bench() -> float:
        out = subprocess.run(
            [
                str(tools["llama-bench"]),
                "-m",
                str(path),
                "-p",
                "512",
                "-n",
                "0",
                "-r",
                "3",
                "-t",
                str(args.threads),
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return float(json.loads(out.stdout)[0]["avg_ts"])

    rows.append(
        alternate(
            Comparison("(3) prompt processing pp512, gemma", "tok/s", "≥ 0.98", "llama-bench"),
            args.rounds,
            ours,
            llama_bench,
        )
    )
    model.close()


def bench_load(rows: list[Comparison], loop: Path, models: dict[str, Path], args: Any) -> None:
    path = models.get("gemma", models["tiny"])
    rss_ours: list[float] = []
    rss_cpp: list[float] = []

    def ours() -> float:
        r = cases.load_in_child(path, 512, args.threads, PROMPT)
        rss_ours.append(r["rss_mb"])
        return r["load_ms"]

    def cpp() -> float:
        cmd = [
            str(loop),
            "--lib-dir",
            lc.get_lib_dir(),
            "--model",
            str(path),
            "--prompt",
            PROMPT,
            "--n-predict",
            "1",
            "--threads",
            str(args.threads),
            "--ctx",
            "512",
        ]
        out, rss = cases.run_child(cmd)
        rss_cpp.append(rss / 1024)
        return float(json.loads(out)["load_ms"])

    rows.append(
        alternate(
            Comparison(
                "(5) model load + context, ms",
                "ms",
                "≤ 1.05x (ratio ≥ 0.95)",
                "C++ loop",
                higher_is_better=False,
            ),
            args.rounds,
            ours,
            cpp,
        )
    )
    rows.append(
        Comparison(
            "(5) peak RSS after load + 1 token, MB",
            "MB",
            "≤ +40 MB",
            "C++ loop",
            rss_ours[1:],
            rss_cpp[1:],
            difference=True,
        )
    )
