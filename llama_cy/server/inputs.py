"""What a request asks for, read as llama-server reads it: prompts (text, tokens, both,
several), chat messages and their content parts, and logit biases."""

from __future__ import annotations

from typing import Any

from llama_cy.generation import Media
from llama_cy.media import MEDIA_PARTS, decode_base64
from llama_cy.server.core import Server
from llama_cy.server.schema import ApiError

__all__ = [
    "MediaTokens",
    "input_prompts",
    "is_int",
    "logit_bias",
    "lora_request",
    "messages",
    "prompt",
    "prompt_parts",
]


class MediaTokens(list[int]):
    """A prompt's tokens whose media positions are stand-ins, with its :class:`Media`."""

    media: Media


def input_prompts(server: Server, value: Any) -> list[list[int]]:
    """llama-server's ``prompt``: a string, a token array, an array mixing both (one
    prompt), an object ``{"prompt_string": ...}``, or an array of any of those (several
    prompts). Text gets BOS where it comes first; token ids are range-checked."""
    if isinstance(value, list) and value and not any(is_int(x) for x in value):
        return [_subprompt(server, x) for x in value]
    return [_subprompt(server, value)]


def is_int(x: Any) -> bool:
    """A JSON integer (a token id), not a boolean."""
    return isinstance(x, int) and not isinstance(x, bool)


def _subprompt(server: Server, value: Any) -> list[int]:
    if isinstance(value, dict) and "prompt_string" in value:
        if value.get("multimodal_data") is not None:
            return _multimodal(server, value["prompt_string"], value["multimodal_data"])
        value = value["prompt_string"]
    model = server.model
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(is_int(x) or isinstance(x, str) for x in value):
        tokens: list[int] = []
        for i, x in enumerate(value):
            if isinstance(x, str):
                tokens += model.tokenize(x, add_special=i == 0, parse_special=True).tolist()
            else:
                tokens.append(x)
        return server.preparer.tokens(tokens)
    raise ApiError(
        400,
        "'prompt' elements must be a string, a list of tokens, a JSON object with a "
        "prompt_string, or a list of mixed strings and tokens",
        param="prompt",
    )


def _multimodal(server: Server, text: Any, data: Any) -> MediaTokens:
    """llama-server's ``{"prompt_string": ..., "multimodal_data": [base64, ...]}``: one
    media marker in the text per entry."""
    if server.mtmd is None:
        raise ApiError(
            400,
            "multimodal data was given, but this server has no multimodal projector (--mmproj)",
            param="prompt",
        )
    if not isinstance(text, str) or not isinstance(data, list):
        raise ApiError(
            400,
            "a multimodal prompt is a prompt_string and a multimodal_data array of base64 strings",
            param="prompt",
        )
    if not all(isinstance(d, str) for d in data):
        raise ApiError(400, "multimodal_data entries must be base64 strings", param="prompt")
    files = [decode_base64(d) for d in data]
    prep = server.preparer
    tokens, media = prep.media_prompt(text, prep.bitmaps(files))
    out = MediaTokens(tokens)
    out.media = media
    return out


def logit_bias(server: Server, value: Any, bias_type: str | None = None) -> dict[int, float]:
    """llama-server's ``logit_bias``: ``[[token or text, bias or false], ...]`` or
    ``{"token id or text": bias}``; a text biases each of its tokens, ``false`` means
    never. llama-cpp-python's ``logit_bias_type="tokens"`` makes every key a text,
    special tokens parsed (its ``"input_ids"``, the default, keeps llama-server's rule)."""
    if bias_type not in (None, "input_ids", "tokens"):
        raise ApiError(
            400, "'logit_bias_type' must be 'input_ids' or 'tokens'", param="logit_bias_type"
        )
    items = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ApiError(400, "'logit_bias' must be an object or an array", param="logit_bias")
    out: dict[int, float] = {}
    n_vocab = server.model.n_vocab
    for item in items:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            raise ApiError(
                400, "'logit_bias' entries must be [token, bias] pairs", param="logit_bias"
            )
        key, bias = item
        if bias is False:
            b = float("-inf")
        elif isinstance(bias, (int, float)) and not isinstance(bias, bool):
            b = float(bias)
        else:
            raise ApiError(400, "a logit bias must be a number or false", param="logit_bias")
        if isinstance(key, str) and bias_type == "tokens":
            ids = server.model.tokenize(key, add_special=False, parse_special=True).tolist()
        elif isinstance(key, str) and not key.lstrip("-").isdigit():
            ids = server.model.tokenize(key, add_special=False, parse_special=False).tolist()
        elif isinstance(key, (int, str)) and not isinstance(key, bool):
            ids = [int(key)]
        else:
            raise ApiError(400, "a logit bias key must be a token or a text", param="logit_bias")
        for t in ids:
            if not 0 <= t < n_vocab:
                raise ApiError(400, f"logit_bias: token {t} outside [0, {n_vocab})")
            out[t] = b
    return out


