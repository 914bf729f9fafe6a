"""Where a CUDA build finds NVIDIA's runtime libraries: in NVIDIA's pip packages.

The CUDA plugin (``libggml-cuda``) links ``libcudart``, ``libcublas`` and
``libcublasLt`` by name. A wheel does not carry them (their size, their licence);
NVIDIA publishes them on PyPI: ``nvidia-cuda-runtime-cu12`` and ``nvidia-cublas-cu12``
install into ``site-packages/nvidia/cuda_runtime/lib`` and ``nvidia/cublas/lib``, and
CUDA 13's ``nvidia-cuda-runtime`` and ``nvidia-cublas`` into ``nvidia/cu13/lib``
(``bin/x86_64`` on Windows). Before the plugins load, :func:`prepare` reads which
major version the plugin was linked against, opens the libraries of that version it
finds there (globally, so that the loader resolves the plugin's names to them), and
says plainly when the NVIDIA driver is missing: the plugin then does not load and the
CPU serves. Libraries on the system's own search path (a CUDA toolkit) need nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "driver_available",
    "find_libraries",
    "links_driver",
    "needed_majors",
    "open_driver",
    "prepare",
    "site_dirs",
]

_log = logging.getLogger("llama_cy")
#: the NVIDIA driver's library, which comes with the driver and never from PyPI
DRIVER = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def _windows(system: str | None) -> bool:
    return (system or sys.platform) == "win32"


def library_names(major: int, system: str | None = None) -> list[str]:
    """The files of CUDA ``major``'s runtime and cuBLAS, in the order they must load."""
    if _windows(system):
        return [f"cudart64_{major}.dll", f"cublasLt64_{major}.dll", f"cublas64_{major}.dll"]
    return [f"libcudart.so.{major}", f"libcublasLt.so.{major}", f"libcublas.so.{major}"]


def library_dirs(site: Path, major: int, system: str | None = None) -> list[Path]:
    """Where NVIDIA's packages put those files under one ``site-packages`` folder."""
    nvidia = site / "nvidia"
    if major >= 13:  # one package folder per CUDA major
        return [nvidia / f"cu{major}" / ("bin/x86_64" if _windows(system) else "lib")]
    sub = "bin" if _windows(system) else "lib"
    return [nvidia / "cuda_runtime" / sub, nvidia / "cublas" / sub]


def site_dirs() -> list[Path]:
    """The folders Python imports from that could hold NVIDIA's packages."""
    return [Path(p) for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]


def find_libraries(sites: Iterable[Path], major: int, system: str | None = None) -> list[Path]:
    """CUDA ``major``'s libraries found in NVIDIA's packages, in load order (each from
    the first folder that has it)."""
    sites = list(sites)
    found = []
    for name in library_names(major, system):
        for site in sites:
            hit = next(
                (d / name for d in library_dirs(site, major, system) if (d / name).is_file()),
                None,
            )
            if hit is not None:
                found.append(hit)
                break
    return found


def needed_majors(plugin: Path) -> list[int]:
    """The CUDA majors whose ``libcudart`` the ELF file ``plugin`` links (DT_NEEDED)."""
    majors = set()
    for name in _dt_needed(plugin):
        m = re.fullmatch(r"libcudart\.so\.(\d+)", name)
        if m:
            majors.add(int(m.group(1)))
    return sorted(majors)


def _dt_needed(path: Path) -> list[str]:
    """The DT_NEEDED names of a 64-bit little-endian ELF shared object ([] otherwise)."""
    data = path.read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        if off + 64 > len(data):
            return []
        (sh_type,) = struct.unpack_from("<I", data, off + 4)
        sh_offset, sh_size = struct.unpack_from("<QQ", data, off + 24)
        (sh_link,) = struct.unpack_from("<I", data, off + 40)
        sections.append((sh_type, sh_offset, sh_size, sh_link))
    names = []
    for sh_type, offset, size, link in sections:
        if sh_type != 6 or link >= len(sections):  # SHT_DYNAMIC, with its string table
            continue
        strtab = sections[link][1]
        for entry in range(offset, min(offset + size, len(data) - 15), 16):
            tag, value = struct.unpack_from("<qQ", data, entry)
            if tag == 0:  # DT_NULL
                break
            if tag == 1:  # DT_NEEDED
                end = data.find(b"\0", strtab + value)
                names.append(data[strtab + value : end].decode("utf-8", "replace"))
    return names


def links_driver(plugin: Path) -> bool:
    """Whether the ELF file ``plugin`` names the driver (:data:`DRIVER`) in DT_NEEDED:
    linked against a stand-in with no symbols, ``--as-needed`` drops the entry and the
    plugin fails on a GPU with ``undefined symbol: cuMemCreate``."""
    return DRIVER in _dt_needed(plugin)


def open_driver() -> str | None:
    """Open the NVIDIA driver's library (:data:`DRIVER`) globally, before the plugin, so
    that the plugin's driver calls resolve to it; why it cannot be opened, or None."""
    try:
        ctypes.CDLL(DRIVER, mode=getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0))
    except OSError as exc:
        return str(exc)
    return None


def driver_available() -> bool:
    """Whether the NVIDIA driver's library (:data:`DRIVER`) loads."""
    return open_driver() is None


def preload(paths: Sequence[Path]) -> list[Path]:
    """Open ``paths`` globally, in order; the ones that opened."""
    opened = []
    mode = getattr(os, "RTLD_GLOBAL", 0) | getattr(os, "RTLD_NOW", 0)
    for path in paths:
        if _windows(None):
            os.add_dll_directory(str(path.parent))  # type: ignore[attr-defined,unused-ignore]
        try:
            ctypes.CDLL(str(path), mode=mode)
        except OSError as exc:
            _log.warning("CUDA: cannot load %s: %s", path, exc)
            continue
        opened.append(path)
    return opened


def prepare(plugin: Path) -> list[Path]:
    """Before the CUDA plugin ``plugin`` loads: open the runtime libraries of its CUDA
    major from NVIDIA's pip packages (the ones opened), and log a clear line when the
    driver is missing."""
    why = open_driver()
    if why is not None:
        _log.warning(
            "CUDA: the NVIDIA driver (%s) is not installed or not visible (%s): the CUDA "
            "backend is skipped and the CPU serves",
            DRIVER,
            why,
        )
        return []
    # A PE file's imports are not read here: on Windows both majors are tried.
    majors = [12, 13] if _windows(None) else needed_majors(plugin) if plugin.is_file() else []
    opened: list[Path] = []
    for major in majors:
        opened += preload(find_libraries(site_dirs(), major))
    return opened
