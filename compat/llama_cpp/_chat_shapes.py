"""A text completion turned into a chat completion (or its chunks), as
llama-cpp-python's chat handlers turn theirs: an answer, or a call of one named tool;
the completion's ``logprobs`` in the chat shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "chunks_to_chat",
    "chunks_to_tool_call",
    "completion_to_chat",
    "completion_to_tool_call",
    "text_logprobs_to_chat",
]


def text_logprobs_to_chat(logprobs: dict[str, Any] | None) -> dict[str, Any] | None:
    """A text completion's ``logprobs`` in a chat completion's shape."""
    if logprobs is None:
        return None
    content = [
        {
            "token": token,
            "bytes": None,
            "logprob": logprob,
            "top_logprobs": [
                {"token": t, "logprob": lp, "bytes": None} for t, lp in (top or {}).items()
            ],
        }
        for token, logprob, top in zip(
            logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"], strict=False
        )
    ]
    return {"content": content, "refusal": None}


def _head(completion: dict[str, Any], chunk: bool) -> dict[str, Any]:
    """The fields a chat answer (or chunk) takes from its text completion."""
    return {
        "id": "chat" + completion["id"],
        "object": "chat.completion.chunk" if chunk else "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
    }


def _choice(choice: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"index": 0, **fields, "logprobs": text_logprobs_to_chat(choice.get("logprobs"))}


def completion_to_tool_call(
    name: str, completion: dict[str, Any], call_id: str | None = None
) -> dict[str, Any]:
    """A call of tool ``name`` whose arguments are the completion's text (its id:
    ``call_id``, else the chat-format handlers' ``call__0_NAME_ID``)."""
    choice = completion["choices"][0]
    call = {"name": name, "arguments": choice["text"]}
    message = {
        "role": "assistant",
        "content": None,
        "function_call": call,
        "tool_calls": [
            {
                "id": call_id if call_id is not None else f"call__0_{name}_{completion['id']}",
                "type": "function",
                "function": call,
            }
        ],
    }
    return {
        **_head(completion, False),
        "choices": [_choice(choice, message=message, finish_reason="tool_calls")],
        "usage": completion["usage"],
    }


def chunks_to_tool_call(name: str, chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    first = True
    for chunk in chunks:
        choice = chunk["choices"][0]
        call: dict[str, Any] = {"index": 0, "function": {"arguments": choice["text"]}}
        if first:
            call = {
                "index": 0,
                "id": f"call__0_{name}_{chunk['id']}",
                "type": "function",
                "function": {"name": name, "arguments": choice["text"]},
            }
            first = False
        done = choice["finish_reason"] is not None
        delta: dict[str, Any] = (
            {} if done else {"role": "assistant", "content": None, "tool_calls": [call]}
        )
        finish = "tool_calls" if done else None
        yield {
            **_head(chunk, True),
            "choices": [_choice(choice, delta=delta, finish_reason=finish)],
        }


def completion_to_chat(completion: dict[str, Any]) -> dict[str, Any]:
    choice = completion["choices"][0]
    message = {"role": "assistant", "content": choice["text"]}
    return {
        **_head(completion, False),
        "choices": [_choice(choice, message=message, finish_reason=choice["finish_reason"])],
        "usage": completion["usage"],
    }


def chunks_to_chat(chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for i, chunk in enumerate(chunks):
        head = _head(chunk, True)
        if i == 0:
            opening = {"index": 0, "delta": {"role": "assistant"}, "logprobs": None}
            yield {**head, "choices": [{**opening, "finish_reason": None}]}
        choice = chunk["choices"][0]
        delta = {"content": choice["text"]} if choice["finish_reason"] is None else {}
        finish = choice["finish_reason"]
        yield {**head, "choices": [_choice(choice, delta=delta, finish_reason=finish)]}
