"""llama_cy on a GPU against llama.cpp's own programs on the same build, side by side.

usage: python bench/gpu.py OUT_DIR [--part all|kernels|server] [--rounds 3] [--work DIR]
                            [--dry-run] [--only TEXT ...]

Every layer offloaded (``n_gpu_layers=-1``; ``-ngl 99`` for the C++ programs), rounds
alternated A B A B, medians compared. Three generated models: an overhead-bound tiny
llama, a ~0.85 B Q4_0 llama and a tiny llama with Gemma's 262,144-token vocabulary
(the heaviest per-token logits copy). Then the servers (row (7b) of bench/run.py, on
the device): ``llama-cy serve`` against llama-server at 1, 8, 32 and 64 clients; on the
tiny model streamed and not, on ``/completion`` and ``/v1/chat/completions``; on the
~0.85 B model ``/completion`` streamed; tokens/s and time to first token (p50, p99).
llama-bench, llama-batched-bench
and llama-server are looked for in ``$LCY_BIN`` (built from the package's CMake tree,
tools/gpu_check.sh); rows whose program is missing are recorded as skipped.
``--dry-run`` runs every row on small models and few tokens wherever the package runs
(the CPU in CI), so the script cannot rot; its figures mean nothing.

Writes OUT_DIR/gpu.json and OUT_DIR/gpu.md (gpu-PART.* for one ``--part``); the models
go to --work (OUT_DIR/models), written once for every part.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import llama_cy as lc
from llama_cy import _cuda_packs

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "support")]
import cases  # noqa: E402
import server_load  # noqa: E402
import server_rates  # noqa: E402
from common import in_turn  # noqa: E402
from reference_loop import build_reference  # noqa: E402
from tiny_model import write_tiny_llama  # noqa: E402

PROMPT = "The history of the printing press begins"
TOP_K = ["--sampler", "dist", "--seed", "1", "--top-k", "40", "--temp", "0.8"]


class Bench:
    def __init__(
        self,
        out: Path,
        work: Path,
        rounds: int,
        dry: bool,
        only: Sequence[str] = (),
        stem: str = "gpu",
        server_models: Sequence[str] = (),
    ) -> None:
        self.out, self.work, self.rounds, self.dry = out, work, rounds, dry
        self.stem = stem  # the results' file names: STEM.json, STEM.md
        self.server_models = list(server_models)  # the servers on these models only (words)
        self.only = list(only)  # run only the rows whose name contains one of these
        self.bin = Path(os.environ["LCY_BIN"]) if os.environ.get("LCY_BIN") else None
        self.threads = 2 if dry else 4
        # Each loop runs this often in one context, the first run a warm-up (both sides):
        # a GPU captures its graphs on the first decodes, which a cold run would time.
        self.repeat = 2 if dry else 4
        self.reference = Path()  # the C++ loop, compiled in run()
        self.results: dict[str, Any] = {
            "date": datetime.date.today().isoformat(),
            "dry_run": dry,
            "devices": [str(d) for d in lc.devices()],
            "system_info": lc.system_info(),
            "python": platform.python_version(),
            "llama_cpp": lc.LLAMA_CPP_BUILD,
            "rows": [],
            "repeat": self.repeat,
            "llama_bench_tg128": {},
        }

    def save(self) -> None:
        (self.out / f"{self.stem}.json").write_text(json.dumps(self.results, indent=1))

    def row(
        self, name: str, ours: Callable[[], float], theirs: Callable[[], float], ref: str
    ) -> None:
        """Alternate ``ours`` and ``theirs`` (after one warm-up each); record the medians."""
        if self.only and not any(o in name for o in self.only):
            return
        a: list[float] = []
        b: list[float] = []
        entry: dict[str, Any] = {"name": name, "reference": ref, "ours": a, "theirs": b}
        try:
            ours()
            theirs()
            for r in range(self.rounds):
                for i in in_turn((0, 1), r):  # by place: the two may be one function
                    (a, b)[i].append((ours, theirs)[i]())
            entry["ratio"] = statistics.median(a) / statistics.median(b)
        except Exception as exc:  # recorded, and the next row runs
            entry["error"] = repr(exc)[-1500:]
        print(
            json.dumps(
                {k: v for k, v in entry.items() if k != "error"}
                | ({"error": entry["error"][-300:]} if "error" in entry else {})
            ),
            flush=True,
        )
        self.results["rows"].append(entry)
        self.save()

    def program(self, name: str) -> Path:
        path = self.bin / name if self.bin is not None else None
        if path is None or not path.is_file():
            raise FileNotFoundError(f"{name} is not built (set LCY_BIN): row skipped")
        return path

    def llama_bench(self, model: Path, args: list[str]) -> float:
        cmd = [str(self.program("llama-bench")), "-m", str(model), "-ngl", "99", "-r", "3"]
        r = subprocess.run([*cmd, "-o", "json", *args], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        return float(json.loads(r.stdout)[0]["avg_ts"])

    def loop(self, model: Path, n: int, extra: Sequence[str] = ()) -> dict[str, Any]:
        cmd = [
            str(self.reference), "--lib-dir", lc.get_lib_dir(), "--model", str(model),
            "--prompt", PROMPT, "--n-predict", str(n), "--threads", str(self.threads),
            "--ctx", "2048", "--ngl", "99", "--repeat", str(self.repeat), *extra,
        ]  # fmt: skip
        if _cuda_packs.selected is not None:  # a CUDA wheel: its plugin is in a pack
            cmd += ["--plugin", str(_cuda_packs.selected)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-2000:])
        result: dict[str, Any] = json.loads(r.stdout)
        return result

    def models(self, work: Path) -> dict[str, Path]:
        """The three models, written once into ``work`` (a second part reuses them)."""
        done = work / "models.json"
        if done.is_file():
            return {k: Path(v) for k, v in json.loads(done.read_text()).items()}
        made = self._write_models(work)
        done.write_text(json.dumps({k: str(v) for k, v in made.items()}))
        return made

    def _write_models(self, work: Path) -> dict[str, Path]:
        tiny = write_tiny_llama(work / "tiny.gguf")
        if self.dry:
            big = write_tiny_llama(work / "tiny-qwen2.gguf", vocab="qwen2")
            return {"tiny llama (n_embd 64)": tiny, "tiny llama, vocab 152k (dry run)": big}
        big = write_tiny_llama(
            work / "tiny-262k.gguf", vocab="gemma-4", n_embd=256, n_layer=4, n_ff=512
        )
        f32 = write_tiny_llama(
            work / "mid-f32.gguf", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=5632
        )
        mid = work / "mid-q4_0.gguf"
        from llama_cy._quantize import quantize

        quantize(f32, mid, "Q4_0", n_threads=os.cpu_count() or 4)
        f32.unlink()
        return {
            "tiny llama (n_embd 64, vocab 32k)": tiny,
            "llama 0.85B Q4_0 (n_embd 2048, 16 layers)": mid,
            "tiny llama, vocab 262k (n_embd 256)": big,
        }

    def run(self, part: str) -> None:
        """``part``: "kernels" (the generation loops, pp512, batched), "server" or "all"."""
        work = self.work
        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        models = self.models(work)
        self.results["prep_s"] = time.perf_counter() - t0
        if part in ("kernels", "all"):
            self.kernel_rows(models)
        if part in ("server", "all"):
            self.server_rows(models)
        self.results["total_s"] = time.perf_counter() - t0
        self.save()
        (self.out / f"{self.stem}.md").write_text(markdown(self.results))

    def kernel_rows(self, models: dict[str, Path]) -> None:
        self.reference = build_reference(self.work / "loop")
        n = 16 if self.dry else 128
        th = self.threads
        rp = self.repeat
        for name, path in models.items():
            model = lc.LlamaModel.load(path, n_gpu_layers=-1)

            def greedy(model: lc.LlamaModel = model) -> float:
                return float(cases.greedy(model, PROMPT, n, th, 2048, rp)["tokens_per_s"])

            def greedy_bs(model: lc.LlamaModel = model) -> float:
                return float(cases.backend_greedy(model, PROMPT, n, th, 2048, rp)["tokens_per_s"])

            def top_k(model: lc.LlamaModel = model) -> float:
                return float(
                    cases.numpy_sampling(model, PROMPT, n, th, 2048, 1, rp)["tokens_per_s"]
                )

            def top_k_bs(model: lc.LlamaModel = model) -> float:
                r = cases.backend_top_k_numpy(model, PROMPT, n, th, 2048, 1, rp)
                return float(r["tokens_per_s"])

            def dist_bs(model: lc.LlamaModel = model) -> float:
                return float(cases.backend_dist(model, PROMPT, n, th, 2048, 1, rp)["tokens_per_s"])

            def cpp(extra: list[str], path: Path = path) -> Callable[[], float]:
                return lambda: float(self.loop(path, n, extra)["tokens_per_s"])

            def tg128(path: Path = path) -> float:
                return self.llama_bench(path, ["-p", "0", "-n", "128", "-t", str(th)])

            c_loop = "C++ loop (llama_loop.cpp, same libraries)"
            self.row(f"greedy, Python loop over logits | {name}", greedy, cpp([]), c_loop)
            self.row(f"greedy, backend sampling | {name}", greedy_bs, cpp([]), c_loop)
            self.row(
                f"greedy, backend sampling | {name}",
                greedy_bs,
                cpp(["--backend-sampling"]),
                "C++ loop, backend sampling",
            )

            def tg_greedy(model: lc.LlamaModel = model) -> float:
                return cases.tg(model, n, th, lambda ctx: int(np.argmax(ctx.logits(-1))))

            def tg_greedy_bs(model: lc.LlamaModel = model) -> float:
                chain = lc.LlamaSampler.chain(
                    [lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only()]
                )
                return cases.tg(model, n, th, cases.sampled_token, samplers={0: chain})

            tg_name = "llama-bench's tg conditions"
            self.row(
                f"greedy, Python loop over logits, {tg_name} | {name}",
                tg_greedy,
                tg128,
                "llama-bench tg128",
            )
            self.row(
                f"greedy, backend sampling, {tg_name} | {name}",
                tg_greedy_bs,
                tg128,
                "llama-bench tg128",
            )
            chain = "C++ loop, llama.cpp top-k/temp/dist chain on the CPU"
            self.row(f"top-k 40, NumPy over all logits | {name}", top_k, cpp(TOP_K), chain)
            self.row(
                f"top-k 40, NumPy over GPU top-k candidates | {name}", top_k_bs, cpp(TOP_K), chain
            )
            self.row(
                f"top-k/temp/dist chain, backend sampling | {name}", dist_bs, cpp(TOP_K), chain
            )
            self.row(
                f"top-k/temp/dist chain, backend sampling | {name}",
                dist_bs,
                cpp([*TOP_K, "--backend-sampling"]),
                "C++ loop, the same chain with backend sampling",
            )

            def pp(model: lc.LlamaModel = model) -> float:
                return cases.prompt_processing(model, 512, th)

            def pp_ref(path: Path = path) -> float:
                return self.llama_bench(path, ["-p", "512", "-n", "0", "-t", str(th)])

            self.row(f"pp512 | {name}", pp, pp_ref, "llama-bench pp512")
            model.close()
        mid = list(models.values())[1 if not self.dry else 0]
        mid_name = list(models)[1 if not self.dry else 0]
        model = lc.LlamaModel.load(mid, n_gpu_layers=-1)
        pp_b, tg_b = (16, 16) if self.dry else (128, 128)

        def ours_b() -> float:
            return cases.batched(model, 8, pp_b, tg_b, th)

        def theirs_b() -> float:
            cmd = [
                str(self.program("llama-batched-bench")), "-m", str(mid), "-ngl", "99",
                "-c", "2048", "-b", "512", "-ub", "512", "-npp", str(pp_b), "-ntg", str(tg_b),
                "-npl", "8", "-t", str(th), "--output-format", "jsonl",
            ]  # fmt: skip
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(r.stderr[-1500:])
            line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
            return float(json.loads(line)["speed_tg"])

        self.row(f"batched, 8 sequences, tg | {mid_name}", ours_b, theirs_b, "llama-batched-bench")
        model.close()

    def server_rows(self, models: dict[str, Path]) -> None:
        """Row (7b) on the device: ``llama-cy serve`` against llama-server of the same
        build, every layer offloaded, 64 slots. On the tiny model (tokens at GPU rates, so
        each server's own per-token work decides): 1, 8, 32 and 64 clients, streamed and
        not, on ``/completion`` and ``/v1/chat/completions``; on the ~0.85 B model,
        ``/completion`` streamed. Tokens/s and time to first token (p50, p99); the
        servers take turns round by round. A dry run without llama-server compares
        llama-cy with itself (the steps run)."""
        if self.only and not any(o in "server" for o in self.only):
            return
        clients = (1, 4) if self.dry else (1, 8, 32, 64)
        n_predict = 8 if self.dry else 128
        names = list(models)
        plan = {
            names[0]: [
                server_rates.Load(e, s, n, n_predict=n_predict)
                for e in server_rates.ENDPOINTS
                for s in (True, False)
                for n in clients
            ],
            names[-1 if self.dry else 1]: [
                server_rates.Load("/completion", True, n, n_predict=n_predict) for n in clients
            ],
        }
        for name, loads in plan.items():
            if not self.server_models or any(w in name for w in self.server_models):
                self._server_model(models[name], name, loads)

    def _server_model(self, model: Path, model_name: str, loads: list[server_rates.Load]) -> None:
        port = 18700
        flags = ["--port", str(port), "-ngl", "99", "-np", "64", "-c", "32768"]
        flags += ["-t", str(self.threads)]
        ours = [sys.executable, "-P", "-m", "llama_cy", "serve", "-m", str(model), *flags]
        ref = "llama-server"
        names = [f"server, {load.name} | {model_name}" for load in loads]
        try:
            theirs = [str(self.program("llama-server")), "-m", str(model), *flags]
        except FileNotFoundError as exc:
            if not self.dry:
                for name in names:
                    self._record(name, ref, [], [], repr(exc))
                return
            theirs, ref = ours, "llama-cy serve (dry run: no llama-server)"
        got: dict[tuple[str, server_rates.Load], list[server_rates.Outcome]] = {}
        t0 = time.perf_counter()
        done = 0
        try:
            for r in range(self.rounds):
                for side, cmd in in_turn((("ours", ours), ("theirs", theirs)), r):
                    server = server_load.ServerProcess(cmd, port, self.work / f"server-{side}.log")
                    try:
                        server_rates.run(port, server_rates.Load("/completion", True, 4, 1, 8))
                        for load in loads:
                            got.setdefault((side, load), []).append(server_rates.run(port, load))
                    finally:
                        server.stop()
                # Recorded after every round: a part cut by its time limit keeps them.
                self._server_record(model_name, ref, loads, names, got)
                self.results.setdefault("server_s", {})[model_name] = time.perf_counter() - t0
                done += 1
        except Exception as exc:  # recorded, and the rest of the bench goes on
            if done:  # the rows of the rounds before stand; the failure is said beside them
                self.results.setdefault("server_errors", []).append(
                    f"{model_name}, round {done + 1}: {exc!r}"[:1500]
                )
                self.save()
                return
            for name in names:
                self._record(name, ref, [], [], repr(exc)[-1500:])

    def _server_record(
        self,
        model_name: str,
        ref: str,
        loads: list[server_rates.Load],
        names: list[str],
        got: dict[tuple[str, server_rates.Load], list[server_rates.Outcome]],
    ) -> None:
        """The rows of ``got`` so far, in place of this model's earlier ones."""
        rows = self.results["rows"]
        rows[:] = [
            r for r in rows if not (r["name"].startswith("server") and model_name in r["name"])
        ]
        for load, name in zip(loads, names, strict=True):
            a, b = got["ours", load], got["theirs", load]
            failed = [f for o in a for f in o.failed]
            error = f"{len(failed)} requests failed: {failed[0]}" if failed else None
            self._record(name, ref, [o.tokens_per_s for o in a], [o.tokens_per_s for o in b], error)
            for q in (0.5, 0.99):
                ttft = [o.quantile(q) for o in a], [o.quantile(q) for o in b]
                short = name.replace("server, ", f"server TTFT p{round(q * 100)}, ", 1)
                self._record(short, ref, *ttft, None, True)

    def _record(
        self,
        name: str,
        ref: str,
        a: list[float],
        b: list[float],
        error: str | None,
        invert: bool = False,
    ) -> None:
        """A row measured elsewhere (the servers' rounds); ``invert``: lower is better."""
        entry: dict[str, Any] = {"name": name, "reference": ref, "ours": a, "theirs": b}
        if error is not None:
            entry["error"] = error
        else:
            ma, mb = statistics.median(a), statistics.median(b)
            entry["ratio"] = mb / ma if invert else ma / mb
        print(json.dumps(entry)[:600], flush=True)
        self.results["rows"].append(entry)
        self.save()


def markdown(r: dict[str, Any]) -> str:
    """The results as a table: one row per comparison, medians and their ratio."""
    lines = [
        f"# GPU bench, {r['date']}{' (DRY RUN: figures mean nothing)' if r['dry_run'] else ''}",
        "",
        f"- devices: {', '.join(r['devices'])}",
        f"- llama.cpp {r['llama_cpp']}, Python {r['python']}; command: `tools/gpu_check.sh run`",
        f"- rounds alternated, medians; every layer offloaded; each generation loop warm "
        f"(both sides run it {r.get('repeat', 1)} times in one context and average all but "
        "the first); the tg rows under llama-bench's conditions (n_ctx 128, one warm-up "
        "token, 3 runs from position 0); model preparation "
        f"{r.get('prep_s', 0):.0f} s, whole bench {r.get('total_s', 0):.0f} s",
        "",
        "Ratios above 1 favour llama_cy: ours / theirs for tokens/s, theirs / ours for "
        "times (TTFT).",
        "",
        *(f"- servers on {m}: {s:.0f} s" for m, s in r.get("server_s", {}).items()),
        *(
            f"- **server failure** (the rounds before it stand): {e}"
            for e in r.get("server_errors", [])
        ),
        "",
        "| comparison | model | reference | llama_cy | reference | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        if "error" in row:
            error = row["error"][:160].replace("|", "/")
            lines.append(f"| {row['name']} | {row['reference']} | — | — | {error} |")
            continue
        a, b = statistics.median(row["ours"]), statistics.median(row["theirs"])
        unit = "ms" if "TTFT" in row["name"] else "tok/s"  # ratio: theirs / ours there
        lines.append(
            f"| {row['name']} | {row['reference']} | {a:.1f} {unit} | {b:.1f} {unit} "
            f"| **{row['ratio']:.3f}** |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="where the generated models go")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument(
        "--only", action="append", default=[], help="run only rows whose name contains this"
    )
    parser.add_argument(
        "--part",
        choices=("all", "kernels", "server"),
        default="all",
        help="the generation loops, pp512 and batched; or the servers (results in "
        "gpu-PART.json/.md; all: gpu.json/.md)",
    )
    parser.add_argument(
        "--server-model",
        action="append",
        default=[],
        help="the servers only on models whose name contains this",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        args.rounds = 1
    stem = "gpu" if args.part == "all" else f"gpu-{args.part}"
    work = args.work or args.out / "models"
    bench = Bench(args.out, work, args.rounds, args.dry_run, args.only, stem, args.server_model)
    bench.run(args.part)


if __name__ == "__main__":
    main()
