from collections.abc import Iterable, Sequence
from typing import Any, Self

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from llama_cy._view import ViewOwner

@disjoint_base
class LlamaBatch(ViewOwner):
    """A ``llama_batch`` with a fixed capacity."""

    @property
    def capacity(self) -> int: ...
    @property
    def n_seq_max(self) -> int: ...
    @property
    def embd(self) -> int: ...
    def __new__(cls, capacity: int, n_seq_max: int = 1, *, embd: int = 0) -> Self: ...
    def __len__(self) -> int: ...
    @property
    def address(self) -> int:
        """The address of this batch's ``llama_batch`` struct, for a ctypes view
        (``llama_batch.from_address``); valid until ``close()``. From then on, each
        decode checks the token count and each token's sequence count written there."""
    @property
    def n_tokens(self) -> int: ...
    @property
    def n_outputs(self) -> int: ...
    def clear(self) -> None: ...
    def add(
        self, token: int, pos: int, seq_ids: Iterable[int] | int = (0,), logits: bool = False
    ) -> None: ...
    def add_embedding(
        self,
        embedding: Sequence[float] | npt.NDArray[np.floating[Any]],
        pos: int,
        seq_ids: Iterable[int] | int = (0,),
        logits: bool = False,
    ) -> None: ...
    def add_sequence(
        self,
        tokens: Sequence[int] | npt.NDArray[np.integer[Any]],
        pos: int = 0,
        seq_id: int = 0,
        *,
        logits_last: bool = True,
    ) -> None: ...
    def set_n_tokens(self, n: int) -> None: ...
    def set_seq_ids(self, i: int, seq_ids: Iterable[int] | int) -> None: ...
    @property
    def token(self) -> npt.NDArray[np.int32]: ...
    @property
    def pos(self) -> npt.NDArray[np.int32]: ...
    @property
    def output(self) -> npt.NDArray[np.int8]: ...
    @property
    def embeddings(self) -> npt.NDArray[np.float32]: ...
