"""llama.cpp's own programs, built from the same source with the same CMake switches.

llama-bench, llama-batched-bench, llama-server and llama-mtmd-cli come from llama.cpp's
tools; the C++ decode loop
(support/reference_loop.py) is linked against the package's own libllama.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from llama_cy._build_config import CMAKE_ARGS

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "subprojects" / "llama.cpp"
TOOLS = ("llama-bench", "llama-batched-bench", "llama-server", "llama-mtmd-cli")


def _build(build: Path, args: list[str], targets: list[str]) -> None:
    """Configure ``build`` (again only when ``args`` change) and build ``targets``."""
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
        ["cmake", "--build", str(build), "--parallel", jobs, "--target", *targets], check=True
    )


def build_tools(build: Path) -> dict[str, Path]:
    """Configure (once) and build llama-bench, llama-batched-bench, llama-server and
    llama-mtmd-cli."""
    # The package's tree is configured with the tools too; it builds only its libraries.
    _build(build, list(CMAKE_ARGS), list(TOOLS))
    return {t: build / "bin" / t for t in TOOLS}


def build_simple(build: Path) -> Path:
    """llama.cpp's ``llama-simple`` as llama.cpp builds it by default: OpenMP threading.

    The package builds ggml without OpenMP (a wheel must not depend on libgomp), so its
    programs share ggml's own spinning thread pool; llama-simple here is the reference
    for what llama.cpp's default build pays with more threads than CPUs. It always runs
    GGML_DEFAULT_N_THREADS (4) threads.
    """
    args = [a for a in CMAKE_ARGS if not a.startswith("-DGGML_OPENMP=")]
    args = [a.replace("-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_EXAMPLES=ON") for a in args]
    _build(build, args, ["llama-simple"])
    return build / "bin" / "llama-simple"


def run_simple(binary: Path, model: Path, prompt: str, n_predict: int) -> float:
    """llama-simple's own generation speed (tokens/s, from its last line)."""
    result = subprocess.run(
        [str(binary), "-m", str(model), "-n", str(n_predict), prompt],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in result.stderr.splitlines():
        if "decoded" in line and "speed:" in line:
            return float(line.rsplit("speed:", 1)[1].split()[0])
    raise RuntimeError(f"no speed line in llama-simple's output:\n{result.stderr[-2000:]}")
