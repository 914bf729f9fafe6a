"""Row (10): an image prompt's encode and prefill, llama_cy against llama-mtmd-cli.

The text model is Gemma 3 270M; the projector is a random-weight LLaVA-1.5 one written
with the gguf package at a realistic size for its encoder's share of the work (a 224 px,
14 px-patch ViT of 4 blocks: 256 image tokens into Gemma's 640-wide input). No vision
model is packaged on PyPI, so the weights are random; the arithmetic is the same.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tiny_model import LLAMA_CPP, ROOT
from tiny_projectors import write_tiny_llava_projector

IMAGE = LLAMA_CPP / "tools" / "mtmd" / "test-1.jpeg"
QUESTION = "Describe this image."
#: The tests' Gemma-style Jinja template, rendered by llama.cpp's Jinja engine on both
#: sides (llama-mtmd-cli --jinja; the packaged Gemma file has no template of its own).
CHAT_TEMPLATE = ROOT / "tests" / "data" / "chat_template.jinja"


def projector(folder: Path) -> Path:
    path = folder / "bench-llava-640-mmproj.gguf"
    if not path.is_file():
        write_tiny_llava_projector(
            path.with_suffix(".partial"),
            n_embd_text=640,
            image_size=224,
            patch_size=14,
            n_embd=384,
            n_ff=1536,
            n_layer=4,
            n_head=6,
            n_mm=640,
        ).replace(path)
    return path


def mtmd_cli(
    binary: Path, model: Path, mmproj: Path, threads: int, n_predict: int = 1
) -> tuple[float, int, str]:
    """llama-mtmd-cli's own figures for one image question: (encode + prompt eval ms,
    prompt tokens, the greedy reply it printed)."""
    out = subprocess.run(
        [
            str(binary),
            "-m",
            str(model),
            "--mmproj",
            str(mmproj),
            "--image",
            str(IMAGE),
            "-p",
            QUESTION,
            "-n",
            str(n_predict),
            "--temp",
            "0",
            "-t",
            str(threads),
            "-c",
            "2048",
            "--jinja",
            "--chat-template",  # its source: llama-mtmd-cli has no --chat-template-file
            CHAT_TEMPLATE.read_text(),
            "-v",  # its encode and prompt-eval timings are logged at this level
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    log = out.stderr + out.stdout
    encode = re.search(r"mtmd batch encoding done in (\d+) ms", log)
    prompt = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", log)
    if encode is None or prompt is None:
        raise RuntimeError(f"no timings in llama-mtmd-cli's output:\n{log[-3000:]}")
    return float(encode.group(1)) + float(prompt.group(1)), int(prompt.group(2)), out.stdout.strip()
