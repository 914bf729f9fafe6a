"""The suite-wide offload switch (``LLAMA_CY_N_GPU_LAYERS``), as the tests see it.

With it set (``-1``: every layer), every model the tests load runs on the build's GPU
backend. A few checks then change, and say so here: the tolerance of logits computed two
ways, and the tests that only make sense on the CPU.
"""

from __future__ import annotations

import os

import pytest

from llama_cy._backend import devices
from llama_cy._model import default_gpu_layers

OFFLOADED = default_gpu_layers() != 0

#: The offloaded device is Mesa's lavapipe (Vulkan on the CPU; ``tools/lavapipe.sh``).
LAVAPIPE = OFFLOADED and any(d.description.startswith("llvmpipe") for d in devices())

#: Logits of one model computed two ways (another batch shape, a cache cut or copied):
#: equal to float32 rounding on the CPU; a GPU's kernels round with the batch's shape
#: (lavapipe, the tiny model: up to 2.5e-3 apart).
LOGITS_TOL = 1e-2 if OFFLOADED else 1e-5  #: as rtol and atol

#: Unit-norm embeddings of one text computed alone and within a batch (lavapipe, Gemma:
#: up to 1.1e-3 apart), as atol.
EMBD_TOL = 5e-3 if OFFLOADED else 1e-4

#: ``$LLAMA_CY_TEST_TIMEOUT_SCALE`` (default 1) stretches the tests' time limits on work
#: that generates (a child interpreter, a server's start and replies, the CLI): a device
#: emulated on the CPU (lavapipe) runs Gemma at about one token per second.
TIMEOUT_SCALE = float(os.environ.get("LLAMA_CY_TEST_TIMEOUT_SCALE", "1"))


def timeout(seconds: float) -> float:
    """``seconds`` stretched by ``TIMEOUT_SCALE``."""
    return seconds * TIMEOUT_SCALE


def cpu_only(reason: str) -> pytest.MarkDecorator:
    """Skip in an offloaded run, for ``reason`` (why the test is about the CPU)."""
    return pytest.mark.skipif(OFFLOADED, reason=f"CPU only: {reason}")


def not_on_lavapipe(reason: str) -> pytest.MarkDecorator:
    """Skip on lavapipe, for ``reason`` (a lavapipe fault, shown with llama.cpp's own calls
    or under valgrind, that kills the process)."""
    return pytest.mark.skipif(LAVAPIPE, reason=f"lavapipe fault: {reason}")


#: Changing a LoRA's scale or the control vector makes llama.cpp reserve its graph again,
#: destroying the old compute buffer: Mesa 22.3's lavapipe (Debian 12) then frees that
#: ``VkBuffer``'s memory twice in its command thread (valgrind: use after free, then double
#: free; Khronos' validation layers report nothing). ``test_adapter.py`` aborted in 7 of 20
#: runs; with Mesa 25.0.7's lavapipe, 12 of 12 passed. Such tests run on the CPU.
lavapipe_reserve_fault = not_on_lavapipe(
    "Mesa 22.3's command thread frees the VkBuffer that ggml destroyed when a LoRA or"
    " control-vector change made llama.cpp reserve its graph again (Mesa 25 runs it)"
)
