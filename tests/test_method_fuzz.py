"""Seeded method fuzzing: every public method of llama_cy's objects, called with hostile
positional arguments (negative, huge, NaN, wrong types, file-descriptor-like ints), must
return or raise. None may kill the process (a GGML_ASSERT, a crash) or leave the objects
unable to do their work (a closed stdout, a kept bad value).

It found: seq_add/seq_div on -1 and their no-ops on an M-RoPE model (KV-cache asserts),
set_embeddings(True) on a graph without an embeddings output, open() closing a descriptor
passed as a path, and llama_cpp.Llama keeping a bad seed.

``LLAMA_CY_FUZZ_SEED`` sets the seed (default 0); each run makes about 2,000 to 5,300
calls and takes a second or two.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from offload import timeout
from test_mtmd import IMAGE
from tiny_model import write_tiny_llama

HERE = Path(__file__).parent
SEED = os.environ.get("LLAMA_CY_FUZZ_SEED", "0")


def fuzz(kind: str, *paths: Path, workdir: Path) -> None:
    """Run the child until it is done, restarting after each call that kills it; assert
    none did and every check passed."""
    deaths: list[str] = []
    broken: list[str] = []
    start = 0
    while True:
        proc = subprocess.run(
            [sys.executable, str(HERE / "method_fuzz_child.py"), kind, SEED, str(start),
             str(workdir), *map(str, paths)],
            capture_output=True, text=True, timeout=timeout(300),
        )  # fmt: skip
        lines = proc.stdout.splitlines()
        broken += [line for line in lines if line.startswith("BROKEN")]
        if lines and lines[-1].startswith("DONE"):
            break
        calls = [line for line in lines if line[:1].isdigit()]
        if not calls:
            raise AssertionError(f"the child did not start: {proc.stderr[-3000:]}")
        last = calls[-1]
        deaths.append(f"{last}  (exit {proc.returncode}: {proc.stderr.strip()[-300:]})")
        start = int(last.split()[0]) + 1
        if len(deaths) > 20:
            break
    assert not deaths, "calls that killed the process:\n" + "\n".join(deaths)
    assert not broken, "calls that left the objects broken:\n" + "\n".join(broken)


@pytest.fixture(scope="module")
def mrope_path(model_cache: Path) -> Path:
    path = model_cache / "fuzz-qwen2vl-v1.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, arch="qwen2vl", rope_sections=(2, 3, 3, 0), seed=5)
        partial.replace(path)
    return path


# Not an EAGLE3 draft: decoded alone (a token batch, no ctx_other) its graph reads target
# features nothing set, so its logits are whatever that memory held.
@pytest.mark.parametrize("model", ["llama", "mrope", "moe", "bert"])
def test_core_objects(
    model: str,
    tiny_model_path: Path,
    mrope_path: Path,
    mtp_path: Path,
    tiny_bert_path: Path,
    tmp_path: Path,
) -> None:
    path = {"llama": tiny_model_path, "mrope": mrope_path, "moe": mtp_path,
            "bert": tiny_bert_path}[model]  # fmt: skip
    fuzz("core", path, workdir=tmp_path)


def test_media_and_speculators(tiny_model_path: Path, vision_path: Path, tmp_path: Path) -> None:
    fuzz("media", tiny_model_path, vision_path, IMAGE, workdir=tmp_path)


def test_llama_objects(tiny_model_path: Path, tmp_path: Path) -> None:
    fuzz("llama", tiny_model_path, workdir=tmp_path)
