from collections.abc import Mapping, Sequence
from typing import Any, Self, final

import numpy as np
import numpy.typing as npt

from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy._handle import Handle
from llama_cy._model import LlamaModel

SPEC_TYPES: tuple[str, ...]

@final
class Speculator(Handle):
    """llama.cpp's speculative drafting for the sequences of a target context."""

    def __new__(
        cls,
        target: LlamaContext,
        types: str | Sequence[str] | None = None,
        *,
        draft_model: LlamaModel | None = None,
        draft_context: dict[str, Any] | None = None,
        n_max: int | None = None,
        n_min: int | None = None,
        p_min: float | None = None,
        ngram_simple: Mapping[str, int] | None = None,
        ngram_map_k: Mapping[str, int] | None = None,
        ngram_map_k4v: Mapping[str, int] | None = None,
        ngram_mod: Mapping[str, int] | None = None,
        ngram_cache: Mapping[str, str] | None = None,
        synth_len: float | None = None,
        synth_rates: Sequence[float] | None = None,
        backend_sampling: bool | None = None,
        probabilistic: bool | None = None,
    ) -> Self: ...
    @property
    def target(self) -> LlamaContext: ...
    @property
    def n_seq(self) -> int: ...
    @property
    def types(self) -> str: ...
    @property
    def n_max(self) -> int: ...
    @property
    def has_draft_model(self) -> bool: ...
    @property
    def draft_context(self) -> LlamaContext | None: ...
    @property
    def all_outputs(self) -> bool: ...
    @property
    def can_shift(self) -> bool: ...
    @property
    def synth_probs(self) -> tuple[float, ...]: ...
    def begin(
        self, tokens: Sequence[int] | npt.NDArray[np.integer[Any]], seq_id: int = 0
    ) -> None: ...
    def process(self, batch: LlamaBatch) -> None: ...
    def request(
        self,
        tokens: Sequence[int] | npt.NDArray[np.integer[Any]],
        last: int,
        seq_id: int = 0,
        *,
        n_max: int | None = None,
        pos: int | None = None,
        temp: float = 1.0,
        seed: int = 0xFFFFFFFF,
        distributions: bool = False,
    ) -> None: ...
    def draft_all(self) -> None: ...
    def result(self, seq_id: int = 0) -> npt.NDArray[np.intc]: ...
    def result_q(
        self, seq_id: int = 0
    ) -> list[tuple[npt.NDArray[np.intc], npt.NDArray[np.float32]]]: ...
    @property
    def probabilistic(self) -> bool: ...
    def draft(
        self,
        tokens: Sequence[int] | npt.NDArray[np.integer[Any]],
        seq_id: int = 0,
        *,
        n_max: int | None = None,
    ) -> npt.NDArray[np.intc]: ...
    def accept(self, n: int, seq_id: int = 0) -> None: ...
    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool: ...
    def seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None: ...
    def clear(self) -> None: ...
