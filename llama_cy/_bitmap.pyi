from os import PathLike
from typing import Self, final

import numpy as np
import numpy.typing as npt

from llama_cy._mtmd import MtmdContext
from llama_cy._view import ViewOwner

MAX_IMAGE_PIXELS: int

@final
class Bitmap(ViewOwner):
    """One decoded image (RGB, 8 bits a channel) or one clip of mono float32 audio."""

    def __new__(cls) -> Self: ...
    @staticmethod
    def from_bytes(
        mctx: MtmdContext, data: bytes | bytearray | memoryview, id: str | None = None
    ) -> Bitmap: ...
    @staticmethod
    def from_file(
        mctx: MtmdContext, path: str | PathLike[str], id: str | None = None
    ) -> Bitmap: ...
    @staticmethod
    def from_array(pixels: npt.ArrayLike, id: str | None = None) -> Bitmap: ...
    @staticmethod
    def from_audio(samples: npt.ArrayLike, id: str | None = None) -> Bitmap: ...
    @property
    def is_audio(self) -> bool: ...
    @property
    def is_video(self) -> bool: ...
    @property
    def video_info(self) -> dict[str, int | float]: ...
    @property
    def nx(self) -> int: ...
    @property
    def ny(self) -> int: ...
    @property
    def id(self) -> str | None: ...
    @id.setter
    def id(self, value: str) -> None: ...
    @property
    def data(self) -> npt.NDArray[np.uint8] | npt.NDArray[np.float32]: ...
