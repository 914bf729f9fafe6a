from collections.abc import Iterable
from os import PathLike
from typing import Self

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from llama_cy._handle import Handle
from llama_cy._model import LlamaModel

@disjoint_base
class LoraAdapter(Handle):
    """A LoRA adapter file applied on top of a model's weights."""

    @property
    def model(self) -> LlamaModel: ...
    @property
    def path(self) -> str: ...
    def __new__(cls, model: LlamaModel, path: str | PathLike[str]) -> Self: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def alora_invocation_tokens(self) -> npt.NDArray[np.int32]: ...

def load_control_vectors(
    items: Iterable[tuple[str | PathLike[str], float]],
) -> npt.NDArray[np.float32]: ...
