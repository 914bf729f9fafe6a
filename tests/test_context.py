"""LlamaContext: decode errors, the zero-copy output views and their lifetime, memory
(KV cache) operations, state save/restore, settings, performance counters, abort and
Ctrl-C, threads, and use after close."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from child import run_python
from offload import LOGITS_TOL, cpu_only

import llama_cy as lc
from llama_cy.errors import (
    AbortedError,
    ClosedError,
    DecodeError,
    InvalidBatchError,
    KVCacheFullError,
    LlamaError,
    StateError,
)

PROMPT = "The quick brown fox jumps over the lazy dog"
Tokens = npt.NDArray[np.int32] | Sequence[int]

#: why the abort tests are about the CPU
ABORT_ON_CPU = (
    "llama.cpp's abort callback is polled by the CPU backend between graph nodes; "
    "a GPU graph runs to its end"
)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> Iterator[lc.LlamaModel]:
    model = lc.LlamaModel.load(gemma_path)
    yield model
    model.close()


def new_ctx(model: lc.LlamaModel, **kwargs: Any) -> lc.LlamaContext:
    # One thread: the tiny model decodes in well under a millisecond, where a thread
    # pool only adds synchronisation cost on a small, busy machine.
    params: dict[str, Any] = {"n_ctx": 256, "n_batch": 64, "n_threads": 1}
    params.update(kwargs)
    return lc.LlamaContext(model, **params)


@pytest.fixture
def ctx(tiny: lc.LlamaModel) -> Iterator[lc.LlamaContext]:
    context = new_ctx(tiny)
    yield context
    context.close()


@pytest.fixture
def ctx2(tiny: lc.LlamaModel) -> Iterator[lc.LlamaContext]:
    """A context with two sequences."""
    context = new_ctx(tiny, n_seq_max=2)
    yield context
    context.close()


@pytest.fixture(scope="module")
def tokens(tiny: lc.LlamaModel) -> npt.NDArray[np.int32]:
    return tiny.tokenize(PROMPT)


def batch_of(
    tokens: Tokens, pos: int = 0, seq_id: int = 0, *, all_outputs: bool = False
) -> lc.LlamaBatch:
    batch = lc.LlamaBatch(len(tokens))
    if all_outputs:
        for i, t in enumerate(tokens):
            batch.add(int(t), pos + i, (seq_id,), True)
    else:
        batch.add_sequence(tokens, pos, seq_id)
    return batch


def decode(
    ctx: lc.LlamaContext, tokens: Tokens, pos: int = 0, seq_id: int = 0
) -> npt.NDArray[np.float32]:
    """Decode ``tokens`` at ``pos...`` of ``seq_id``; a copy of the last token's logits."""
    ctx.decode(batch_of(tokens, pos, seq_id))
    return ctx.logits(-1).copy()


def fresh_logits(model: lc.LlamaModel, tokens: Tokens) -> npt.NDArray[np.float32]:
    with new_ctx(model) as ctx:
        return decode(ctx, tokens)


def data_pointer(arr: npt.NDArray[Any]) -> int:
    pointer: int = arr.__array_interface__["data"][0]
    return pointer


# ---- construction -----------------------------------------------------------------------


def test_construction_and_properties(tiny: lc.LlamaModel) -> None:
    with new_ctx(tiny, n_seq_max=3, n_batch=32, n_ubatch=16) as ctx:
        assert ctx.model is tiny
        assert ctx.n_ctx >= 256
        assert ctx.n_batch == 32
        assert ctx.n_ubatch == 16
        assert ctx.n_seq_max == 3
        assert ctx.n_vocab == tiny.n_vocab
        assert ctx.n_embd == tiny.n_embd
        assert ctx.n_threads == ctx.n_threads_batch == 1
        assert ctx.n_outputs == 0
        assert ctx.causal_attn
        assert not ctx.closed
        assert "n_seq_max=3" in repr(ctx)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_seq_max": 0},
        {"n_seq_max": 100000},
        {"pooling_type": "median"},
        {"rope_scaling_type": "spiral"},
        {"attention_type": "sideways"},
        {"type_k": "f99"},
    ],
)
def test_invalid_parameters_raise_value_error(tiny: lc.LlamaModel, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"n_seq_max|unknown"):
        lc.LlamaContext(tiny, n_ctx=64, **kwargs)


# ---- decode errors -----------------------------------------------------------------------


def test_empty_batch_raises_value_error(ctx: lc.LlamaContext) -> None:
    with pytest.raises(ValueError, match="empty"):
        ctx.decode(lc.LlamaBatch(4))
    with pytest.raises(ValueError, match="empty"):
        ctx.encode(lc.LlamaBatch(4))


@pytest.mark.parametrize("case", ["token-n_vocab", "token-negative", "seq_id", "position-gap"])
def test_invalid_batch_raises_invalid_batch_error(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32], case: str
) -> None:
    decode(ctx, tokens[:3])
    batch = lc.LlamaBatch(1)
    if case == "token-n_vocab":
        batch.add(tiny.n_vocab, 3, logits=True)
    elif case == "token-negative":
        batch.add(-1, 3, logits=True)
    elif case == "seq_id":
        batch.add(int(tokens[3]), 3, seq_ids=(ctx.n_seq_max,), logits=True)
    else:
        batch.add(int(tokens[3]), 3 + 10, logits=True)
    with pytest.raises(InvalidBatchError) as info:
        ctx.decode(batch)
    assert info.value.code == -1
    assert isinstance(info.value, DecodeError)
    assert isinstance(info.value, ValueError)
    # A failed decode leaves no stale outputs to read...
    assert ctx.n_outputs == 0
    with pytest.raises(IndexError):
        ctx.logits()
    # ...and the cache as it was: the next valid token continues the sequence.
    assert ctx.seq_pos_max(0) == 2
    np.testing.assert_allclose(
        decode(ctx, tokens[3:4], 3),
        fresh_logits(tiny, tokens[:4]),
        rtol=LOGITS_TOL,
        atol=LOGITS_TOL,
    )


