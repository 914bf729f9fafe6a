"""Common prefixes of token sequences, in C; the prompt cache's keys are int64 bytes."""

from collections.abc import Sequence

def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token sequences."""

def key_prefix(a: bytes, b: bytes) -> int:
    """The length in tokens of the longest common prefix of two keys."""

def best_match(keys: list[bytes], asked: bytes, keep_best: float, sim_best: float) -> int:
    """The index in ``keys`` of the cached prompt to load for ``asked``, -1 if none."""

def holder_of(keys: list[bytes], key: bytes) -> int:
    """The index of the first of ``keys`` that holds ``key`` whole, -1 if none."""

def prefixes_of(keys: list[bytes], key: bytes) -> list[int]:
    """The indexes of ``keys`` that ``key`` holds whole (prefixes of it, itself too)."""
