"""The licences travel with the code: llama_cy's own, and llama.cpp's, whose libraries
every wheel bundles."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_vendored_llama_cpp_licence_is_llama_cpps(llama_cpp_source: Path) -> None:
    assert (ROOT / "LICENSES" / "llama.cpp-LICENSE").read_text() == (
        llama_cpp_source / "LICENSE"
    ).read_text()


def test_the_installed_wheel_carries_both_licences() -> None:
    dist = metadata.distribution("llama-cy")
    names = {str(f) for f in dist.files or ()}
    licences = {n.split(".dist-info/")[1] for n in names if ".dist-info/licenses/" in n}
    assert licences == {"licenses/LICENSE", "licenses/LICENSES/llama.cpp-LICENSE"}
    text = dist.read_text("licenses/LICENSES/llama.cpp-LICENSE")
    assert text is not None
    assert "The ggml authors" in text
    assert dist.metadata["License-Expression"] == "MIT"
