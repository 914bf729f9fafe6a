"""Where a server's time goes at GPU token rates: ``llama-cy serve`` under a few loads
of row (7b), beside llama-server, with py-spy's view of who holds the GIL and each
thread's CPU per generated token.

usage: python bench/serve_probe.py OUT --model M.gguf [--llama-server BIN] [--rounds 2]
       [--ngl 99] [--threads N] [--py-spy BIN] [--switch-interval S ...] [--h11]
       [--no-profile]

For each round, each server in turn (llama-server, llama-cy serve, llama-cy serve
under each ``--switch-interval``: Python's GIL hand-over interval, 5 ms by default, and
with ``--h11`` llama-cy serve on uvicorn's h11 protocol instead of httptools) runs every
load; then, unless ``--no-profile``, on llama-cy serve alone, each load again under
``py-spy record --gil`` (only the thread that holds the GIL is sampled: what the engine
thread waits behind). Writes OUT/probe.json, OUT/probe.md (tok/s, TTFT p50 and p99, CPU
µs per token of each thread)
and OUT/gil-<load>.txt (py-spy's stacks, folded, with each function's share).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server_load
import server_rates
from serve_cpu import thread_cpu

LOADS = [
    server_rates.Load("/completion", True, 1),
    server_rates.Load("/v1/chat/completions", True, 1),  # 0.76-0.84 on the H200 in 4 runs
    server_rates.Load("/completion", True, 8),
    server_rates.Load("/v1/chat/completions", True, 8),
    server_rates.Load("/completion", True, 64),
    server_rates.Load("/completion", False, 64),
]
_WRAP = "import sys; sys.setswitchinterval({}); from llama_cy.cli import main; sys.exit(main())"
#: llama-cy serve on uvicorn's h11 protocol (http_protocol's choice without httptools)
_WRAP_H11 = (
    "import sys; import llama_cy.server.http_protocol as h; h.http_protocol = lambda: 'h11'; "
    "from llama_cy.cli import main; sys.exit(main())"
)


def commands(args: argparse.Namespace, port: int) -> dict[str, list[str]]:
    flags = ["-m", args.model, "--port", str(port), "-np", "64", "-c", "32768"]
    flags += ["-ngl", str(args.ngl), "-t", str(args.threads)]
    out = {}
    if args.llama_server:
        out["llama-server"] = [args.llama_server, *flags]
    out["llama-cy"] = [sys.executable, "-P", "-m", "llama_cy", "serve", *flags]
    if args.h11:
        out["llama-cy, h11"] = [sys.executable, "-P", "-c", _WRAP_H11, "serve", *flags]
    for s in args.switch_interval:
        wrap = _WRAP.format(s)
        out[f"llama-cy, switch {s * 1e3:g} ms"] = [
            sys.executable,
            "-P",
            "-c",
            wrap,
            "serve",
            *flags,
        ]
    return out


def history(n_predict: int) -> list[server_rates.Load]:
    """Row (7b)'s loads before its 8-client chat stream, in the rows' order (bench/gpu.py)."""
    loads = [
        server_rates.Load("/completion", stream, n, n_predict=n_predict)
        for stream in (True, False)
        for n in (1, 8, 32, 64)
    ]
    return [*loads, server_rates.Load("/v1/chat/completions", True, 1, n_predict=n_predict)]


def thread_names(py_spy: str, pid: int) -> dict[str, str]:
    """The Python threads of ``pid`` by OS thread id (``py-spy dump``); {} if it fails."""
    try:
        r = subprocess.run([py_spy, "dump", "-p", str(pid)], capture_output=True, text=True)
    except OSError:
        return {}
    return dict(re.findall(r'^Thread (\d+) \(\w+\): "(.+)"', r.stdout, re.M))


def folded(path: Path, top: int = 40) -> str:
    """py-spy's raw stacks as two tables: each function's own share and its share with
    what it calls (file names shortened)."""
    own: collections.Counter[str] = collections.Counter()
    within: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        names = [re.sub(r" \(.*?([^/]+\.py[x]?):\d+\)", r" (\1)", f) for f in frames[1:]]
        threads[frames[0]] += int(n)
        if names:
            own[names[-1]] += int(n)
        for f in set(names):
            within[f] += int(n)
    total = sum(threads.values()) or 1
    lines = [f"samples {total}; threads: " + ", ".join(f"{k} {v}" for k, v in threads.items())]
    lines += ["", "own %:"] + [f"{100 * v / total:5.1f} {k}" for k, v in own.most_common(top)]
    lines += ["", "with callees %:"]
    lines += [f"{100 * v / total:5.1f} {k}" for k, v in within.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--llama-server")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ngl", type=int, default=99)
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--py-spy", default="py-spy")
    parser.add_argument("--switch-interval", type=float, action="append", default=[])
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument(
        "--h11", action="store_true", help="also llama-cy serve on h11, not httptools"
    )
    parser.add_argument("--no-profile", action="store_true", help="no py-spy passes")
    parser.add_argument(
        "--history",
        action="store_true",
        help="before the loads, each server serves row (7b)'s loads up to the 1-client chat "
        "stream, in the rows' order (their 8-client chat stream read 0.40-0.50 of "
        "llama-server's where a fresh server read 0.95)",
    )
    parser.add_argument(
        "--spy-all",
        action="store_true",
        help="py-spy samples every thread, waiting or not (--idle), not only the GIL's holder",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = 18800
    loads = [
        server_rates.Load(x.endpoint, x.stream, x.n_clients, n_predict=args.n_predict)
        for x in LOADS
    ]
    got: dict[str, dict[str, list[dict[str, Any]]]] = {}
    t0 = time.perf_counter()

    def save() -> None:
        results = {"loads": [x.name for x in loads], "runs": got, "s": time.perf_counter() - t0}
        (args.out / "probe.json").write_text(json.dumps(results, indent=1))
        (args.out / "probe.md").write_text(markdown(results))

    for r in range(args.rounds):
        for side, cmd in commands(args, port).items():
            server = server_load.ServerProcess(cmd, port, args.out / "server.log")
            try:
                server_rates.run(port, server_rates.Load("/completion", True, 4, 1, 8))
                if args.history:
                    for earlier in history(args.n_predict):
                        server_rates.run(port, earlier)
                # the OS names every Python thread after the program: py-spy knows them
                named = {str(server.proc.pid): "MainThread"}
                if side != "llama-server":
                    named |= thread_names(args.py_spy, server.proc.pid)
                for load in loads:
                    before = thread_cpu(server.proc.pid)
                    o = server_rates.run(port, load)
                    after = thread_cpu(server.proc.pid)
                    n = load.n_clients * load.n_requests * load.n_predict
                    cpu: dict[str, float] = {}
                    for k, v in after.items():  # threads of one name summed
                        comm, tid = k.rsplit(":", 1)
                        name = named.get(tid, comm)
                        cpu[name] = cpu.get(name, 0.0) + (v - before.get(k, 0.0)) / n * 1e6
                    cpu = {k: round(v, 1) for k, v in cpu.items() if v > 0.5}
                    run = {"tok_s": o.tokens_per_s, "ttft_p50": o.quantile(0.5), "cpu_us": cpu}
                    run["ttft_p99"] = o.quantile(0.99)
                    run["failed"] = len(o.failed)
                    got.setdefault(side, {}).setdefault(load.name, []).append(run)
                    print(
                        f"round {r}, {side}, {load.name}: {server_rates.summary([o])}", flush=True
                    )
                if r == 0 and side == "llama-cy" and not args.no_profile:
                    profile(args, server.proc.pid, port, loads)
            finally:
                server.stop()
            save()
    save()


def profile(args: argparse.Namespace, pid: int, port: int, loads: list[server_rates.Load]) -> None:
    """Each load again under py-spy (--gil: the thread that holds the GIL)."""
    for load in loads:
        name = re.sub(r"[^a-z0-9]+", "-", load.name.lower()).strip("-")
        raw = args.out / f"gil-{name}.raw"
        if shutil.which(args.py_spy) is None:
            (args.out / f"gil-{name}.txt").write_text(f"py-spy failed: {args.py_spy} not found")
            continue
        spy = subprocess.Popen(
            [
                args.py_spy,
                "record",
                "-p",
                str(pid),
                "--idle" if args.spy_all else "--gil",
                "--threads",
                "-r",
                "1000",
                "-f",
                "raw",
                "-o",
                str(raw),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)
        server_rates.run(
            port, server_rates.Load(load.endpoint, load.stream, load.n_clients, 4, load.n_predict)
        )
        spy.send_signal(2)  # SIGINT: py-spy writes what it has
        try:
            _, err = spy.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            err = "py-spy did not stop"
        if raw.is_file():
            (args.out / f"gil-{name}.txt").write_text(folded(raw))
            raw.unlink()
        else:
            (args.out / f"gil-{name}.txt").write_text(f"py-spy failed: {err[-2000:]}")


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| server | load | tok/s median (min-max) | TTFT p50 ms | TTFT p99 ms "
        "| CPU µs/token by thread |",
        "|---|---|---|---|---|---|",
    ]
    for side, by_load in results["runs"].items():
        for load, runs in by_load.items():
            rates = [x["tok_s"] for x in runs]
            ttft = statistics.median(x["ttft_p50"] for x in runs)
            p99 = statistics.median(x.get("ttft_p99", float("nan")) for x in runs)
            cpu: dict[str, list[float]] = {}
            for x in runs:
                for k, v in x["cpu_us"].items():
                    cpu.setdefault(k, []).append(v)
            said = ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in sorted(cpu.items()))
            lines.append(
                f"| {side} | {load} | {statistics.median(rates):.0f} ({min(rates):.0f}-"
                f"{max(rates):.0f}) | {ttft:.1f} | {p99:.1f} | {said} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