def test_full_context_raises_kv_cache_full_error(ctx: lc.LlamaContext, tiny: lc.LlamaModel) -> None:
    chunk = 32
    filler = np.full(chunk, int(tiny.tokenize("fox", add_special=False)[0]), dtype=np.int32)
    fits = ctx.n_ctx // chunk
    for i in range(fits):
        ctx.decode(batch_of(filler, i * chunk))
    assert ctx.seq_pos_max(0) == fits * chunk - 1
    with pytest.raises(KVCacheFullError) as info:
        ctx.decode(batch_of(filler, fits * chunk))
    assert info.value.code == 1
    assert isinstance(info.value, DecodeError)
    # Freeing space makes the context usable again.
    ctx.clear()
    assert ctx.seq_pos_max(0) == -1
    probe = tiny.tokenize(PROMPT)
    np.testing.assert_allclose(
        decode(ctx, probe), fresh_logits(tiny, probe), rtol=LOGITS_TOL, atol=LOGITS_TOL
    )


def test_encode_on_a_decoder_only_model_raises(tiny_model_path: Path) -> None:
    # In a subprocess: llama_encode on a model with a KV cache and no encoder crashes
    # inside llama.cpp unless the wrapper refuses it.
    result = run_python(
        """
        import sys
        import llama_cy as lc
        model = lc.LlamaModel.load(sys.argv[1])
        ctx = lc.LlamaContext(model, n_ctx=64, n_threads=1)
        batch = lc.LlamaBatch(4)
        batch.add_sequence(model.tokenize("Hello there"))
        try:
            ctx.encode(batch)
        except lc.LlamaError as exc:
            print("refused:", type(exc).__name__)
        else:
            print("encoded")
        """,
        str(tiny_model_path),
    )
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stderr[-2000:]}"
    assert "refused:" in result.stdout


# ---- zero-copy logits views --------------------------------------------------------------


def test_logits_before_any_decode_raise_index_error(ctx: lc.LlamaContext) -> None:
    with pytest.raises(IndexError):
        ctx.logits()
    with pytest.raises(IndexError):
        ctx.all_logits()
    with pytest.raises(IndexError):
        ctx.embeddings()


def test_logits_are_a_read_only_zero_copy_view(
    ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]
) -> None:
    decode(ctx, tokens)
    first = ctx.logits()
    second = ctx.logits(-1)
    assert first.shape == (ctx.n_vocab,)
    assert first.dtype == np.float32
    assert np.shares_memory(first, second)
    assert data_pointer(first) == data_pointer(second)
    assert not first.flags.writeable
    assert not first.flags.owndata
    assert first.base is not None
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1.0
    with pytest.raises(ValueError, match="WRITEABLE"):
        first.setflags(write=True)
    assert np.isfinite(first).all()


def test_view_keeps_the_context_alive(tiny_model_path: Path, tokens: npt.NDArray[np.int32]) -> None:
    model = lc.LlamaModel.load(tiny_model_path)
    ctx = new_ctx(model)
    decode(ctx, tokens)
    view = ctx.logits()
    expected = view.copy()
    del ctx, model
    gc.collect()
    # The view's base chain owns the context, and the context its model.
    np.testing.assert_array_equal(view, expected)
    part = view[10:20]
    del view
    gc.collect()
    np.testing.assert_array_equal(part, expected[10:20])
    del part
    gc.collect()


def test_close_with_a_live_view_frees_once_the_view_goes(
    tiny_model_path: Path, tmp_path: Path, tokens: npt.NDArray[np.int32]
) -> None:
    path = tmp_path / "own-copy.gguf"
    path.write_bytes(tiny_model_path.read_bytes())
    model = lc.LlamaModel.load(path, use_mmap=True)
    ctx = new_ctx(model)
    decode(ctx, tokens)
    view = ctx.logits()
    expected = view.copy()
    model.close()
    ctx.close()
    assert ctx.closed
    with pytest.raises(ClosedError):
        ctx.logits()
    gc.collect()
    np.testing.assert_array_equal(view, expected)
    assert str(path) in Path("/proc/self/maps").read_text()
    del view
    gc.collect()
    # Last view gone: the context was freed, then the (closed) model it held.
    assert str(path) not in Path("/proc/self/maps").read_text()


def test_views_are_overwritten_by_the_next_decode(
    ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]
) -> None:
    decode(ctx, tokens[:-1])
    view = ctx.logits()
    before = view.copy()
    decode(ctx, tokens[-1:], len(tokens) - 1)
    # Documented contract: a view shows the latest decode's outputs, not a snapshot.
    np.testing.assert_array_equal(view, ctx.logits())
    assert not np.allclose(view, before)


def test_decode_needing_more_output_rows_is_refused_while_a_view_lives(
    ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]
) -> None:
    decode(ctx, tokens[:2])
    view = ctx.logits()
    before = view.copy()
    wide = batch_of(tokens[2:6], 2, all_outputs=True)
    with pytest.raises(LlamaError, match="output rows"):
        ctx.decode(wide)
    np.testing.assert_array_equal(view, before)
    assert ctx.seq_pos_max(0) == 1
    del view
    gc.collect()
    ctx.decode(wide)
    assert ctx.n_outputs == 4
    assert ctx.all_logits().shape == (4, ctx.n_vocab)
    # The buffer now holds 4 rows: a smaller decode with a live view is fine.
    view = ctx.logits(0)
    ctx.decode(batch_of(tokens[6:8], 6, all_outputs=True))
    np.testing.assert_array_equal(view, ctx.logits(0))


