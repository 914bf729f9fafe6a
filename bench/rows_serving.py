"""Rows (6) and (7): batched decoding against llama-batched-bench, and the server
against llama-server and llama-cpp-python's server under load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cases
import server_load
from common import WORK, Comparison, alternate

import llama_cy as lc


def bench_batched(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    path = models["gemma"]
    model = lc.LlamaModel.load(path)
    pp, tg = 128, 64
    for n_seq in (1, 4, 8):

        def ours(n_seq: int = n_seq) -> float:
            return cases.batched(model, n_seq, pp, tg, args.threads)

        def native_bb(n_seq: int = n_seq) -> float:
            out = subprocess.run(
                [
                    str(tools["llama-batched-bench"]),
                    "-m",
                    str(path),
                    "-c",
                    str(n_seq * (pp + tg)),
                    "-b",
                    "512",
                    "-ub",
                    "512",
                    "-npp",
                    str(pp),
                    "-ntg",
                    str(tg),
                    "-npl",
                    str(n_seq),
                    "-t",
                    str(args.threads),
                    "--output-format",
                    "jsonl",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
            return float(json.loads(line)["speed_tg"])

        rows.append(
            alternate(
                Comparison(
                    f"(6) batched tg, {n_seq} sequences", "tok/s", "≥ 0.95", "llama-batched-bench"
                ),
                args.rounds,
                ours,
                native_bb,
            )
        )
    model.close()


def bench_server(
    rows: list[Comparison],
    tools: dict[str, Path],
    models: dict[str, Path],
    args: Any,
    python: Path | None,
) -> None:
    """Aggregate tokens/s of the three servers at 1, 4 and 8 concurrent clients."""
    path = str(models["gemma"])
    with lc.LlamaModel.load(path, vocab_only=True) as model:
        no_eog = [t for t in range(model.n_vocab) if model.is_eog(t)]
    threads = str(args.threads)
    port = 18400
    commands = {
        "llama_cy": [sys.executable, "-P", "-m", "llama_cy", "serve", "-m", path,
                     "--port", str(port), "-np", "8", "-c", "8192", "-t", threads, "-a", "m"],
        "llama-server": [str(tools["llama-server"]), "-m", path, "--port", str(port),
                         "-np", "8", "-c", "8192", "-t", threads, "-a", "m"],
    }  # fmt: skip
    if python is not None:
        # llama-cpp-python's server runs one request at a time, in a context of a slot's size.
        commands["llama-cpp-python"] = [
            str(python), "-m", "llama_cpp.server", "--model", path, "--port", str(port),
            "--n_ctx", "1024", "--n_threads", threads, "--model_alias", "m",
        ]  # fmt: skip
    clients = (1, 4, 8)
    speeds: dict[tuple[str, int], list[float]] = {(k, n): [] for k in commands for n in clients}
    for _ in range(min(args.rounds, 3)):
        for name, cmd in commands.items():
            server = server_load.ServerProcess(cmd, port, WORK / f"server-{name}.log")
            try:
                server_load.aggregate_speed(port, "m", 2, 1, 16, no_eog)  # warm-up
                for n in clients:
                    speeds[name, n].append(server_load.aggregate_speed(port, "m", n, 2, 64, no_eog))
                    print(f"  {name}, {n} clients: {speeds[name, n][-1]:.1f} tok/s", flush=True)
            finally:
                server.stop()
    for theirs in commands:
        if theirs == "llama_cy":
            continue
        for n in clients:
            target = "≥ 0.9" if theirs == "llama-server" and n == 8 else "-"
            if theirs == "llama-cpp-python":
                target = "≥ 1"
            c = Comparison(f"(7) server, {n} clients", "tok/s", target, theirs)
            c.ours, c.theirs = speeds["llama_cy", n], speeds[theirs, n]
            print(f"  {c.name} vs {theirs}: ratio {c.ratio():.3f}", flush=True)
            rows.append(c)
