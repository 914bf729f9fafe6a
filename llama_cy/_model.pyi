from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from llama_cy._backend import Device
from llama_cy._vocab import LlamaVocab

_Path = str | PathLike[str]
_SplitMode = Literal["none", "layer", "row", "tensor"]
_LoadMode = Literal["auto", "none", "mmap", "mlock", "mmap+mlock", "dio"]
_Tokens = Sequence[int] | npt.NDArray[np.integer[Any]]

def default_gpu_layers() -> int: ...

@disjoint_base
class LlamaModel(LlamaVocab):
    """A GGUF model loaded by llama.cpp, with its vocabulary."""
    # Raises TypeError: instances come from the static constructors.
    def __init__(self, *args: object, **kwargs: object) -> None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def vocab_only(self) -> bool: ...
    @property
    def mtp(self) -> bool: ...
    @staticmethod
    def load(
        path: _Path,
        *,
        n_gpu_layers: int | None = None,
        split_mode: _SplitMode = "layer",
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        use_mmap: bool = True,
        use_mlock: bool = False,
        vocab_only: bool = False,
        check_tensors: bool = False,
        kv_overrides: Mapping[str, bool | int | float | str] | None = None,
        devices: Sequence[Device] | None = None,
        progress: Callable[[float], bool | None] | None = None,
        rpc_servers: str | Sequence[str] | None = None,
        use_extra_bufts: bool = True,
        tensor_overrides: Iterable[tuple[str, str]] | None = None,
        load_mode: _LoadMode | None = None,
        lazy_mode: Literal["off", "auto", "on"] = "auto",
        no_host: bool = False,
        load_mtp: bool = False,
    ) -> LlamaModel: ...
    @staticmethod
    def load_splits(
        paths: Iterable[_Path],
        *,
        n_gpu_layers: int | None = None,
        split_mode: _SplitMode = "layer",
        main_gpu: int = 0,
        tensor_split: Sequence[float] | None = None,
        use_mmap: bool = True,
        use_mlock: bool = False,
        vocab_only: bool = False,
        check_tensors: bool = False,
        kv_overrides: Mapping[str, bool | int | float | str] | None = None,
        devices: Sequence[Device] | None = None,
        progress: Callable[[float], bool | None] | None = None,
        rpc_servers: str | Sequence[str] | None = None,
        use_extra_bufts: bool = True,
        tensor_overrides: Iterable[tuple[str, str]] | None = None,
        load_mode: _LoadMode | None = None,
        lazy_mode: Literal["off", "auto", "on"] = "auto",
        no_host: bool = False,
        load_mtp: bool = False,
    ) -> LlamaModel: ...
    @staticmethod
    def from_metadata(
        metadata: dict[str, Any],
        set_tensor_data: Callable[[str, npt.NDArray[Any]], None],
        *,
        n_gpu_layers: int | None = None,
        split_mode: _SplitMode = "layer",
        main_gpu: int = 0,
        devices: Sequence[Device] | None = None,
    ) -> LlamaModel: ...
    def save(self, path: _Path) -> None: ...
    @property
    def address(self) -> int: ...
    @property
    def tensor_buffers(self) -> dict[str, str]: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    def meta_val(self, key: str) -> str | None: ...
    @property
    def desc(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def n_params(self) -> int: ...
    @property
    def ftype(self) -> str: ...
    @property
    def n_ctx_train(self) -> int: ...
    @property
    def n_embd(self) -> int: ...
    @property
    def n_embd_out(self) -> int: ...
    @property
    def n_layer(self) -> int: ...
    @property
    def n_layer_nextn(self) -> int: ...
    @property
    def n_head(self) -> int: ...
    @property
    def n_head_kv(self) -> int: ...
    @property
    def n_swa(self) -> int: ...
    @property
    def n_cls_out(self) -> int: ...
    @property
    def rope_type(self) -> str: ...
    @property
    def rope_freq_scale_train(self) -> float: ...
    @property
    def has_encoder(self) -> bool: ...
    @property
    def has_decoder(self) -> bool: ...
    @property
    def decoder_start_token(self) -> int: ...
    @property
    def is_recurrent(self) -> bool: ...
    @property
    def is_hybrid(self) -> bool: ...
    @property
    def is_diffusion(self) -> bool: ...
    def chat_template(self, name: str | None = None) -> str | None: ...
