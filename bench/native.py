"""llama.cpp's own programs, built from the same source with the same CMake switches.

llama-bench, llama-batched-bench and llama-server come from llama.cpp's tools; the C++ decode loop
(tests/reference_loop.py) is linked against the package's own libllama.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from llama_cy._build_config import CMAKE_ARGS

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "subprojects" / "llama.cpp"
TOOLS = ("llama-bench", "llama-batched-bench", "llama-server")

# The package build turns llama.cpp's tools off; everything else stays as it was.
_ENABLE = {
    "-DLLAMA_BUILD_COMMON=OFF": "-DLLAMA_BUILD_COMMON=ON",
    "-DLLAMA_BUILD_TOOLS=OFF": "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=OFF": "-DLLAMA_BUILD_SERVER=ON",
}


def build_tools(build: Path) -> dict[str, Path]:
    """Configure (once) and build llama-bench, llama-batched-bench and llama-server."""
    args = [_ENABLE.get(a, a) for a in CMAKE_ARGS]
    stamp = build / "bench-cmake-args.txt"
    if not (stamp.is_file() and stamp.read_text() == "\n".join(args)):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(
            [
                "cmake",
                "-S",
                str(SOURCE),
                "-B",
                str(build),
                *generator,
                "-DCMAKE_BUILD_TYPE=Release",
                *args,
            ],
            check=True,
        )
        stamp.write_text("\n".join(args))
    jobs = str(os.cpu_count() or 2)
    subprocess.run(
        ["cmake", "--build", str(build), "--parallel", jobs, "--target", *TOOLS], check=True
    )
    return {t: build / "bin" / t for t in TOOLS}
