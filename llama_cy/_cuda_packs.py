"""CUDA plugin packs: native code for every NVIDIA GPU from Turing to Blackwell, in wheels
under PyPI's 100 MB per file.

One ``libggml-cuda`` with native code (SASS) for compute capabilities 7.5 to 12.0 does
not fit in one wheel (the figures are in docs/gpu-and-wheels.md), so the CUDA
distributions carry no plugin of their own: ``llama-cy-cu13`` depends on its *packs*,
``llama-cy-cu13-sm75-89`` and ``llama-cy-cu13-sm90-120``, each a package
(``llama_cy_cu13_sm75_89``) with one plugin built for a family of architectures and an
``ARCHS`` file naming them as ``CMAKE_CUDA_ARCHITECTURES`` does (``tools/cuda_pack.py``
makes them). At import, :func:`select` asks the driver for the visible GPUs' compute
capabilities and picks the pack that runs on the most of them, natively first. CUDA's
rules decide: code for X.Y runs natively on X.Z for Z >= Y, code for an arch-specific
``XYa`` only on X.Y, and PTX (``-virtual``) on anything at least as new, compiled by the
driver on first use. A plugin inside ``llama_cy`` itself (a build from source) is used
as it is, and no pack is looked at.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llama_cy._cuda_runtime import DRIVER, find_libraries, site_dirs

__all__ = ["PLUGIN", "Pack", "capabilities", "choose", "find_packs", "runs_on", "select"]

_log = logging.getLogger("llama_cy")
#: the plugin's file name in a pack (packs are built for Linux: tools/cuda_pack.py)
PLUGIN = "libggml-cuda.so"
_PACK_DIR = re.compile(r"llama_cy_cu(\d+)_sm\d+_\d+")
_ARCH = re.compile(r"(\d+)([af]?)(?:-(real|virtual))?")
#: the pack's plugin :func:`select` chose, which ``_backend`` loads; None: none chosen
selected: Path | None = None

NATIVE, PTX = 2, 1


@dataclass(frozen=True)
class Pack:
    """One installed pack: its package folder, CUDA major and architectures."""

    path: Path
    cuda_major: int
    archs: tuple[str, ...]

    @property
    def plugin(self) -> Path:
        return self.path / PLUGIN


def runs_on(archs: Iterable[str], capability: tuple[int, int]) -> int:
    """How code built for ``archs`` runs on a GPU of ``capability`` (major, minor):
    :data:`NATIVE`, :data:`PTX` (compiled by the driver on first use) or 0 (not at all).
    An entry without ``-real``/``-virtual`` is both, as in CMake."""
    major, minor = capability
    best = 0
    for arch in archs:
        m = _ARCH.fullmatch(arch.strip())
        if m is None:
            continue
        number, suffix, kind = int(m.group(1)), m.group(2), m.group(3)
        a_major, a_minor = divmod(number, 10)
        if suffix == "a":  # arch-specific features: that capability alone
            fits = (a_major, a_minor) == (major, minor)
            ptx_fits = fits
        else:
            fits = a_major == major and a_minor <= minor
            ptx_fits = (a_major, a_minor) <= (major, minor)
        if kind in (None, "real") and fits:
            best = NATIVE
        elif kind in (None, "virtual") and ptx_fits:
            best = max(best, PTX)
    return best


def find_packs(sites: Iterable[Path] | None = None) -> list[Pack]:
    """The packs installed under ``sites`` (default: the folders Python imports from)."""
    if sites is None:
        sites = [Path(p) for p in sys.path if p and os.path.isdir(p)]
    found = []
    for site in sites:
        for folder in sorted(Path(site).glob("llama_cy_cu*_sm*")):
            m = _PACK_DIR.fullmatch(folder.name)
            archs_file = folder / "ARCHS"
            if m is None or not archs_file.is_file() or not (folder / PLUGIN).is_file():
                continue
            archs = tuple(a for a in archs_file.read_text().split() if a)
            found.append(Pack(folder, int(m.group(1)), archs))
    return found


def capabilities() -> list[tuple[int, int]] | None:
    """The compute capabilities of the GPUs the driver shows (``CUDA_VISIBLE_DEVICES``
    applies), or None when the driver cannot be opened or initialised."""
    try:
        cuda = ctypes.CDLL(DRIVER)
    except OSError:
        return None
    count, dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    caps = []
    for i in range(count.value):
        if cuda.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR
        if cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0 and (
            cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) == 0
        ):
            caps.append((major.value, minor.value))
    return caps


def choose(
    packs: Sequence[Pack], caps: Sequence[tuple[int, int]], runtimes: Iterable[int] = ()
) -> Pack | None:
    """The pack that runs on the most of the GPUs ``caps``, then natively on the most,
    then one whose CUDA major's runtime is among ``runtimes``, then the newest major;
    None if none runs on any."""
    have = set(runtimes)

    def key(pack: Pack) -> tuple[int, int, bool, int]:
        ways = [runs_on(pack.archs, cap) for cap in caps]
        return (
            sum(w > 0 for w in ways),
            ways.count(NATIVE),
            pack.cuda_major in have,
            pack.cuda_major,
        )

    ranked = sorted(packs, key=key, reverse=True)
    return ranked[0] if ranked and key(ranked[0])[0] > 0 else None


def select(own: Path, sites: Iterable[Path] | None = None) -> Path | None:
    """The pack plugin to load when this build carries no CUDA plugin of its own
    (``own`` does not exist), also kept in :data:`selected`; None otherwise. Says in
    the log which pack serves which GPUs, or why none does."""
    global selected
    selected = None
    if own.is_file():
        return None
    sites = None if sites is None else list(sites)
    packs = find_packs(sites)
    if not packs:
        _log.warning(
            "CUDA: this build has no CUDA plugin and no pack is installed "
            "(llama-cy-cu<major>-sm<from>-<to>): the CPU serves"
        )
        return None
    caps = capabilities()
    if not caps:  # no driver (_cuda_runtime.prepare says why) or no GPU visible
        return None
    homes = site_dirs() if sites is None else sites  # where NVIDIA's packages would be
    runtimes = [p.cuda_major for p in packs if find_libraries(homes, p.cuda_major)]
    pack = choose(packs, caps, runtimes)
    shown = ", ".join(f"{a}.{b}" for a, b in caps)
    if pack is None:
        _log.warning(
            "CUDA: no installed pack (%s) runs on these GPUs (compute capability %s): "
            "the CPU serves",
            ", ".join(p.path.name for p in packs),
            shown,
        )
        return None
    ptx = [f"{a}.{b}" for a, b in caps if runs_on(pack.archs, (a, b)) == PTX]
    if ptx:
        _log.warning(
            "CUDA: %s has no native code for compute capability %s: the driver compiles "
            "its PTX on first use (slow once, then cached)",
            pack.path.name,
            ", ".join(ptx),
        )
    _log.info("CUDA: %s serves compute capability %s", pack.path.name, shown)
    selected = pack.plugin
    return selected
