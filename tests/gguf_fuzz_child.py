"""Child process of test_gguf_fuzz.py: load, run and sample each mutated copy of a model.

usage: gguf_fuzz_child.py BASE.gguf SPECS.json START WORKDIR

For each spec from START on it prints ``BEGIN i``, then ``END i <outcome>``, where the
outcome is ``ok`` or the name of the exception raised. A copy that kills the process
shows as a BEGIN without its END; the parent restarts the child after it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import llama_cy as lc

# Every copy must fail cleanly, never by asking for all the machine's memory.
AS_LIMIT = 8 << 30


def apply(base: bytes, spec: dict[str, object], path: Path) -> None:
    data = bytearray(base)
    for offset, hexbytes in spec["patches"]:  # type: ignore[attr-defined]
        raw = bytes.fromhex(hexbytes)
        data[offset : offset + len(raw)] = raw
    truncate = spec.get("truncate")
    if isinstance(truncate, int):
        del data[truncate:]
    path.write_bytes(data)


def run(path: Path) -> str:
    try:
        model = lc.LlamaModel.load(path)
        with model, lc.LlamaContext(model, n_ctx=64, n_batch=16, n_threads=1) as ctx:
            tokens = model.tokenize("hello world")[:8].tolist() or [0]
            batch = lc.LlamaBatch(16)
            batch.add_sequence(tokens, 0, 0)
            ctx.decode(batch)
            sampler = lc.LlamaSampler.chain(
                [lc.LlamaSampler.top_k(8), lc.LlamaSampler.dist(seed=1)]
            )
            token = sampler.sample(ctx, -1)
            model.token_to_piece(token)
            model.detokenize(tokens)
        return "ok"
    except Exception as exc:  # the parent checks which kinds are acceptable
        return type(exc).__name__


def main() -> None:
    base_path, specs_path, start, workdir = sys.argv[1:5]
    if not os.environ.get("LLAMA_CY_SANITIZED"):  # ASan reserves terabytes of address space
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    base = Path(base_path).read_bytes()
    specs = json.loads(Path(specs_path).read_text())
    path = Path(workdir) / "mutant.gguf"
    for i in range(int(start), len(specs)):
        print("BEGIN", i, flush=True)
        apply(base, specs[i], path)
        print("END", i, run(path), flush=True)


if __name__ == "__main__":
    main()
