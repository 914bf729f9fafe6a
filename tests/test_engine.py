"""The server's engine in-process, without HTTP: slot choice, prefix reuse, the features
it shares with ``Llama`` through the one generation core, and a ``Llama`` on the same
model afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import llama_cy as lc
from llama_cy.completion import Completion, CompletionChunk, join_chunks
from llama_cy.errors import StateError
from llama_cy.generation import Job, KVSequence, common_prefix
from llama_cy.prepare import Preparer
from llama_cy.sequence_settings import SequenceSettings
from llama_cy.server import engine as engine_module
from llama_cy.server.engine import Engine
from llama_cy.server.engine_settings import EngineSettings

# Bans tokens 1 and 2 (BOS, EOS) so the tiny model never ends its turn on its own.
NO_END = {1: -1e9, 2: -1e9}


def serve(engine: Engine, jobs: Sequence[Job], cache_prompt: bool = True) -> list[Completion]:
    """Run ``jobs`` together through a started engine; their completions in order."""

    async def one(job: Job) -> Completion:
        task = engine.submit(job, cache_prompt=cache_prompt)
        return join_chunks([c async for c in engine.results(task)])

    async def every() -> list[Completion]:
        return list(await asyncio.gather(*(one(j) for j in jobs)))

    return asyncio.run(every())


@pytest.fixture(scope="module")
def gemma_chat(gemma_chat_path: Path) -> Iterator[lc.LlamaModel]:
    model = lc.LlamaModel.load(gemma_chat_path)
    yield model
    model.close()


def test_a_request_goes_to_the_slot_with_its_prefix_and_decodes_only_new_tokens(
    gemma_chat: lc.LlamaModel,
) -> None:
    prep = Preparer(gemma_chat, profile="server")
    engine = Engine(gemma_chat, slots=2, n_ctx=2048, n_threads=2)
    engine.start()
    try:
        first = [{"role": "user", "content": "Name a colour."}]
        other = [{"role": "user", "content": "What is two plus two? Answer in words."}]
        jobs = [prep.chat(m, max_tokens=8, temperature=0) for m in (first, other)]
        done = serve(engine, jobs)  # both at once: one slot each
        holders = [
            [s.id for s in engine.slots if s.cache[: len(j.tokens)] == j.tokens] for j in jobs
        ]
        assert len(holders[0]) == len(holders[1]) == 1
        assert holders[0] != holders[1]
        first_slot = holders[0][0]
        cache_before = list(engine.slots[first_slot].cache)

        second = [
            *first,
            {"role": "assistant", "content": done[0].text},
            {"role": "user", "content": "And another one?"},
        ]
        turn2 = prep.chat(second, max_tokens=4, temperature=0)
        n_prompt_before = engine.n_prompt_tokens
        (reply,) = serve(engine, [turn2], cache_prompt=True)
        reused = reply.timings.cached_n
        # The chat's first turn (prompt and reply) is reused from its slot's KV cache.
        assert reused >= len(jobs[0].tokens)
        assert reused == min(
            common_prefix(cache_before, turn2.tokens), len(turn2.tokens) - 1
        )  # nothing more, nothing less
        assert reply.timings.prompt_n == len(turn2.tokens) - reused
        assert engine.n_prompt_tokens - n_prompt_before == len(turn2.tokens) - reused
        assert engine.slots[first_slot].cache[: len(turn2.tokens)] == turn2.tokens

        # cache_prompt=False decodes the whole prompt again.
        n_prompt_before = engine.n_prompt_tokens
        (again,) = serve(engine, [turn2], cache_prompt=False)
        assert again.timings.cached_n == 0
        assert engine.n_prompt_tokens - n_prompt_before == len(turn2.tokens)
        assert again.tokens == reply.tokens
    finally:
        engine.stop()


def test_slot_choice_breaks_ties_as_llama_server(tiny: lc.LlamaModel) -> None:
    """A fresh engine hands out slots from the highest id down (least recently used,
    ties to the last, as llama-server's scan), and a prompt that shares as much with
    several idle slots goes to the lowest of them: a step's attention spans the KV
    streams from its lowest slot to its highest, so where ties fall decides tokens/s."""
    prep = Preparer(tiny, profile="server")
    engine = Engine(tiny, slots=4, settings=EngineSettings(cache_ram=0), n_ctx=512, n_threads=1)
    engine.start()
    try:
        story = "Once upon a time there was a little fox who lived in a wood"
        jobs = [
            prep.completion(f"{story} number {i}", max_tokens=2, temperature=0) for i in range(2)
        ]
        serve(engine, jobs)  # together: the two highest slots
        assert sorted(s.id for s in engine.slots if s.cache) == [2, 3]
        again = prep.completion(f"{story} again", max_tokens=2, temperature=0)
        held = [common_prefix(engine.slots[i].cache, again.tokens) for i in (2, 3)]
        assert held[0] == held[1] > len(again.tokens) // 2  # a tie between slots 2 and 3
        assert asyncio.run(_slot_of(engine, again)) == 2
    finally:
        engine.stop()


@pytest.mark.parametrize("whole", [False, True])
def test_a_streamed_requests_first_chunk_is_sent_before_the_next_step(
    tiny: lc.LlamaModel, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    """With a pool thread for each CPU (a polling worker then holds the CPU the event
    loop needs), the step that hands a streamed request its first chunk waits until
    the loop has run the request's reader: the engine decodes nothing more before.
    The wait's bound is raised, so that a slow machine cannot pass it instead. An
    answer sent whole (not streamed) is not waited for: the steps go on."""
    monkeypatch.setattr(engine_module, "_HAND_OVER_S", 60.0)
    prep = Preparer(tiny, profile="server")
    cpus = lc.available_cpus()
    settings = EngineSettings(cache_ram=0)
    engine = Engine(tiny, slots=2, settings=settings, n_ctx=512, n_threads=cpus)
    engine.start()
    try:
        job = prep.completion("Once upon a time", max_tokens=24, temperature=0, logit_bias=NO_END)

        async def first_seen() -> tuple[int, int]:
            """(the step that made the first chunk, the steps run when it was read)"""
            before = engine.n_decode
            tasks = engine.submit_all([(job, None)], whole=whole)
            async for chunk in engine.results(tasks[0]):
                steps = engine.n_decode - before
                # the prompt's step samples the first token, each later step one more
                await asyncio.sleep(0.05)  # the rest, as a slow reader
                return len(chunk.tokens), steps
            raise AssertionError("no chunk")

        for _ in range(3):
            made, seen = asyncio.run(first_seen())
            assert (seen == made) != whole, (made, seen)
    finally:
        engine.stop()


class _CountedPauses(lc.LlamaContext):
    """A context that counts the times its pools were put to sleep."""

    pauses = 0

    def pause_threadpools(self) -> None:
        type(self).pauses += 1
        super().pause_threadpools()


def test_the_pool_sleeps_while_a_step_waits_for_its_first_chunk_to_be_sent(
    tiny: lc.LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the step that made a streamed request's first chunk waits for the event loop
    to send it, the pool's workers sleep instead of polling on the CPUs the loop needs;
    the next decode wakes them and the generation goes on as if they had not slept (the
    same tokens as an answer sent whole, which is not waited for: no pause)."""
    monkeypatch.setattr(engine_module, "LlamaContext", _CountedPauses)
    prep = Preparer(tiny, profile="server")
    cpus = lc.available_cpus()
    engine = Engine(tiny, slots=2, settings=EngineSettings(cache_ram=0), n_ctx=512, n_threads=cpus)
    engine.start()
    try:
        job = prep.completion("Once upon a time", max_tokens=16, temperature=0, logit_bias=NO_END)

        async def tokens(whole: bool) -> list[int]:
            task = engine.submit_all([(job, None)], cache_prompt=False, whole=whole)[0]
            return join_chunks([c async for c in engine.results(task)]).tokens

        whole = asyncio.run(tokens(True))
        assert _CountedPauses.pauses == 0
        streamed = asyncio.run(tokens(False))
        assert _CountedPauses.pauses == 1  # one first chunk, one wait
        assert streamed == whole
        assert len(whole) == 16
    finally:
        engine.stop()


async def _slot_of(engine: Engine, job: Job, id_slot: int = -1) -> int:
    """The slot that served ``job``."""
    task = engine.submit(job, id_slot=id_slot)
    async for _ in engine.results(task):
        pass
    return task.slot


def test_a_new_prompt_takes_the_idle_slot_that_keeps_the_busy_ones_together(
    tiny: lc.LlamaModel,
) -> None:
    """With a slot busy, a prompt no slot holds goes beside it, not to the least
    recently used slot far off (llama-server's choice, which makes every step read the
    KV streams in between); with one unified stream the least recently used, as there."""
    prep = Preparer(tiny, profile="server")
    busy = prep.completion("a long one", max_tokens=96, temperature=0, logit_bias=NO_END)
    other = prep.completion("something else", max_tokens=2, temperature=0)
    for unified, expected in ((False, 2), (True, 5)):  # 0 and 2 tie: the highest, as LRU
        engine = Engine(
            tiny,
            slots=6,
            settings=EngineSettings(cache_ram=0),
            n_ctx=6 * 256,
            n_threads=1,
            kv_unified=unified,
        )
        engine.start()
        try:
            assert asyncio.run(_beside_a_busy_slot(engine, busy, other)) == expected, unified
        finally:
            engine.stop()


def test_a_prompt_goes_beside_the_busy_slots_among_those_that_hold_nearly_as_much(
    tiny: lc.LlamaModel,
) -> None:
    """Two idle slots hold a prompt's opening, one a token more: llama-server's choice
    (the most, as without a busy slot) unless the other keeps the busy slots together
    and holds at least 90% as much."""
    prep = Preparer(tiny, profile="server")
    opening = "Once upon a time there was a little fox who lived in a wood near a river and"
    near, far = (prep.completion(f"{opening} {w}", max_tokens=1, temperature=0) for w in "ab")
    new = prep.completion(f"{opening} b c", max_tokens=2, temperature=0)
    assert common_prefix(near.tokens, new.tokens) + 1 == common_prefix(far.tokens, new.tokens)
    busy = prep.completion("a long one", max_tokens=96, temperature=0, logit_bias=NO_END)
    for with_busy, expected in ((False, 5), (True, 2)):
        engine = Engine(
            tiny, slots=6, settings=EngineSettings(cache_ram=0), n_ctx=6 * 256, n_threads=1
        )
        engine.start()
        try:
            assert asyncio.run(_slot_of(engine, near, id_slot=2)) == 2
            assert asyncio.run(_slot_of(engine, far, id_slot=5)) == 5
            if with_busy:
                assert asyncio.run(_beside_a_busy_slot(engine, busy, new)) == expected
            else:
                assert asyncio.run(_slot_of(engine, new)) == expected
        finally:
            engine.stop()


def test_idle_slots_are_saved_after_a_new_tasks_first_token(tiny: lc.LlamaModel) -> None:
    """--cache-idle-slots: with a KV stream per slot, the idle slots' states go to the
    prompt cache after the step that gives a new task its first token (63 state copies
    after a spell of 64 clients would delay it); a unified cache clears them for the new
    task's cells first, as llama-server does."""
    for unified in (False, True):
        events = _saves_and_tokens_of_a_new_task(tiny, unified)
        idle = [i for i, e in enumerate(events) if e == "idle save"]
        assert len(idle) >= 2, events  # the warm slots the new task did not take
        assert (events.index("token") < idle[0]) is not unified, events


def test_a_failed_idle_slot_save_ends_no_request(tiny: lc.LlamaModel) -> None:
    """The idle slots are saved between steps: a failure there is logged, and the
    requests running go on."""
    prep = Preparer(tiny, profile="server")
    engine = Engine(tiny, slots=2, n_ctx=2 * 256, n_threads=1)

    def fail() -> None:
        raise StateError("no state")

    engine._cache_idle_slots = fail  # type: ignore[method-assign]
    engine.start()
    try:
        jobs = [prep.completion(f"story {i}", max_tokens=3, temperature=0) for i in range(3)]
        done = serve(engine, jobs)
        assert [c.stop_reason for c in done] == ["length"] * 3
        assert engine.alive
    finally:
        engine.stop()


def _saves_and_tokens_of_a_new_task(tiny: lc.LlamaModel, unified: bool) -> list[str]:
    """What the engine thread did for a new task, in order, after three slots served:
    each save of another slot's state ("idle save"), and each step that handed out text."""
    prep = Preparer(tiny, profile="server")
    warm = [prep.completion(f"story {i} of the fox", max_tokens=2, temperature=0) for i in range(3)]
    engine = Engine(tiny, slots=4, n_ctx=4 * 256, n_threads=1, kv_unified=unified)
    assert engine.prompt_cache is not None
    assert engine.cache_idle_slots
    engine.start()
    try:
        serve(engine, warm)
        engine.on_slot(0, lambda s: None).result(10)  # after the warm tasks' saves
        events: list[tuple[str, int]] = []
        cache, flush = engine.prompt_cache, engine._flush
        save = cache.save

        def saving(slot: KVSequence) -> bool:
            events.append(("save", slot.id))
            return save(slot)

        def flushing(*, wait: bool = True) -> None:
            events.extend(
                ("token", -1) for _, c in engine._outbox if isinstance(c, CompletionChunk)
            )
            flush(wait=wait)

        cache.save = saving  # type: ignore[method-assign]
        engine._flush = flushing  # type: ignore[method-assign]
        slot = asyncio.run(_slot_of(engine, prep.completion("a new one", max_tokens=4)))
        return ["idle save" if e == "save" and i != slot else e for e, i in events]
    finally:
        engine.stop()


async def _beside_a_busy_slot(engine: Engine, busy: Job, job: Job) -> int:
    """The slot that serves ``job`` while ``busy`` runs on slot 1."""
    first = engine.submit(busy, id_slot=1)
    second = engine.submit(job)
    async for _ in engine.results(second):
        pass
    assert engine.tasks[1] is first  # `job` ran while slot 1 was busy
    async for _ in engine.results(first):
        pass
    return second.slot


def test_stopping_criteria_in_the_engine(tiny: lc.LlamaModel) -> None:
    prep = Preparer(tiny, profile="server")
    seen: list[int] = []

    def after_three(ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        seen.append(len(ids))
        assert logits.shape == (tiny.n_vocab,)
        return len(ids) >= n_prompt + 3

    job = prep.completion(
        "hello world",
        max_tokens=20,
        temperature=0,
        logit_bias=NO_END,
        stopping_criteria=[after_three],
    )
    n_prompt = len(job.tokens)
    engine = Engine(tiny, slots=2, n_ctx=128)
    engine.start()
    try:
        (done,) = serve(engine, [job])
    finally:
        engine.stop()
    assert done.stop_reason == "stop"
    assert len(done.tokens) == 3
    assert seen == [n_prompt + 1, n_prompt + 2, n_prompt + 3]


def test_context_shift_in_the_engine(tiny: lc.LlamaModel) -> None:
    prep = Preparer(tiny, profile="server")
    engine = Engine(tiny, slots=2, n_ctx=96)  # llama.cpp pads each slot's share
    n_slot = engine.n_ctx_slot
    n = 2 * n_slot + 10
    job = prep.completion("hello world", max_tokens=n, temperature=0, logit_bias=NO_END)
    engine.start()
    try:
        (full,) = serve(engine, [job])
    finally:
        engine.stop()
    assert full.stop_reason == "length"
    assert full.prompt_tokens + len(full.tokens) == n_slot + 1  # the last pick is never decoded

    shift = EngineSettings(sequence=SequenceSettings(context_shift=True))
    engine = Engine(tiny, slots=2, settings=shift, n_ctx=96)
    engine.start()
    try:
        (shifted,) = serve(engine, [job])
        assert all(len(s.cache) <= n_slot for s in engine.slots)
    finally:
        engine.stop()
    assert shifted.stop_reason == "length"
    assert len(shifted.tokens) == n
    # Up to the first shift both runs are the same greedy sequence.
    assert shifted.tokens[: len(full.tokens)] == full.tokens


def test_llama_after_serving_on_the_same_model(gemma_path: Path) -> None:
    model = lc.LlamaModel.load(gemma_path)
    try:
        llm = lc.Llama.from_model(model, n_ctx=512, n_threads=2)
        prompt = "The three primary colours are"
        before = llm.complete(prompt, max_tokens=12, temperature=0)
        engine = Engine(model, slots=2, n_ctx=1024, n_threads=2)
        engine.start()
        try:
            prep = Preparer(model, profile="server")
            jobs = [
                prep.completion(prompt, max_tokens=12, temperature=0),
                prep.completion("Once upon a time", max_tokens=12, temperature=0),
            ]
            # One at a time: a batch that mixes sequences may round differently.
            served = [serve(engine, [job], cache_prompt=False)[0] for job in jobs]
        finally:
            engine.stop()
        assert engine.ctx.closed  # the engine's own context, freed with it
        assert served[0].tokens == before.tokens  # the server's greedy output is Llama's
        after = llm.complete(prompt, max_tokens=12, temperature=0)
        assert after.tokens == before.tokens
        assert after.timings.cached_n == len(llm.tokenize(prompt)) - 1  # its own cache, intact
        # From an empty cache, as the engine ran it: a prompt decoded in two pieces (BOS
        # reused, then the rest) may round differently from one decode on some CPUs.
        llm.reset()
        other = llm.complete("Once upon a time", max_tokens=12, temperature=0)
        assert other.tokens == served[1].tokens
        llm.close()
    finally:
        model.close()


def test_a_slot_reused_under_another_lora_clears_the_draft_context_too(
    tiny: lc.LlamaModel, tmp_path: Path
) -> None:
    """A slot whose LoRA scales change drops its cache: in the draft model's context as
    well as the target's, or the draft context keeps positions the slot no longer has."""
    from tiny_model import write_tiny_lora

    adapter = lc.LoraAdapter(tiny, write_tiny_lora(tmp_path / "lora.gguf", tiny))
    prep = Preparer(tiny, profile="server")
    job = prep.completion("hello world hello world", max_tokens=12, temperature=0,
                          logit_bias=NO_END)  # fmt: skip
    spec = {"types": "draft-simple", "draft_model": tiny, "n_max": 4}

    def run(scales: Sequence[tuple[float, ...]]) -> list[list[int]]:
        engine = Engine(tiny, slots=1, n_ctx=128, loras=[adapter], speculative=spec)
        engine.start()

        async def each() -> list[list[int]]:
            out = []
            for lora in scales:
                task = engine.submit(job, lora=lora)
                out.append(list(join_chunks([c async for c in engine.results(task)]).tokens))
            return out

        try:
            return asyncio.run(each())
        finally:
            engine.stop()

    reused = run([(0.0,), (1.0,), (1.0,)])
    fresh = run([(1.0,)])
    assert reused[1] == fresh[0]
    assert reused[2] == fresh[0]
    assert reused[0] != fresh[0]  # the adapter changes the output: the test can fail
