"""Rows (6), (7), (7b) and (11): batched decoding against llama-batched-bench, the
server against llama-server and llama-cpp-python's server under load, the server at GPU
token rates against llama-server and xllamacpp, and a second turn that needs a context
checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import cases
import server_load
import server_rates
from common import WORK, Comparison, alternate, in_turn
from serve_cpu import settle

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
    for r in range(min(args.rounds, 3)):
        for name, cmd in in_turn(list(commands.items()), r):
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
            # issue 50: Gemma at 8 clients stays at least 0.98x llama-server
            target = "≥ 0.98" if theirs == "llama-server" and n == 8 else "-"
            if theirs == "llama-cpp-python":
                target = "≥ 1"
            c = Comparison(f"(7) server, {n} clients", "tok/s", target, theirs)
            c.ours, c.theirs = speeds["llama_cy", n], speeds[theirs, n]
            print(f"  {c.name} vs {theirs}: ratio {c.ratio():.3f}", flush=True)
            rows.append(c)


def bench_checkpoints(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    """(11) A second turn that the KV cache cannot be cut back to: Gemma 3 (SWA layers
    that keep their window only, llama-server's default) after a first prompt of 971
    tokens and a 300-token reply that the second prompt drops (a regenerated or edited
    reply). llama-server restores the context checkpoint taken 4 tokens before the
    first prompt's end; so does llama-cy, and without checkpoints it decodes it all."""
    path = str(models["gemma"])
    story = " ".join(f"Day {i}: the fox ran to the river and back." for i in range(70))
    port = 18500
    flags = ["-m", path, "--port", str(port), "-np", "1", "-c", "2048", "-ub", "64",
             "-t", str(args.threads), "--no-warmup"]  # fmt: skip
    commands = {
        "llama_cy": [sys.executable, "-P", "-m", "llama_cy", "serve", *flags],
        "llama-server": [str(tools["llama-server"]), *flags],
        "llama_cy, no checkpoints": [
            sys.executable, "-P", "-m", "llama_cy", "serve", *flags, "--ctx-checkpoints", "0",
        ],
    }  # fmt: skip
    times: dict[str, list[float]] = {k: [] for k in commands}
    decoded: dict[str, int] = {}
    for r in range(args.rounds):
        for name, cmd in in_turn(list(commands.items()), r):
            server = server_load.ServerProcess(cmd, port, WORK / "server-checkpoints.log")
            try:
                post = partial(server_load.post, port)
                first = post("/tokenize", {"content": story, "add_special": True})["tokens"]
                more = post("/tokenize", {"content": " Then it slept.", "add_special": False})
                post("/completion", {"prompt": first, "n_predict": 300, "temperature": 0,
                                     "ignore_eos": True})  # fmt: skip
                t0 = time.perf_counter()
                out = post("/completion", {"prompt": first + more["tokens"], "n_predict": 8,
                                           "temperature": 0})  # fmt: skip
                times[name].append((time.perf_counter() - t0) * 1e3)
                decoded[name] = out["timings"]["prompt_n"]
                print(f"  {name}: {times[name][-1]:.0f} ms, {decoded[name]} prompt tokens "
                      "decoded", flush=True)  # fmt: skip
            finally:
                server.stop()
    for theirs, target in (("llama-server", "≥ 0.95"), ("llama_cy, no checkpoints", "-")):
        c = Comparison(
            f"(11) second turn, first reply dropped (Gemma SWA; decoded {decoded['llama_cy']} "
            f"vs {decoded[theirs]})",
            "ms",
            target,
            theirs,
            higher_is_better=False,
        )
        c.ours, c.theirs = times["llama_cy"], times[theirs]
        print(f"  {c.name} vs {theirs}: ratio {c.ratio():.3f}", flush=True)
        rows.append(c)


RATE_CLIENTS = (1, 8, 32, 64)


def rate_loads(clients: tuple[int, ...] = RATE_CLIENTS, n_predict: int = 128) -> list[Any]:
    """Row (7b)'s points: every client count, endpoint and streaming mode."""
    return [
        server_rates.Load(endpoint, stream, n, n_predict=n_predict)
        for n in clients
        for endpoint in server_rates.ENDPOINTS
        for stream in (True, False)
    ]


def rate_rows(
    loads: list[Any], results: dict[tuple[str, Any], list[Any]], names: list[str]
) -> list[Comparison]:
    """Row (7b)'s comparisons of llama_cy against each of ``names``: tokens/s at every
    point; the time to first token's p50 and p99 where the reply is streamed (a plain
    reply's first token is its last); failed requests."""
    out = []
    for theirs in names:
        for load in loads:
            ours, ref = results["llama_cy", load], results[theirs, load]
            c = Comparison(f"(7b) tiny, {load.name}", "tok/s", "≥ 0.95", theirs)
            c.ours = [r.tokens_per_s for r in ours]
            c.theirs = [r.tokens_per_s for r in ref]
            out.append(c)
            for q in (0.5, 0.99) if load.stream else ():
                c = Comparison(
                    f"(7b) tiny, {load.name}, TTFT p{round(q * 100)}",
                    "ms",
                    "≥ 0.91",  # at most 1.1 times llama-server's time
                    theirs,
                    higher_is_better=False,
                )
                c.ours = [r.quantile(q) for r in ours]
                c.theirs = [r.quantile(q) for r in ref]
                out.append(c)
            failed = Comparison(f"(7b) tiny, {load.name}, failed requests", "", "0", theirs)
            failed.difference = True
            failed.ours = [float(len(r.failed)) for r in ours]
            failed.theirs = [float(len(r.failed)) for r in ref]
            out.append(failed)
    return out


def bench_server_rates(
    rows: list[Comparison],
    tools: dict[str, Path],
    models: dict[str, Path],
    args: Any,
    xlc: Path | None,
) -> None:
    """(7b) The servers where tokens come at GPU rates: the tiny model (n_embd 64, 2
    layers, 32k vocabulary), so that each server's own per-token work decides. 64
    slots of 512 tokens. Every server runs at once, on its own port, and each point of
    :func:`rate_loads` runs on one after the other once all are idle, the first
    changing point by point and round by round: this machine's speed changes by a third
    for minutes at a time, and a server's 16 loads take about a minute, so sides run
    one after the other compared the machine's phases as much as the servers."""
    path = str(models["tiny"])
    threads = str(args.threads)

    def flags(port: int) -> list[str]:
        return ["--port", str(port), "-np", "64", "-c", "32768", "-t", threads]

    commands = {
        "llama_cy": lambda p: [sys.executable, "-P", "-m", "llama_cy", "serve", "-m", path,
                               *flags(p)],
        "llama-server": lambda p: [str(tools["llama-server"]), "-m", path, *flags(p)],
    }  # fmt: skip
    if xlc is not None:
        script = str(Path(__file__).with_name("xlc_server.py"))
        commands["xllamacpp"] = lambda p: [str(xlc), script, path, str(p), "64", "32768", threads]
    ports = {name: 18600 + i for i, name in enumerate(commands)}
    loads = rate_loads()
    results: dict[tuple[str, Any], list[Any]] = {(k, load): [] for k in commands for load in loads}
    for r in range(args.rounds):
        servers: dict[str, server_load.ServerProcess] = {}
        try:
            for name in in_turn(list(commands), r):
                port = ports[name]
                log = WORK / f"rates-{name}.log"
                servers[name] = server_load.ServerProcess(commands[name](port), port, log)
                server_rates.run(port, server_rates.Load("/completion", True, 8, 1, 16))  # warm-up
            for k, load in enumerate(loads):
                for name in in_turn(list(commands), r + k):
                    settle([s.proc.pid for s in servers.values()])
                    results[name, load].append(server_rates.run(ports[name], load))
                    said = server_rates.summary(results[name, load][-1:])
                    print(f"  {name}, {load.name}: {said}", flush=True)
        finally:
            for server in servers.values():
                server.stop()
    for c in rate_rows(loads, results, [k for k in commands if k != "llama_cy"]):
        print(f"  {c.name} vs {c.reference}: {c.ratio():.3f}", flush=True)
        rows.append(c)
