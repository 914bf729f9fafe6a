"""llama.cpp's CPU placement of a thread pool (``common_cpu_params`` less the thread
count): the CPUs its threads may run on, their priority, strict placement and polling.
llama-server's ``-C``/``-Cr``/``--prio``/``--poll``/``--cpu-strict`` (and their
``-batch`` and ``-draft`` kin) make these; :class:`~llama_cy.LlamaContext` takes them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

__all__ = [
    "MAX_N_THREADS",
    "CpuParams",
    "parse_cpu_mask",
    "parse_cpu_range",
    "set_process_priority",
]

#: ggml's GGML_MAX_N_THREADS: the length of a thread pool's CPU mask.
MAX_N_THREADS = 512
#: ggml_sched_priority: low, normal, medium, high, realtime.
PRIORITIES = range(-1, 4)
# set_process_priority's nice values (common/common.cpp), by priority.
_NICE = {-1: 5, 0: 0, 1: -5, 2: -10, 3: -20}

_log = logging.getLogger("llama_cy")


@dataclass(frozen=True)
class CpuParams:
    """Where a thread pool's threads run. ``cpumask`` holds CPU numbers (None: any CPU);
    ``priority`` is ggml's: -1 low, 0 normal, 1 medium, 2 high, 3 realtime; ``poll``
    is how long idle threads busy-wait for work (0: not at all, 50: llama.cpp's default,
    100: mostly); ``strict_cpu`` pins each thread to one CPU of the mask."""

    cpumask: frozenset[int] | None = None
    priority: int = 0
    strict_cpu: bool = False
    poll: int = 50

    def __post_init__(self) -> None:
        if self.cpumask is not None:
            bad = [c for c in self.cpumask if not 0 <= c < MAX_N_THREADS]
            if bad:
                raise ValueError(f"CPU numbers must be in [0, {MAX_N_THREADS}), not {bad}")
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be -1 (low) to 3 (realtime), not {self.priority}")
        if not 0 <= self.poll < 2**32:
            raise ValueError(f"poll must be in [0, 2**32), not {self.poll}")


def parse_cpu_mask(mask: str) -> frozenset[int]:
    """llama.cpp's ``-C`` value: an arbitrarily long hex mask (``0x`` optional; at most
    128 digits are read, as ``parse_cpu_mask`` does), bit i meaning CPU i."""
    digits = mask[2:] if mask.startswith("0x") else mask
    digits = digits[:128]
    if not all(ch in "0123456789abcdefABCDEF" for ch in digits):
        raise ValueError(f"invalid CPU mask {mask!r}: expected hex digits")
    value = int(digits, 16) if digits else 0
    return frozenset(i for i in range(len(digits) * 4) if value >> i & 1)


def parse_cpu_range(text: str) -> frozenset[int]:
    """llama.cpp's ``-Cr`` value: ``lo-hi`` (inclusive; ``-hi`` from 0, ``lo-`` to the
    last CPU ggml can address)."""
    lo, dash, hi = text.partition("-")
    if not dash:
        raise ValueError(f"invalid CPU range {text!r}: expected [<start>]-[<end>]")
    try:
        start = int(lo) if lo else 0
        end = int(hi) if hi else MAX_N_THREADS - 1
    except ValueError:
        raise ValueError(f"invalid CPU range {text!r}: expected [<start>]-[<end>]") from None
    if not 0 <= start < MAX_N_THREADS or not 0 <= end < MAX_N_THREADS:
        raise ValueError(f"invalid CPU range {text!r}: CPUs are 0 to {MAX_N_THREADS - 1}")
    return frozenset(range(start, end + 1))


def set_process_priority(priority: int) -> bool:
    """The process's scheduling priority, as llama.cpp's tools set it from ``--prio``
    (a nice value on POSIX); a failure (raising it needs privileges) is a warning."""
    if priority == 0:
        return True
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be -1 (low) to 3 (realtime), not {priority}")
    if not hasattr(os, "setpriority"):
        _log.warning("setting the process priority is not supported on this platform")
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, 0, _NICE[priority])
    except OSError as exc:
        _log.warning("failed to set process priority %d: %s", priority, exc.strerror)
        return False
    return True
