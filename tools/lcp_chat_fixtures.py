"""Write tests/data/lcp_chat_formats.json: prompts rendered by llama-cpp-python itself.

usage: <python with llama-cpp-python installed> tools/lcp_chat_fixtures.py

Each named chat format of llama-cpp-python renders a few conversations; the test suite
checks that llama_cpp (compat/) renders the same text and stops.
"""

from __future__ import annotations

import json
from pathlib import Path

import llama_cpp
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
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
