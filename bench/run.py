"""llama_cy against native llama.cpp and llama-cpp-python, side by side.

usage: python bench/run.py [--rounds 5] [--threads N] [--quick] [--no-lcp]

Prepares what it compares against (llama.cpp's llama-bench and llama-batched-bench and
a C++ decode loop, built from the same source with the same CMake switches as the
package; llama-cpp-python from PyPI in a virtual environment of its own), then runs
every comparison A B A B ... and writes bench/results/<date>-cpu.md and .json.
"""

# ruff: noqa: E402  (the bench's modules are importable once sys.path says where)
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The bench's own modules and the tests' helpers (also when Python runs with -P).
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "support"), str(ROOT / "compat")]

import native
from common import (
    WORK,
    Comparison,
    prepare_cyllama,
    prepare_lcp,
    prepare_models,
    prepare_xlc,
)
from reference_loop import build_reference
from report import report
from rows_core import (
    bench_completion,
    bench_greedy,
    bench_load,
    bench_pp,
    bench_sampling,
    bench_threads,
)
from rows_multimodal import bench_multimodal
from rows_serving import bench_batched, bench_checkpoints, bench_server, bench_server_rates
from rows_speculative import bench_hidden_state_drafts, bench_speculative


def main() -> None:
    parser = argparse.ArgumentParser(description="llama_cy vs llama.cpp and llama-cpp-python")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny model, one round, C++ loop only (no peers)",
    )
    parser.add_argument("--no-lcp", action="store_true", help="leave llama-cpp-python out")
    parser.add_argument("--no-peers", action="store_true", help="leave xllamacpp out")
    parser.add_argument(
        "--only",
        choices=[
            "server",
            "rates",
            "threads",
            "core",
            "batched",
            "speculative",
            "drafters",
            "multimodal",
            "checkpoints",
        ],
        help="run one group of comparisons: server (7), rates (7b), threads (8), batched (6), "
        "speculative (9), drafters (9: MTP, EAGLE3), multimodal (10), checkpoints (11), "
        "or core (1) and (4)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.no_lcp, args.no_peers = 1, True, True

    WORK.mkdir(parents=True, exist_ok=True)
    models = prepare_models(args.quick)
    if args.only == "server":
        args.rounds = min(args.rounds, 3)  # each round starts three servers
        rows: list[Comparison] = []
        python = None if args.no_lcp else prepare_lcp()
        bench_server(rows, native.build_tools(WORK / "native"), models, args, python)
        print(f"wrote {report(rows, args, args.out, suffix='-server')}")
        return
    if args.only == "rates":
        rows = []
        xlc = None if args.no_peers else prepare_xlc()
        bench_server_rates(rows, native.build_tools(WORK / "native"), models, args, xlc)
        print(f"wrote {report(rows, args, args.out, suffix='-rates')}")
        return
    if args.only == "threads":
        rows = []
        bench_threads(rows, native.build_simple(WORK / "native-omp"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-threads')}")
        return
    if args.only == "batched":
        rows = []
        bench_batched(rows, native.build_tools(WORK / "native"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-batched')}")
        return
    if args.only == "speculative":
        rows = []
        bench_speculative(rows, native.build_tools(WORK / "native"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-speculative')}")
        return
    if args.only == "drafters":
        rows = []
        bench_hidden_state_drafts(rows, native.build_tools(WORK / "native"), args)
        print(f"wrote {report(rows, args, args.out, suffix='-drafters')}")
        return
    if args.only == "checkpoints":
        rows = []
        bench_checkpoints(rows, native.build_tools(WORK / "native"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-checkpoints')}")
        return
    if args.only == "multimodal":
        rows = []
        bench_multimodal(rows, native.build_tools(WORK / "native"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-multimodal')}")
        return
    if args.only == "core":
        rows = []
        loop = build_reference(WORK / "loop")
        found = peers(args)
        bench_greedy(rows, loop, models, args, found)
        python = None if args.no_lcp else prepare_lcp()
        bench_completion(rows, loop, models, args, python, found)
        print(f"wrote {report(rows, args, args.out, suffix='-core')}")
        return
    loop = build_reference(WORK / "loop")
    rows = []
    found = peers(args)
    bench_greedy(rows, loop, models, args, found)
    bench_load(rows, loop, models, args)
    python = None if args.no_lcp else prepare_lcp()
    bench_completion(rows, loop, models, args, python, found)
    if not args.quick:
        tools = native.build_tools(WORK / "native")
        bench_sampling(rows, loop, models, args, python)
        bench_pp(rows, tools, models, args)
        bench_batched(rows, tools, models, args)
        bench_server(rows, tools, models, args, python)
        bench_server_rates(rows, tools, models, args, None if args.no_peers else prepare_xlc())
        bench_speculative(rows, tools, models, args)
        bench_multimodal(rows, tools, models, args)
        bench_checkpoints(rows, tools, models, args)
        bench_threads(rows, native.build_simple(WORK / "native-omp"), models, args)
    print(f"wrote {report(rows, args, args.out)}")


def peers(args: argparse.Namespace) -> dict[str, Path]:
    """The other bindings' environments (none with --no-peers)."""
    if args.no_peers:
        return {}
    found = {"xllamacpp": prepare_xlc(), "cyllama": prepare_cyllama()}
    return {k: v for k, v in found.items() if v is not None}


if __name__ == "__main__":
    main()
