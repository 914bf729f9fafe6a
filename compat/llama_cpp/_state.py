"""llama-cpp-python's ``LlamaState`` (exported by :mod:`llama_cpp.llama`), in a module of
its own so that the caches that keep states need not import the ``Llama`` that makes them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["LlamaState"]


class LlamaState:
    """What :meth:`Llama.save_state` returns: the tokens evaluated, their scores, the
    context's state (llama.cpp's bytes) and the seed."""

    def __init__(
        self,
        input_ids: npt.NDArray[np.intc],
        scores: npt.NDArray[np.single],
        n_tokens: int,
        llama_state: bytes,
        llama_state_size: int,
        seed: int,
    ) -> None:
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed
