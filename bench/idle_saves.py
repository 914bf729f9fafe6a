"""What ``--cache-idle-slots`` costs after a busy spell: the server's engine with 64 slots
on the tiny llama, 64 requests at once, then one request alone (its start saves every
idle slot's state to the prompt cache), and ``state_seq_get_data`` timed alone.

usage: python bench/idle_saves.py [--ngl 99] [--rounds 3] [--threads 8]

On the H200 (every layer offloaded) the ad-hoc script this was tidied from gave 65
saves in 10.5-12.0 ms, ``state_seq_get_data`` 137-141 µs a slot of 140 tokens, and the
first request after the spell 54 ms, the next 42-44 (this script itself has run on the
2-core CPU only, ``--ngl 0 --threads 2``: 65 saves in 8.5-10.7 ms, ``state_seq_get_data``
112 µs, the first token after the spell 2.2-2.4 ms, the next request's 1.9-2.1).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "support")]

from tiny_model import write_tiny_llama  # noqa: E402

import llama_cy as lc  # noqa: E402
from llama_cy.generation import KVSequence  # noqa: E402
from llama_cy.prepare import Preparer  # noqa: E402
from llama_cy.server.engine import Engine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ngl", type=int, default=99)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp()) / "tiny.gguf"
    write_tiny_llama(path)
    model = lc.LlamaModel.load(str(path), n_gpu_layers=args.ngl)
    prep = Preparer(model, profile="server")
    engine = Engine(model, slots=64, n_ctx=32768, n_threads=args.threads)
    saved = {"s": 0.0, "n": 0}
    cache = engine.prompt_cache
    assert cache is not None
    save = cache.save

    def timed(slot: KVSequence) -> bool:
        t = time.perf_counter()
        done = save(slot)
        saved["s"] += time.perf_counter() - t
        saved["n"] += done
        return done

    cache.save = timed  # type: ignore[method-assign]

    async def one(text: str) -> tuple[float, float]:
        t0 = time.perf_counter()
        task = engine.submit(prep.completion(text, max_tokens=128, temperature=0.8))
        first = 0.0
        async for _ in engine.results(task):
            first = first or time.perf_counter()
        return (first - t0) * 1e3, (time.perf_counter() - t0) * 1e3

    async def spell(n: int, tag: str) -> list[tuple[float, float]]:
        texts = [f"Once upon a time {tag} story {i} of many" for i in range(n)]
        return list(await asyncio.gather(*(one(t) for t in texts)))

    engine.start()
    try:
        for r in range(args.rounds):
            asyncio.run(spell(64, f"r{r}"))
            saved.update(s=0.0, n=0)
            alone = [asyncio.run(spell(1, f"x{r}{k}"))[0] for k in range(2)]
            times = " ".join(f"{a:.1f}/{b:.1f}" for a, b in alone)
            print(f"after 64: {saved['n']} saves in {saved['s'] * 1e3:.1f} ms; "
                  f"then 1 request, first token/whole ms: {times}", flush=True)  # fmt: skip
        slots = [s for s in engine.slots if s.cache]
        t = time.perf_counter()
        for s in slots:
            engine.ctx.state_seq_get_data(s.id)
        each = (time.perf_counter() - t) / len(slots) * 1e6
        print(f"state_seq_get_data: {each:.0f} us a slot of {len(slots[0].cache)} tokens")
    finally:
        engine.stop()
        model.close()


if __name__ == "__main__":
    main()
