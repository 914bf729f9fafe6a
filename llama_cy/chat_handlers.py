"""llama-cpp-python's multimodal chat handlers, mapped onto llama.cpp's libmtmd.

In llama-cpp-python a chat handler holds a projector file (``clip_model_path``) and the
chat format its model family was trained on. Here a handler does the same for
``Llama(chat_handler=...)``: the projector is loaded as an :class:`~llama_cy.MtmdContext`
and the format renders through llama.cpp's chat engine. :class:`MtmdChatHandler` uses the
model's own chat template (what llama-server does with ``--mmproj``). The others render
their family's format as llama-cpp-python renders it, character for character
(tests/data/lcp_chat_formats.json holds prompts its own code rendered): our templates,
with :meth:`MtmdChatHandler.user_content` laying out a user message's parts (most put a
message's images before its text) and quirks kept where they change the prompt.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

__all__ = [
    "Gemma4ChatHandler",
    "Llama3VisionAlphaChatHandler",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "MiniCPMv26ChatHandler",
    "MoondreamChatHandler",
    "MtmdChatHandler",
    "NanoLlavaChatHandler",
    "ObsidianChatHandler",
    "Qwen25VLChatHandler",
]


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
    #: False: the format prints no system message's text
    renders_system: ClassVar[bool] = True

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
        """The messages as the family's format expects them: the default system message
        first where the chat's first system message is missing or empty (as
        llama-cpp-python decides it), and each user message's content as
        :meth:`user_content` lays it out for the template."""
        out = list(messages)
        first_system = next((m for m in out if m.get("role") == "system"), None)
        if self.default_system_message is not None and not (
            first_system is not None and first_system.get("content")
        ):
            out.insert(0, {"role": "system", "content": self.default_system_message})
        if self.renders_system is False:
            # llama.cpp's chat engine would fold a system message the template drops into
            # the first user turn: it goes by another role, which these formats skip.
            out = [
                {**m, "role": "system-unrendered"} if m.get("role") == "system" else m for m in out
            ]
        return [
            {**m, "content": self.user_content(m.get("content"))} if m.get("role") == "user" else m
            for m in out
        ]

    def user_content(self, content: Any) -> Any:
        """A user message's content as the template receives it (media parts become
        markers after this): unchanged here."""
        return content


def _media_first(
    content: Any, after_media: str = "", text: str = "{}", whole: str | None = None
) -> Any:
    """llama-cpp-python's layout of a user message in its vision formats: every image of
    the message (then each followed by ``after_media``), then each text part as ``text``
    (``{}`` is the part's text). A plain string becomes ``whole`` (default: ``text``)."""
    if isinstance(content, str):
        return (text if whole is None else whole).format(content)
    if not isinstance(content, list):
        return content
    media: list[Any] = []
    texts: list[str] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") in _MEDIA:
            media += [part, after_media] if after_media else [part]
        elif isinstance(part, Mapping) and part.get("type") == "text":
            texts.append(text.format(part.get("text", "")))
    # Adjacent text joined here: llama.cpp's chat engine puts a newline between parts.
    out: list[Any] = []
    for item in [*media, *texts]:
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        else:
            out.append(item)
    return [{"type": "text", "text": x} if isinstance(x, str) else x for x in out]


_MEDIA = ("image_url", "input_audio")


class Llava15ChatHandler(MtmdChatHandler):
    """LLaVA-1.5 (and BakLLaVA, ShareGPT4V, …): ``USER: <images><text>ASSISTANT: ``, with
    no newline between turns, as llama-cpp-python renders it (its template's newlines
    fall to Jinja's ``trim_blocks``), and its second ``USER: `` after a plain-string
    message."""

    default_system_message: ClassVar[str | None] = (
        "A chat between a curious human and an artificial intelligence assistant. "
        "The assistant gives helpful, detailed, and polite answers to the human's questions."
    )
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role == 'system' -%}{{ message.content }}"
        "{%- elif message.role == 'user' -%}{{ 'USER: ' + message.content }}"
        "{%- elif message.role == 'assistant' and message.content is not none -%}"
        "{{ 'ASSISTANT: ' + message.content }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ 'ASSISTANT: ' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        # A string is iterable to Jinja too: llama-cpp-python's format renders such a
        # message once as a string and once as an (empty) list of parts.
        return _media_first(content, whole="{}USER: ")


