"""Row (9): speculative decoding against llama-speculative-simple."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import server_load
import speculative
from common import WORK, Comparison, alternate

import llama_cy as lc


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
        "llama_cy": [sys.executable, "-P", "-m", "llama_cy", "serve"],
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
