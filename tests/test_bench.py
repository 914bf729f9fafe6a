"""A smoke run of the benchmark: it prepares its native side, runs, and prints its table.

The full bench (bench/run.py) is not part of the test run: timings are not tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

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


def _bench_module(name: str) -> Any:
    """bench/<name>.py, loaded from its file (the bench is not a package), with bench/ on
    the path for its own imports while it loads."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return module


def test_each_side_leads_a_round_in_turn_and_its_results_stay_its_own() -> None:
    common = _bench_module("common")
    assert [common.in_turn("abc", r) for r in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    calls: list[str] = []

    def side(name: str, value: float) -> Any:
        def run() -> float:
            calls.append(name)
            return value

        return run

    c = common.Comparison("row", "tok/s", "-", "them")
    common.alternate(c, 3, side("ours", 2.0), side("theirs", 1.0))
    # a warm-up of each, then the lead changes every round
    assert calls == ["ours", "theirs", "ours", "theirs", "theirs", "ours", "ours", "theirs"]
    assert c.ours == [2.0, 2.0, 2.0]
    assert c.theirs == [1.0, 1.0, 1.0]
    same = common.Comparison("dry", "tok/s", "-", "itself")
    common.alternate(same, 2, side("both", 1.0), side("both", 1.0))
    one = side("one", 3.0)
    common.alternate(same, 2, one, one)  # one function on both sides: a dry run's
    assert same.ours == [1.0, 1.0, 3.0, 3.0]
    assert same.theirs == [1.0, 1.0, 3.0, 3.0]


def test_thread_cpu_leaves_out_a_thread_that_ended_while_it_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server's thread can end between the listing of its threads and the read of its
    stat file (one did during a row (7b) run): it is left out, and the others are still
    counted."""
    serve_cpu = _bench_module("serve_cpu")
    listdir = os.listdir

    def with_a_gone_thread(path: str) -> list[str]:
        return [*listdir(path), "999999999"]

    monkeypatch.setattr(serve_cpu.os, "listdir", with_a_gone_thread)
    seen = serve_cpu.thread_cpu(os.getpid())
    assert seen
    assert not any(k.endswith(":999999999") for k in seen)


def test_settle_returns_once_the_servers_are_idle_and_waits_while_one_is_busy() -> None:
    """Row (7b) runs a load once every server is idle: an idle process lets it go within
    a few tenths of a second, a busy one holds it to its limit."""
    serve_cpu = _bench_module("serve_cpu")
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # both started
        t0 = time.monotonic()
        serve_cpu.settle([idle.pid], limit_s=5.0)
        assert time.monotonic() - t0 < 2.0
        t0 = time.monotonic()
        serve_cpu.settle([idle.pid, busy.pid], limit_s=0.6)
        assert time.monotonic() - t0 >= 0.6
    finally:
        for p in (idle, busy):
            p.kill()
            p.wait()
