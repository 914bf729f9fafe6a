from collections.abc import Sequence
from os import PathLike
from typing import Any

from llama_cy._backend import Device

__all__ = ["FIT_STATUSES", "fit_params"]

FIT_STATUSES: tuple[str, str, str]
MiB: int

def fit_params(
    path: str | PathLike[str],
    *,
    n_gpu_layers: int = -1,
    split_mode: str = "layer",
    main_gpu: int = 0,
    tensor_split: Sequence[float] | None = None,
    tensor_overrides: Sequence[tuple[str, str]] | None = None,
    devices: Sequence[Device] | None = None,
    use_mmap: bool = True,
    use_mlock: bool = False,
    load_mode: str | None = None,
    no_host: bool = False,
    n_ctx: int = 0,
    n_batch: int = 2048,
    n_ubatch: int | None = 512,
    n_seq_max: int = 1,
    flash_attn: bool | None = None,
    type_k: str | None = None,
    type_v: str | None = None,
    offload_kqv: bool | None = None,
    swa_full: bool | None = None,
    kv_unified: bool | None = None,
    embeddings: bool = False,
    margins: Sequence[int] = ...,
    n_ctx_min: int = 4096,
    draft: str | PathLike[str] | None = None,
    draft_n_gpu_layers: int = -1,
    draft_devices: Sequence[Device] | None = None,
    draft_tensor_overrides: Sequence[tuple[str, str]] | None = None,
    verbose: bool = False,
) -> dict[str, Any]: ...
