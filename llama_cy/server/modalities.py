"""A model's ``architecture`` in ``/models``, as llama-server's
``server_model_architecture_json`` gives it: the input modalities its projector adds to
text (images, audio, video), and text out; and the marker that stands for media in the
server's prompts."""

from __future__ import annotations

import functools
import logging
import os
import secrets
import string
from typing import Any

__all__ = ["architecture", "from_projector", "media_marker"]

_log = logging.getLogger("llama_cy")
#: the projector's metadata that mtmd_get_cap_from_file reads (clip.cpp's get_bool)
VISION, AUDIO = "clip.has_vision_encoder", "clip.has_audio_encoder"


@functools.cache
def media_marker() -> str:
    """The server's media marker, one per process as llama-server's ``get_media_marker``:
    ``$LLAMA_MEDIA_MARKER``, else ``<__media_`` and 32 random letters and digits ``__>``,
    so that text in a request cannot pass for an image (``/props`` tells clients it)."""
    pinned = os.environ.get("LLAMA_MEDIA_MARKER")
    if pinned:
        return pinned
    alnum = string.digits + string.ascii_uppercase + string.ascii_lowercase
    return "<__media_" + "".join(secrets.choice(alnum) for _ in range(32)) + "__>"


def architecture(image: bool = False, audio: bool = False, video: bool = False) -> dict[str, Any]:
    kinds = (("image", image), ("audio", audio), ("video", video))
    inputs = ["text", *(kind for kind, on in kinds if on)]
    return {"input_modalities": inputs, "output_modalities": ["text"]}


def from_projector(path: str | None) -> dict[str, Any]:
    """The architecture a projector file gives, read from its metadata without loading
    it (a router lists models before they run); text alone without one, or when the file
    cannot be read (said in the log, as llama-server says it). As llama-server's offline
    discovery, it cannot see video: a loaded model reports it."""
    if not path:
        return architecture()
    from llama_cy._gguf import gguf_flags
    from llama_cy.errors import ModelLoadError

    try:
        flags = gguf_flags(path, (VISION, AUDIO))
    except (ModelLoadError, OSError) as exc:  # missing or unreadable: text alone
        _log.warning("failed to read the multimodal capabilities of %r: %s", path, exc)
        return architecture()
    return architecture(image=flags[VISION], audio=flags[AUDIO])
