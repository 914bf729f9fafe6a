"""The device check (tools/gpu_check.sh) runs its steps here on small sizes, so that the
script a lent GPU runs in one short call cannot rot between loans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from offload import timeout

ROOT = Path(__file__).resolve().parent.parent


def test_device_check_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("LCY_BIN", None)  # llama-bench is not built here: its rows say so
    result = subprocess.run(
        ["bash", str(ROOT / "tools" / "gpu_check.sh"), "dry-run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout(900),
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "bench" / "gpu.json").read_text())
    assert report["dry_run"] is True
    rows = report["rows"]
    # ten comparisons a model, the batched one, and the servers' three (tokens/s, time to
    # first token p50 and p99) a load: the dry run's two client counts, on the first model
    # streamed and not on both endpoints, on the second streamed on /completion
    assert len(rows) == 2 * 10 + 1 + 3 * (2 * 2 * 2 + 2)
    for row in rows:
        if "error" in row:  # only the rows against llama.cpp's programs, not built here
            assert "is not built" in row["error"], row
            assert "llama-bench" in row["reference"] or "batched" in row["reference"], row
        else:
            assert row["ratio"] > 0, row
            assert all(x > 0 for x in row["ours"] + row["theirs"]), row
    ran = {row["name"].split(" | ")[0] for row in rows if "error" not in row}
    assert {
        "greedy, backend sampling",
        "top-k 40, NumPy over GPU top-k candidates",
        "top-k/temp/dist chain, backend sampling",
    } <= ran
    server = [row for row in rows if row["name"].startswith("server")]
    assert [row["reference"] for row in server] == [
        "llama-cy serve (dry run: no llama-server)"
    ] * 30
    assert all("error" not in row for row in server), server  # no request failed
    named = " ".join(row["name"] for row in server)
    assert "/v1/chat/completions, non-stream" in named
    assert "TTFT p99" in named
    table = (tmp_path / "bench" / "gpu.md").read_text()
    assert "DRY RUN" in table
    assert table.count("\n| ") == len(rows) + 1  # the header and a line a row


def test_serve_probe_dry_run(tmp_path: Path, tiny_model_path: Path) -> None:
    """bench/serve_probe.py, the device check's probe step, on this machine's CPU: every
    load is measured, each thread's CPU is named, and a missing py-spy is said, not fatal."""
    out = tmp_path / "probe"
    run = subprocess.run(
        [sys.executable, "-P", str(ROOT / "bench" / "serve_probe.py"), str(out),
         "--model", str(tiny_model_path), "--rounds", "1", "--ngl", "0", "--threads", "2",
         "--n-predict", "4", "--py-spy", "no-such-py-spy"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((out / "probe.json").read_text())
    runs = result["runs"]["llama-cy"]
    assert set(runs) == set(result["loads"])
    named: set[str] = set()
    for load, (one,) in runs.items():
        assert one["failed"] == 0, load
        assert one["tok_s"] > 0
        named |= set(one["cpu_us"])  # a thread below a clock tick in one load is left out
    # without py-spy only the main thread is told from the others (the engine's, llama.cpp's)
    assert "MainThread" in named
    assert len(named) >= 2, named
    assert "llama-cy | 8 clients, /v1/chat/completions, stream" in (out / "probe.md").read_text()
    spy = (out / "gil-8-clients-v1-chat-completions-stream.txt").read_text()
    assert spy == "py-spy failed: no-such-py-spy not found"
