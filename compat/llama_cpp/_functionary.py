"""llama-cpp-python's ``functionary`` chat format (MeetKai's first function-calling
models, v0): the functions as a TypeScript-like namespace in a system message, the
conversation as ``role:\\n</s>text</s>`` turns, and a call made in two completions: the
function's name (``assistant to=functions.NAME:``), then its arguments under a grammar
of its parameters' JSON schema. Rendered and driven as llama-cpp-python 0.3.x does (the
tests compare the prompts and completions it asks for with its own)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._chat_shapes import chunks_to_chat, completion_to_chat, completion_to_tool_call
from .llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

__all__ = ["functionary_chat_handler", "schema_of_functions"]

SYSTEM_MESSAGE = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions. The assistant "
    "calls functions with appropriate input when necessary"
)


def _type_of(param: dict[str, Any], indent_level: int) -> str:
    """A parameter's type in the namespace's TypeScript-like notation."""
    indent = "  " * indent_level
    if "$ref" in param:
        return str(param["$ref"].split("/")[-1])
    if param.get("type") == "array":
        return f"Array<{_type_of(param.get('items', {}), indent_level + 1)}>"
    if param.get("type") == "object":
        fields = "".join(
            f"{indent}  {name}: {_type_of(p, indent_level + 1)},\n"
            for name, p in param.get("properties", {}).items()
        )
        return "{\n" + fields + indent + "}"
    if "enum" in param:
        return " | ".join(f'"{v}"' for v in param["enum"])
    return str(param.get("type", "any"))


def schema_of_functions(functions: Sequence[dict[str, Any]], namespace: str = "functions") -> str:
    """The functions as the system message functionary reads them."""
    defs: dict[str, Any] = {}
    for fn in functions:
        defs.update(fn.get("parameters", {}).get("$defs", {}))
    out = "// Supported function definitions that should be called when necessary.\n"
    out += f"namespace {namespace} {{\n\n"
    for name, d in defs.items():
        out += f"  type {name} = "
        if d.get("type") == "object":
            out += _type_of(d, 1)
        elif "enum" in d:
            out += " | ".join(f'"{v}"' for v in d["enum"])
        out += ";\n"
    for fn in functions:
        params = fn.get("parameters", {})
        required = params.get("required", [])
        out += f"  // {fn.get('description', '')}\n"
        out += f"  type {fn['name']} = (_: {{\n"
        for pname, p in params.get("properties", {}).items():
            optional = "" if pname in required else "?"
            out += f"    // {p.get('description', '')}\n"
            out += f"    {pname}{optional}: {_type_of(p, 2)},\n"
        out += "  }) => any;\n\n"
    return out + f"}} // namespace {namespace}\n"


def _turn(msg: dict[str, Any]) -> str:
    role = msg["role"]
    content = msg.get("content")
    call = msg.get("function_call")
    if role == "system":
        return f"system:\n{content}\n"
    if role == "function" and "name" in msg:
        return f"function name={msg['name']}:\n{content}\n"
    if role == "function" and call is not None:
        return f"function name={call['name']}:\n{call['arguments']}\n"
    if role == "tool":
        if content is not None:
            return f"function name={msg['tool_call_id']}:\n{content}\n"
        return f"function name={msg['tool_call_id']}\n"
    if role == "user":
        return "user:\n</s></s>\n" if content is None else f"user:\n</s>{content}</s>\n"
    if role == "assistant":
        if content is not None and call is not None:
            return f"assistant:\n{content}\nassistant to={call['name']}:\n{call['arguments']}</s>\n"
        if call is not None:
            return f"assistant to={call['name']}:\n{call['arguments']}</s>\n"
        if msg.get("tool_calls"):  # the first call only, as there
            first = msg["tool_calls"][0]
            return f"assistant to={first['id']}:\n{first['function']['arguments']}</s>\n"
        return "assistant" if content is None else f"assistant:\n{content}\n"
    raise ValueError(f"Unsupported role: {role}")


def _prompt(
    messages: Sequence[dict[str, Any]],
    functions: Sequence[dict[str, Any]] | None,
    tools: Sequence[dict[str, Any]] | None,
) -> str:
    system: list[dict[str, Any]] = []
    if functions is not None:
        system.append({"role": "system", "content": schema_of_functions(functions)})
    if tools is not None:  # with tools, their functions are described a second time, as there
        fns = [t["function"] for t in tools if t["type"] == "function"]
        system.append({"role": "system", "content": schema_of_functions(fns)})
    system.append({"role": "system", "content": SYSTEM_MESSAGE})
    turns = []
    for m in messages:
        m = dict(m)  # llama-cpp-python renames in the caller's dicts; the text is the same
        if m["role"] == "function" and "name" in m:
            m["name"] = f"functions.{m['name']}"
        if "function_call" in m:
            m["function_call"] = {**m["function_call"]}
            m["function_call"]["name"] = f"functions.{m['function_call']['name']}"
        turns.append(m)
    turns.append({"role": "assistant", "content": None})
    return "".join(_turn(m) for m in [*system, *turns])


def _grammar(body: Any) -> LlamaGrammar:
    """The arguments' grammar: the parameters' JSON schema, else any JSON."""
    if body is None:
        return LlamaGrammar.from_string(JSON_GBNF)
    try:
        return LlamaGrammar.from_string(json_schema_to_gbnf(json.dumps(body)))
    except ValueError:
        return LlamaGrammar.from_string(JSON_GBNF)


def functionary_chat_handler(
    llama: Any,
    messages: Sequence[Any],
    functions: list[dict[str, Any]] | None = None,
    function_call: Any = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    temperature: float = 0.2,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    typical_p: float = 1.0,
    stream: bool = False,
    stop: str | list[str] | None = None,
    response_format: Any = None,
    max_tokens: int | None = None,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    repeat_penalty: float = 1.1,
    tfs_z: float = 1.0,
    mirostat_mode: int = 0,
    mirostat_tau: float = 5.0,
    mirostat_eta: float = 0.1,
    model: str | None = None,
    logits_processor: Any = None,
    grammar: Any = None,
    **kwargs: Any,
) -> Any:
    """llama-cpp-python's ``chat_format="functionary"``. A call's arguments are not
    streamed (there neither: ``stream`` applies to plain answers)."""
    sampling = dict(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        typical_p=typical_p,
        max_tokens=max_tokens,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        repeat_penalty=repeat_penalty,
        tfs_z=tfs_z,
        mirostat_mode=mirostat_mode,
        mirostat_tau=mirostat_tau,
        mirostat_eta=mirostat_eta,
        model=model,
        logits_processor=logits_processor,
    )
    if tools is not None:
        functions = [t["function"] for t in tools if t["type"] == "function"]
    if tool_choice is not None:
        function_call = tool_choice if isinstance(tool_choice, str) else tool_choice["function"]
    prompt = _prompt(messages, functions, tools)
    if function_call is None and not functions:
        answer = llama.create_completion(
            prompt=prompt + ":\n", stream=stream, stop=["user:", "</s>"], grammar=grammar,
            **sampling,
        )  # fmt: skip
        return chunks_to_chat(answer) if stream else completion_to_chat(answer)
    if function_call is None or function_call == "auto":
        # The model names the function: " to=functions.NAME:" up to the line's end.
        head = llama.create_completion(prompt=prompt, stop="\n", stream=False)
        text = head["choices"][0]["text"]
        function_call = text.split(".")[-1][:-1]
        prompt += text + "\n"
    elif isinstance(function_call, dict):
        function_call = function_call["name"]
        prompt += f" to=functions.{function_call}:\n"
    else:  # "none", or another word: llama-cpp-python still asks for a call
        prompt += ":\n"
    body = None
    for fn in functions or []:
        if fn["name"] == function_call:
            body = fn["parameters"]
            break
    for tool in tools or []:
        if tool["type"] == "function" and tool["function"]["name"] == function_call:
            body = tool["function"]["parameters"]
            break
    done = llama.create_completion(
        prompt=prompt, stop=["user:", "</s>"], stream=False, grammar=_grammar(body), **sampling
    )
    # the call's id is the function's name there
    return completion_to_tool_call(function_call, done, call_id=function_call)
