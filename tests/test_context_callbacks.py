"""llama.cpp's C callbacks on a context: ``cb_eval`` (the scheduler's per-tensor
callback) and ``abort_callback``, given as ctypes functions, as llama-cpp-python's
``llama_context_params`` carries them."""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from offload import cpu_only

import llama_cy as lc
from llama_cy.errors import AbortedError

EVAL = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)
ABORT = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)


def logits_of(ctx: lc.LlamaContext, tokens: list[int]) -> npt.NDArray[np.float32]:
    batch = lc.LlamaBatch(len(tokens))
    for i, t in enumerate(tokens):
        batch.add(t, i, (0,), True)
    ctx.decode(batch)
    return np.array(ctx.all_logits())


@pytest.fixture(scope="module")
def tokens(tiny: lc.LlamaModel) -> list[int]:
    return [int(t) for t in tiny.tokenize("The quick brown fox jumps over the lazy dog")]


def test_cb_eval_is_asked_about_and_shown_the_graphs_tensors(
    tiny: lc.LlamaModel, tokens: list[int]
) -> None:
    asked: list[bool] = []
    data: list[int | None] = []

    def on_tensor(tensor: int | None, ask: bool, user_data: int | None) -> bool:
        asked.append(bool(ask))
        data.append(user_data)
        return True  # ask: yes, show it; then: go on

    with lc.LlamaContext(tiny, n_ctx=64) as plain:
        want = logits_of(plain, tokens)
    ctx = lc.LlamaContext(tiny, n_ctx=64, cb_eval=EVAL(on_tensor), cb_eval_user_data=0xC0FFEE)
    got = logits_of(ctx, tokens)
    # The scheduler asks about each node, then shows the ones the callback wanted.
    assert asked.count(True) > 10, asked[:20]
    assert asked.count(False) > 10, asked[:20]
    assert set(data) == {0xC0FFEE}
    # Observing splits the graph but computes the same values.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ctx.close()


@cpu_only("llama.cpp's abort callback is polled by the CPU backend between graph nodes")
def test_abort_callback_stops_a_decode_and_the_context_goes_on(
    tiny: lc.LlamaModel, tokens: list[int]
) -> None:
    calls: list[int | None] = []
    stop = [True]

    def should_abort(user_data: int | None) -> bool:
        calls.append(user_data)
        return stop[0]

    callback = ABORT(should_abort)
    ctx = lc.LlamaContext(tiny, n_ctx=64, abort_callback=callback, abort_callback_data=7)
    del callback
    gc.collect()  # the context holds the ctypes function: llama.cpp calls it later
    with pytest.raises(AbortedError):
        logits_of(ctx, tokens)
    assert calls
    assert set(calls) == {7}
    stop[0] = False
    ctx.clear()
    got = logits_of(ctx, tokens)
    with lc.LlamaContext(tiny, n_ctx=64) as plain:
        np.testing.assert_allclose(got, logits_of(plain, tokens), rtol=1e-5, atol=1e-5)
    # llama_cy's own abort() still works beside the caller's callback: it is asked first.
    ctx.abort()  # forgotten: no decode runs
    ctx.clear()
    logits_of(ctx, tokens)
    ctx.close()


def test_callbacks_must_have_llama_cpp_prototypes(tiny: lc.LlamaModel) -> None:
    with pytest.raises(TypeError, match="ctypes function"):
        lc.LlamaContext(tiny, n_ctx=64, cb_eval=lambda t, ask, data: True)  # type: ignore[arg-type]
    wrong = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda data: 0)
    with pytest.raises(TypeError, match="1 arguments and reads a c_bool"):
        lc.LlamaContext(tiny, n_ctx=64, abort_callback=wrong)
    with pytest.raises(TypeError, match="3 arguments"):
        lc.LlamaContext(tiny, n_ctx=64, cb_eval=ABORT(lambda data: False))
    with pytest.raises(ValueError, match="NULL function pointer"):
        lc.LlamaContext(tiny, n_ctx=64, abort_callback=ABORT())
    with pytest.raises(TypeError, match="abort_callback_data must be an address"):
        lc.LlamaContext(
            tiny,
            n_ctx=64,
            abort_callback=ABORT(lambda data: False),
            abort_callback_data="here",  # type: ignore[arg-type]
        )


def test_llama_cpp_python_context_params_carry_them(tiny_model_path: Path) -> None:
    """llama-cpp-python's ``_internals.LlamaContext`` hands both to llama.cpp."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from llama_cpp import _internals

    seen: list[bool] = []

    def observe(tensor: int | None, ask: bool, user_data: int | None) -> bool:
        seen.append(bool(ask))
        return True

    on_tensor = llama_cpp.ggml_backend_sched_eval_callback(observe)
    never = llama_cpp.ggml_abort_callback(lambda data: False)
    model = _internals.LlamaModel(
        path_model=str(tiny_model_path), params=llama_cpp.llama_model_default_params()
    )
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = 64
    params.cb_eval = on_tensor
    params.abort_callback = never
    ctx = _internals.LlamaContext(model=model, params=params)
    batch = _internals.LlamaBatch(n_tokens=8, embd=0, n_seq_max=1)
    batch.set_batch(model.tokenize(b"Hello world", True, False), 0, False)
    ctx.decode(batch)
    assert True in seen
    assert False in seen
    ctx.close()
    model.close()
