"""llama-cpp-python's own test suite, unchanged, against ``import llama_cpp`` (compat/).

The test files come from llama-cpp-python's sdist on the package index (the release
the bench compares against), fetched once into pytest's cache. Only the model download
is replaced: ``huggingface_hub.hf_hub_download`` returns local files, a conftest.py
written next to the tests (no assertion is edited). The models it downloads become:

- Qwen3.5 0.8B (its "real" model): Gemma 3 270M, from its PyPI package;
- stories15M (a llama): a tiny llama written with ``gguf``;
- bge-small (embeddings): a tiny BERT;
- mamba-130m (recurrent): a tiny ``mamba``; Falcon-H1 (hybrid): a tiny ``jamba``.

Two tests assert values that belong to the model they download; they must fail, and
only at those assertions (``MODEL_SPECIFIC`` says why for each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tiny_model import write_tiny_bert, write_tiny_llama, write_tiny_recurrent

ROOT = Path(__file__).resolve().parent.parent
LCP_VERSION = "0.3.36"  # bench/run.py's LCP_VERSION: the newest 0.3.x on the index
VOCAB = "vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf"

#: test id -> the assertion that fails, and why that value is the downloaded model's.
MODEL_SPECIFIC = {
    "test_llama.test_real_model": (
        "assert tokens == [9419, 11, 1814, 0]",
        "Qwen3.5's token ids for 'Hello, world!'; Gemma's vocabulary gives others",
    ),
    "test_llama.test_real_llama": (
        "assert number_1 != number_2",
        "two seeds must pick different numbers from 1 to 10; Gemma 3 270M's grammar-"
        "constrained distribution puts ~0.9 on '1' (then '0'): 30 of 30 seeds give '10'. "
        "The asserts before it (the greedy fox, the true/false grammar, the logits "
        "processor) pass on Gemma",
    ),
}

HUB_SHIM = """
import json, os
import huggingface_hub

_MODELS = json.loads(os.environ["LCP_SUITE_MODELS"])


def _local(repo_id, filename, **kwargs):
    return _MODELS[f"{repo_id}/{filename}"]


huggingface_hub.hf_hub_download = _local
"""


@pytest.fixture(scope="session")
def lcp_suite(request: pytest.FixtureRequest) -> Path:
    """llama-cpp-python's tests/ and the vocabulary file they open, from its sdist."""
    cache = Path(request.config.cache.mkdir(f"lcp-suite-{LCP_VERSION}"))
    root = cache / "suite"
    if not (root / VOCAB).is_file():
        sdist = cache / f"llama_cpp_python-{LCP_VERSION}.tar.gz"
        if not sdist.is_file():
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                 "--no-binary", "llama-cpp-python", f"llama-cpp-python=={LCP_VERSION}",
                 "-d", str(cache)],
                check=True,
            )  # fmt: skip
        prefix = f"llama_cpp_python-{LCP_VERSION}/"
        partial = cache / "partial"
        with tarfile.open(sdist) as tar:
            members = [
                m for m in tar.getmembers()
                if m.name.startswith(prefix + "tests/") or m.name == prefix + VOCAB
            ]  # fmt: skip
            for m in members:
                m.name = m.name.removeprefix(prefix)
            tar.extractall(partial, members=members, filter="data")
        partial.replace(root)
    (root / "conftest.py").write_text(HUB_SHIM)
    (root / "pytest.ini").write_text("[pytest]\n")  # its own root, not this project's
    return root


@pytest.fixture(scope="session")
def lcp_models(model_cache: Path, gemma_path: Path) -> dict[str, str]:
    def made(name: str, write: object) -> str:
        path = model_cache / f"lcp-suite-{name}.gguf"
        if not path.is_file():
            write(path.with_suffix(".partial")).replace(path)  # type: ignore[operator]
        return str(path)

    return {
        "lmstudio-community/Qwen3.5-0.8B-GGUF/Qwen3.5-0.8B-Q8_0.gguf": str(gemma_path),
        "ggml-org/models/tinyllamas/stories15M-q4_0.gguf": made("llama", write_tiny_llama),
        "CompendiumLabs/bge-small-en-v1.5-gguf/bge-small-en-v1.5-q4_k_m.gguf": made(
            "bert", write_tiny_bert
        ),
        "QuantFactory/mamba-130m-hf-GGUF/mamba-130m-hf.Q2_K.gguf": made(
            "mamba", write_tiny_recurrent
        ),
        "tiiuae/Falcon-H1-Tiny-90M-Instruct-GGUF/Falcon-H1-Tiny-90M-Instruct-Q2_K.gguf": made(
            "jamba", lambda p: write_tiny_recurrent(p, hybrid=True)
        ),
    }


def test_llama_cpp_pythons_own_suite_passes(
    lcp_suite: Path, lcp_models: dict[str, str], tmp_path: Path
) -> None:
    report = tmp_path / "report.xml"
    env = {**os.environ, "LCP_SUITE_MODELS": json.dumps(lcp_models)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests",
         f"--junitxml={report}", "-o", "junit_family=xunit1"],
        cwd=lcp_suite, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert report.is_file(), result.stdout[-3000:] + result.stderr[-3000:]
    cases = ET.parse(report).getroot().iter("testcase")
    outcomes: dict[str, str] = {}
    failures: dict[str, str] = {}
    for case in cases:
        name = f"{case.get('classname', '').rpartition('.')[2]}.{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped") is not None
        outcomes[name] = "failed" if bad is not None else "skipped" if skipped else "passed"
        if bad is not None:
            failures[name] = (bad.get("message") or "") + (bad.text or "")
    assert len(outcomes) >= 26, outcomes
    unexpected = {n: failures[n][-1500:] for n in failures if n not in MODEL_SPECIFIC}
    assert not unexpected, unexpected
    assert not [n for n, o in outcomes.items() if o == "skipped"]
    for name, (assertion, _why) in MODEL_SPECIFIC.items():
        assert outcomes.get(name) == "failed", f"{name} passed: drop it from MODEL_SPECIFIC"
        assert assertion in failures[name], failures[name][-1500:]
