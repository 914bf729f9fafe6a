from collections.abc import Iterable, Iterator
from os import PathLike
from typing import Literal, Self, final

import numpy as np
import numpy.typing as npt

from llama_cy._backend import Device
from llama_cy._bitmap import Bitmap
from llama_cy._context import LlamaContext
from llama_cy._handle import Handle
from llama_cy._model import LlamaModel
from llama_cy._view import ViewOwner

def default_marker() -> str: ...
def projector_caps(path: str | PathLike[str]) -> tuple[bool, bool]: ...

@final
class InputChunks(Handle):
    """A tokenized multimodal prompt: a sequence of :class:`InputChunk`."""

    def __new__(cls) -> Self: ...
    @property
    def mctx(self) -> MtmdContext: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> InputChunk: ...
    def __iter__(self) -> Iterator[InputChunk]: ...
    @property
    def n_tokens(self) -> int: ...
    @property
    def n_pos(self) -> int: ...

@final
class InputChunk(Handle):
    """One chunk of an :class:`InputChunks`: text tokens, an image or a clip of audio."""

    def __new__(cls) -> Self: ...
    @property
    def parent(self) -> InputChunks: ...
    @property
    def type(self) -> Literal["text", "image", "audio"]: ...
    @property
    def n_tokens(self) -> int: ...
    @property
    def n_pos(self) -> int: ...
    @property
    def id(self) -> str | None: ...
    @property
    def tokens(self) -> npt.NDArray[np.int32]: ...

@final
class MtmdContext(ViewOwner):
    """A multimodal projector (``mmproj`` GGUF) loaded for a text model."""

    def __new__(
        cls,
        model: LlamaModel,
        path: str | PathLike[str],
        *,
        use_gpu: bool = True,
        n_threads: int | None = None,
        image_min_tokens: int = -1,
        image_max_tokens: int = -1,
        flash_attn: bool | None = None,
        warmup: bool = True,
        print_timings: bool = False,
        device: Device | None = None,
        batch_max_tokens: int = 1024,
        video_fps: float = 4.0,
        video_timestamp_interval_ms: int = 5000,
        video_ffmpeg_dir: str | PathLike[str] | None = None,
        media_marker: str | None = None,
    ) -> Self: ...
    @property
    def model(self) -> LlamaModel: ...
    @property
    def path(self) -> str: ...
    @property
    def vision(self) -> bool: ...
    @property
    def audio(self) -> bool: ...
    @property
    def video(self) -> bool: ...
    @property
    def audio_sample_rate(self) -> int: ...
    @property
    def uses_mrope(self) -> bool: ...
    @property
    def n_embd(self) -> int: ...
    @property
    def n_encodes(self) -> int: ...
    @property
    def marker(self) -> str: ...
    def bitmap(
        self,
        source: str | PathLike[str] | bytes | bytearray | memoryview | npt.NDArray[np.generic],
        id: str | None = None,
    ) -> Bitmap: ...
    def tokenize(
        self,
        text: str,
        bitmaps: Iterable[Bitmap] = (),
        *,
        add_special: bool = True,
        parse_special: bool = True,
    ) -> InputChunks: ...
    def encode(self, chunk: InputChunk) -> npt.NDArray[np.float32]: ...
    def encode_batch(
        self, chunks: Iterable[InputChunk], ctx: LlamaContext | None = None
    ) -> list[npt.NDArray[np.float32]]: ...
    def eval_chunk(
        self,
        ctx: LlamaContext,
        chunk: InputChunk,
        n_past: int,
        seq_id: int = 0,
        *,
        logits_last: bool = False,
        embd: npt.ArrayLike | None = None,
    ) -> int: ...
    def eval_chunks(
        self,
        ctx: LlamaContext,
        chunks: InputChunks,
        n_past: int = 0,
        seq_id: int = 0,
        *,
        logits_last: bool = True,
    ) -> int: ...
