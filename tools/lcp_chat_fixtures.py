"""Write tests/data/lcp_chat_formats.json: prompts rendered by llama-cpp-python itself.

usage: <python with llama-cpp-python installed> tools/lcp_chat_fixtures.py

Each named chat format of llama-cpp-python renders a few conversations; the test suite
checks that llama_cpp (compat/) renders the same text and stops. Its vision chat handlers
render theirs as their ``__call__`` does before it tokenizes: the default system message
where the chat's first one is empty or missing, the handler's ``CHAT_FORMAT`` in Jinja's
sandbox with ``trim_blocks`` and ``lstrip_blocks``, then each image URL replaced by
libmtmd's marker (``<__media__>``); ``bos_token``/``eos_token`` are ``<s>``/``</s>``.
llama_cy's handlers (llama_cy.chat_handlers) must give the same text.
"""

from __future__ import annotations

import json
from pathlib import Path

import llama_cpp
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp import llama_chat_format

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "lcp_chat_formats.json"
FORMATS = [
    "llama-2", "llama-3", "alpaca", "qwen", "vicuna", "chatml", "mistral-instruct",
    "zephyr", "gemma", "openchat", "phind", "oasst_llama", "baichuan-2", "baichuan",
    "openbuddy", "redpajama-incite", "snoozy", "intel", "open-orca", "mistrallite",
    "pygmalion", "chatglm3", "saiga",
]  # fmt: skip
CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye"},
    ],
    [{"role": "user", "content": "One"}, {"role": "assistant", "content": "Two"}],
]


HANDLERS = [
    "Llava15ChatHandler", "Llava16ChatHandler", "ObsidianChatHandler", "MoondreamChatHandler",
    "NanoLlavaChatHandler", "Llama3VisionAlphaChatHandler", "MiniCPMv26ChatHandler",
    "Qwen25VLChatHandler",
]  # fmt: skip
IMAGE = "https://example.com/cat.png"  # the tests put a real image in its place
HANDLER_CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": IMAGE}},
            ],
        }
    ],
    [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": IMAGE},
                {"type": "text", "text": "Describe it."},
            ],
        },
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "And its colour?"},
    ],
]


def render_handler(cls: type, messages: list[dict[str, object]]) -> str:
    """The prompt text ``cls.__call__`` hands to libmtmd (before tokenizing)."""
    if llama_chat_format._get_system_message(messages) == "" and cls.DEFAULT_SYSTEM_MESSAGE:
        messages = [{"role": "system", "content": cls.DEFAULT_SYSTEM_MESSAGE}, *messages]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string(cls.CHAT_FORMAT).render(
        messages=messages, add_generation_prompt=True, eos_token="</s>", bos_token="<s>"
    )
    return text.replace(IMAGE, "<__media__>")


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city"},
            "unit": {"enum": ["c", "f"], "description": "Degrees"},
            "days": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["city"],
    },
}
TOOLS = [{"type": "function", "function": WEATHER}]
#: functionary calls: (request keywords, the completions the fake model answers)
FUNCTIONARY = [
    ({"messages": [{"role": "user", "content": "Hi"}]}, ["Hello there"]),
    ({"messages": [{"role": "user", "content": "Hi"}], "stream": True}, ["Hello there"]),
    (
        {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS},
        [" to=functions.get_weather:", '{"city": "Paris"}'],
    ),
    (
        {
            "messages": [{"role": "user", "content": "Weather?"}],
            "functions": [WEATHER],
            "function_call": {"name": "get_weather"},
            "temperature": 0.5,
        },
        ['{"city": "Rome"}'],
    ),
    (
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None,
                 "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
                {"role": "function", "name": "get_weather", "content": "cold"},
                {"role": "assistant", "content": "It is cold.",
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "still cold"},
                {"role": "user", "content": None},
            ],
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        },
        ['{"city": "Oslo"}'],
    ),
]  # fmt: skip


class Recorder:
    """A stand-in for Llama that records what a chat handler asks it to complete and
    answers with canned texts (tests/test_llama_cpp_compat.py drives llama_cpp's
    handler with this same class)."""

    verbose = False

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.calls: list[dict[str, object]] = []

    def create_completion(self, **kw: object) -> object:
        keep = ("prompt", "stop", "stream", "temperature", "max_tokens", "repeat_penalty")
        call = {k: kw.get(k) for k in keep}
        call["grammar"] = kw.get("grammar") is not None
        self.calls.append(call)
        text = self.replies.pop(0)
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}
        done = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m"}
        if not kw.get("stream"):
            return {**done, "choices": [choice], "usage": usage}
        last = {**choice, "text": ""}
        return iter([{**done, "choices": [{**choice, "finish_reason": None}]},
                     {**done, "choices": [last]}])  # fmt: skip


def functionary_cases() -> list[dict[str, object]]:
    import contextlib
    import io

    out = []
    for request, replies in FUNCTIONARY:
        fake = Recorder(replies)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints the grammar
            result = llama_chat_format.functionary_chat_handler(
                llama=fake, **json.loads(json.dumps(request))
            )
        if request.get("stream"):
            result = list(result)
        out.append({"request": request, "replies": replies, "calls": fake.calls,
                    "result": result})  # fmt: skip
    return out


def main() -> None:
    out = {"llama_cpp_python": llama_cpp.__version__, "conversations": CONVERSATIONS, "formats": {}}
    for name in FORMATS:
        fn = getattr(llama_chat_format, "format_" + name.replace("-", "_"), None)
        if name == "llama-2":
            fn = llama_chat_format.format_llama2
        elif name == "llama-3":
            fn = llama_chat_format.format_llama3
        elif name == "vicuna":
            fn = llama_chat_format.format
        elif name == "baichuan-2":
            fn = llama_chat_format.format_baichuan2
        assert fn is not None, name
        rendered = []
        for messages in CONVERSATIONS:
            r = fn(messages=messages)
            rendered.append({"prompt": r.prompt, "stop": r.stop, "added_special": r.added_special})
        out["formats"][name] = rendered
    out["handler_image"] = IMAGE
    out["handler_conversations"] = HANDLER_CONVERSATIONS
    out["handlers"] = {
        name: [render_handler(getattr(llama_chat_format, name), m) for m in HANDLER_CONVERSATIONS]
        for name in HANDLERS
    }
    out["functionary"] = functionary_cases()
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
