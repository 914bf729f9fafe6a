"""llama-cpp-python's ``llama_cpp.llama_speculative``."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
import numpy.typing as npt

from llama_cy.speculative import LlamaPromptLookupDecoding as _Lookup

__all__ = ["LlamaDraftModel", "LlamaPromptLookupDecoding"]


class LlamaDraftModel(abc.ABC):
    """A drafter written in Python (llama-cpp-python's base class). llama_cy drafts
    with llama.cpp's ``common_speculative``: ``Llama`` takes
    :class:`LlamaPromptLookupDecoding` and refuses other subclasses with that reason."""

    @abc.abstractmethod
    def __call__(
        self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any
    ) -> npt.NDArray[np.intc]: ...


class LlamaPromptLookupDecoding(_Lookup, LlamaDraftModel):
    """Prompt lookup decoding, run by llama.cpp's ``ngram-simple`` drafter."""

    __slots__ = ()

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        return self.find_candidate_pred_tokens(  # type: ignore[return-value]
            input_ids, self.max_ngram_size, self.num_pred_tokens
        )
