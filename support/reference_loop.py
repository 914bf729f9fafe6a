"""llama.cpp's own generation loop, as a native program, for tests and benchmarks.

``reference/llama_loop.cpp`` is compiled against the headers and shared libraries the
package was built with, so its output is what llama.cpp itself produces: tests compare
our Python loop's tokens with it, and the benchmark compares speeds with its timings.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import TypedDict

import llama_cy
from llama_cy import _build_config

SOURCE = Path(__file__).resolve().parent / "reference" / "llama_loop.cpp"


class ReferenceResult(TypedDict):
    """The JSON object llama_loop prints."""

    prompt_tokens: list[int]
    tokens: list[int]  # generated ids, an end-of-generation token excluded
    text: str  # the pieces (special=False), ill-formed UTF-8 replaced by U+FFFD
    text_hex: str  # the exact bytes of ``text``
    load_ms: float  # model load + context creation
    prompt_ms: float  # the prompt's llama_decode
    gen_ms: float  # n_gen samples and n_gen - 1 decodes (see llama_loop.cpp)
    n_gen: int
    tokens_per_s: float


def build_reference(cache_dir: Path) -> Path:
    """Compile llama_loop into ``cache_dir`` unless an up-to-date binary is there."""
    return compile_program(SOURCE, ("llama", "ggml", "ggml-base"), cache_dir)


def compile_program(source: Path, libraries: tuple[str, ...], cache_dir: Path) -> Path:
    """Compile a native program from ``source`` against the package's headers and the
    named libraries of its library folder, into ``cache_dir``, unless an up-to-date
    binary is there.

    The binary's name carries a hash of the library folder, whose path is baked in as the
    rpath, so builds of the package in different folders do not share one binary.
    """
    lib_dir = Path(llama_cy.get_lib_dir()).resolve()
    libs = [lib_dir / _build_config.LIBRARIES[name] for name in libraries]
    missing = [str(p) for p in libs if not p.is_file()]
    if missing:
        raise RuntimeError(f"llama_cy's library folder lacks {', '.join(missing)}")
    tag = hashlib.sha256(str(lib_dir).encode()).hexdigest()[:12]
    binary = Path(cache_dir) / f"{source.stem}-{tag}"
    newest_input = max(p.stat().st_mtime for p in (source, *libs))
    if binary.is_file() and binary.stat().st_mtime >= newest_input:
        return binary

    binary.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target, then renamed: a concurrent run never sees half a binary.
    partial = binary.with_name(f"{binary.name}.{os.getpid()}.partial")
    cmd = [
        *shlex.split(os.environ.get("CXX", "g++")),
        "-O2",
        "-std=c++17",
        "-Wall",
        "-Wextra",
        f"-I{llama_cy.get_include()}",
        str(source),
        "-o",
        str(partial),
        *(str(p) for p in libs),
        f"-Wl,-rpath,{lib_dir}",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"compiling {source.name} failed ({result.returncode}):\n"
            f"{shlex.join(cmd)}\n{result.stdout}{result.stderr}"
        )
    partial.replace(binary)
    return binary


def run_reference(
    binary: Path,
    model: Path,
    prompt: str,
    n_predict: int,
    *,
    sampler: str = "greedy",
    seed: int = 0,
    top_k: int = 40,
    temp: float = 0.8,
    threads: int = 2,
    ctx: int = 512,
    warmup: bool = False,
    flash_attn: str = "auto",
) -> ReferenceResult:
    """Run llama_loop once and return its JSON; RuntimeError (with its stderr) on failure."""
    if sampler not in ("greedy", "dist"):
        raise ValueError(f"sampler must be 'greedy' or 'dist', not {sampler!r}")
    cmd = [
        str(binary),
        "--lib-dir",
        llama_cy.get_lib_dir(),
        "--model",
        str(model),
        "--prompt",
        prompt,
        "--n-predict",
        str(n_predict),
        "--threads",
        str(threads),
        "--ctx",
        str(ctx),
        "--sampler",
        sampler,
    ]
    if warmup:
        cmd.append("--warmup")
    if flash_attn != "auto":
        cmd += ["--flash-attn", flash_attn]
    if sampler == "dist":
        cmd += ["--seed", str(seed), "--top-k", str(top_k), "--temp", repr(float(temp))]
    result = subprocess.run(cmd, capture_output=True)
    stderr = result.stderr.decode(errors="replace").strip()
    if result.returncode != 0:
        raise RuntimeError(f"llama_loop exited with status {result.returncode}: {stderr}")
    try:
        parsed: ReferenceResult = json.loads(result.stdout)
    except ValueError as exc:
        raise RuntimeError(
            f"llama_loop printed no valid JSON: {result.stdout!r}\n{stderr}"
        ) from exc
    return parsed
