"""Fail when a wheel is over the size limit (PyPI's default: 100 MB per file).

usage: python tools/check_wheel_size.py WHEELHOUSE [--max-mb 100]

Prints each wheel's size and its three largest members (for a CUDA wheel, the plugin:
its size is set by the pinned GPU architectures, ``-Dgpu_archs``), and exits 1 if any
wheel is over the limit.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path


def check(folder: Path, max_mb: float) -> list[str]:
    """Lines to print; the ones about wheels over ``max_mb`` start with ``TOO LARGE``."""
    lines = []
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        return [f"TOO LARGE? no wheel in {folder}"]
    for wheel in wheels:
        mb = wheel.stat().st_size / 1e6
        with zipfile.ZipFile(wheel) as z:
            members = sorted(z.infolist(), key=lambda i: i.compress_size, reverse=True)[:3]
        big = ", ".join(f"{m.filename} {m.compress_size / 1e6:.1f} MB" for m in members)
        tag = "TOO LARGE" if mb > max_mb else "ok"
        lines.append(f"{tag}: {wheel.name} {mb:.1f} MB (limit {max_mb:g} MB; largest: {big})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--max-mb", type=float, default=100.0)
    args = parser.parse_args(argv)
    lines = check(args.folder, args.max_mb)
    print("\n".join(lines))
    return 1 if any(line.startswith("TOO LARGE") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
