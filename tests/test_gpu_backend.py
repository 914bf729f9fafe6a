"""A GPU build, run offloaded: its device is seen, and it computes what the CPU computes.

These run for a build with a GPU backend (``-Dgpu=vulkan``, ``cuda``, ...) when
``LLAMA_CY_N_GPU_LAYERS`` offloads the suite (``-1``); a CPU build has no GPU to check,
and says so. On Mesa's lavapipe (Vulkan on the CPU, ``GGML_VK_VISIBLE_DEVICES=0``) Gemma
3 270M runs at about one token per second, so the prompts here are short and forced:
their greedy continuation does not hang on a near tie that the GPU's rounding could flip.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from child import run_python

import llama_cy as lc
from llama_cy import _build_config
from llama_cy._model import default_gpu_layers

pytestmark = pytest.mark.skipif(
    _build_config.GPU == "cpu" or default_gpu_layers() == 0,
    reason="a GPU build run with LLAMA_CY_N_GPU_LAYERS=-1 only (this is a CPU build, or "
    "the suite is not offloaded)",
)

FORCED = ["Count: 1, 2, 3, 4, 5, 6,", "A B C D E F G H"]


def gpu_devices() -> list[lc.Device]:
    return [d for d in lc.devices() if d.type in ("gpu", "igpu")]


def test_the_gpu_device_is_listed_with_its_memory() -> None:
    found = gpu_devices()
    assert found, lc.devices()
    assert all(d.memory_total > 0 and 0 < d.memory_free <= d.memory_total for d in found)
    assert lc.supports_gpu_offload()


def test_forced_continuations_equal_the_cpu(gemma_path: Path) -> None:
    gpu = lc.Llama(gemma_path, n_ctx=256, n_threads=2)  # offloaded by the environment
    cpu = lc.Llama(gemma_path, n_ctx=256, n_threads=2, n_gpu_layers=0)
    try:
        for prompt in FORCED:
            want = cpu.complete(prompt, max_tokens=8, temperature=0)
            got = gpu.complete(prompt, max_tokens=8, temperature=0)
            assert got.tokens == want.tokens, prompt
    finally:
        gpu.close()
        cpu.close()


def test_logits_agree_with_the_cpu(tiny_model_path: Path) -> None:
    """The tiny float32 model's logits over a prompt, every position: the GPU's kernels
    accumulate in another order (and partly in half precision), so they agree within a
    tolerance, not bit for bit."""
    rows = []
    for ngl in (default_gpu_layers(), 0):
        model = lc.LlamaModel.load(tiny_model_path, n_gpu_layers=ngl)
        ctx = lc.LlamaContext(model, n_ctx=128, n_threads=2)
        batch = lc.LlamaBatch(32)
        tokens = model.tokenize("Once upon a time there was a little fox")
        for pos, token in enumerate(tokens):
            batch.add(int(token), pos, (0,), True)  # logits at every position
        ctx.decode(batch)
        rows.append(np.array(ctx.all_logits()))
        batch.close()
        ctx.close()
        model.close()
    gpu, cpu = rows
    scale = float(np.abs(cpu).max())
    assert np.abs(gpu - cpu).max() <= 2e-2 * scale
    assert (gpu.argmax(axis=1) == cpu.argmax(axis=1)).mean() >= 0.9


def test_without_a_device_the_cpu_serves(tiny_model_path: Path) -> None:
    """With no device visible to the backend (for Vulkan: lavapipe hidden again), the
    plugin finds nothing, a warning says so, and an offloaded load runs on the CPU.
    ``GGML_VK_VISIBLE_DEVICES``/``CUDA_VISIBLE_DEVICES`` set empty hide every device."""
    env = dict(os.environ)
    env["GGML_VK_VISIBLE_DEVICES" if _build_config.GPU == "vulkan" else "CUDA_VISIBLE_DEVICES"] = ""
    result = run_python(
        """
        import logging, sys
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        import llama_cy as lc
        print("gpus", sum(d.type in ("gpu", "igpu") for d in lc.devices()))
        llm = lc.Llama(sys.argv[1], n_ctx=64, n_gpu_layers=-1)
        print("tokens", len(llm.complete("Once upon a time", max_tokens=4, temperature=0).tokens))
        """,
        str(tiny_model_path),
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "found no device" in result.stderr
    assert result.stdout.splitlines() == ["gpus 0", "tokens 4"]
