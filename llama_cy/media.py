"""Images, audio and video in requests: OpenAI content parts and llama-server's
``multimodal_data`` turned into bytes, with each media part replaced by a media-marker part.

The parts are llama-server's: ``image_url``, ``input_audio``, and ``input_video`` (or
OpenAI-style ``video_url``). The sources are llama-server's (``handle_media`` in its
server-common.cpp): a ``data:`` URI (``image/``, ``video/``, ``audio/``; base64), raw
base64, ``file://`` under a media folder the owner named (``--media-path``; none by
default), and ``http(s)://`` only where the owner allowed remote media. Bad media raise
:class:`~llama_cy.errors.MediaError` (a ValueError: a 400 from the server).
"""

from __future__ import annotations

import base64
import binascii
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_cy.errors import MediaError

__all__ = ["MEDIA_PARTS", "MediaSource", "decode_base64", "extract_media", "load_url"]

#: The content parts that carry media, and what each is.
MEDIA_PARTS = {
    "image_url": "image",
    "input_audio": "audio",
    "input_video": "video",
    "video_url": "video",
}

#: At most this many bytes are downloaded for one remote image (llama-server's 10 MB).
MAX_REMOTE_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaSource:
    """Where request media may come from besides the request itself."""

    #: ``file://`` URLs are read under this folder (llama-server's ``--media-path``)
    media_path: str | None = None
    #: ``http(s)://`` URLs are downloaded (``Llama(allow_remote_media=True)``)
    allow_remote: bool = False
    timeout: float = 10.0


def decode_base64(data: str) -> bytes:
    try:
        out = base64.b64decode(data.strip(), validate=True)
    except (binascii.Error, ValueError) as e:
        raise MediaError(f"invalid base64 media data: {e}") from None
    if not out:
        raise MediaError("the media data is empty")
    return out


def load_url(url: str, source: MediaSource) -> bytes:
    """The bytes behind one media URL (see the module docstring)."""
    if not isinstance(url, str) or not url:
        raise MediaError("a media part needs a non-empty url or data string")
    if url.startswith(("http://", "https://")):
        if not source.allow_remote:
            raise MediaError(
                "remote media URLs are not fetched unless allowed "
                "(Llama(allow_remote_media=True)); send the image as a data: URI"
            )
        try:
            with urllib.request.urlopen(url, timeout=source.timeout) as r:
                data: bytes = r.read(MAX_REMOTE_BYTES + 1)
        except OSError as e:
            raise MediaError(f"failed to download {url!r}: {e}") from None
        if len(data) > MAX_REMOTE_BYTES:
            raise MediaError(f"{url!r} is larger than {MAX_REMOTE_BYTES} bytes")
        return data
    if url.startswith("file://"):
        if source.media_path is None:
            raise MediaError("file:// URLs are not allowed unless a media path is given")
        base = Path(source.media_path).resolve()
        path = (base / url[len("file://") :]).resolve()
        if not path.is_relative_to(base):
            raise MediaError(f"file path is not allowed: {url[len('file://') :]!r}")
        try:
            return path.read_bytes()
        except OSError:
            raise MediaError(f"file does not exist or cannot be opened: {url!r}") from None
    if url.startswith("data:"):
        head, sep, body = url.partition(",")
        if not sep:
            raise MediaError("invalid data: URI (no comma)")
        if not head.startswith(("data:image/", "data:video/", "data:audio/")):
            raise MediaError(f"unsupported data: URI type {head!r} (image/, video/ or audio/)")
        if not head.endswith(";base64"):
            raise MediaError("a data: URI must be base64 encoded")
        return decode_base64(body)
    return decode_base64(url)


def _part_url(part: Mapping[str, Any]) -> str:
    kind = part["type"]
    if kind == "image_url":
        value = part.get("image_url")
        # llama-cpp-python also takes the URL as a plain string.
        url = value.get("url") if isinstance(value, Mapping) else value
    else:  # input_audio, input_video, video_url: {"data" or "url": ...}
        value = part.get(kind)
        if not isinstance(value, Mapping):
            raise MediaError(f"{kind} must be an object with 'data' or 'url'")
        url = value.get("data", value.get("url"))
        if isinstance(url, str) and not url.startswith(("data:", "http", "file://")):
            return url  # OpenAI's raw base64 with a separate "format"
    if not isinstance(url, str):
        raise MediaError(f"{kind} needs a url string")
    return url


def extract_media(
    messages: Sequence[Mapping[str, Any]],
    marker: str,
    source: MediaSource,
    *,
    vision: bool = True,
    audio: bool = True,
    video: bool = False,
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """The messages with each media part (:data:`MEDIA_PARTS`) replaced by a media marker
    part, and the media's bytes in prompt order. ``vision``/``audio``/``video``: what
    the projector takes; other media raise."""
    allowed = {"image": vision, "audio": audio, "video": video}
    files: list[bytes] = []
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if not isinstance(content, list):
            out.append(dict(msg) if isinstance(msg, Mapping) else msg)
            continue
        parts: list[Any] = []
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            what = MEDIA_PARTS.get(kind) if isinstance(kind, str) else None
            if what is None:
                parts.append(part)
                continue
            if not allowed[what]:
                raise MediaError(f"{what} input is not supported by this model's projector")
            files.append(load_url(_part_url(part), source))
            parts.append({"type": "media_marker", "text": marker})
        out.append({**msg, "content": parts})
    return out, files


def has_media(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any message has an image, audio or video part."""
    for msg in messages:
        content = msg.get("content") if isinstance(msg, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") in MEDIA_PARTS for p in content
        ):
            return True
    return False
