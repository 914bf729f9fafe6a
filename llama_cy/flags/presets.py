"""llama.cpp's preset flags (common/arg.cpp: ``--gpt-oss-20b-default``,
``--fim-qwen-7b-spec``, ...): each stands for a list of flags, read where it was given,
so that a later flag overrides them, as in llama.cpp."""

from collections.abc import Sequence

__all__ = ["ARG_PRESETS", "expand_presets"]

#: The flags that stand for others (common/arg.cpp's presets): given, their flags are
#: read in their place, so that a later flag overrides them, as in llama.cpp.
# fmt: off
ARG_PRESETS: dict[str, tuple[str, ...]] = {
    "--fim-qwen-1.5b-default": (
        "-hf", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "-hff", "qwen2.5-coder-1.5b-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--fim-qwen-3b-default": (
        "-hf", "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF", "-hff", "qwen2.5-coder-3b-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--fim-qwen-7b-default": (
        "-hf", "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "-hff", "qwen2.5-coder-7b-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--fim-qwen-7b-spec": (
        "-hf", "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "-hff", "qwen2.5-coder-7b-q8_0.gguf",
        "-hfd", "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF", "-md",
        "qwen2.5-coder-0.5b-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--fim-qwen-14b-spec": (
        "-hf", "ggml-org/Qwen2.5-Coder-14B-Q8_0-GGUF", "-hff", "qwen2.5-coder-14b-q8_0.gguf",
        "-hfd", "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF", "-md",
        "qwen2.5-coder-0.5b-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--fim-qwen-30b-default": (
        "-hf", "ggml-org/Qwen3-Coder-30B-A3B-Instruct-Q8_0-GGUF",
        "-hff", "qwen3-coder-30b-a3b-instruct-q8_0.gguf",
        "--port", "8012", "-ub", "1024", "-b", "1024", "-c", "0", "--cache-reuse", "256",
    ),
    "--embd-gemma-default": (
        "-hf", "ggml-org/embeddinggemma-300M-qat-q4_0-GGUF",
        "-hff", "embeddinggemma-300M-qat-Q4_0.gguf",
        "--port", "8011", "-ub", "2048", "-b", "2048", "-np", "32", "-c", "65536",
        "--embedding",
    ),
    "--gpt-oss-20b-default": (
        "-hf", "ggml-org/gpt-oss-20b-GGUF", "-hff", "gpt-oss-20b-mxfp4.gguf",
        "--port", "8013", "-ub", "2048", "-b", "32768", "-np", "2", "-c", "262144",
        "--temp", "1.0", "--top-p", "1.0", "--top-k", "0", "--min-p", "0.01", "--jinja",
    ),
    "--gpt-oss-120b-default": (
        "-hf", "ggml-org/gpt-oss-120b-GGUF",
        "--port", "8013", "-ub", "2048", "-b", "32768", "-np", "2", "-c", "262144",
        "--temp", "1.0", "--top-p", "1.0", "--top-k", "0", "--min-p", "0.01", "--jinja",
    ),
    "--vision-gemma-4b-default": (
        "-hf", "ggml-org/gemma-3-4b-it-qat-GGUF", "--port", "8014", "-c", "0", "--jinja",
    ),
    "--vision-gemma-12b-default": (
        "-hf", "ggml-org/gemma-3-12b-it-qat-GGUF", "--port", "8014", "-c", "0", "--jinja",
    ),
}

# fmt: on


def expand_presets(argv: Sequence[str]) -> list[str]:
    """``argv`` with each preset flag followed by the flags it stands for."""
    out: list[str] = []
    for a in argv:
        out += [a, *ARG_PRESETS.get(a, ())]
    return out
