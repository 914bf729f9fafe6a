"""llama-cpp-python's multimodal chat handlers, mapped onto llama.cpp's libmtmd.

In llama-cpp-python a chat handler holds a projector file (``clip_model_path``) and the
chat format its model family was trained on. Here a handler does the same for
``Llama(chat_handler=...)``: the projector is loaded as an :class:`~llama_cy.MtmdContext`
and the format renders through llama.cpp's chat engine. :class:`MtmdChatHandler` uses the
model's own chat template (what llama-server does with ``--mmproj``);
:class:`Llava15ChatHandler` renders LLaVA-1.5's format, as llama-cpp-python's does:
a system line, then ``USER:`` turns with a message's images before its text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

__all__ = ["Llava15ChatHandler", "MtmdChatHandler"]


class MtmdChatHandler:
    """A projector file and the chat template to use it with (None: the model's own).

    ``use_gpu``, ``image_min_tokens`` and ``image_max_tokens`` are
    :class:`~llama_cy.MtmdContext`'s. ``verbose`` is accepted for llama-cpp-python's
    signature; llama_cy logs through the ``llama_cy`` logger either way.
    """

    #: Jinja source of the family's chat format (None: the model's template)
    chat_template: ClassVar[str | None] = None
    #: system message inserted when a chat has none
    default_system_message: ClassVar[str | None] = None

    def __init__(
        self,
        clip_model_path: str | os.PathLike[str],
        verbose: bool = True,
        *,
        use_gpu: bool = True,
        image_min_tokens: int = -1,
        image_max_tokens: int = -1,
    ) -> None:
        if not os.path.isfile(clip_model_path):
            raise FileNotFoundError(f"projector file not found: {os.fspath(clip_model_path)!r}")
        self.clip_model_path = os.fspath(clip_model_path)
        self.verbose = verbose
        self.use_gpu = use_gpu
        self.image_min_tokens = image_min_tokens
        self.image_max_tokens = image_max_tokens

    def prepare(self, messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The messages as the family's format expects them."""
        out = list(messages)
        if self.default_system_message is not None and not any(
            m.get("role") == "system" for m in out
        ):
            out.insert(0, {"role": "system", "content": self.default_system_message})
        return out


class Llava15ChatHandler(MtmdChatHandler):
    """LLaVA-1.5 (and BakLLaVA, ShareGPT4V, …): ``USER: <images><text>\\nASSISTANT:``."""

    default_system_message = (
        "A chat between a curious human and an artificial intelligence assistant. "
        "The assistant gives helpful, detailed, and polite answers to the human's questions."
    )
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role == 'system' -%}{{ message.content }}"
        "{%- elif message.role == 'user' -%}{{ '\\nUSER: ' + message.content }}"
        "{%- elif message.role == 'assistant' and message.content -%}"
        "{{ '\\nASSISTANT: ' + message.content }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '\\nASSISTANT: ' }}{%- endif -%}"
    )

    def prepare(self, messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        out = []
        for m in super().prepare(messages):
            content = m.get("content")
            if m.get("role") == "user" and isinstance(content, list):
                # llama-cpp-python's format puts a message's images before its text.
                media = [p for p in content if p.get("type") in ("image_url", "input_audio")]
                text = [p for p in content if p.get("type") not in ("image_url", "input_audio")]
                m = {**m, "content": media + text}
            out.append(m)
        return out
