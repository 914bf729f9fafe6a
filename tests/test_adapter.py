"""LoRA adapters and control vectors change what the model computes, and undo cleanly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from offload import lavapipe_reserve_fault
from tiny_model import write_tiny_lora

import llama_cy as lc
from llama_cy.errors import ClosedError, ModelLoadError


def last_logits(ctx: lc.LlamaContext, tokens: npt.NDArray[np.int32]) -> npt.NDArray[np.float32]:
    ctx.clear()
    batch = lc.LlamaBatch(len(tokens))
    batch.add_sequence(tokens, 0, 0)
    ctx.decode(batch)
    return ctx.logits(-1).copy()


@lavapipe_reserve_fault
def test_lora_changes_logits_and_removal_restores_them(tiny: lc.LlamaModel, tmp_path: Path) -> None:
    adapter = lc.LoraAdapter(tiny, write_tiny_lora(tmp_path / "lora.gguf", tiny))
    assert adapter.metadata["adapter.type"] == "lora"
    assert adapter.alora_invocation_tokens.size == 0
    ctx = lc.LlamaContext(tiny, n_ctx=128)
    tokens = tiny.tokenize("Hello world")
    base = last_logits(ctx, tokens)

    ctx.set_lora(adapter, 1.0)
    assert ctx.loras == {adapter: 1.0}
    with_lora = last_logits(ctx, tokens)
    assert not np.allclose(base, with_lora)

    ctx.set_lora(adapter, 0.0)
    np.testing.assert_allclose(last_logits(ctx, tokens), base, rtol=1e-5, atol=1e-5)

    ctx.set_lora(adapter, 0.5)
    half = last_logits(ctx, tokens)
    assert not np.allclose(half, with_lora)
    ctx.remove_lora(adapter)
    np.testing.assert_allclose(last_logits(ctx, tokens), base, rtol=1e-5, atol=1e-5)
    with pytest.raises(KeyError):
        ctx.remove_lora(adapter)
    ctx.set_lora(adapter)
    ctx.clear_loras()
    assert ctx.loras == {}


@lavapipe_reserve_fault
def test_adapter_closed_while_set_keeps_working_until_removed(
    tiny: lc.LlamaModel, tmp_path: Path
) -> None:
    adapter = lc.LoraAdapter(tiny, write_tiny_lora(tmp_path / "lora.gguf", tiny))
    ctx = lc.LlamaContext(tiny, n_ctx=128)
    tokens = tiny.tokenize("Hello")
    ctx.set_lora(adapter, 1.0)
    expected = last_logits(ctx, tokens)
    adapter.close()
    with pytest.raises(ClosedError):
        _ = adapter.metadata
    np.testing.assert_allclose(last_logits(ctx, tokens), expected, rtol=1e-5, atol=1e-5)
    ctx.clear_loras()  # the adapter's memory is freed here
    ctx.close()


def test_adapter_errors(tiny: lc.LlamaModel, tmp_path: Path, gemma_path: Path) -> None:
    with pytest.raises(ModelLoadError):
        lc.LoraAdapter(tiny, tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(ModelLoadError):
        lc.LoraAdapter(tiny, junk)
    other = lc.LlamaModel.load(gemma_path)
    lora = lc.LoraAdapter(tiny, write_tiny_lora(tmp_path / "lora.gguf", tiny))
    ctx = lc.LlamaContext(other, n_ctx=64)
    with pytest.raises(ValueError, match="another model"):
        ctx.set_lora(lora)


@lavapipe_reserve_fault
def test_control_vector(tiny: lc.LlamaModel) -> None:
    ctx = lc.LlamaContext(tiny, n_ctx=128)
    tokens = tiny.tokenize("Hello world")
    base = last_logits(ctx, tokens)
    vec = np.random.default_rng(0).standard_normal((tiny.n_layer, tiny.n_embd), dtype=np.float32)
    ctx.set_control_vector(vec)
    steered = last_logits(ctx, tokens)
    assert not np.allclose(base, steered)
    ctx.clear_control_vector()
    np.testing.assert_allclose(last_logits(ctx, tokens), base, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="n_embd"):
        ctx.set_control_vector(np.zeros((tiny.n_layer, tiny.n_embd + 1), np.float32))
    # As llama.cpp: layer 0 has no control vector, a range past the model's layers
    # steers nothing, and rows past its last layer are not used.
    assert tiny.n_layer == 2  # layer 1 is the only one steered
    ctx.set_control_vector(vec, il_start=0, il_end=1)
    np.testing.assert_allclose(last_logits(ctx, tokens), steered, rtol=1e-5, atol=1e-5)
    ctx.set_control_vector(vec, il_start=2, il_end=5)
    np.testing.assert_allclose(last_logits(ctx, tokens), base, rtol=1e-5, atol=1e-5)
    ctx.set_control_vector(np.vstack([vec, vec]), il_end=tiny.n_layer)
    np.testing.assert_allclose(last_logits(ctx, tokens), steered, rtol=1e-5, atol=1e-5)
