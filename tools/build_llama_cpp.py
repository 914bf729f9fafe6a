"""Build llama.cpp's shared libraries with its own CMake; called by a Meson custom_target.

usage: build_llama_cpp.py SOURCE CMAKE_BUILD_DIR OUTDIR OUTPUT... -- CMAKE_ARG...

$LLAMA_CY_LLAMA_CPP_BUILD, when set, replaces CMAKE_BUILD_DIR: wheel builds point it at
one folder for every Python version, so llama.cpp is compiled once per platform.
$LLAMA_CY_CMAKE_ARGS adds CMake arguments of your own (a toolkit in an odd place,
-DGGML_CUDA_NO_VMM=ON, ...), after the package's.

CMake is configured once per set of arguments and rebuilt incrementally after that, so
a rebuild with no change is a no-op. Each OUTPUT (the SONAME of a library, the file
name of a backend plugin, or a static library) is built by its own target, and copied
into OUTDIR only when its bytes changed: Meson's outputs keep their timestamps and
nothing downstream relinks for nothing.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# Each shared object finds the others in its own folder, in the build and installed.
RPATH = "@loader_path" if sys.platform == "darwin" else "$ORIGIN"


def configure(source: Path, build: Path, args: list[str]) -> None:
    cmake, ninja = shutil.which("cmake"), shutil.which("ninja")
    generator = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []
    # pip's isolated build environments put cmake and ninja at a new path each time; a
    # build tree configured with the old ones cannot run, so the paths are part of the key.
    wanted = "\n".join([f"cmake={cmake}", f"ninja={ninja}", *args])
    stamp = build / "llama_cy-cmake-args.txt"
    if (build / "CMakeCache.txt").is_file() and stamp.is_file() and stamp.read_text() == wanted:
        return
    subprocess.run(
        [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={build / 'bin'}",
            f"-DCMAKE_ARCHIVE_OUTPUT_DIRECTORY={build / 'bin'}",
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
            f"-DCMAKE_INSTALL_RPATH={RPATH}",
            *args,
        ],
        check=True,
    )
    stamp.write_text(wanted)


def _target(output: str) -> str:
    """The CMake target behind an output file: libggml-cpu.so (ggml-cpu.dll) -> ggml-cpu."""
    return output.removeprefix("lib").split(".", 1)[0]


def _is_plugin(name: str) -> bool:
    """A ggml backend plugin (libggml-cpu.so, ggml-cuda.dll), not ggml or ggml-base."""
    target = _target(name)
    return target.startswith("ggml-") and target != "ggml-base"


def _links_driver(plugin: Path) -> bool:
    """llama_cy._cuda_runtime.links_driver, loaded from the source tree (not installed yet)."""
    path = Path(__file__).resolve().parent.parent / "llama_cy" / "_cuda_runtime.py"
    spec = importlib.util.spec_from_file_location("_llama_cy_cuda_runtime", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return bool(module.links_driver(plugin))


def main() -> None:
    sep = sys.argv.index("--")
    source, build, outdir = map(Path, sys.argv[1:4])
    build = Path(os.environ.get("LLAMA_CY_LLAMA_CPP_BUILD") or build)
    outputs, cmake_args = [Path(o).name for o in sys.argv[4:sep]], sys.argv[sep + 1 :]
    cmake_args += shlex.split(os.environ.get("LLAMA_CY_CMAKE_ARGS", ""))
    build.mkdir(parents=True, exist_ok=True)
    configure(source, build, cmake_args)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
    # Only the outputs' own targets: the tree is configured with llama.cpp's tools (for
    # the server's static library), which are not built.
    targets = [_target(o) for o in outputs]
    subprocess.run(
        ["cmake", "--build", str(build), "--parallel", jobs, "--target", *targets], check=True
    )

    bin_dir = build / "bin"
    built_plugins = {
        p.name
        for p in bin_dir.iterdir()
        if _is_plugin(p.name) and p.suffix in (".so", ".dll") and not p.is_symlink()
    }
    expected = {o for o in outputs if _is_plugin(o)}
    if built_plugins != expected:
        # meson.build lists the plugins by hand; fail loudly instead of shipping a partial set.
        sys.exit(
            f"backend plugins built {sorted(built_plugins)}, meson.build expects {sorted(expected)}"
        )
    cuda = bin_dir / "libggml-cuda.so"
    if "libggml-cuda.so" in outputs and not _links_driver(cuda):
        sys.exit(
            f"{cuda} does not name libcuda.so.1 in DT_NEEDED: it was linked against a libcuda "
            "stand-in without the driver's symbols (--as-needed dropped it), and would fail "
            "on a GPU with 'undefined symbol: cuMemCreate'. Link NVIDIA's stubs/libcuda.so "
            "or one from tools/cuda_stub.py (-DCUDA_cuda_driver_LIBRARY=...)."
        )
    for name in outputs:
        src, dst = (bin_dir / name).resolve(), outdir / name
        if not dst.is_file() or not filecmp.cmp(src, dst, shallow=False):
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)


if __name__ == "__main__":
    main()