class ObsidianChatHandler(Llava15ChatHandler):
    """Obsidian: ChatML's markers with ``###`` ending each turn."""

    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role in ('system', 'user', 'assistant') -%}"
        "{{ '<|im_start|>' + message.role + '\n' + (message.content or '') }}"
        "{{ '\n###\n' if message.role == 'system' else '###\n' }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content)


class MoondreamChatHandler(Llava15ChatHandler):
    """moondream2: the images, then ``Question: …`` and ``Answer:`` paragraphs; system
    messages are not rendered."""

    renders_system = False

    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role == 'user' -%}{{ message.content }}"
        "{%- elif message.role == 'assistant' -%}{{ 'Answer:' + (message.content or '') + '\n\n' }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ 'Answer:' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content, "\n\n", "Question: {}\n\n")


class Llava16ChatHandler(Llava15ChatHandler):
    """LLaVA-1.6 (LLaVA-NeXT): the turns run together, each image on its own line, and
    the answer follows ``Answer:``."""

    default_system_message = str(Llava15ChatHandler.default_system_message) + " "
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role in ('system', 'user', 'assistant') -%}{{ message.content or '' }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ 'Answer:' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content, "\n")


class NanoLlavaChatHandler(Llava15ChatHandler):
    """nanoLLaVA: ChatML without a newline after ``<|im_end|>``."""

    default_system_message = "Answer the question"
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if message.role in ('system', 'user', 'assistant') -%}"
        "{{ '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>' }}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content)


class Llama3VisionAlphaChatHandler(Llava15ChatHandler):
    """llama-3-vision-alpha: Llama 3's headers; a system message leaves an empty turn."""

    default_system_message = None
    renders_system = False
    chat_template = (
        "{%- for message in messages -%}"
        "{{ '<|start_header_id|>' }}"
        "{%- if message.role in ('user', 'assistant') -%}"
        "{{ message.role + '<|end_header_id|>\n\n' + (message.content or '') }}"
        "{%- endif -%}"
        "{{ '<|eot_id|>' }}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}"
        "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
        "{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content)


class MiniCPMv26ChatHandler(Llava15ChatHandler):
    """MiniCPM-V 2.6: ChatML, images before the text."""

    default_system_message = "You are a helpful assistant."
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if loop.first and messages[0].role != 'system' -%}"
        "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}"
        "{%- endif -%}"
        "{{ '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>\n' }}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
    )

    def user_content(self, content: Any) -> Any:
        return _media_first(content)


class Qwen25VLChatHandler(Llava15ChatHandler):
    """Qwen2.5-VL: ChatML with the parts in their order, and the closing
    ``<|im_start|>assistant`` without its newline, as llama-cpp-python renders it. Its
    projector's M-RoPE positions run in the generation core."""

    def user_content(self, content: Any) -> Any:
        return content  # the parts in their own order

    default_system_message = "You are a helpful assistant."
    chat_template = (
        "{%- for message in messages -%}"
        "{%- if loop.first and message.role != 'system' -%}"
        "{{ '<|im_start|>system\n<|im_end|>\n' }}"
        "{%- endif -%}"
        "{{ '<|im_start|>' + message.role + '\n' + (message.content or '') + '<|im_end|>\n' }}"
        "{%- endfor -%}"
        "{{ '<|im_start|>assistant' }}"
    )


class Gemma4ChatHandler(MtmdChatHandler):
    """Gemma 4: the model's own chat template, as :class:`MtmdChatHandler`."""
