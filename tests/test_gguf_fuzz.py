"""Seeded GGUF fuzzing: mutated copies of a tiny model load, run and sample, or raise.

The copies are the tiny model with header fields at edge values, hostile
hyperparameters, truncations and random byte flips in the header and metadata. Each is
loaded, given a context, decoded and sampled in a child process under an address-space
limit. Every copy must succeed or raise; none may kill the child or hang past 30 s.

``LLAMA_CY_FUZZ_COUNT`` sets the number of random byte-flip copies (default 150) on top
of the fixed edge cases; ``LLAMA_CY_FUZZ_SEED`` the seed (default 0).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import gguf
import numpy as np
import pytest
from tiny_model import file_offset, scalar_offset, write_tiny_llama

import llama_cy.errors

HERE = Path(__file__).parent
COPY_TIMEOUT = 30.0
FLIPS = int(os.environ.get("LLAMA_CY_FUZZ_COUNT", "150"))
SEED = int(os.environ.get("LLAMA_CY_FUZZ_SEED", "0"))
# What a bad file may raise: llama_cy's own errors (ModelLoadError above all) and the
# built-in kinds those derive from or that a bad argument gives.
ACCEPTED = {name for name in llama_cy.errors.__all__ if name[0].isupper()} | {
    "MemoryError",
    "OverflowError",
}

Spec = dict[str, object]


@pytest.fixture(scope="module")
def fuzz_base(model_cache: Path, llama_cpp_source: Path) -> Path:
    """A small tiny model (n_embd 16): a few MB per copy."""
    path = model_cache / "fuzz-base-v1.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, n_embd=16, n_head=2, n_head_kv=1, n_ff=32)
        partial.replace(path)
    return path


def _patch(offset: int, dtype: np.dtype, value: float) -> list[object]:
    return [offset, np.array([value], dtype=dtype).tobytes().hex()]


def specs_for(path: Path) -> list[Spec]:
    """The fixed edge cases, then the seeded random byte flips."""
    reader = gguf.GGUFReader(path)
    data_start = min(int(t.data_offset) for t in reader.tensors)
    size = path.stat().st_size
    specs: list[Spec] = []

    def add(
        desc: str, patches: list[list[object]] | None = None, truncate: int | None = None
    ) -> None:
        specs.append({"desc": desc, "patches": patches or [], "truncate": truncate})

    # Header: version, tensor count, KV count.
    for value in (0, 1, 2, 4, 2**32 - 1):
        add(f"version={value}", [[4, struct.pack("<I", value).hex()]])
    for value in (0, 20, 22, 2**31, 2**63, 2**64 - 1):
        add(f"n_tensors={value}", [[8, struct.pack("<Q", value).hex()]])
        add(f"n_kv={value}", [[16, struct.pack("<Q", value).hex()]])
    add("bad magic", [[0, b"GGUX".hex()]])
    # Hyperparameters and tokenizer ids at edge values.
    hostile_u32 = (0, 1, 3, 7, 513, 2**16 + 1, 2**31, 2**32 - 1)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or len(field.types) != 1:
            continue
        if field.types[0] == gguf.GGUFValueType.UINT32:
            offset, dtype = scalar_offset(reader, key)
            for value in hostile_u32:
                add(f"{key}={value}", [_patch(offset, dtype, value)])
        elif field.types[0] == gguf.GGUFValueType.FLOAT32:
            offset, dtype = scalar_offset(reader, key)
            for eps in (-1.0, float("nan"), float("inf"), 0.0, 1e30):
                add(f"{key}={eps}", [_patch(offset, dtype, eps)])
        elif field.types[0] == gguf.GGUFValueType.STRING:
            offset, _ = scalar_offset(reader, key)
            n = len(field.parts[field.data[0]])
            add(f"{key} -> x*{n}", [[offset, (b"x" * n).hex()]])
            # The string's length prefix, just before its bytes.
            for value in (0, n + 1, 2**63):
                add(f"len({key})={value}", [[offset - 8, struct.pack("<Q", value).hex()]])
    # Array lengths (the vocabulary) at edge values: the count is the uint64 before
    # the first element, after the element type.
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        field = reader.fields[key]
        count_offset = file_offset(reader, field.parts[field.data[0]]) - 8
        if field.types[1] == gguf.GGUFValueType.STRING:
            count_offset -= 8  # the first string's own length prefix
        for value in (0, 1, 31999, 32001, 2**40):
            add(f"len({key})={value}", [[count_offset, struct.pack("<Q", value).hex()]])
    # Tensor infos: dimension count, first dimension, type and data offset.
    for tensor in reader.tensors[:3]:
        _, _, n_dims, dims, ttype, toffset = tensor.field.parts
        for part, values in (
            (n_dims, (0, 5, 2**32 - 1)),
            (dims, (0, 3, 2**40, 2**63)),
            (ttype, (2, 39, 255, 2**31)),
            (toffset, (1, 2**40, 2**64 - 32)),
        ):
            for value in values:
                add(
                    f"{tensor.name} {part.dtype}@{file_offset(reader, part)}={value}",
                    [_patch(file_offset(reader, part), part.dtype, value)],
                )
    # Truncations.
    for cut in (0, 3, 8, 20, 100, data_start - 1, data_start, data_start + 1, size // 2, size - 1):
        add(f"truncated at {cut}", truncate=cut)
    # Seeded byte flips in the header, metadata and tensor infos.
    rng = np.random.default_rng(SEED)
    for _ in range(FLIPS):
        patches: list[list[object]] = []
        for _ in range(int(rng.integers(1, 5))):
            offset = int(rng.integers(0, data_start))
            patches.append([offset, bytes([int(rng.integers(0, 256))]).hex()])
        add(f"flips {patches}", patches)
    return specs


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_all(base: Path, specs: list[Spec], workdir: Path) -> tuple[dict[int, str], list[str]]:
    """Outcomes by spec index, and the copies that killed or hung the child."""
    specs_path = workdir / "specs.json"
    specs_path.write_text(json.dumps(specs))
    outcomes: dict[int, str] = {}
    failures: list[str] = []
    start = 0
    while start < len(specs):
        child = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "gguf_fuzz_child.py"),
                str(base),
                str(specs_path),
                str(start),
                str(workdir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert child.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()

        threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True).start()
        current, hung = None, False
        while True:
            try:
                line = lines.get(timeout=COPY_TIMEOUT)
            except queue.Empty:
                child.kill()
                hung = True
                break
            if line is None:
                break
            word, index, *rest = line.split()
            current = int(index) if word == "BEGIN" else None
            if word == "END":
                outcomes[int(index)] = rest[0]
        rc = child.wait()
        if current is None:  # every copy ran (or the child left between two: counted below)
            break
        desc = specs[current]["desc"]
        if hung:
            failures.append(f"{desc}: hung past {COPY_TIMEOUT} s")
        else:
            how = signal.Signals(-rc).name if rc < 0 else f"exit code {rc}"
            failures.append(f"{desc}: killed the process ({how})")
        start = current + 1
    return outcomes, failures


def test_mutated_models_load_or_raise(fuzz_base: Path, tmp_path: Path) -> None:
    specs = specs_for(fuzz_base)
    outcomes, failures = run_all(fuzz_base, specs, tmp_path)
    assert not failures, "\n".join(failures)
    assert len(outcomes) == len(specs)
    wrong = {specs[i]["desc"]: o for i, o in outcomes.items() if o not in ACCEPTED | {"ok"}}
    assert not wrong, wrong
    # The fixed cases include both kinds: copies that still work, copies that are refused.
    kinds = set(outcomes.values())
    assert "ok" in kinds
    assert "ModelLoadError" in kinds
