"""The memory of ``Llama.scores``: llama-cpp-python's ``(n_ctx, n_vocab)`` float32 buffer
(``(n_batch, n_vocab)`` without ``logits_all``), reserved rather than allocated.

Its pages are an anonymous private mapping with no swap reserved for them, so the
buffer costs address space only until a row is written: the resident memory grows by one
row (``n_vocab`` floats) per evaluated token whose logits are kept, not by the whole
buffer at creation (2 GiB at ``n_ctx=2048`` and Gemma 3's 262,144-token vocabulary,
which llama-cpp-python's users meet as ``np.ndarray`` touched on load: #1542).
"""

from __future__ import annotations

import mmap

import numpy as np
import numpy.typing as npt

__all__ = ["reserve"]


def reserve(rows: int, n_vocab: int) -> npt.NDArray[np.single]:
    """A writable ``(rows, n_vocab)`` float32 array of zeros whose memory is committed
    page by page as rows are written."""
    size = max(rows * n_vocab * 4, 1)
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20)
    flags |= getattr(mmap, "MAP_NORESERVE", 0)  # no commit charge for unwritten rows
    try:
        buf = mmap.mmap(-1, size, flags=flags)
    except (OSError, ValueError):  # a platform without these flags: plain zeroed pages
        buf = mmap.mmap(-1, size)
    return np.frombuffer(buf, dtype=np.single, count=rows * n_vocab).reshape(rows, n_vocab)
