"""llama-mtmd-cli's evaluation as a native program (``reference/mtmd_ref.cpp``), for tests
and the benchmark: compiled against the package's own headers and libraries."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from reference_loop import compile_program

import llama_cy

SOURCE = Path(__file__).resolve().parent / "reference" / "mtmd_ref.cpp"


def build_mtmd_reference(cache_dir: Path) -> Path:
    """Compile mtmd_ref into ``cache_dir`` unless an up-to-date binary is there."""
    return compile_program(SOURCE, ("mtmd", "llama", "ggml", "ggml-base"), cache_dir)


def run_mtmd_reference(
    binary: Path,
    model: Path,
    mmproj: Path,
    prompt: str,
    media: list[Path],
    out: Path,
    *,
    n_predict: int = 8,
    threads: int = 2,
    warmup: bool = False,
    video_fps: float | None = None,
    video_timestamp_interval: int | None = None,
) -> dict[str, Any]:
    """Run mtmd_ref; its JSON plus ``embd`` (one array per media chunk) and ``logits``.
    ``warmup``: time a second evaluation of the prompt, after a first one. ``video_*``:
    how videos are read (llama-server's ``--video-fps``, ``--video-timestamp-interval``)."""
    env = dict(os.environ)
    if video_fps is not None:
        env["MTMD_REF_VIDEO_FPS"] = str(video_fps)
    if video_timestamp_interval is not None:
        env["MTMD_REF_VIDEO_TS_MS"] = str(video_timestamp_interval)
    cmd = [
        str(binary),
        llama_cy.get_lib_dir(),
        str(model),
        str(mmproj),
        prompt,
        str(n_predict),
        str(out),
        str(threads),
        "1" if warmup else "0",
        *map(str, media),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"mtmd_ref exited with {result.returncode}: {result.stderr[-3000:]}")
    parsed: dict[str, Any] = json.loads(result.stdout)
    embd: list[npt.NDArray[np.float32]] = []
    i = 0
    while (p := Path(f"{out}.embd.{i}")).is_file():
        embd.append(np.fromfile(p, dtype=np.float32))
        i += 1
    parsed["embd"] = embd
    parsed["logits"] = np.fromfile(f"{out}.logits", dtype=np.float32)
    return parsed
