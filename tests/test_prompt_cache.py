"""llama-server's prompt cache in host memory (``--cache-ram``, ``--cache-idle-slots``):
a slot that takes another prompt keeps its old one in RAM, and a later request for it
is served from there."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serving import Server

import llama_cy as lc
from llama_cy.server.prompt_cache import PromptCache

LONG = (
    "Once upon a time in a land far away, there lived a brave knight who traveled across "
    "mountains and rivers to find the legendary golden sword hidden deep within the "
    "enchanted forest of whispers."
)
OTHER = "The quick brown fox jumps over the lazy dog, and then it runs away."


def answer(server: Server, prompt: Any, **body: Any) -> dict[str, Any]:
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0, "cache_prompt": True, **body}
    status, _, out = server.request("POST", "/completion", body)
    assert status == 200, out
    return out  # type: ignore[no-any-return]


def complete(server: Server, prompt: Any, **body: Any) -> dict[str, Any]:
    return answer(server, prompt, **body)["timings"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("draft", [False, True], ids=["plain", "draft-model"])
def test_a_swapped_out_prompt_comes_back_from_ram(tiny_model_path: Path, draft: bool) -> None:
    """With a draft model, its context's state is cached and restored with the target's
    (llama-server's ``drft`` state): drafting goes on from the restored prompt."""
    base = ["-np", "1", "-c", "512", "-t", "2", "--no-warmup", "--no-cache-idle-slots"]
    if draft:
        base += ["-md", str(tiny_model_path), "--spec-draft-n-max", "4"]
    decoded, texts = {}, {}
    for ram in ("100", "0"):
        with Server(tiny_model_path, *base, "--cache-ram", ram) as server:
            first = complete(server, LONG)
            complete(server, OTHER)  # the one slot takes another prompt
            out = answer(server, LONG, n_predict=12)
            again = out["timings"]
            decoded[ram] = (first["prompt_n"], again["prompt_n"], again["cache_n"])
            texts[ram] = out["content"]
            if draft:  # the draft context holds the prompt: its drafts are all taken
                assert again["draft_n"] > 0
                assert again["draft_n_accepted"] == again["draft_n"]
    n = decoded["0"][0]
    assert decoded["0"] == (n, n - 1, 1)  # without the cache: all again but the BOS
    assert decoded["100"] == (n, 1, n - 1)  # from RAM: only the last token, as llama-server
    assert texts["100"] == texts["0"]


def test_a_prompt_with_an_image_comes_back_from_ram(
    tiny_model_path: Path, vision_path: Path
) -> None:
    """As llama-server's cache (server_tokens with their media): a slot holding an image
    is saved, and the image is not encoded again when its prompt comes back."""
    from test_mtmd import IMAGE

    args = ("-np", "1", "-c", "2048", "-t", "2", "--no-warmup", "--no-cache-idle-slots")
    with Server(tiny_model_path, "--mmproj", str(vision_path), *args, "--cache-ram", "100") as s:
        marker = s.request("GET", "/props")[2]["media_marker"]
        data = base64.b64encode(IMAGE.read_bytes()).decode()
        prompt = {"prompt_string": f"Look: {marker} It shows", "multimodal_data": [data]}
        first = answer(s, prompt, n_predict=3)
        complete(s, OTHER)  # the one slot takes another prompt
        again = answer(s, prompt, n_predict=3)
    assert first["timings"]["prompt_n"] > 16
    assert again["timings"]["prompt_n"] == 1  # the image and its text came from RAM
    assert again["content"] == first["content"]


def test_idle_slots_are_saved_and_cleared(tiny_model_path: Path) -> None:
    # llama-server's own test (test_kv_keep_only_active.py), on the tiny model.
    args = ("-np", "2", "-c", "1024", "-t", "2", "--no-warmup", "-kvu", "--cache-ram", "100")
    with Server(tiny_model_path, *args, "-v") as server:
        log = server.output()
        assert "__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__" in log
        first = complete(server, LONG, id_slot=0)
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" not in server.output()  # slot 1 is empty
        complete(server, OTHER, id_slot=1)
        log = server.output()
        assert log.count("__TEST_TAG_CACHE_IDLE_SLOT__") == 1  # slot 0 saved, then cleared
        slots = {s["id"]: s for s in server.slots()}
        assert slots[0]["n_ctx"] > 0
        again = complete(server, LONG)
        log = server.output()
        assert "updating prompt cache" in log
        assert again["cache_n"] > 0
        assert again["prompt_n"] < first["prompt_n"]
        n_tags = log.count("__TEST_TAG_CACHE_IDLE_SLOT__")
        complete(server, LONG + " The knight reached the castle gates.")
        assert server.output().count("__TEST_TAG_CACHE_IDLE_SLOT__") == n_tags
    with Server(tiny_model_path, *args, "-v", "--no-cache-idle-slots") as server:
        assert "__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__" not in server.output()
        complete(server, LONG, id_slot=0)
        complete(server, OTHER, id_slot=1)
        assert "__TEST_TAG_CACHE_IDLE_SLOT__" not in server.output()


def test_cache_limits_and_choice(tiny: lc.LlamaModel) -> None:
    llm = lc.Llama.from_model(tiny, n_ctx=512, n_threads=2)
    seq = llm.sequence

    def fill(text: str) -> list[int]:
        llm.create_completion(text, max_tokens=1, temperature=0)
        return list(seq.cache)

    cache = PromptCache(-1, 0)
    long = fill(LONG)
    assert cache.save(seq)
    assert not cache.save(seq)  # held already
    state = cache.states[0]
    assert state.tokens.tolist() == long
    assert state.size() == len(state.data) > 0
    other = fill(OTHER)
    assert cache.save(seq)
    # An empty slot takes the entry that keeps most of the prompt.
    seq.forget()
    assert cache.load(seq, [*long, 42])
    assert seq.cache == long
    assert [s.tokens.tolist() for s in cache.states] == [other]  # taken out of the cache
    # An entry is taken only if it keeps more of the prompt than the slot does.
    assert cache.load(seq, long[:3])
    assert seq.cache == long
    assert len(cache.states) == 1
    # A state llama.cpp rejects: False, and the caller clears the slot.
    cache.states[0].data = bytes(np.zeros(64, np.uint8))
    seq.forget()
    assert not cache.load(seq, other)
    # Size limit: the oldest go first.
    per_entry = PromptCache(-1, 0)
    fill(LONG)
    per_entry.save(seq)
    size = per_entry.states[0].size()
    small = PromptCache(1, 0)
    small.limit_size = size  # room for one (the first, the larger)
    for text in (LONG, OTHER):
        fill(text)
        small.save(seq)
    assert len(small.states) == 1
    assert small.states[0].tokens.tolist() == list(seq.cache)
    # Token limit: with no size limit, the context's tokens.
    by_tokens = PromptCache(-1, len(long) + 1)
    for text in (LONG, OTHER):
        fill(text)
        by_tokens.save(seq)
    by_tokens.update()
    assert [len(s.tokens) for s in by_tokens.states] == [len(seq.cache)]
    assert by_tokens.n_tokens() == len(seq.cache)
    llm.close()


def test_the_entry_taken_need_not_be_the_oldest(tiny: lc.LlamaModel) -> None:
    """Entries are told apart by identity: taking the second of two (of other lengths)
    once compared their token arrays and raised, which stopped the server's engine."""
    llm = lc.Llama.from_model(tiny, n_ctx=512, n_threads=2)
    seq = llm.sequence
    cache = PromptCache(-1, 0)
    for text in (OTHER, LONG):
        llm.create_completion(text, max_tokens=1, temperature=0)
        assert cache.save(seq)
    long = [s.tokens.tolist() for s in cache.states][1]
    seq.forget()
    assert cache.load(seq, [*long, 42])
    assert seq.cache == long
    assert len(cache.states) == 1
    llm.close()