def prompt(value: Any) -> str | list[int]:
    """A prompt: a string, a token array, or a one-element array of either."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, list)):
        value = value[0]
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        return value
    raise ApiError(
        400,
        "'prompt' must be a string or an array of token ids (one prompt per request)",
        param="prompt",
    )


def messages(
    value: list[Any], *, allow_empty: bool = False, media: bool = False
) -> list[dict[str, Any]]:
    """Chat messages, checked; text content parts stay parts (llama.cpp's chat engine
    joins them as llama-server does), and ``media`` (the server has a projector) lets
    media parts through (``image_url``, ``input_audio``, ``input_video``, ``video_url``).
    Only Anthropic's route takes an empty list, as llama-server does there."""
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(
                400, f"messages[{i}] must be an object with a string 'role'", param="messages"
            )
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind in MEDIA_PARTS and media:
                    continue  # read by the preparer (llama_cy.media)
                if kind in MEDIA_PARTS:
                    what = MEDIA_PARTS[kind]
                    raise ApiError(  # llama-server's words
                        400,
                        f"{what} input is not supported - hint: if this is unexpected, you "
                        "may need to provide the mmproj",
                        param="messages",
                    )
                if kind != "text" or not isinstance(part.get("text"), str):
                    raise ApiError(
                        400,
                        f"messages[{i}]: content parts must be text"
                        + (", image_url, input_audio, input_video or video_url" if media else "")
                        + f" parts, not {kind!r}",
                        param="messages",
                    )
        elif content is not None and not isinstance(content, str):
            raise ApiError(
                400,
                f"messages[{i}].content must be a string or an array of parts",
                param="messages",
            )
        out.append(m)
    if not out and not allow_empty:
        raise ApiError(400, "'messages' must not be empty", param="messages")
    return out


def prompt_parts(parts: Any) -> str:
    """An array of OpenAI content parts (text only: this server has no multimodal
    projector) as one text."""
    if not isinstance(parts, list):
        raise ApiError(400, "'content' must be a string or an array of parts", param="content")
    texts = []
    for part in parts:
        if not isinstance(part, dict) or part.get("type") != "text":
            raise ApiError(
                400,
                "only text content parts are supported: this server has no multimodal projector",
                param="content",
            )
        if not isinstance(part.get("text"), str):
            raise ApiError(400, "a text part needs a string 'text'", param="content")
        texts.append(part["text"])
    return "".join(texts)


def lora_request(value: Any, n: int, base: list[float]) -> list[float]:
    """``base`` with the scales of llama-server's ``[{"id": i, "scale": s}, ...]``."""
    if not isinstance(value, list):
        raise ApiError(400, "'lora' must be an array of {id, scale} objects", param="lora")
    out = list(base)
    for entry in value:
        i = entry.get("id") if isinstance(entry, dict) else None
        scale = entry.get("scale", 0.0) if isinstance(entry, dict) else None
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            raise ApiError(400, f"lora: no adapter with id {i!r} (there are {n})", param="lora")
        if not isinstance(scale, (int, float)) or isinstance(scale, bool):
            raise ApiError(400, "lora: a scale must be a number", param="lora")
        out[i] = float(scale)
    return out
