"""Make the CUDA plugin packs (llama_cy/_cuda_packs.py): wheels that each carry one
``libggml-cuda`` built for a family of GPU architectures.

    python tools/cuda_pack.py pack PLUGIN --archs "90-real;100-real;120-real;120-virtual" \\
        --version 0.1.0 --plat manylinux_2_28_x86_64 -o wheelhouse
    python tools/cuda_pack.py split wheelhouse/llama_cy_cu13-*.whl \\
        --archs "75-real;80-real;86-real;89-real" -o wheelhouse

``pack`` wraps a plugin (from a ``--target ggml-cuda`` build) in a wheel named after its
CUDA major and architectures (``llama-cy-cu13-sm90-120``). ``split`` takes the plugin out
of CUDA wheels of llama_cy (one per CPython, the same plugin in each), rewrites them
without it and packs it once. A plugin must name the driver (``DT_NEEDED libcuda.so.1``)
and link one CUDA major's runtime; ``$ORIGIN/../llama_cy`` is set as its run path (with
patchelf, where there is one) so that it finds llama_cy's ``libggml-base``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _runtime() -> ModuleType:
    """llama_cy/_cuda_runtime.py from this checkout (stdlib only: no build needed)."""
    spec = importlib.util.spec_from_file_location(
        "_cuda_runtime", ROOT / "llama_cy/_cuda_runtime.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def family(archs: list[str]) -> str:
    """``sm75_89`` for 75-real;...;89-real: the lowest and highest compute capability."""
    numbers = sorted(int(re.match(r"\d+", a).group()) for a in archs)  # type: ignore[union-attr]
    return f"sm{numbers[0]}_{numbers[-1]}"


def parse_archs(text: str) -> list[str]:
    """``CMAKE_CUDA_ARCHITECTURES`` as ggml-cuda builds them: it turns 12x into the
    arch-specific 12xa (ggml/src/ggml-cuda/CMakeLists.txt), which runs on 12.x alone."""
    archs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not archs or any(re.fullmatch(r"\d+[af]?(-real|-virtual)?", a) is None for a in archs):
        raise SystemExit(f"--archs: CMAKE_CUDA_ARCHITECTURES entries expected, got {text!r}")
    return [re.sub(r"^(12\d)(-real|-virtual)?$", r"\1a\2", a) for a in archs]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(path: Path, files: dict[str, bytes], dist_info: str, executable: set[str]) -> None:
    """A wheel at ``path`` holding ``files`` (``dist_info``'s RECORD is written last)."""
    record = [_record_line(n, d) for n, d in files.items()] + [f"{dist_info}/RECORD,,"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name, data in [
            *files.items(),
            (f"{dist_info}/RECORD", "\n".join(record).encode() + b"\n"),
        ]:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if name in executable else 0o644) << 16
            zf.writestr(info, data)


def pack(plugin: Path, archs: list[str], version: str, plat: str, out: Path) -> Path:
    """Wrap ``plugin`` in a pack wheel in ``out``; its path."""
    rt = _runtime()
    if not rt.links_driver(plugin):
        raise SystemExit(f"{plugin}: does not name {rt.DRIVER} (DT_NEEDED): it would not load")
    majors = rt.needed_majors(plugin)
    if len(majors) != 1:
        raise SystemExit(f"{plugin}: links CUDA runtime majors {majors}, one expected")
    fam = family(archs)
    dist = f"llama-cy-cu{majors[0]}-{fam.replace('_', '-')}"
    package = f"llama_cy_cu{majors[0]}_{fam}"
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / plugin.name
        shutil.copyfile(plugin, lib)
        if shutil.which("patchelf"):
            subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/../llama_cy", str(lib)], check=True)
        else:
            print("patchelf not found: the run path is left as built", file=sys.stderr)
        data = lib.read_bytes()
    dist_info = f"{package}-{version}.dist-info"
    files = {
        f"{package}/__init__.py": (
            f'"""llama_cy\'s CUDA {majors[0]} plugin for {", ".join(archs)} '
            '(chosen at import by llama_cy._cuda_packs)."""\n'
        ).encode(),
        f"{package}/ARCHS": ("\n".join(archs) + "\n").encode(),
        f"{package}/libggml-cuda.so": data,
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
            f"Summary: llama_cy's CUDA {majors[0]} plugin for GPU architectures "
            f"{', '.join(archs)}\nLicense: MIT\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: llama_cy tools/cuda_pack.py\n"
            f"Root-Is-Purelib: false\nTag: py3-none-{plat}\n"
        ).encode(),
    }
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{package}-{version}-py3-none-{plat}.whl"
    write_wheel(wheel, files, dist_info, {f"{package}/libggml-cuda.so"})
    print(f"{wheel}: {wheel.stat().st_size / 1e6:.1f} MB")
    return wheel


def split(wheels: list[Path], archs: list[str], out: Path) -> list[Path]:
    """Take the plugin out of each llama_cy CUDA wheel (the same one in all) and pack it."""
    plugin_data: bytes | None = None
    version = plat = ""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            inside = [n for n in names if n.endswith("/libggml-cuda.so") and n.count("/") == 1]
            if len(inside) != 1:
                raise SystemExit(f"{wheel}: no CUDA plugin (llama_cy/libggml-cuda.so) inside")
            data = zf.read(inside[0])
            if plugin_data is not None and data != plugin_data:
                raise SystemExit(f"{wheel}: its plugin differs from the other wheels'")
            plugin_data = data
            kept = {n: zf.read(n) for n in names if n != inside[0] and not n.endswith("/RECORD")}
            modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
            dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        parts = wheel.name[: -len(".whl")].split("-")
        version, plat = parts[1], parts[-1]
        executable = {n for n, mode in modes.items() if mode & 0o111}
        out.mkdir(parents=True, exist_ok=True)
        write_wheel(out / wheel.name, kept, dist_info, executable)
    assert plugin_data is not None
    with tempfile.TemporaryDirectory() as tmp:
        plugin = Path(tmp) / "libggml-cuda.so"
        plugin.write_bytes(plugin_data)
        return [pack(plugin, archs, version, plat, out)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="wrap a built libggml-cuda in a pack wheel")
    p.add_argument("plugin", type=Path)
    p.add_argument("--version", required=True)
    p.add_argument("--plat", default="manylinux_2_28_x86_64")
    s = sub.add_parser("split", help="move the plugin of llama_cy CUDA wheels into a pack")
    s.add_argument("wheels", type=Path, nargs="+")
    for q in (p, s):
        q.add_argument(
            "--archs", required=True, help="the CMAKE_CUDA_ARCHITECTURES it was built for"
        )
        q.add_argument("-o", "--out", type=Path, default=Path("wheelhouse"))
    args = parser.parse_args()
    archs = parse_archs(args.archs)
    if args.command == "pack":
        pack(args.plugin, archs, args.version, args.plat, args.out)
    else:
        split(args.wheels, archs, args.out)


if __name__ == "__main__":
    main()
