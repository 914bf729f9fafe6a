"""A smoke run of the benchmark: it prepares its native side, runs, and prints its table.

The full bench (bench/run.py) is not part of the test run: timings are not tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bench_prints_and_writes_its_table(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    assert "| comparison | llama_cy median" in out
    assert "(1) greedy tg, tiny" in out
    (md,) = tmp_path.glob("*-cpu-quick.md")
    assert "(5) peak RSS" in md.read_text()
    rows = json.loads(md.with_suffix(".json").read_text())["rows"]
    greedy = next(r for r in rows if r["name"] == "(1) greedy tg, tiny")
    assert greedy["llama_cy"]["median"] > 0
    assert greedy["theirs"]["median"] > 0
    rss = next(r for r in rows if r["name"].startswith("(5) peak RSS"))
    # Each side's own peak, not the bench process's: both well under 1 GB for a tiny model.
    assert 10 < rss["llama_cy"]["median"] < 1024
    assert 1 < rss["theirs"]["median"] < 1024
