"""Flags of ``llama-cy serve`` that change how the context computes (RoPE, YaRN, the KV
cache's type): read as the server reads them (``settings_from_args`` then
``context_kwargs``), each changes the logits a prompt gets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from tiny_model import write_tiny_llama

import llama_cy as lc
from llama_cy import cli
from llama_cy.server.flag_settings import settings_from_args


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lc.LlamaModel]:
    # heads of 32 values: whole q4_0 blocks, which a GPU's K cache needs (test_hazards.py)
    path = write_tiny_llama(tmp_path_factory.mktemp("flags") / "tiny.gguf", n_embd=128)
    with lc.LlamaModel.load(path) as m:
        yield m


def logits(model: lc.LlamaModel, *flags: str) -> npt.NDArray[np.float32]:
    args = cli.parser().parse_args(["serve", "-c", "256", "-np", "1", "-fa", "off", *flags])
    kwargs = settings_from_args(args, str(model.path)).context_kwargs(model)
    tokens = model.tokenize("Once upon a time, in a land far away, there lived a king")
    with lc.LlamaContext(model, **kwargs) as ctx:
        batch = lc.LlamaBatch(len(tokens))
        batch.add_sequence(tokens)
        ctx.decode(batch)
        return ctx.logits(-1).copy()


YARN = ["--rope-scaling", "yarn", "--rope-scale", "4"]


@pytest.mark.parametrize(
    ("before", "flags"),
    [
        ([], ["--rope-freq-base", "100"]),
        ([], ["--rope-freq-scale", "0.25"]),
        ([], ["--rope-scale", "4"]),
        ([], YARN),
        (YARN, ["--yarn-orig-ctx", "8"]),
        (YARN, ["--yarn-ext-factor", "0.5"]),
        ([], ["--yarn-attn-factor", "2"]),  # with ext_factor != 0 llama.cpp sets its own
        (YARN, ["--yarn-beta-fast", "4"]),
        (YARN, ["--yarn-beta-slow", "0.25"]),
        ([], ["-ctk", "q4_0"]),
        (["-fa", "on"], ["-ctv", "bf16"]),  # a V type other than f16 needs flash attention
    ],
)
def test_context_flags_change_the_logits(
    model: lc.LlamaModel, before: list[str], flags: list[str]
) -> None:
    base = logits(model, *before)
    assert np.array_equal(base, logits(model, *before))  # the same flags: the same logits
    assert not np.allclose(base, logits(model, *before, *flags), atol=1e-4)


@pytest.mark.parametrize(
    ("flags", "buffer"), [([], "CPU_Mapped"), (["--load-mode", "none"], "CPU")]
)
def test_load_mode_decides_where_weights_live(
    tiny_model_path: Path, flags: list[str], buffer: str
) -> None:
    """--load-mode none reads the weights into allocated memory; the default maps them.
    The weights stay on the host (``n_gpu_layers`` is passed by the server, not here);
    with a GPU backend llama.cpp puts unmapped host weights in its pinned host buffer
    (``CUDA_Host``), which is what the H200 showed."""
    from llama_cy.server.settings import load_keywords

    args = cli.parser().parse_args(["serve", *flags])
    load = load_keywords(settings_from_args(args, str(tiny_model_path)).load)
    with lc.LlamaModel.load(tiny_model_path, n_gpu_layers=0, **load) as m:
        got = set(m.tensor_buffers.values())
    pinned = buffer == "CPU" and len(got) == 1 and next(iter(got)).endswith("_Host")
    assert got == {buffer} or pinned