def test_switching_on_embeddings_does_not_move_the_buffer_under_a_view(
    tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    """Enabling embeddings grows llama.cpp's output buffer: with a live view, either
    the decode is refused or the view still points into the live buffer."""
    # Several contexts kept alive at once: the allocator may hand a grown buffer the
    # address of the one it replaces, so one trial alone could hide the move.
    contexts, views, moved = [], [], []
    for _ in range(4):
        ctx = new_ctx(tiny)
        contexts.append(ctx)
        decode(ctx, tokens[:1])
        view = ctx.logits()
        views.append(view)
        ctx.set_embeddings(True)
        try:
            ctx.decode(batch_of(tokens[1:2], 1))
        except LlamaError:
            continue
        # Compare addresses only: reading a view over freed memory could crash the run.
        moved.append(data_pointer(view) != data_pointer(ctx.logits()))
    assert not any(moved), "the output buffer moved: live views point to freed memory"


def test_all_logits_rows_equal_per_row_logits(
    ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]
) -> None:
    batch = lc.LlamaBatch(len(tokens))
    flagged = [1, 4, len(tokens) - 1]
    for i, t in enumerate(tokens):
        batch.add(int(t), i, logits=i in flagged)
    ctx.decode(batch)
    assert ctx.n_outputs == len(flagged)
    rows = ctx.all_logits()
    assert rows.shape == (len(flagged), ctx.n_vocab)
    assert not rows.flags.writeable
    for k, i in enumerate(flagged):
        np.testing.assert_array_equal(rows[k], ctx.logits(i))
    np.testing.assert_array_equal(ctx.logits(-1), rows[-1])
    assert not np.allclose(rows[0], rows[1])
    with pytest.raises(IndexError):
        ctx.logits(0)  # no output flag


# ---- embeddings -------------------------------------------------------------------------


def test_token_and_mean_pooled_embeddings(
    tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    n = len(tokens)
    with new_ctx(tiny, embeddings=True, pooling_type="none") as per_token:
        assert per_token.pooling_type == "none"
        per_token.decode(batch_of(tokens))
        # Embeddings need every token: llama.cpp outputs all of them.
        assert per_token.n_outputs == n
        rows = np.stack([per_token.embeddings(i) for i in range(n)])
        assert rows.shape == (n, tiny.n_embd)
        view = per_token.embeddings(-1)
        assert not view.flags.writeable
        np.testing.assert_array_equal(view, rows[-1])
        assert not np.allclose(rows[0], rows[-1])
    with new_ctx(tiny, embeddings=True, pooling_type="mean") as mean:
        assert mean.pooling_type == "mean"
        mean.decode(batch_of(tokens))
        pooled = mean.sequence_embeddings(0)
        assert pooled.shape == (tiny.n_embd,)
        assert not pooled.flags.writeable
        np.testing.assert_allclose(pooled, rows.mean(axis=0), rtol=LOGITS_TOL, atol=LOGITS_TOL)
        with pytest.raises(ValueError, match="out of range"):
            mean.sequence_embeddings(1)


def test_embeddings_of_a_logits_context_raise_index_error(
    ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]
) -> None:
    decode(ctx, tokens)
    with pytest.raises(IndexError):
        ctx.embeddings(-1)
    with pytest.raises(IndexError):
        ctx.sequence_embeddings(0)


