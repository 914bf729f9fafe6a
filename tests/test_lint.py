"""The code stays clean: ruff, cython-lint, mypy --strict, and stubs that match the
compiled modules (stubtest). Each runs as the developer would run it."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
from pathlib import Path

import pytest

import llama_cy

ROOT = Path(__file__).resolve().parent.parent


def run(*cmd: str) -> None:
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stdout}\n{result.stderr}"


def compiled_modules() -> list[str]:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    lib_dir = Path(llama_cy.get_lib_dir())
    names = {p.name.split(".")[0] for p in lib_dir.iterdir() if p.name.endswith(suffixes)}
    return sorted(f"llama_cy.{n}" for n in names if n.startswith("_"))


def test_ruff() -> None:
    run(sys.executable, "-m", "ruff", "check", ".")
    run(sys.executable, "-m", "ruff", "format", "--check", ".")


def test_cython_lint() -> None:
    pyx = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "llama_cy").rglob("*.p[yx]?"))
    cython_lint = str(Path(sys.executable).with_name("cython-lint"))
    run(cython_lint, *[p for p in pyx if not p.endswith((".py", ".pyi"))])


def test_mypy_strict() -> None:
    run(sys.executable, "-m", "mypy")


def test_stubs_match_compiled_modules() -> None:
    modules = compiled_modules()
    assert "llama_cy._backend" in modules
    allowlist = str(ROOT / "stubs" / "stubtest-allowlist.txt")
    run(sys.executable, "-m", "mypy.stubtest", "--allowlist", allowlist, *modules)


@pytest.mark.parametrize("module", compiled_modules())
def test_every_compiled_module_has_a_stub(module: str) -> None:
    assert (ROOT / (module.replace(".", "/") + ".pyi")).is_file()
