"""Write a link-time stand-in for the CUDA driver, libcuda.so, from the toolkit's cuda.h.

usage: cuda_stub.py OUT_SO [CUDA_INCLUDE_DIR]

A CUDA toolkit installed without a driver (a build machine, a manylinux container without
NVIDIA's stubs/ folder) has no libcuda.so to link libggml-cuda.so against. A stand-in
with no symbols is worse than none: `--as-needed` drops it, the plugin loses its
`DT_NEEDED libcuda.so.1` and fails on a GPU with `undefined symbol: cuMemCreate`.
This one defines every function cuda.h declares (after the preprocessor maps names such
as cuMemGetInfo to their _v2 symbols), under the driver's SONAME, so the link keeps the
entry and the real driver serves the calls at run time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SONAME = "libcuda.so.1"
# `CUresult cuFoo(` after preprocessing: CUDAAPI expands to nothing on Linux.
DECL = re.compile(r"\bCUresult\s+(cu\w+)\s*\(")


def driver_symbols(include: Path) -> list[str]:
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    pre = subprocess.run(
        [cc, "-E", "-P", "-x", "c", "-I", str(include), "-"],
        input="#include <cuda.h>\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(set(DECL.findall(pre)))


def write_stub(out: Path, include: Path) -> int:
    names = driver_symbols(include)
    if not names:
        sys.exit(f"no driver functions found in {include / 'cuda.h'}")
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "cuda_stub.c"
        # Never called: the real driver is loaded in its place at run time.
        src.write_text("".join(f"int {n}(void) {{ return 999; }}\n" for n in names))
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [cc, "-shared", "-fPIC", f"-Wl,-soname,{SONAME}", "-o", str(out), str(src)],
            check=True,
        )
    return len(names)


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    include = Path(
        sys.argv[2] if len(sys.argv) == 3 else os.environ.get("CUDA_PATH", "/usr/local/cuda")
    )
    include = include if (include / "cuda.h").is_file() else include / "include"
    n = write_stub(Path(sys.argv[1]), include)
    print(f"{sys.argv[1]}: {n} driver functions, SONAME {SONAME}")


if __name__ == "__main__":
    main()
