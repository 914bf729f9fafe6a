"""A request's body mapped to the :class:`~llama_cy.prepare.Preparer`'s keywords: the
checked fields, the sampler settings by their Python names, the adapter scales, and one
:func:`prepare_chat` for every route that takes chat messages."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from starlette.requests import Request

from llama_cy.chat import ChatParser, ChatRender, render_here
from llama_cy.generation import Job
from llama_cy.sampling import MinTokensLogitsProcessor
from llama_cy.sampling_settings import SAMPLING_SETTINGS, server_names
from llama_cy.server import schema, worker
from llama_cy.server.core import Server
from llama_cy.server.inputs import logit_bias, lora_request, messages
from llama_cy.server.schema import ApiError

T = TypeVar("T")

__all__ = [
    "chat_kwargs",
    "chat_parser",
    "lora_for",
    "prepare_chat",
    "read_body",
    "read_converted_chat",
    "render_kwargs",
    "sampling",
    "stop",
    "verbose",
]

# Request fields that are sampler settings, by any of their names -> the Python name.
SAMPLING_FIELDS: dict[str, str] = {
    **{s.name: s.name for s in SAMPLING_SETTINGS},
    **server_names(),
    "seed": "seed",
    "grammar": "grammar",
    "logit_bias": "logit_bias",
    "samplers": "samplers",
}


async def read_body(
    server: Server,
    request: Request,
    fields: Mapping[str, tuple[type, ...]],
    *required: str,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request's checked fields, with ``defaults`` for those it does not give (a
    null it gives stays unset). The ``model`` field names any model: one is served (as
    llama-server, which answers whatever name is asked)."""
    raw = await worker.read_json(request)
    if isinstance(raw, dict):
        schema.refuse_unsupported(raw, fields)
    body = schema.check(raw, fields, required)
    for name, value in (defaults or {}).items():
        if name not in raw and value is not None:
            body[name] = value
    stop = body.get("stop")
    if isinstance(stop, list) and not all(isinstance(x, str) for x in stop):
        raise ApiError(400, "'stop' must be a string or an array of strings", param="stop")
    return body


def sampling(server: Server, body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's sampler settings by their Python names (the preparer fills in
    the server's defaults for the rest); ``ignore_eos`` biases every end-of-generation
    token to never, as llama-server does."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        name = SAMPLING_FIELDS.get(key)
        if name is not None:
            out[name] = value
    if body.get("logit_bias") is not None:
        out["logit_bias"] = logit_bias(server, body["logit_bias"], body.get("logit_bias_type"))
    min_tokens = body.get("min_tokens", 0)
    if min_tokens < 0:
        raise ApiError(400, "'min_tokens' must be >= 0", param="min_tokens")
    if min_tokens > 0:
        out["logits_processor"] = [MinTokensLogitsProcessor(min_tokens, server.model.token_eos)]
    if body.get("ignore_eos"):
        bias = dict(out.get("logit_bias") or server.settings.sampling.get("logit_bias") or {})
        bias.update(server.eog_bias)
        out["logit_bias"] = bias
    return out


def stop(server: Server, body: Mapping[str, Any]) -> str | list[str] | None:
    """The request's stop strings; where it gives none (no ``stop``, or only empty
    strings), the server's -r ones, as llama-server falls back to its antiprompts."""
    given = body.get("stop")
    words = [given] if isinstance(given, str) else list(given or ())
    if any(words):
        return given
    return list(server.settings.reverse_prompt) or given


def lora_for(server: Server, value: Any) -> tuple[float, ...]:
    """The adapter scales of a request: its ``lora`` list (``[{"id", "scale"}]``,
    unnamed adapters at 0, as llama-server), else the server's current scales."""
    if value is None:
        return tuple(server.lora_scales)
    return tuple(lora_request(value, len(server.loras), base=[0.0] * len(server.loras)))


def verbose(server: Server, body: Mapping[str, Any]) -> bool:
    """llama-server's ``__verbose`` extra: with ``-v``, or a request's ``verbose``."""
    return server.settings.verbose or bool(body.get("verbose"))


def render_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``Preparer.chat_prompt`` for a chat request's body (checked
    against ``schema.CHAT``), as llama-server reads them."""
    return {
        "tools": body.get("tools"),
        "tool_choice": body.get("tool_choice"),
        "parallel_tool_calls": body.get("parallel_tool_calls"),
        "functions": body.get("functions"),
        "function_call": body.get("function_call"),
        "response_format": body.get("response_format")
        or (
            {"type": "json_schema", "json_schema": {"schema": body["json_schema"]}}
            if "json_schema" in body
            else None
        ),
        "chat_template_kwargs": body.get("chat_template_kwargs"),
        "reasoning_format": body.get("reasoning_format"),
        "reasoning_effort": body.get("reasoning_effort"),
        "add_generation_prompt": body.get("add_generation_prompt"),
        "continue_final_message": body.get("continue_final_message"),
    }


def chat_kwargs(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``Preparer.chat`` for a chat request's body."""
    return {
        **render_kwargs(body),
        "max_tokens": body.get("max_completion_tokens", body.get("max_tokens")),
        "stop": stop(server, body),
        "logprobs": body.get("logprobs"),
        "top_logprobs": body.get("top_logprobs"),
        # llama-server's names (and its alias)
        "reasoning_budget": body.get("reasoning_budget_tokens", body.get("thinking_budget_tokens")),
        "reasoning_budget_message": body.get("reasoning_budget_message"),
        **sampling(server, body),
    }