def test_set_embeddings_switches_outputs(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    ctx.set_embeddings(True)
    ctx.decode(batch_of(tokens))
    got = np.stack([ctx.embeddings(i).copy() for i in range(len(tokens))])
    with new_ctx(tiny, embeddings=True, pooling_type="none") as reference:
        reference.decode(batch_of(tokens))
        expected = np.stack([reference.embeddings(i) for i in range(len(tokens))])
    np.testing.assert_allclose(got, expected, rtol=LOGITS_TOL, atol=LOGITS_TOL)
    ctx.set_embeddings(False)
    ctx.clear()
    ctx.decode(batch_of(tokens))
    assert ctx.n_outputs == 1
    with pytest.raises(IndexError):
        ctx.embeddings(0)


# ---- memory (KV cache) --------------------------------------------------------------------


def test_clear(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> None:
    first = decode(ctx, tokens)
    assert (ctx.seq_pos_min(0), ctx.seq_pos_max(0)) == (0, len(tokens) - 1)
    ctx.clear()
    assert (ctx.seq_pos_min(0), ctx.seq_pos_max(0)) == (-1, -1)
    np.testing.assert_array_equal(decode(ctx, tokens), first)
    # data=False forgets the cells without zeroing them: the cache is empty all the same.
    ctx.clear(data=False)
    assert ctx.seq_pos_max(0) == -1
    np.testing.assert_array_equal(decode(ctx, tokens), first)


def test_seq_rm(ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]) -> None:
    decode(ctx, tokens)
    assert ctx.seq_rm(0, 5, -1)
    assert (ctx.seq_pos_min(0), ctx.seq_pos_max(0)) == (0, 4)
    # What is left is exactly the first 5 tokens: continuing at 5 equals a fresh decode.
    np.testing.assert_allclose(
        decode(ctx, tokens[5:6], 5),
        fresh_logits(tiny, tokens[:6]),
        rtol=LOGITS_TOL,
        atol=LOGITS_TOL,
    )
    assert ctx.seq_rm(0, 0, 2)
    assert ctx.seq_pos_min(0) == 2
    assert ctx.seq_rm(-1)
    assert ctx.seq_pos_max(0) == -1


def test_seq_cp_then_decoding_on_the_copy_equals_the_original(
    ctx2: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    n = len(tokens)
    decode(ctx2, tokens[:-1], 0, 0)
    assert ctx2.seq_pos_max(1) == -1
    ctx2.seq_cp(0, 1)
    assert (ctx2.seq_pos_min(1), ctx2.seq_pos_max(1)) == (0, n - 2)
    on_copy = decode(ctx2, tokens[-1:], n - 1, 1)
    on_original = decode(ctx2, tokens[-1:], n - 1, 0)
    np.testing.assert_allclose(on_copy, on_original, rtol=LOGITS_TOL, atol=LOGITS_TOL)
    np.testing.assert_allclose(
        on_copy, fresh_logits(tiny, tokens), rtol=LOGITS_TOL, atol=LOGITS_TOL
    )


@pytest.mark.parametrize("kv_unified", [False, True])
def test_seq_keep(tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32], kv_unified: bool) -> None:
    with new_ctx(tiny, n_seq_max=3, kv_unified=kv_unified) as ctx:
        decode(ctx, tokens[:4], 0, 0)
        decode(ctx, tokens[:6], 0, 1)
        decode(ctx, tokens[:5], 0, 2)
        ctx.seq_keep(1)
        assert ctx.seq_pos_max(0) == -1
        assert ctx.seq_pos_max(2) == -1
        assert (ctx.seq_pos_min(1), ctx.seq_pos_max(1)) == (0, 5)


def test_seq_add_shifts_positions(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    n, shift = len(tokens), 20
    assert ctx.can_shift
    decode(ctx, tokens[:-1])
    # Without a shift, position n-1+shift leaves a gap: llama.cpp refuses it.
    with pytest.raises(InvalidBatchError):
        ctx.decode(batch_of(tokens[-1:], n - 1 + shift))
    ctx.seq_add(0, 0, -1, shift)
    assert (ctx.seq_pos_min(0), ctx.seq_pos_max(0)) == (shift, n - 2 + shift)
    shifted = decode(ctx, tokens[-1:], n - 1 + shift)
    # RoPE is relative: the same text shifted as a whole predicts the same next token
    # (up to the rounding of re-rotating the cached keys).
    reference = fresh_logits(tiny, tokens)
    np.testing.assert_allclose(shifted, reference, atol=0.05)
    assert int(np.argmax(shifted)) == int(np.argmax(reference))


def test_seq_div_divides_positions(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> None:
    decode(ctx, tokens)
    last = len(tokens) - 1
    ctx.seq_div(0, 0, -1, 2)
    assert ctx.seq_pos_max(0) == last // 2
    ctx.seq_div(0, 0, -1, 1)
    assert ctx.seq_pos_max(0) == last // 2
    with pytest.raises(ValueError, match="d must be"):
        ctx.seq_div(0, 0, -1, 0)


SEQ_OPS: dict[str, Callable[[lc.LlamaContext, int], object]] = {
    "seq_rm": lambda c, s: c.seq_rm(s),
    "seq_cp-src": lambda c, s: c.seq_cp(s, 0),
    "seq_cp-dst": lambda c, s: c.seq_cp(0, s),
    "seq_keep": lambda c, s: c.seq_keep(s),
    "seq_add": lambda c, s: c.seq_add(s, 0, -1, 1),
    "seq_div": lambda c, s: c.seq_div(s, 0, -1, 2),
    "seq_pos_min": lambda c, s: c.seq_pos_min(s),
    "seq_pos_max": lambda c, s: c.seq_pos_max(s),
    "sequence_embeddings": lambda c, s: c.sequence_embeddings(s),
    "state_seq_get_data": lambda c, s: c.state_seq_get_data(s),
    "state_seq_set_data": lambda c, s: c.state_seq_set_data(b"x", s),
}


@pytest.mark.parametrize("op", SEQ_OPS.values(), ids=SEQ_OPS.keys())
@pytest.mark.parametrize("seq_id", [2, -2, 1000])
def test_seq_id_out_of_range_raises_value_error(
    ctx2: lc.LlamaContext, op: Callable[[lc.LlamaContext, int], object], seq_id: int
) -> None:
    with pytest.raises(ValueError, match="out of range"):
        op(ctx2, seq_id)


def test_minus_one_means_all_only_where_documented(ctx2: lc.LlamaContext) -> None:
    for op in (SEQ_OPS["seq_keep"], SEQ_OPS["seq_pos_max"], SEQ_OPS["seq_cp-dst"]):
        with pytest.raises(ValueError, match="out of range"):
            op(ctx2, -1)


# ---- state ---------------------------------------------------------------------------------


def test_state_bytes_round_trip(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    n = len(tokens)
    decode(ctx, tokens[:-1])
    state = ctx.state_get_data()
    assert isinstance(state, bytes)
    assert len(state) > 0
    expected = decode(ctx, tokens[-1:], n - 1)
    # Diverge, then restore.
    decode(ctx, tokens[:3], n)
    assert ctx.state_set_data(state) == len(state)
    assert ctx.seq_pos_max(0) == n - 2
    np.testing.assert_array_equal(decode(ctx, tokens[-1:], n - 1), expected)
    # Into another context of the same model.
    with new_ctx(tiny) as other:
        other.state_set_data(bytearray(state))
        np.testing.assert_array_equal(decode(other, tokens[-1:], n - 1), expected)


def test_state_file_round_trip(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32], tmp_path: Path
) -> None:
    n = len(tokens)
    decode(ctx, tokens[:-1])
    path = tmp_path / "session.bin"
    ctx.state_save_file(path, tokens[:-1])
    expected = decode(ctx, tokens[-1:], n - 1)
    with new_ctx(tiny) as other:
        saved = other.state_load_file(path)
        np.testing.assert_array_equal(saved, tokens[:-1])
        np.testing.assert_array_equal(decode(other, tokens[-1:], n - 1), expected)


def test_sequence_state_round_trip(
    ctx2: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32], tmp_path: Path
) -> None:
    n = len(tokens)
    decode(ctx2, tokens[:-1], 0, 0)
    data = ctx2.state_seq_get_data(0)
    assert len(data) > 0
    expected = decode(ctx2, tokens[-1:], n - 1, 0)
    # Restore sequence 0's state as sequence 1 of the same context.
    assert ctx2.state_seq_set_data(data, 1) > 0
    assert (ctx2.seq_pos_min(1), ctx2.seq_pos_max(1)) == (0, n - 2)
    np.testing.assert_array_equal(decode(ctx2, tokens[-1:], n - 1, 1), expected)
    # Through a file, into another context.
    path = tmp_path / "seq.bin"
    ctx2.seq_rm(0, n - 1, -1)
    assert ctx2.state_seq_save_file(path, 0, tokens[:-1]) > 0
    with new_ctx(tiny, n_seq_max=2) as other:
        saved = other.state_seq_load_file(path, 1)
        np.testing.assert_array_equal(saved, tokens[:-1])
        assert other.seq_pos_max(0) == -1
        np.testing.assert_array_equal(decode(other, tokens[-1:], n - 1, 1), expected)


@pytest.mark.parametrize(
    "kind", ["random-body", "random-tail", "truncated", "zeros", "tiny", "empty"]
)
def test_corrupt_state_bytes_raise_state_error(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32], kind: str
) -> None:
    decode(ctx, tokens)
    good = ctx.state_get_data()
    noise = np.random.default_rng(3).integers(0, 256, len(good), dtype=np.uint8).tobytes()
    # (Entirely random bytes work too, but llama.cpp first allocates whatever string
    # length the first 4 random bytes say: seconds per test. "random-body" keeps the
    # valid architecture name and randomises everything after it.)
    bad = {
        "random-body": good[:9] + noise[9:],
        "random-tail": good[: len(good) // 2] + noise[len(good) // 2 :],
        "truncated": good[: len(good) // 2],
        "zeros": bytes(len(good)),
        "tiny": b"\x01\x02\x03",
        "empty": b"",
    }[kind]
    with pytest.raises(StateError):
        ctx.state_set_data(bad)
    # The context recovers: clear and decode as new.
    ctx.clear()
    np.testing.assert_allclose(
        decode(ctx, tokens), fresh_logits(tiny, tokens), rtol=LOGITS_TOL, atol=LOGITS_TOL
    )


@pytest.mark.parametrize("kind", ["random", "truncated", "empty"])
def test_corrupt_sequence_state_raises_state_error(
    ctx2: lc.LlamaContext, tokens: npt.NDArray[np.int32], kind: str
) -> None:
    decode(ctx2, tokens)
    good = ctx2.state_seq_get_data(0)
    bad = {
        "random": np.random.default_rng(4).integers(0, 256, len(good), dtype=np.uint8).tobytes(),
        "truncated": good[: len(good) // 2],
        "empty": b"",
    }[kind]
    with pytest.raises(StateError):
        ctx2.state_seq_set_data(bad, 1)


def test_missing_or_corrupt_state_files_raise_state_error(
    ctx: lc.LlamaContext, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.bin"
    with pytest.raises(StateError, match="not found"):
        ctx.state_load_file(missing)
    with pytest.raises(StateError, match="not found"):
        ctx.state_seq_load_file(missing, 0)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(np.random.default_rng(5).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(StateError):
        ctx.state_load_file(garbage)
    with pytest.raises(StateError):
        ctx.state_seq_load_file(garbage, 0)
    with pytest.raises(StateError):
        ctx.state_save_file(tmp_path / "no" / "such" / "dir.bin")
    with pytest.raises(OSError, match=r"dir\.bin"):  # callers that catch OSError catch it
        ctx.state_save_file(tmp_path / "no" / "such" / "dir.bin")


#: A child's start for the state-file tests: the tiny model (argv[1]), a context that
#: has decoded ``tokens`` in sequence 0, and the two file names in folder argv[2].
_STATE_FILE_CHILD = """
import os, resource, sys
import numpy as np
import llama_cy as lc
from llama_cy.errors import StateError

model = lc.LlamaModel.load(sys.argv[1])
folder = sys.argv[2]
ctx = lc.LlamaContext(model, n_ctx=512, n_seq_max=2)
tokens = model.tokenize("Once upon a time there was a fox who lived in a wood " * 3)
batch = lc.LlamaBatch(len(tokens))
batch.add_sequence(tokens, 0, 0, logits_last=True)
ctx.decode(batch)
seq, whole = os.path.join(folder, "seq.bin"), os.path.join(folder, "whole.bin")
"""

_DAMAGED_STATE_FILES = (
    _STATE_FILE_CHILD
    + """
ctx.state_seq_save_file(seq, 0, tokens)
ctx.state_save_file(whole, tokens)
for path, load in ((seq, lambda p: ctx.state_seq_load_file(p, 1)), (whole, ctx.state_load_file)):
    data = open(path, "rb").read()
    n_head = 12 + 4 * len(tokens)
    for cut in (0, 7, 12, n_head - 2, n_head, n_head + 3, len(data) // 2, len(data) - 1):
        bad = os.path.join(folder, "bad.bin")
        open(bad, "wb").write(data[:cut])
        try:
            load(bad)
        except StateError as exc:
            assert folder not in str(exc), exc  # the message names no path
        else:
            raise AssertionError(f"{os.path.basename(path)} cut at {cut} was loaded")
        assert ctx.seq_pos_max(1) == -1, cut  # nothing half-restored
    open(bad, "wb").write(data + b"0" * 8)
    try:
        load(bad)
    except StateError:
        pass
    else:
        raise AssertionError("trailing bytes were taken")
    ctx.clear()
    np.testing.assert_array_equal(load(path), tokens)  # the whole file still loads
    ctx.clear()
    print("ok", os.path.basename(path))
"""
)


def test_damaged_state_files_raise_state_error(tiny_model_path: Path, tmp_path: Path) -> None:
    # llama.cpp's file loaders read past a short file's end and then abort
    # (GGML_ASSERT(nread <= state_size)): in a child, so an abort fails one test.
    out = run_python(_DAMAGED_STATE_FILES, str(tiny_model_path), str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok", "seq.bin", "ok", "whole.bin"]


_SAVE_ON_FULL_DISK = (
    _STATE_FILE_CHILD
    + """
ctx.state_seq_save_file(seq, 0, tokens[:4])
ctx.state_save_file(whole, tokens[:4])
before = {p: open(p, "rb").read() for p in (seq, whole)}
# a disk that fills up: writes past 4 KiB fail (EFBIG; Python ignores SIGXFSZ)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
saves = (lambda: ctx.state_seq_save_file(seq, 0, tokens),
         lambda: ctx.state_save_file(whole, tokens))
for save in saves:
    try:
        save()
    except StateError:
        pass
    else:
        raise AssertionError("a save past the file size limit succeeded")
for p, data in before.items():
    assert open(p, "rb").read() == data, p  # the file before the failed save, whole
assert sorted(os.listdir(folder)) == ["seq.bin", "whole.bin"], os.listdir(folder)
print("ok")
"""
)


def test_a_failed_save_leaves_the_file_before_it(tiny_model_path: Path, tmp_path: Path) -> None:
    out = run_python(_SAVE_ON_FULL_DISK, str(tiny_model_path), str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok"]


def test_state_save_file_checks_its_tokens(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tmp_path: Path
) -> None:
    from llama_cy.errors import InvalidTokenError

    with pytest.raises(InvalidTokenError):
        ctx.state_save_file(tmp_path / "s.bin", [1, tiny.n_vocab])


# ---- settings -------------------------------------------------------------------------------


def test_set_n_threads(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> None:
    one = decode(ctx, tokens)
    ctx.set_n_threads(2, 1)
    assert (ctx.n_threads, ctx.n_threads_batch) == (2, 1)
    ctx.set_n_threads(2)
    assert (ctx.n_threads, ctx.n_threads_batch) == (2, 2)
    ctx.clear()
    np.testing.assert_allclose(decode(ctx, tokens), one, rtol=LOGITS_TOL, atol=LOGITS_TOL)
    ctx.set_n_threads(1)
    assert (ctx.n_threads, ctx.n_threads_batch) == (1, 1)
    with pytest.raises(ValueError, match="n_threads"):
        ctx.set_n_threads(0)


def _cpu_s(tids: set[str]) -> float:
    """The CPU time (user and system, s) of this process's threads ``tids`` (Linux)."""
    ticks = 0
    for tid in tids:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_pause_threadpools_lets_the_workers_sleep_until_the_next_decode(
    tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    """After a decode a pool's worker polls for the next graph (here for longer than the
    test waits: poll 1000), holding a CPU; paused, it sleeps; the next decode wakes it
    and gives the logits of a decode without a pause. A pause before any decode, or a
    second one, is harmless."""
    before = set(os.listdir("/proc/self/task"))
    ctx = new_ctx(tiny, n_threads=2, cpu_params=lc.CpuParams(poll=1000))
    try:
        workers = set(os.listdir("/proc/self/task")) - before
        assert workers  # the pool's second thread

        def cpu_while_idle() -> float:
            t = _cpu_s(workers)
            time.sleep(0.2)
            return _cpu_s(workers) - t

        ctx.pause_threadpools()
        one = decode(ctx, tokens)
        polled = cpu_while_idle()
        ctx.pause_threadpools()
        ctx.pause_threadpools()
        slept = cpu_while_idle()
        assert polled >= 0.05, polled
        assert slept <= 0.02, slept
        ctx.clear()
        np.testing.assert_allclose(decode(ctx, tokens), one, rtol=LOGITS_TOL, atol=LOGITS_TOL)
    finally:
        ctx.close()


def test_set_causal_attn(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> None:
    ctx.decode(batch_of(tokens, all_outputs=True))
    causal = ctx.all_logits().copy()
    ctx.set_causal_attn(False)
    assert not ctx.causal_attn
    ctx.clear()
    ctx.decode(batch_of(tokens, all_outputs=True))
    # Without the causal mask the first token attends to the whole text.
    assert not np.allclose(ctx.all_logits()[0], causal[0])
    ctx.set_causal_attn(True)
    assert ctx.causal_attn
    ctx.clear()
    ctx.decode(batch_of(tokens, all_outputs=True))
    np.testing.assert_array_equal(ctx.all_logits(), causal)


def test_warmup_resets_the_counters(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    ctx.warmup()
    assert ctx.seq_pos_max(0) == -1
    decode(ctx, tokens[:4])
    ctx.synchronize()
    # The warmup token is not counted.
    assert ctx.perf().n_p_eval == 4
    np.testing.assert_allclose(
        decode(ctx, tokens[4:], 4), fresh_logits(tiny, tokens), rtol=LOGITS_TOL, atol=LOGITS_TOL
    )


def test_warmup_on_a_used_context(
    ctx: lc.LlamaContext, tiny: lc.LlamaModel, tokens: npt.NDArray[np.int32]
) -> None:
    decode(ctx, tokens)
    ctx.warmup()
    assert ctx.seq_pos_max(0) == -1
    decode(ctx, tokens[:4])
    ctx.synchronize()
    # Neither the earlier prompt nor the warmup token is counted.
    assert ctx.perf().n_p_eval == 4


def test_perf_counts_what_was_decoded(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> None:
    ctx.perf_reset()
    n = len(tokens) - 3
    decode(ctx, tokens[:n])
    for i in range(n, len(tokens)):
        decode(ctx, tokens[i : i + 1], i)  # reading the logits synchronises
    ctx.synchronize()
    perf = ctx.perf()
    assert isinstance(perf, lc.ContextPerf)
    assert perf.n_p_eval == n
    assert perf.n_eval == 3
    assert perf.t_p_eval_ms > 0
    assert perf.t_eval_ms > 0
    assert isinstance(perf.n_reused, int)
    assert isinstance(perf.t_start_ms, float)
    ctx.perf_reset()
    ctx.clear()
    decode(ctx, tokens[:5])
    ctx.synchronize()
    after = ctx.perf()
    assert after.n_p_eval == 5


# ---- abort and Ctrl-C --------------------------------------------------------------------


def long_prompt(model: lc.LlamaModel, n: int = 512) -> npt.NDArray[np.int32]:
    text = " ".join(f"{PROMPT} number {i}." for i in range(200))
    tokens = model.tokenize(text)[:n]
    assert len(tokens) == n
    return tokens


@cpu_only(ABORT_ON_CPU)
def test_abort_from_another_thread(gemma: lc.LlamaModel) -> None:
    tokens = long_prompt(gemma)
    ctx = lc.LlamaContext(gemma, n_ctx=1024, n_batch=512, n_threads=1)
    batch = batch_of(tokens)
    started = threading.Event()
    outcome: dict[str, Any] = {}

    def work() -> None:
        started.set()
        try:
            ctx.decode(batch)
        except BaseException as exc:
            outcome["error"] = exc
        outcome["end"] = time.monotonic()

    worker = threading.Thread(target=work)
    worker.start()
    started.wait()
    time.sleep(0.1)  # well inside the decode, which takes seconds
    aborted_at = time.monotonic()
    ctx.abort()
    # decode() clears the flag when it starts: on a very busy machine the first call
    # could come before that, so repeat it until the worker is done.
    while worker.is_alive() and time.monotonic() - aborted_at < 30:
        worker.join(timeout=0.02)
        ctx.abort()
    assert not worker.is_alive()
    latency = outcome["end"] - aborted_at
    print(f"abort latency: {latency * 1000:.1f} ms")
    assert isinstance(outcome.get("error"), AbortedError), outcome
    assert outcome["error"].code == 2
    assert latency < 1.0
    # The context works afterwards, and an abort() with no decode running is forgotten.
    ctx.clear()
    ctx.abort()
    short = tokens[:8]
    got = decode(ctx, short)
    with lc.LlamaContext(gemma, n_ctx=64, n_batch=64, n_threads=1) as fresh:
        np.testing.assert_allclose(got, decode(fresh, short), rtol=1e-4, atol=1e-4)
    ctx.close()


CTRL_C_CHILD = """
import signal
import sys
import time

import llama_cy as lc

model = lc.LlamaModel.load(sys.argv[1])
ctx = lc.LlamaContext(model, n_ctx=1024, n_batch=512, n_threads=1)
text = " ".join(f"The quick brown fox jumps over the lazy dog number {i}." for i in range(200))
tokens = model.tokenize(text)[:512]
batch = lc.LlamaBatch(512)
batch.add_sequence(tokens)
print("ready", flush=True)
decodes = 0
try:
    while True:
        ctx.clear()
        ctx.decode(batch)
        decodes += 1
except KeyboardInterrupt:
    print("interrupted", time.monotonic(), decodes, flush=True)
print("handler restored", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
ctx.clear()
small = lc.LlamaBatch(4)
small.add_sequence(tokens[:4])
ctx.decode(small)
print("works", bool(abs(ctx.logits()).sum() > 0), flush=True)
"""


def _ctrl_c_during_decode(code: str, gemma_path: Path) -> tuple[str, float]:
    """Run ``code`` in a child, send it SIGINT 0.3 s after it prints "ready" (inside a
    decode that takes seconds); its stdout and when the signal was sent."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(gemma_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite run as a background job ignores SIGINT, and so would its children.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        sent_at = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err[-3000:]
    return out, sent_at


@cpu_only(ABORT_ON_CPU)
def test_ctrl_c_interrupts_a_long_decode(gemma_path: Path) -> None:
    out, sent_at = _ctrl_c_during_decode(CTRL_C_CHILD, gemma_path)
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    caught_at = float(lines["interrupted"].split()[0])
    # CLOCK_MONOTONIC is system-wide on Linux: the two processes' clocks compare.
    latency = caught_at - sent_at
    print(f"Ctrl-C latency (signal sent -> KeyboardInterrupt caught): {latency * 1000:.1f} ms")
    assert 0 <= latency < 1.0
    assert lines["handler"] == "restored True"
    assert lines["works"] == "True"


IGNORED_CTRL_C_CHILD = """
import signal
import sys

import llama_cy as lc

signal.signal(signal.SIGINT, signal.SIG_IGN)
model = lc.LlamaModel.load(sys.argv[1])
ctx = lc.LlamaContext(model, n_ctx=1024, n_batch=512, n_threads=1)
batch = lc.LlamaBatch(512)
batch.add_sequence(model.tokenize("The quick brown fox " * 100)[:512])
print("ready", flush=True)
ctx.decode(batch)
print("decoded", flush=True)
"""


@cpu_only(ABORT_ON_CPU)
def test_ctrl_c_ignored_by_the_process_does_not_abort(gemma_path: Path) -> None:
    out, _ = _ctrl_c_during_decode(IGNORED_CTRL_C_CHILD, gemma_path)
    assert out.strip() == "decoded"


# ---- threads ----------------------------------------------------------------------------------


def test_two_threads_on_one_context_equal_sequential(tiny: lc.LlamaModel) -> None:
    n_steps = 60
    rng = np.random.default_rng(11)
    streams = [rng.integers(3, tiny.n_vocab, n_steps).astype(np.int32) for _ in range(2)]
    probe = int(tiny.tokenize("fox", add_special=False)[0])

    def feed(ctx: lc.LlamaContext, seq_id: int) -> None:
        batch = lc.LlamaBatch(1)
        for pos, token in enumerate(streams[seq_id]):
            batch.clear()
            batch.add(int(token), pos, (seq_id,), True)
            ctx.decode(batch)

    def probe_logits(ctx: lc.LlamaContext) -> list[npt.NDArray[np.float32]]:
        return [decode(ctx, [probe], n_steps, seq_id) for seq_id in range(2)]

    with new_ctx(tiny, n_seq_max=2) as sequential:
        feed(sequential, 0)
        feed(sequential, 1)
        expected = probe_logits(sequential)

    shared = new_ctx(tiny, n_seq_max=2)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(seq_id: int) -> None:
        barrier.wait()
        try:
            feed(shared, seq_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    for seq_id in range(2):
        assert (shared.seq_pos_min(seq_id), shared.seq_pos_max(seq_id)) == (0, n_steps - 1)
    for got, want in zip(probe_logits(shared), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    shared.close()


# ---- lifetime ---------------------------------------------------------------------------------


def test_context_in_a_reference_cycle_is_collected(tiny_model_path: Path) -> None:
    # In a subprocess: a crash during garbage collection would kill the test run.
    result = run_python(
        """
        import gc
        import sys
        import llama_cy as lc

        model = lc.LlamaModel.load(sys.argv[1])
        ctx = lc.LlamaContext(model, n_ctx=64, n_threads=1)
        holder = [ctx]
        holder.append(holder)  # a cycle that owns the context
        del ctx, holder
        gc.collect()
        print("collected", model.n_vocab)

        class Owner:
            pass

        owner = Owner()
        owner.model = lc.LlamaModel.load(sys.argv[1])
        owner.ctx = lc.LlamaContext(owner.model, n_ctx=64, n_threads=1)
        owner.me = owner
        del owner
        gc.collect()
        print("collected again")
        """,
        str(tiny_model_path),
    )
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stderr[-2000:]}"
    assert "collected again" in result.stdout


CONTEXT_CALLS: dict[str, Callable[[lc.LlamaContext], object]] = {
    "decode": lambda c: c.decode(batch_of([1, 2])),
    "encode": lambda c: c.encode(batch_of([1, 2])),
    "logits": lambda c: c.logits(),
    "all_logits": lambda c: c.all_logits(),
    "embeddings": lambda c: c.embeddings(),
    "sequence_embeddings": lambda c: c.sequence_embeddings(0),
    "n_outputs": lambda c: c.n_outputs,
    "pooling_type": lambda c: c.pooling_type,
    "n_threads": lambda c: c.n_threads,
    "set_n_threads": lambda c: c.set_n_threads(1),
    "pause_threadpools": lambda c: c.pause_threadpools(),
    "set_embeddings": lambda c: c.set_embeddings(True),
    "set_causal_attn": lambda c: c.set_causal_attn(False),
    "causal_attn": lambda c: c.causal_attn,
    "clear": lambda c: c.clear(),
    "seq_rm": lambda c: c.seq_rm(0),
    "seq_cp": lambda c: c.seq_cp(0, 0),
    "seq_keep": lambda c: c.seq_keep(0),
    "seq_add": lambda c: c.seq_add(0, 0, -1, 1),
    "seq_div": lambda c: c.seq_div(0, 0, -1, 2),
    "seq_pos_min": lambda c: c.seq_pos_min(0),
    "seq_pos_max": lambda c: c.seq_pos_max(0),
    "can_shift": lambda c: c.can_shift,
    "state_get_data": lambda c: c.state_get_data(),
    "state_set_data": lambda c: c.state_set_data(b"state"),
    "state_save_file": lambda c: c.state_save_file(os.devnull),
    "state_load_file": lambda c: c.state_load_file(os.devnull),
    "state_seq_get_data": lambda c: c.state_seq_get_data(0),
    "state_seq_set_data": lambda c: c.state_seq_set_data(b"state", 0),
    "state_seq_save_file": lambda c: c.state_seq_save_file(os.devnull, 0),
    "state_seq_load_file": lambda c: c.state_seq_load_file(os.devnull, 0),
    "perf": lambda c: c.perf(),
    "perf_reset": lambda c: c.perf_reset(),
    "warmup": lambda c: c.warmup(),
    "synchronize": lambda c: c.synchronize(),
    "enter": lambda c: c.__enter__(),
}


@pytest.mark.parametrize("call", CONTEXT_CALLS.values(), ids=CONTEXT_CALLS.keys())
def test_use_after_close_raises_closed_error(
    tiny: lc.LlamaModel, call: Callable[[lc.LlamaContext], object]
) -> None:
    ctx = new_ctx(tiny, n_ctx=64)
    ctx.decode(batch_of([1, 2]))
    ctx.close()
    ctx.close()  # idempotent
    assert ctx.closed
    assert "closed" in repr(ctx)
    with pytest.raises(ClosedError):
        call(ctx)


def test_context_manager_closes(tiny: lc.LlamaModel) -> None:
    with new_ctx(tiny, n_ctx=64) as ctx:
        ctx.decode(batch_of([1, 2]))
    assert ctx.closed
    with pytest.raises(ClosedError):
        ctx.decode(batch_of([1, 2]))


def test_context_on_a_closed_model_raises_closed_error(tiny_model_path: Path) -> None:
    model = lc.LlamaModel.load(tiny_model_path, vocab_only=True)
    model.close()
    with pytest.raises(ClosedError):
        lc.LlamaContext(model, n_ctx=64)


SIGINT_SHIM_PROGRAM = r"""
#include <stdio.h>
#include "_sigint_shim.h"

static volatile int hits = 0;
static void on_int(int sig) { (void) sig; hits++; }

int main(void) {
    lcy_sigint_handler before = lcy_sigint_current();
    if (!lcy_sigint_ignored(SIG_IGN) || lcy_sigint_ignored(on_int)) return 1;
    lcy_sigint_saved saved;
    lcy_sigint_install(on_int, &saved);
    if (lcy_sigint_current() != on_int) return 2;
    raise(SIGINT);
    if (hits != 1) return 3;
    lcy_sigint_restore(&saved);
    if (lcy_sigint_current() != before) return 4;
    printf("ok\n");
    return 0;
}
"""


@pytest.mark.parametrize("platform", ["posix", "windows"])
def test_sigint_shim_installs_and_restores(tmp_path: Path, platform: str) -> None:
    """Both branches of the Ctrl-C shim: sigaction (POSIX) and the C standard's signal()
    (the Windows branch, which compiles and runs on any C library, so it is checked here
    without Windows)."""
    cc = shutil.which(sysconfig.get_config_var("CC").split()[0]) or shutil.which("cc")
    assert cc is not None, "no C compiler (the package's own build needs one)"
    src = tmp_path / "shim.c"
    src.write_text(SIGINT_SHIM_PROGRAM)
    exe = tmp_path / "shim"
    flags = ["-D_WIN32"] if platform == "windows" else []
    include = Path(__file__).resolve().parent.parent / "llama_cy"  # the source tree's
    if not (include / "_sigint_shim.h").is_file():
        pytest.skip("needs the source tree's llama_cy/_sigint_shim.h (this run has only a wheel)")
    build = subprocess.run(
        [cc, *flags, "-I", str(include), str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "ok\n"), run.stderr
