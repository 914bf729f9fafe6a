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


def completion_to_tool_call(name: str, completion: dict[str, Any]) -> dict[str, Any]:
    text = completion["choices"][0]["text"]
    return {
        "id": "chat" + completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": name, "arguments": text},
                    "tool_calls": [
                        {
                            "id": f"call__0_{name}_{completion['id']}",
                            "type": "function",
                            "function": {"name": name, "arguments": text},
                        }
                    ],
                },
                "logprobs": text_logprobs_to_chat(completion["choices"][0].get("logprobs")),
                "finish_reason": "tool_calls",
            }
        ],
        "usage": completion["usage"],
    }


def chunks_to_tool_call(name: str, chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    first = True
    for chunk in chunks:
        base = {
            "id": "chat" + chunk["id"],
            "object": "chat.completion.chunk",
            "created": chunk["created"],
            "model": chunk["model"],
        }
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
        yield {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": text_logprobs_to_chat(choice.get("logprobs")),
                    "finish_reason": "tool_calls" if done else None,
                }
            ],
        }


def completion_to_chat(completion: dict[str, Any]) -> dict[str, Any]:
    choice = completion["choices"][0]
    return {
        "id": "chat" + completion["id"],
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": choice["text"]},
                "logprobs": text_logprobs_to_chat(choice.get("logprobs")),
                "finish_reason": choice["finish_reason"],
            }
        ],
        "usage": completion["usage"],
    }


def chunks_to_chat(chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    first = True
    for chunk in chunks:
        base = {
            "id": "chat" + chunk["id"],
            "model": chunk["model"],
            "created": chunk["created"],
            "object": "chat.completion.chunk",
        }
        if first:
            first = False
            yield {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant"},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            }
        choice = chunk["choices"][0]
        delta = {"content": choice["text"]} if choice["finish_reason"] is None else {}
        yield {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": text_logprobs_to_chat(choice.get("logprobs")),
                    "finish_reason": choice["finish_reason"],
                }
            ],
        }
