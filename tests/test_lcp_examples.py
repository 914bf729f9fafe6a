"""llama-cpp-python's own documented examples, run unchanged against llama_cy.

Each example is the text of llama-cpp-python's README (v0.3), with only the model path
filled in; it runs in a child interpreter where ``import llama_cpp`` is compat/'s package.
The examples print their results; the test checks what they printed.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from child import run_python

# The examples print with json; `import llama_cpp` is compat/'s (conftest's PYTHONPATH).
SHIM = """
import json
"""

EXAMPLES = {
    "completion": """
from llama_cpp import Llama

llm = Llama(
      model_path="./models/7B/llama-model.gguf",
      # n_gpu_layers=-1, # Uncomment to use GPU acceleration
      # seed=1337, # Uncomment to set a specific seed
      # n_ctx=2048, # Uncomment to increase the context window
)
output = llm(
      "Q: Name the planets in the solar system? A: ", # Prompt
      max_tokens=32, # Generate up to 32 tokens, set to None to generate up to the end of the context window
      stop=["Q:", "\\n"], # Stop generating just before the model would generate a new question
      echo=True # Echo the prompt back in the output
) # Generate a completion, can also call create_completion
print(json.dumps(output))
""",
    "chat": """
from llama_cpp import Llama
llm = Llama(
      model_path="path/to/llama-2/llama-model.gguf",
      chat_format="llama-2"
)
out = llm.create_chat_completion(
      messages = [
          {"role": "system", "content": "You are an assistant who perfectly describes images."},
          {
              "role": "user",
              "content": "Describe this image in detail please."
          }
      ]
)
print(json.dumps(out))
""",
    "json_mode": """
from llama_cpp import Llama
llm = Llama(model_path="path/to/model.gguf", chat_format="chatml")
out = llm.create_chat_completion(
    messages=[
        {
            "role": "system",
            "content": "You are a helpful assistant that outputs in JSON.",
        },
        {"role": "user", "content": "Who won the world series in 2020"},
    ],
    response_format={
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"team_name": {"type": "string"}},
            "required": ["team_name"],
        },
    },
    temperature=0.7,
)
print(json.dumps(out))
""",
    "function_calling": """
from llama_cpp import Llama
llm = Llama(model_path="path/to/chatml/llama-model.gguf", chat_format="chatml-function-calling")
out = llm.create_chat_completion(
      messages = [
        {
          "role": "system",
          "content": "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the user's questions. The assistant calls functions with appropriate input when necessary"

        },
        {
          "role": "user",
          "content": "Extract Jason is 25 years old"
        }
      ],
      tools=[{
        "type": "function",
        "function": {
          "name": "UserDetail",
          "parameters": {
            "type": "object",
            "title": "UserDetail",
            "properties": {
              "name": {
                "title": "Name",
                "type": "string"
              },
              "age": {
                "title": "Age",
                "type": "integer"
              }
            },
            "required": [ "name", "age" ]
          }
        }
      }],
      tool_choice={
        "type": "function",
        "function": {
          "name": "UserDetail"
        }
      }
)
print(json.dumps(out))
""",
    "embeddings": """
import llama_cpp

llm = llama_cpp.Llama(model_path="path/to/model.gguf", embedding=True)

embeddings = llm.create_embedding("Hello, world!")

# or create multiple embeddings at once

embeddings = llm.create_embedding(["Hello, world!", "Goodbye, world!"])
print(json.dumps(embeddings))
""",
    "streaming": """
from llama_cpp import Llama
llm = Llama(model_path="./models/7B/llama-model.gguf")
texts = []
for output in llm("Q: What are the colours of the rainbow? A: ", max_tokens=24, stream=True):
    texts.append(output["choices"][0]["text"])
chat = []
for chunk in llm.create_chat_completion(
    messages=[{"role": "user", "content": "Tell me a joke"}], max_tokens=24, stream=True
):
    delta = chunk["choices"][0]["delta"]
    if "content" in delta:
        chat.append(delta["content"])
print(json.dumps({"texts": texts, "chat": chat}))
""",
}

PATHS = [
    "./models/7B/llama-model.gguf",
    "path/to/llama-2/llama-model.gguf",
    "path/to/chatml/llama-model.gguf",
    "path/to/model.gguf",
]


def run_example(name: str, model: Path) -> object:
    code = textwrap.dedent(EXAMPLES[name])
    for placeholder in PATHS:
        code = code.replace(placeholder, str(model))
    result = run_python(SHIM + code)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_documented_example_runs_unchanged(name: str, gemma_chat_path: Path) -> None:
    # Gemma with its chat template, as GGUF files are published. The "chat" example asks
    # for llama-cpp-python's llama-2 format, under which Gemma answers "</s>" at once
    # (p = 0.93), as it does under llama-cpp-python: its content may be empty.
    out = run_example(name, gemma_chat_path)
    assert isinstance(out, dict)
    if name == "completion":
        choice = out["choices"][0]
        assert out["object"] == "text_completion"
        assert choice["text"].startswith("Q: Name the planets in the solar system? A: ")
        assert "\n" not in choice["text"]
        assert "Q:" not in choice["text"][3:]
        assert choice["finish_reason"] in ("stop", "length")
    elif name in ("chat", "json_mode"):
        message = out["choices"][0]["message"]
        assert out["object"] == "chat.completion"
        assert message["role"] == "assistant"
        assert isinstance(message["content"], str)
        assert message["content"] or name == "chat"
        if name == "json_mode" and out["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(message["content"])["team_name"], str)
    elif name == "function_calling":
        (call,) = out["choices"][0]["message"]["tool_calls"]
        args = json.loads(call["function"]["arguments"])
        assert call["function"]["name"] == "UserDetail"
        assert isinstance(args["name"], str)
        assert isinstance(args["age"], int)
    elif name == "embeddings":
        assert [d["index"] for d in out["data"]] == [0, 1]
        assert all(len(d["embedding"]) > 0 for d in out["data"])
    else:
        assert "".join(out["texts"])
        assert "".join(out["chat"])
