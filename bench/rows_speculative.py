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
        # llama-cpp-python README's: max_ngram_size=2 (its default), 10 tokens a draft
        "LlamaPromptLookupDecoding(num_pred_tokens=10)": lc.LlamaPromptLookupDecoding(
            num_pred_tokens=10
        ),
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


def bench_hidden_state_drafts(rows: list[Comparison], tools: dict[str, Path], args: Any) -> None:
    """(9) MTP and EAGLE3 drafting, llama-cy serve against llama-server with the same
    tiny pair (written by the tests: a GLM-4.5-style MoE with one NextN layer; an EAGLE3
    draft for the tiny llama). Each server's speed-up from drafting over its own plain
    decoding, and the two speed-ups against each other; both servers' draft counts are
    printed, and the replies must be the same. Random weights accept few drafts, so the
    speed-ups are below 1: the row measures the drafting machinery's cost, not a gain."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
    from tiny_model import write_tiny_llama
    from tiny_mtp import write_tiny_eagle3, write_tiny_glm4moe_mtp

    folder = WORK / "models"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "mtp": folder / "bench-glm4moe-mtp.gguf",
        "llama": folder / "bench-tiny-llama.gguf",
        "eagle3": folder / "bench-eagle3.gguf",
    }
    writers: dict[str, Callable[[Path], Path]] = {
        "mtp": write_tiny_glm4moe_mtp,
        "llama": write_tiny_llama,
        "eagle3": write_tiny_eagle3,
    }
    for name, path in paths.items():
        if not path.is_file():
            writers[name](path.with_suffix(".partial")).replace(path)
    port = 18460
    threads = str(args.threads)
    programs = {
        "llama_cy": [sys.executable, "-P", "-m", "llama_cy", "serve"],
        "llama-server": [str(tools["llama-server"])],
    }
    eagle3 = ["--spec-type", "draft-eagle3", "-md", str(paths["eagle3"])]
    pairs = {
        "draft-mtp": (paths["mtp"], ["--spec-type", "draft-mtp"]),
        "draft-eagle3": (paths["llama"], eagle3),
    }
    body = {"prompt": speculative.PROMPT, "n_predict": 128, "temperature": 0, "cache_prompt": True}
    for kind, (model, flags) in pairs.items():
        base = ["-m", str(model), "--port", str(port), "-np", "1", "-c", "4096", "-t", threads]
        speed: dict[tuple[str, str], list[float]] = {
            (p, c): [] for p in programs for c in ("plain", kind)
        }
        replies: dict[str, tuple[Any, ...]] = {}
        for _ in range(min(args.rounds, 3)):
            for prog, cmd in programs.items():
                for config, extra in (("plain", []), (kind, flags)):
                    log = WORK / f"spec-{prog}-{config}.log"
                    server = server_load.ServerProcess([*cmd, *base, *extra], port, log)
                    try:
                        speed[prog, config].append(speculative.completion_speed(port))
                        out = server_load.post(port, "/completion", body)
                    finally:
                        server.stop()
                    t = out["timings"]
                    replies[f"{prog} {config}"] = (out["content"], t.get("draft_n"),
                                                   t.get("draft_n_accepted"))  # fmt: skip
        print(
            f"  {kind}: drafted/accepted { ({k: v[1:] for k, v in replies.items()}) }", flush=True
        )
        if len({r[0] for r in replies.values()}) != 1:
            raise RuntimeError(f"{kind}: the replies differ: {replies}")
        gain = {
            p: [s / b for s, b in zip(speed[p, kind], speed[p, "plain"], strict=True)]
            for p in programs
        }
        c = Comparison(
            f"(9) server speed-up from --spec-type {kind}, tiny random-weight pair "
            f"(drafted/accepted: llama-cy {replies[f'llama_cy {kind}'][1:]}, "
            f"llama-server {replies[f'llama-server {kind}'][1:]})",
            "x",
            "≥ 0.95",
            "llama-server's speed-up",
        )
        c.ours, c.theirs = gain["llama_cy"], gain["llama-server"]
        rows.append(c)
        print(f"  {c.name}: ratio {c.ratio():.3f}", flush=True)
