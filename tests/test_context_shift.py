"""llama-server's context shift arithmetic (server-context.cpp): what is kept, what goes.
The shift itself, on a real model, is in test_engine and test_server."""

from __future__ import annotations

from llama_cy.context_shift import shift_plan


def test_half_of_what_follows_n_keep_goes() -> None:
    # 100 tokens, the BOS kept: 99 left, 49 dropped
    assert shift_plan(100, 1, 100, None, add_bos=True) == (1, 49, 100)
    assert shift_plan(100, 1, 100, (10, None, 0), add_bos=True) == (1, 49, 100)


def test_a_requests_n_keep_counts_after_the_bos_and_minus_one_keeps_the_prompt() -> None:
    assert shift_plan(100, 1, 100, (10, 5, 0), add_bos=True) == (6, 47, 100)
    assert shift_plan(100, 1, 100, (10, -1, 0), add_bos=True) == (11, 44, 100)
    assert shift_plan(100, 0, 100, (10, -1, 0), add_bos=False) == (10, 45, 100)
    # never more than n_ctx - 4, nor more than all but one token
    assert shift_plan(100, 1, 100, (10, 500, 0), add_bos=True) == (96, 2, 100)


def test_a_requests_n_discard_is_taken_up_to_all_but_one() -> None:
    assert shift_plan(100, 1, 100, (10, None, 30), add_bos=True) == (1, 30, 100)
    assert shift_plan(100, 1, 100, (10, None, 500), add_bos=True) == (1, 98, 100)


def test_nothing_to_drop_is_no_plan() -> None:
    assert shift_plan(2, 1, 100, None, add_bos=True) is None
    assert shift_plan(100, 99, 100, None, add_bos=True) is None
