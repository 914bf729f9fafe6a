"""Request checking for the server: each endpoint's fields and their JSON types.

Known fields of the wrong type are refused with an OpenAI-shaped 400; unknown fields
are ignored, as OpenAI's API and llama-server do, so clients that send more than we
read (``user``, ...) keep working.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from llama_cy.sampling_settings import SAMPLING_SETTINGS, Setting

__all__ = [
    "CHAT",
    "COMPLETION",
    "EMBEDDINGS",
    "INFILL",
    "NATIVE_COMPLETION",
    "RERANK",
    "SAMPLING",
    "UNSUPPORTED",
    "ApiError",
    "check",
    "limited",
    "no_constant",
    "parse",
    "refuse_unsupported",
]

_NUM = (int, float)
_INT = (int,)
_STR = (str,)
_BOOL = (bool,)
_LIST = (list,)
_DICT = (dict,)
_NULL = (type(None),)


def _types(s: Setting) -> tuple[type, ...]:
    if s.type is int:
        return _INT + _NULL
    if s.type is tuple:
        return _LIST + _NULL
    return _NUM + _NULL


#: Fields every completion request may carry: the sampling settings by their Python and
#: llama-server names (from the one table), and the rest.
SAMPLING: dict[str, tuple[type, ...]] = {
    "model": _STR + _NULL,
    "stream": _BOOL + _NULL,
    "stream_options": _DICT + _NULL,
    "n": _INT + _NULL,
    "n_cmpl": _INT + _NULL,  # llama-server's name of n (the first given is read)
    **{s.name: _types(s) for s in SAMPLING_SETTINGS},
    **{s.server: _types(s) for s in SAMPLING_SETTINGS if s.server is not None},
    "seed": _INT + _NULL,
    "stop": _STR + _LIST + _NULL,
    # llama-server's text limits (code completion: llama.vim, llama.vscode) and shifts
    "n_indent": _INT + _NULL,
    "t_max_predict_ms": _INT + _NULL,
    "n_keep": _INT + _NULL,
    "n_discard": _INT + _NULL,
    # llama-server reads it as /completion does on every route; llama-cpp-python's
    # logit_bias_type "tokens" makes every key a text
    "logit_bias": _DICT + _LIST + _NULL,
    "logit_bias_type": _STR + _NULL,
    "min_tokens": _INT + _NULL,  # llama-cpp-python's: no end of sequence before that many
    "grammar": _STR + _NULL,
    "max_tokens": _INT + _NULL,
    "cache_prompt": _BOOL + _NULL,
    "n_cache_reuse": _INT + _NULL,
    "id_slot": _INT + _NULL,
    "verbose": _BOOL + _NULL,
    "response_fields": _LIST + _NULL,
    "sse_ping_interval": _NUM + _NULL,
    "ignore_eos": _BOOL + _NULL,
    "samplers": _STR + _LIST + _NULL,
    "timings_per_token": _BOOL + _NULL,
    "return_progress": _BOOL + _NULL,
    "backend_sampling": _BOOL + _NULL,
    "lora": _LIST + _NULL,
}

#: llama-server's request fields that llama_cy does not honour yet, with the value that
#: asks for nothing (llama-server's default): any other value is refused, never ignored.
UNSUPPORTED: dict[str, Any] = {
    "post_sampling_probs": False,
    "grammar_lazy": False,
    "grammar_triggers": [],
    "preserved_tokens": [],
    "chat_format": None,
    "generation_prompt": None,
    "parse_tool_calls": None,
    "chat_parser": None,
    "reasoning_control": None,
    "reasoning_budget_start_tag": None,
    "reasoning_budget_end_tags": None,
}


def refuse_unsupported(
    body: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]] | None = None
) -> None:
    """400 for a llama-server field that asks for what is not built here (on this
    endpoint: a field in ``fields`` is honoured by it)."""
    for name, off in UNSUPPORTED.items():
        if name in body and body[name] != off and name not in (fields or {}):
            raise ApiError(400, f"'{name}' is not supported by llama-cy serve (yet)", param=name)
    # "speculative.n_max" and its kin: llama-server b11434 compiles their parsing out
    # (server-schema.cpp, #if 0), so they are unknown fields there, ignored as such here.


#: /v1/completions
COMPLETION: dict[str, tuple[type, ...]] = {
    **SAMPLING,
    # an object: llama-server's {"prompt_string", "multimodal_data"} (tokenize_input_prompts)
    "prompt": _STR + _LIST + _DICT,
    "suffix": _STR + _NULL,
    "echo": _BOOL + _NULL,
    "logprobs": _INT + _NULL,
}

#: /v1/chat/completions
CHAT: dict[str, tuple[type, ...]] = {
    **SAMPLING,
    "messages": _LIST,
    "max_completion_tokens": _INT + _NULL,
    "tools": _LIST + _NULL,
    "tool_choice": _STR + _DICT + _NULL,
    "functions": _LIST + _NULL,
    "function_call": _STR + _DICT + _NULL,
    "response_format": _DICT + _NULL,
    "logprobs": _BOOL + _NULL,
    "top_logprobs": _INT + _NULL,
    "chat_template_kwargs": _DICT + _NULL,
    "parallel_tool_calls": _BOOL + _NULL,
    "reasoning_format": _STR + _NULL,
    "reasoning_effort": _STR + _NULL,
    "reasoning_budget_tokens": _INT + _NULL,
    "thinking_budget_tokens": _INT + _NULL,
    "reasoning_budget_message": _STR + _NULL,
    "json_schema": _DICT + _NULL,
    "add_generation_prompt": _BOOL + _NULL,
    "continue_final_message": _BOOL + _NULL,
    "post_sampling_probs": _BOOL + _NULL,
}

#: llama.cpp's native /completion
NATIVE_COMPLETION: dict[str, tuple[type, ...]] = {
    **SAMPLING,
    "prompt": _STR + _LIST + _DICT,
    "n_predict": _INT + _NULL,
    "n_probs": _INT + _NULL,
    "json_schema": _DICT + _NULL,
    "logit_bias": _DICT + _LIST + _NULL,
    "return_tokens": _BOOL + _NULL,
    "post_sampling_probs": _BOOL + _NULL,
    # [{"role", "delimiter"}]: where messages start, for checkpoints at user messages
    "message_delimiters": _LIST + _NULL,
    # a lazy grammar (server/lazy_grammar.py)
    "grammar_lazy": _BOOL + _NULL,
    "grammar_triggers": _LIST + _NULL,
    "preserved_tokens": _LIST + _NULL,
}

#: llama.cpp's /infill
INFILL: dict[str, tuple[type, ...]] = {
    **NATIVE_COMPLETION,
    "prompt": _STR + _NULL,
    "input_prefix": _STR + _LIST,
    "input_suffix": _STR + _LIST,
    "input_extra": _LIST + _NULL,
}

#: /v1/embeddings
EMBEDDINGS: dict[str, tuple[type, ...]] = {
    "input": _STR + _LIST + _DICT,
    "content": _STR + _LIST + _DICT,
    "model": _STR + _NULL,
    "encoding_format": _STR + _NULL,
    "embd_normalize": _INT + _NULL,
}

#: /rerank (Jina's shape: documents; TEI's: texts)
RERANK: dict[str, tuple[type, ...]] = {
    "query": _STR,
    "documents": _LIST + _NULL,
    "texts": _LIST + _NULL,
    "top_n": _INT + _NULL,
    "return_text": _BOOL + _NULL,
    "model": _STR + _NULL,
}

_JSON_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


class ApiError(Exception):
    """An error answered in OpenAI's shape: ``{"error": {code, message, type, param}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.headers = dict(headers or {})
        self.extra = extra

    def body(self) -> dict[str, Any]:
        error = {"code": self.status, "message": self.message, "type": self.type}
        return {"error": {**error, "param": self.param, **self.extra}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def parse(raw: bytes) -> Any:
    """The request's JSON; 400 if it is not JSON."""
    try:
        return json.loads(raw, parse_constant=no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "the request body nests too deeply") from None


def no_constant(name: str) -> Any:
    # Python's json takes NaN and Infinity; JSON (and llama-server) does not, and a NaN
    # temperature or bias has no meaning.
    raise ValueError(f"{name} is not a JSON value")


_I32 = 2**31 - 1
#: llama-server's limits of its request fields (server-schema.cpp): name -> (lowest,
#: highest, hard). A value outside a hard limit is refused in its words; outside a soft
#: one it is clamped. Of the names of one field (``ALIASES``) the first given is read.
LIMITS: dict[str, tuple[float, float, bool]] = {
    "sse_ping_interval": (-1, _I32, True),
    "n_predict": (-1, _I32, True),
    "max_completion_tokens": (-1, _I32, True),
    "max_tokens": (-1, _I32, True),
    "n_indent": (0, _I32, True),
    "n_keep": (-1, _I32, True),
    "n_discard": (0, _I32, True),
    "n_cache_reuse": (0, _I32, True),
    "t_max_predict_ms": (-1, 2**63 - 1, True),
    "top_k": (0, _I32, False),
    "top_p": (0.0, 1.0, False),
    "min_p": (0.0, 1.0, False),
    "xtc_probability": (0.0, 1.0, False),
    "xtc_threshold": (0.0, 1.0, False),
    "temperature": (0.0, math.inf, False),
    "repeat_last_n": (0, _I32, True),
    "dry_allowed_length": (0, _I32, True),
    "dry_penalty_last_n": (0, _I32, True),
    "mirostat": (0, 2, False),
    "adaptive_target": (-math.inf, 1.0, False),
    "adaptive_decay": (0.0, 0.99, True),
    "min_keep": (0, _I32, True),
    "reasoning_budget_tokens": (-1, _I32, True),
}
#: the names of one field, in the order llama-server reads them (the first given wins)
ALIASES = (("n_predict", "max_completion_tokens", "max_tokens"),)


def limited(name: str, value: Any, lo: float, hi: float, hard: bool = True) -> Any:
    """``value`` of field ``name`` within [lo, hi], as server-schema.cpp's field_num: a
    hard limit refuses it in llama-server's words (std::to_string of the field's C
    type), a soft one clamps it. Not a number: left to the type check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or lo <= value <= hi:
        return value
    if hard:

        def shown(x: float) -> str:
            return f"{x:.6f}" if isinstance(lo, float) else str(int(x))

        raise ApiError(
            400,
            f"Field '{name}': Value must be between {shown(lo)} <= value <= {shown(hi)}, "
            f"but got {shown(value)}",
            param=name,
        )
    return type(value)(min(max(value, lo), hi))


def check(
    body: Any, fields: Mapping[str, tuple[type, ...]], required: tuple[str, ...]
) -> dict[str, Any]:
    """The known, non-null fields of ``body``, each of its declared JSON type, within
    llama-server's limits (:data:`LIMITS`)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    for name in required:
        if body.get(name) is None:
            raise ApiError(400, f"'{name}' is required", param=name)
    out = {}
    for name, value in body.items():
        types = fields.get(name)
        if types is None:
            continue
        # JSON booleans are not numbers, though Python's bool is an int.
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            want = " or ".join(_JSON_NAMES[t] for t in types)
            raise ApiError(400, f"'{name}' must be {want}", param=name)
        if value is not None:
            out[name] = value
    skipped = {n for names in ALIASES for n in [n for n in names if n in out][1:]}
    for name in LIMITS.keys() & out.keys() - skipped:
        out[name] = limited(name, out[name], *LIMITS[name])
    return out
