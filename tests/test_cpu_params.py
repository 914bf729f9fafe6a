"""Thread pool placement: llama-server's ``-C``, ``-Cr``, ``--cpu-strict``, ``--prio``,
``--poll`` and their ``-batch`` kin, as :class:`~llama_cy.CpuParams` on a context."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from child import run_python

import llama_cy as lc
from llama_cy import cli
from llama_cy.cpu_params import CpuParams, parse_cpu_mask, parse_cpu_range
from llama_cy.flags.values import cpu_params
from llama_cy.server.flag_settings import settings_from_args


def test_masks_and_ranges_read_as_llama_cpp_reads_them() -> None:
    assert parse_cpu_mask("0x5") == {0, 2}
    assert parse_cpu_mask("F0") == {4, 5, 6, 7}
    assert parse_cpu_mask("1" + "0" * 16) == {64}
    assert parse_cpu_mask("") == frozenset()
    assert parse_cpu_range("2-4") == {2, 3, 4}
    assert parse_cpu_range("-1") == {0, 1}
    assert parse_cpu_range("510-") == {510, 511}
    for bad in ("0xg", "12 ", "0X1"):
        with pytest.raises(ValueError, match="hex"):
            parse_cpu_mask(bad)
    for bad in ("3", "a-b", "0-512"):
        with pytest.raises(ValueError, match="range"):
            parse_cpu_range(bad)
    with pytest.raises(ValueError, match="priority"):
        CpuParams(priority=4)
    with pytest.raises(ValueError, match="CPU numbers"):
        CpuParams(cpumask=frozenset({512}))
    with pytest.raises(ValueError, match="poll"):
        CpuParams(poll=-1)


def parse(*argv: str) -> dict[str, Any]:
    return cpu_params(cli.parser().parse_args(["serve", *argv]))


def test_flags_make_the_pools_placement() -> None:
    assert parse() == {"cpu_params": None, "cpu_params_batch": None}
    got = parse("-C", "0x3", "-Cr", "4-5", "--prio", "-1", "--poll", "0", "--cpu-strict", "1")
    want = CpuParams(cpumask=frozenset({0, 1, 4, 5}), priority=-1, strict_cpu=True, poll=0)
    assert got == {"cpu_params": want, "cpu_params_batch": want}
    # Without -tb the batch pool takes the generation pool's placement and the -batch
    # flags go unused (llama.cpp's postprocess_cpu_params); with it, they count.
    assert parse("-C", "1", "-Cb", "2")["cpu_params_batch"] == CpuParams(cpumask=frozenset({0}))
    got = parse("-C", "1", "-tb", "2", "-Cb", "2", "--poll-batch", "10")
    assert got["cpu_params_batch"] == CpuParams(cpumask=frozenset({1}), poll=10)
    args = cli.parser().parse_args(["serve", "-C", "1"])
    settings = settings_from_args(args, "x.gguf")
    assert settings.context["cpu_params"] == CpuParams(cpumask=frozenset({0}))
    for bad in (["--prio", "4"], ["--prio-batch", "-1"], ["--poll", "-2"]):
        with pytest.raises(SystemExit):
            cli.parser().parse_args(["serve", *bad])
    with pytest.raises(SystemExit, match="hex"):
        parse("-C", "zz")


PLACED = """
import glob, json, os, sys
import numpy as np
import llama_cy as lc
from llama_cy import CpuParams

def masks():  # each thread's CPUs (Linux)
    return sorted({ln.split()[1] for p in glob.glob("/proc/self/task/*/status")
                   for ln in open(p) if ln.startswith("Cpus_allowed_list")})

model = lc.LlamaModel.load(sys.argv[1])
tokens = model.tokenize("Hello world, once upon a time")
last = str(max(os.sched_getaffinity(0)))
placed = {
    "cpu_params": CpuParams(cpumask=frozenset({int(last)}), poll=0, strict_cpu=True),
    "cpu_params_batch": CpuParams(cpumask=frozenset(os.sched_getaffinity(0)), poll=100),
}
out, seen = [], []
for kw in ({}, placed):
    ctx = lc.LlamaContext(model, n_ctx=128, n_threads=1, n_threads_batch=2, **kw)
    batch = lc.LlamaBatch(64)
    batch.add_sequence(tokens, 0, 0, logits_last=True)
    ctx.decode(batch)  # the batch pool
    first = ctx.logits(-1).copy()
    batch.clear()
    batch.add(int(np.argmax(first)), len(tokens), [0], True)
    ctx.decode(batch)  # one token: the generation pool, pinned
    seen.append(masks())
    out.append([first.tolist(), ctx.logits(-1).tolist()])
    ctx.set_n_threads(2, 1)  # new pools, the same placement
    ctx.close()
print(json.dumps({"out": out, "seen": seen, "last": last}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads' CPUs from /proc")
def test_placed_pools_run_where_placed_and_compute_the_same(tiny_model_path: Path) -> None:
    # A child: ggml pins the calling thread too, which must not pin this test process.
    result = run_python(PLACED, str(tiny_model_path))
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    plain, placed = got["out"]
    np.testing.assert_allclose(plain, placed, rtol=1e-5, atol=1e-5)
    assert got["last"] not in got["seen"][0] or len(os.sched_getaffinity(0)) == 1
    assert got["last"] in got["seen"][1]  # the generation threads run on that CPU only


def test_cpu_params_are_checked(tiny: lc.LlamaModel) -> None:
    with pytest.raises(TypeError, match="CpuParams"):
        lc.LlamaContext(tiny, n_ctx=64, cpu_params={"poll": 0})  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="POSIX process priorities")
def test_prio_sets_the_process_priority(tiny_model_path: Path) -> None:
    # A lower priority (nice 5) needs no privileges; a higher one is a warning without them.
    code = """
        import os, sys
        from llama_cy.cpu_params import set_process_priority
        before = os.getpriority(os.PRIO_PROCESS, 0)
        assert set_process_priority(-1)
        print(os.getpriority(os.PRIO_PROCESS, 0) - before)
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 5
    run = run_python(
        "import sys; from llama_cy.cli import main; sys.exit(main(sys.argv[1:]))",
        "run", "-m", str(tiny_model_path), "-p", "Hi", "-n", "2", "--prio", "-1", "-C", "1",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
