import os

QUANT_TYPES: tuple[str, ...]

def quantize(
    path_in: str | os.PathLike[str],
    path_out: str | os.PathLike[str],
    ftype: str = "Q4_K_M",
    n_threads: int | None = None,
    *,
    allow_requantize: bool = False,
    quantize_output_tensor: bool = True,
    pure: bool = False,
) -> None: ...
