"""Child process of test_method_fuzz.py: call every public method of llama_cy's objects
with hostile positional arguments.

usage: method_fuzz_child.py KIND SEED START WORKDIR MODEL [PROJECTOR IMAGE]

KIND is ``core`` (LlamaModel, LlamaContext, LlamaBatch, LlamaSampler), ``media``
(MtmdContext, Bitmap, InputChunks, and two Speculators) or ``llama`` (``llama_cy.Llama``
and ``llama_cpp.Llama``). Before each call it prints ``i object.method(args)``; a call may
raise anything, but must not kill the process; every 50 calls the objects must still do
their normal work (a failed check prints ``BROKEN i ...``). The last line is ``DONE n``.
A call that kills the process shows as the last line printed; the parent restarts the
child after it.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import llama_cy as lc

VALUES: list[Any] = [
    -1, 0, 1, 3, 2**31 - 1, -(2**31), 2**40, None, "x", "", b"\xff", 1.5, float("nan"),
    True, [-5, 10**9], [0, 1], (0,), {"a": 1}, np.array([1, 2], dtype=np.int32),
    np.zeros(3, dtype=np.float32), np.zeros((2, 2, 3), dtype=np.uint8),
]  # fmt: skip
SKIP = {"close", "load", "load_splits", "from_metadata", "from_pretrained", "abort"}
CHECK_EVERY = 50


def methods(objects: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for oname, obj in objects.items():
        for name in sorted(dir(obj)):
            if name.startswith("_") or name in SKIP:
                continue
            try:
                if callable(getattr(obj, name)):
                    out.append((oname, name))
            except Exception:  # a property that refuses in this state
                continue
    return out


Made = tuple[dict[str, Any], Callable[[], None], list[Any]]


def core(model_path: str) -> Made:
    model = lc.LlamaModel.load(model_path)
    ctx = lc.LlamaContext(model, n_ctx=64, n_batch=32, n_threads=1)
    objects = {
        "model": model,
        "ctx": ctx,
        "batch": lc.LlamaBatch(8),
        "sampler": lc.LlamaSampler.chain([lc.LlamaSampler.top_k(5), lc.LlamaSampler.dist(1)]),
    }

    def check() -> None:
        ctx.set_embeddings(False)
        ctx.clear()
        if model.has_encoder and not model.has_decoder:
            return  # an encoder alone (BERT): nothing to decode
        batch = lc.LlamaBatch(4)
        batch.add_sequence([1, 2, 3], 0, 0)
        ctx.decode(batch)
        assert np.isfinite(ctx.logits(-1)).all()

    return objects, check, [ctx, model]


def media(model_path: str, projector: str, image: str) -> Made:
    model = lc.LlamaModel.load(model_path)
    ctx = lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1, n_seq_max=2)
    mctx = lc.MtmdContext(model, projector, n_threads=1)
    bitmap = mctx.bitmap(image)
    chunks = mctx.tokenize("a " + mctx.marker + " b", [bitmap])
    draft = lc.LlamaModel.load(model_path)
    spec = lc.Speculator(ctx, "draft-simple", draft_model=draft)
    objects = {
        "mctx": mctx,
        "bitmap": bitmap,
        "chunks": chunks,
        "spec": spec,
        "ngram": lc.Speculator(ctx, "ngram-simple"),
    }

    def check() -> None:
        ctx.clear()
        spec.clear()
        fresh = mctx.tokenize("a " + mctx.marker + " b", [mctx.bitmap(image)])
        assert mctx.eval_chunks(ctx, fresh, logits_last=True) == fresh.n_pos
        assert np.isfinite(ctx.logits(-1)).all()

    # the context and the chunks as arguments too: eval_chunk(ctx, chunks[1], ...) and kin
    return objects, check, [ctx, chunks, chunks[1], bitmap, [1, 2, 3]]


def llama(model_path: str) -> Made:
    import llama_cpp

    ours = lc.Llama(model_path, n_ctx=64, n_batch=32, n_threads=1)
    theirs = llama_cpp.Llama(model_path, n_ctx=64, n_batch=32, n_threads=1, verbose=False)
    objects = {"llama_cy.Llama": ours, "llama_cpp.Llama": theirs}

    def check() -> None:
        theirs.set_cache(None)  # it keeps any object, as llama-cpp-python does
        for llm in (ours, theirs):
            llm.reset()
            assert llm.create_completion("Hi", max_tokens=2)["usage"]["total_tokens"] >= 1

    return objects, check, []


def main() -> None:
    kind, seed, start, workdir, *paths = sys.argv[1:]
    os.chdir(workdir)  # where the state-file methods write
    makers: dict[str, Callable[..., Made]] = {
        "core": core,
        "media": media,
        "llama": llama,
    }
    objects, check, own = makers[kind](*paths)
    values = VALUES + own
    rng = random.Random(int(seed))
    calls = [
        (oname, name, tuple(rng.choice(values) for _ in range(arity)))
        for oname, name in methods(objects)
        for arity in range(6)
        for _ in range(1 if arity == 0 else 12)
    ]
    for i, (oname, name, args) in enumerate(calls):
        if i < int(start):
            continue
        print(i, f"{oname}.{name}{args!r}"[:200], flush=True)
        with contextlib.suppress(Exception):  # any exception is an answer
            getattr(objects[oname], name)(*args)
        if i % CHECK_EVERY == 0:
            try:
                check()
            except Exception as e:
                print("BROKEN", i, type(e).__name__, e, flush=True)
    print("DONE", len(calls), flush=True)


if __name__ == "__main__":
    main()
