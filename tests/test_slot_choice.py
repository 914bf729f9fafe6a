"""Which idle slot a new prompt goes to (``llama_cy/server/slot_choice.py``), on stand-in
slots: the cases the engine's tests cannot set up cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from llama_cy.generation import KVSequence
from llama_cy.server.slot_choice import NEARLY_AS_MUCH, choose_slot


@dataclass
class Slot:  # what choose_slot reads of a KVSequence
    id: int
    cache: list[int] = field(default_factory=list)
    last_used: float = 0.0


def choose(idle: list[Slot], busy: list[int], prompt: list[int], unified: bool = False) -> int:
    slot, _ = choose_slot(cast(list[KVSequence], idle), busy, prompt, 0.1, unified)
    return cast(Slot, slot).id


PROMPT = list(range(100, 120))


def test_a_prompt_no_slot_holds_goes_to_the_lru_slot_that_widens_the_span_least() -> None:
    idle = [Slot(0, last_used=1.0), Slot(3, last_used=5.0), Slot(9, last_used=0.0)]
    assert choose(idle, [], PROMPT) == 9  # none busy: llama-server's least recently used
    assert choose(idle, [4, 5], PROMPT) == 3  # beside the busy slots, though used later
    assert choose(idle, [4, 5], PROMPT, unified=True) == 9  # one stream: no span
    inside = [Slot(2, last_used=3.0), Slot(4, last_used=2.0), Slot(7)]
    assert choose(inside, [1, 6], PROMPT) == 4  # both inside the span: the older


def test_a_nearer_slot_wins_only_if_it_holds_nearly_as_much() -> None:
    best = Slot(9, cache=PROMPT[:10])  # holds 10 tokens of the prompt
    enough = Slot(1, cache=PROMPT[: round(10 * NEARLY_AS_MUCH)])  # holds 9
    too_little = Slot(1, cache=PROMPT[: round(10 * NEARLY_AS_MUCH) - 1])  # holds 8
    assert choose([enough, best], [], PROMPT) == 9  # none busy: the most, as llama-server
    assert choose([enough, best], [0], PROMPT) == 1
    assert choose([too_little, best], [0], PROMPT) == 9
    assert choose([enough, best], [0], PROMPT, unified=True) == 9


def test_a_slot_that_would_lose_most_of_its_cache_swaps_it() -> None:
    keeps = Slot(0, cache=[*PROMPT[:10], 1, 2, 3])  # keeps 10 of 13
    loses = Slot(0, cache=[*PROMPT[:4], *range(50)])  # keeps 4 of 54
    for slot, swap in ((keeps, False), (loses, True), (Slot(0), True)):
        assert choose_slot([cast(KVSequence, slot)], [], PROMPT, 0.1, False)[1] is swap
