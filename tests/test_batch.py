"""LlamaBatch: fixed capacity, checked sequence ids, writable zero-copy views of the C
arrays, embedding batches, and a clear error for every misuse."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt
import pytest

import llama_cy as lc
from llama_cy.errors import ClosedError

PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture
def ctx(tiny: lc.LlamaModel) -> Iterator[lc.LlamaContext]:
    # One thread: the tiny model decodes in well under a millisecond, and a thread pool
    # only adds synchronisation cost on a small, busy machine.
    context = lc.LlamaContext(tiny, n_ctx=256, n_batch=64, n_threads=1)
    yield context
    context.close()


def data_pointer(arr: npt.NDArray[np.generic]) -> int:
    pointer: int = arr.__array_interface__["data"][0]
    return pointer


def decode_logits(ctx: lc.LlamaContext, batch: lc.LlamaBatch) -> npt.NDArray[np.float32]:
    """Logits of every output of ``batch`` decoded on an empty cache, copied."""
    ctx.clear()
    ctx.decode(batch)
    return ctx.all_logits().copy()


# ---- construction -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((0,), {}),
        ((-3,), {}),
        ((4, 0), {}),
        ((4, -1), {}),
        ((4,), {"embd": -1}),
    ],
)
def test_invalid_construction_raises_value_error(
    args: tuple[int, ...], kwargs: dict[str, int]
) -> None:
    with pytest.raises(ValueError, match="must be"):
        lc.LlamaBatch(*args, **kwargs)


def test_capacity_and_n_seq_max_are_fixed() -> None:
    batch = lc.LlamaBatch(5, 3)
    assert (batch.capacity, batch.n_seq_max, batch.embd) == (5, 3, 0)
    with pytest.raises(AttributeError):
        batch.capacity = 10  # type: ignore[misc]
    with pytest.raises(AttributeError):
        batch.n_seq_max = 1  # type: ignore[misc]
    for i in range(5):
        batch.add(i, i)
    batch.clear()
    assert batch.capacity == 5
    assert batch.n_tokens == 0
    assert len(batch) == 0
    # The full capacity is usable again after clear().
    batch.add_sequence(np.arange(5, dtype=np.int32))
    assert batch.n_tokens == 5


def test_add_fills_the_c_arrays() -> None:
    batch = lc.LlamaBatch(4, 2)
    batch.add(11, 0)
    batch.add(12, 1, seq_ids=(0, 1), logits=True)
    batch.add(13, 7, seq_ids=1)
    assert len(batch) == batch.n_tokens == 3
    assert batch.n_outputs == 1
    assert batch.token[:3].tolist() == [11, 12, 13]
    assert batch.pos[:3].tolist() == [0, 1, 7]
    assert batch.output[:3].tolist() == [0, 1, 0]
    assert "3/4" in repr(batch)


def test_add_sequence_positions_and_output_flags() -> None:
    batch = lc.LlamaBatch(8)
    batch.add(5, 0)
    batch.add_sequence([21, 22, 23], pos=10, seq_id=0)
    assert batch.n_tokens == 4
    assert batch.token[:4].tolist() == [5, 21, 22, 23]
    assert batch.pos[:4].tolist() == [0, 10, 11, 12]
    assert batch.output[:4].tolist() == [0, 0, 0, 1]
    batch.add_sequence(np.array([31, 32], dtype=np.int64), pos=13, logits_last=False)
    assert batch.n_tokens == 6
    assert batch.n_outputs == 1
    batch.add_sequence([])
    assert batch.n_tokens == 6


# ---- overflow and sequence ids ------------------------------------------------------------


def test_add_past_capacity_raises_overflow_error() -> None:
    batch = lc.LlamaBatch(2)
    batch.add(1, 0)
    batch.add(2, 1)
    with pytest.raises(OverflowError, match="full"):
        batch.add(3, 2)
    assert batch.n_tokens == 2
    assert batch.token[:2].tolist() == [1, 2]


def test_add_sequence_past_capacity_raises_and_leaves_the_batch_unchanged() -> None:
    batch = lc.LlamaBatch(4)
    batch.add_sequence([1, 2, 3])
    with pytest.raises(OverflowError, match="do not fit"):
        batch.add_sequence([4, 5], pos=3)
    assert batch.n_tokens == 3
    assert batch.token[:3].tolist() == [1, 2, 3]
    with pytest.raises(OverflowError):
        lc.LlamaBatch(2).add_sequence(np.arange(3, dtype=np.int32))


def test_embedding_batch_overflow() -> None:
    batch = lc.LlamaBatch(1, embd=4)
    batch.add_embedding(np.ones(4, dtype=np.float32), 0)
    with pytest.raises(OverflowError):
        batch.add_embedding(np.ones(4, dtype=np.float32), 1)


@pytest.mark.parametrize(
    ("seq_ids", "match"),
    [
        ((0, 1, 2), "at most 2"),
        ((-1,), ">= 0"),
        (-5, ">= 0"),
        ((), "at least one"),
    ],
)
def test_invalid_seq_ids_raise_value_error(seq_ids: tuple[int, ...] | int, match: str) -> None:
    batch = lc.LlamaBatch(2, 2)
    with pytest.raises(ValueError, match=match):
        batch.add(1, 0, seq_ids=seq_ids)
    assert batch.n_tokens == 0


def test_invalid_seq_ids_in_add_sequence_and_set_seq_ids() -> None:
    batch = lc.LlamaBatch(3, 1)
    with pytest.raises(ValueError, match=">= 0"):
        batch.add_sequence([1, 2], 0, -1)
    assert batch.n_tokens == 0
    with pytest.raises(IndexError):
        batch.set_seq_ids(3, (0,))
    with pytest.raises(IndexError):
        batch.set_seq_ids(-1, (0,))
    with pytest.raises(ValueError, match="at most 1"):
        batch.set_seq_ids(0, (0, 1))


def test_set_n_tokens_is_bounded_by_the_capacity() -> None:
    batch = lc.LlamaBatch(3)
    with pytest.raises(ValueError, match="n_tokens"):
        batch.set_n_tokens(4)
    with pytest.raises(ValueError, match="n_tokens"):
        batch.set_n_tokens(-1)
    batch.set_n_tokens(3)
    assert batch.n_tokens == 3


# ---- zero-copy views --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dtype"), [("token", np.int32), ("pos", np.int32), ("output", np.int8)]
)
def test_views_are_writable_and_zero_copy(name: str, dtype: type[np.generic]) -> None:
    batch = lc.LlamaBatch(6)
    first: npt.NDArray[np.generic] = getattr(batch, name)
    second: npt.NDArray[np.generic] = getattr(batch, name)
    assert first.dtype == dtype
    assert first.shape == (6,)
    assert first.flags.writeable
    assert np.shares_memory(first, second)
    assert data_pointer(first) == data_pointer(second)
    first[:] = np.arange(6)
    # A fresh view sees the write: both look at the same C array.
    assert getattr(batch, name).tolist() == list(range(6))


def test_writes_through_views_are_what_add_would_write() -> None:
    tokens = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    by_add = lc.LlamaBatch(5)
    for i, t in enumerate(tokens):
        by_add.add(int(t), i + 2, logits=i % 2 == 0)
    by_view = lc.LlamaBatch(5)
    by_view.token[:] = tokens
    by_view.pos[:] = np.arange(2, 7)
    by_view.output[:] = [1, 0, 1, 0, 1]
    by_view.set_n_tokens(5)
    assert by_view.n_outputs == by_add.n_outputs == 3
    for name in ("token", "pos", "output"):
        assert np.array_equal(getattr(by_view, name), getattr(by_add, name))


def test_views_filled_batch_decodes_like_add(ctx: lc.LlamaContext, tiny: lc.LlamaModel) -> None:
    tokens = tiny.tokenize(PROMPT)
    n = len(tokens)
    added = lc.LlamaBatch(n)
    for i, t in enumerate(tokens):
        added.add(int(t), i, logits=True)
    reference = decode_logits(ctx, added)

    viewed = lc.LlamaBatch(n)
    viewed.token[:] = tokens
    viewed.pos[:] = np.arange(n, dtype=np.int32)
    viewed.output[:] = 1
    viewed.set_n_tokens(n)
    assert viewed.n_outputs == n
    np.testing.assert_array_equal(decode_logits(ctx, viewed), reference)

    # The views are the memory llama_decode reads: changing one token through the view
    # changes the logits of that position and of every later one.
    tok_view = viewed.token
    tok_view[n // 2] = (int(tokens[n // 2]) + 1000) % tiny.n_vocab
    changed = decode_logits(ctx, viewed)
    np.testing.assert_array_equal(changed[: n // 2], reference[: n // 2])
    assert not np.allclose(changed[n // 2], reference[n // 2])


def test_views_on_two_sequences_with_set_seq_ids(tiny: lc.LlamaModel) -> None:
    model_ctx = lc.LlamaContext(tiny, n_ctx=256, n_batch=64, n_seq_max=2, n_threads=1)
    tokens = tiny.tokenize(PROMPT)[:4]
    batch = lc.LlamaBatch(8, 1)
    batch.token[:4] = tokens
    batch.token[4:8] = tokens
    batch.pos[:4] = np.arange(4)
    batch.pos[4:8] = np.arange(4)
    batch.output[:] = 0
    batch.output[3] = batch.output[7] = 1
    for i in range(4, 8):
        batch.set_seq_ids(i, 1)
    batch.set_n_tokens(8)
    model_ctx.decode(batch)
    assert model_ctx.seq_pos_max(0) == model_ctx.seq_pos_max(1) == 3
    rows = model_ctx.all_logits().copy()
    # The same tokens in two independent sequences give the same logits.
    np.testing.assert_allclose(rows[0], rows[1], rtol=1e-5, atol=1e-5)
    model_ctx.close()


def test_close_with_a_live_view_keeps_its_memory() -> None:
    batch = lc.LlamaBatch(16)
    batch.add_sequence(np.arange(100, 116, dtype=np.int32))
    tokens = batch.token
    batch.close()
    assert len(batch) == 0
    assert "closed" in repr(batch)
    with pytest.raises(ClosedError):
        _ = batch.token
    gc.collect()
    # The C arrays are freed only when the last view goes.
    assert tokens.tolist() == list(range(100, 116))
    tokens[:] = 7
    assert tokens.sum() == 7 * 16
    view_slice = tokens[4:8]
    del tokens
    gc.collect()
    assert view_slice.tolist() == [7] * 4
    del view_slice
    gc.collect()


# ---- embedding batches -------------------------------------------------------------------


def test_embedding_batch_add_and_view() -> None:
    batch = lc.LlamaBatch(3, 2, embd=4)
    assert batch.embd == 4
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    batch.add_embedding(rows[0], 0)
    batch.add_embedding(rows[1].tolist(), 1, seq_ids=(0, 1), logits=True)
    view = batch.embeddings
    assert view.shape == (3, 4)
    assert view.dtype == np.float32
    assert view.flags.writeable
    np.testing.assert_array_equal(view[:2], rows[:2])
    assert batch.pos[:2].tolist() == [0, 1]
    assert batch.n_outputs == 1
    # Writable in place, zero-copy.
    view[2] = rows[2]
    batch.set_n_tokens(3)
    np.testing.assert_array_equal(batch.embeddings, rows)
    assert np.shares_memory(view, batch.embeddings)


def test_embedding_batch_refuses_token_operations() -> None:
    batch = lc.LlamaBatch(2, embd=4)
    with pytest.raises(TypeError):
        batch.add(1, 0)
    with pytest.raises(TypeError):
        batch.add_sequence([1, 2])
    with pytest.raises(TypeError):
        _ = batch.token
    with pytest.raises(ValueError, match="expects 4"):
        batch.add_embedding(np.ones(3, dtype=np.float32), 0)
    assert batch.n_tokens == 0
    tokens = lc.LlamaBatch(2)
    with pytest.raises(TypeError):
        tokens.add_embedding(np.ones(4, dtype=np.float32), 0)
    with pytest.raises(TypeError):
        _ = tokens.embeddings


def test_embedding_batch_decodes_like_the_token_ids(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tiny_model_path: Path
) -> None:
    """Feeding the rows of ``token_embd`` gives the logits of feeding the token ids."""
    reader = gguf.GGUFReader(tiny_model_path)
    token_embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    table = np.asarray(token_embd.data, dtype=np.float32)
    assert table.shape == (tiny.n_vocab, tiny.n_embd)
    tokens = tiny.tokenize(PROMPT)
    by_id = lc.LlamaBatch(len(tokens))
    by_id.add_sequence(tokens)
    expected = decode_logits(ctx, by_id)

    by_embd = lc.LlamaBatch(len(tokens), embd=tiny.n_embd)
    for i, t in enumerate(tokens):
        by_embd.add_embedding(table[t], i, logits=i == len(tokens) - 1)
    np.testing.assert_allclose(decode_logits(ctx, by_embd), expected, rtol=1e-5, atol=1e-5)


# ---- closed batches --------------------------------------------------------------------


BATCH_CALLS: dict[str, Callable[[lc.LlamaBatch], object]] = {
    "add": lambda b: b.add(1, 0),
    "add_sequence": lambda b: b.add_sequence([1, 2]),
    "add_embedding": lambda b: b.add_embedding([0.0] * 4, 0),
    "set_n_tokens": lambda b: b.set_n_tokens(1),
    "set_seq_ids": lambda b: b.set_seq_ids(0, 0),
    "clear": lambda b: b.clear(),
    "n_tokens": lambda b: b.n_tokens,
    "n_outputs": lambda b: b.n_outputs,
    "token": lambda b: b.token,
    "pos": lambda b: b.pos,
    "output": lambda b: b.output,
    "embeddings": lambda b: b.embeddings,
    "enter": lambda b: b.__enter__(),
}


@pytest.mark.parametrize("call", BATCH_CALLS.values(), ids=BATCH_CALLS.keys())
@pytest.mark.parametrize("embd", [0, 4])
def test_use_after_close_raises_closed_error(
    call: Callable[[lc.LlamaBatch], object], embd: int
) -> None:
    batch = lc.LlamaBatch(4, embd=embd)
    batch.close()
    batch.close()  # idempotent
    with pytest.raises(ClosedError):
        call(batch)
    assert len(batch) == 0


def test_context_manager_closes(ctx: lc.LlamaContext) -> None:
    with lc.LlamaBatch(2) as batch:
        batch.add(1, 0, logits=True)
        ctx.decode(batch)
    with pytest.raises(ClosedError):
        batch.add(2, 1)
    # A context refuses a closed batch rather than reading freed arrays.
    with pytest.raises(ClosedError):
        ctx.decode(batch)