async def read_converted_chat(
    request: Request, convert: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """A body in another API's shape (Anthropic's, the Responses API's), converted by
    ``convert`` to an OpenAI chat body, and checked as one."""
    chat = convert(await worker.read_json(request))
    schema.refuse_unsupported(chat)
    return schema.check(chat, schema.CHAT, ("messages",))


def n_choices(server: Server, body: Mapping[str, Any]) -> int:
    """llama-server's ``n_cmpl`` (or its alias ``n``): completions per prompt, between 1
    and the server's slots (they run side by side)."""
    name = "n_cmpl" if body.get("n_cmpl") is not None else "n"
    return int(schema.limited(name, body.get(name, 1), 1, server.settings.n_parallel))


def choice(job: Job, j: int) -> Job:
    """The ``j``-th of a request's choices: a seed it sets goes up by ``j``, as
    llama-server seeds its child tasks (a random one stays random)."""
    seed = job.params.seed
    if j == 0 or seed is None or seed == 0xFFFFFFFF:
        return job
    return replace(job, params=replace(job.params, seed=(seed + j) % 2**32))


def with_generation_fields(job: Job, body: Mapping[str, Any], server: Server, **fields: Any) -> Job:
    """``job`` with the request's llama-server fields that end or shift its text:
    ``n_indent`` and ``t_max_predict_ms`` (0 or less: off), ``n_keep`` (the server's
    ``--keep`` where it gives none) and ``n_discard``; and ``fields``, in the same copy."""
    return replace(
        job,
        n_indent=max(0, body.get("n_indent") or 0),
        t_max_predict_ms=max(0, body.get("t_max_predict_ms") or 0),
        n_keep=body.get("n_keep", server.settings.keep),
        n_discard=body.get("n_discard") or 0,
        **fields,
    )


def chat_messages(server: Server, value: list[Any], *, allow_empty: bool = False) -> list[Any]:
    """A chat body's messages, checked, as the server's chat handler lays them out (if
    it has one: llama-cpp-python's vision formats)."""
    msgs = messages(value, allow_empty=allow_empty, media=server.mtmd is not None)
    handler = server.settings.chat_handler
    return msgs if handler is None else handler.prepare(msgs)


#: A request with up to this many characters of text, nothing to compile (grammar, JSON
#: schema, tools, response format), no media and a short logit bias is prepared on the
#: event loop: tokenizing and rendering it take well under a millisecond, where a trip
#: to a worker thread costs a wake-up and a GIL hand-over each way, which under load was
#: most of the time to first token (bench row (7b)). Anything else goes to a thread.
LIGHT_TEXT = 16 * 1024
_COMPILED = ("grammar", "json_schema", "tools", "functions", "response_format")


def light(body: Mapping[str, Any], *text: Any) -> bool:
    """Whether ``body``, whose ``text`` (prompts, messages) is what it tokenizes, is
    prepared on the event loop (:data:`LIGHT_TEXT`)."""
    if any(body.get(k) for k in _COMPILED):
        return False
    bias = body.get("logit_bias")
    if bias is not None and (not isinstance(bias, dict | list) or len(bias) > 256):
        return False
    budget = LIGHT_TEXT
    stack = list(text)
    while stack:  # iterative: a deeply nested body cannot exhaust the Python stack
        value = stack.pop()
        if isinstance(value, str):
            budget -= len(value)
        elif isinstance(value, dict):
            if value.get("type", "text") != "text":
                return False  # an image, audio or file part: media to decode
            stack += value.values()
        elif isinstance(value, list):
            budget -= len(value)
            stack += value
        else:
            budget -= 8
        if budget < 0:
            return False
    return True


async def off_loop_if_heavy(body: Mapping[str, Any], text: Any, fn: Callable[[], T]) -> T:
    """``fn()`` on the event loop for a :func:`light` request, else in a worker thread."""
    return fn() if light(body, text) else await asyncio.to_thread(fn)


async def prepare_chat(server: Server, body: dict[str, Any], *, allow_empty: bool = False) -> Job:
    """A checked chat body's job (``Preparer.chat``). A :func:`light` request is prepared
    on the event loop, but while others generate its render goes to the server's native
    render threads (their tokens would wait behind it); any other in a worker thread:
    rendering, tokenizing and compiling a grammar never hold the loop for long."""

    def steps() -> Generator[ChatRender, dict[str, Any], Job]:
        # the messages and settings checked where this runs: a logit_bias can be long
        msgs = chat_messages(server, body["messages"], allow_empty=allow_empty)
        return server.preparer.chat_steps(msgs, **chat_kwargs(server, body))

    def prepare() -> Job:
        return render_here(steps())

    engine = server.engine
    if not (engine is not None and (engine.n_processing or engine.n_waiting)):
        job = await off_loop_if_heavy(body, body["messages"], prepare)
    elif server.chat_renders is not None and light(body, body["messages"]):
        job = await server.chat_renders.run(steps())
    else:
        job = await asyncio.to_thread(prepare)
    post = bool(body.get("post_sampling_probs"))
    return with_generation_fields(job, body, server, post_sampling_probs=post)


def chat_parser(job: Job, body: Mapping[str, Any]) -> ChatParser:
    """A parser of the reply to a chat job (one per choice: it keeps the stream's
    state), streaming as the request asks."""
    assert job.chat is not None
    return ChatParser(
        job.chat, parse_tool_calls=job.parse_tool_calls, stream=bool(body.get("stream"))
    )
