"""Chat templates, tool calls and structured output (JSON schema) through ``Llama``, all
rendered, constrained and parsed by llama.cpp's chat engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tiny_model import write_tiny_llama

import llama_cy as lc
from llama_cy.chat import ChatParser
from llama_cy.grammar import json_schema_to_grammar

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! ✨"},
    {"role": "user", "content": "Name a colour."},
]

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "maxLength": 16}},
            "required": ["zone"],
        },
    },
}


@pytest.fixture(scope="module")
def chat_model(gemma_chat_path: Path) -> Iterator[lc.LlamaModel]:
    model = lc.LlamaModel.load(gemma_chat_path)
    yield model
    model.close()


@pytest.fixture
def chat_llm(chat_model: lc.LlamaModel) -> Iterator[lc.Llama]:
    """A fresh ``Llama`` per test over the module's chat model (no shared KV cache)."""
    llm = lc.Llama.from_model(chat_model, n_ctx=1024, n_threads=2)
    yield llm
    llm.close()


def render_directly(template: str, **variables: Any) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, **kw: json.dumps(v, ensure_ascii=False)
    return env.from_string(template).render(**variables)


def test_the_prompt_is_what_jinja2_renders_from_the_gguf_template(chat_llm: lc.Llama) -> None:
    template = chat_llm.model.chat_template()
    assert template is not None
    assert "start_of_turn" in template
    for messages, tools in [(MESSAGES, None), (MESSAGES[1:2], [WEATHER, TIME])]:
        # llama.cpp hands templates its normalized tools (a description always there).
        normal = [
            {"type": "function", "function": {"name": f["name"], "description": "", **f}}
            for f in (t["function"] for t in tools or ())
        ]
        expected = render_directly(
            template,
            messages=messages,
            tools=normal or None,
            add_generation_prompt=True,
            bos_token="<bos>",
            eos_token="<eos>",
        )
        # As llama-server: the BOS text is left to the tokenizer, which adds the token.
        assert expected.startswith("<bos>")
        assert chat_llm.apply_chat_template(messages, tools=tools) == expected[len("<bos>") :]
    assert "get_weather" in chat_llm.apply_chat_template(MESSAGES[1:2], tools=[WEATHER])
    # The template's BOS text and the tokenizer's BOS make one BOS token, not two.
    tokens = chat_llm.preparer.chat_tokens(chat_llm.apply_chat_template(MESSAGES))
    assert tokens[0] == chat_llm.token_bos()
    assert tokens[1] != chat_llm.token_bos()


def test_template_errors_surface(chat_llm: lc.Llama) -> None:
    with pytest.raises(ValueError, match="unknown role: narrator"):
        chat_llm.apply_chat_template([{"role": "narrator", "content": "x"}])


def test_a_model_without_a_template_gets_chatml_or_a_named_built_in(gemma_llm: lc.Llama) -> None:
    assert gemma_llm.model.chat_template() is None
    # As llama-server: ChatML when the model has no template.
    assert (
        gemma_llm.apply_chat_template(MESSAGES[1:2])
        == "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    )
    named = lc.Llama.from_model(gemma_llm.model, n_ctx=256, chat_format="gemma")
    text = named.apply_chat_template(MESSAGES)
    assert text.startswith("<start_of_turn>user\nYou are terse.")
    assert text.endswith("<start_of_turn>user\nName a colour.<end_of_turn>\n<start_of_turn>model\n")
    named.close()
    with pytest.raises(ValueError, match="unknown chat_format"):
        lc.Llama.from_model(gemma_llm.model, n_ctx=256, chat_format="nonesuch")


def test_chat_completion_greedy_matches_completion_of_the_rendered_prompt(
    chat_llm: lc.Llama,
) -> None:
    out = chat_llm.create_chat_completion(MESSAGES, max_tokens=16, temperature=0)
    assert isinstance(out, dict)
    assert out["object"] == "chat.completion"
    message = out["choices"][0]["message"]
    assert message["role"] == "assistant"
    chat_llm.reset()
    prompt = chat_llm.preparer.chat_tokens(chat_llm.apply_chat_template(MESSAGES))
    chat_llm.reset()
    plain = chat_llm.complete(prompt, max_tokens=16, temperature=0)
    assert message["content"] == plain.text
    assert out["usage"]["prompt_tokens"] == len(prompt)


def test_chat_stream_concatenates_to_the_message(chat_llm: lc.Llama) -> None:
    kw: dict[str, Any] = {"max_tokens": 24, "temperature": 0.7, "seed": 11}
    chat_llm.reset()
    whole = chat_llm.create_chat_completion(MESSAGES, **kw)
    chat_llm.reset()
    chunks = list(chat_llm.create_chat_completion(MESSAGES, stream=True, **kw))
    assert isinstance(whole, dict)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_chat_logprobs(chat_llm: lc.Llama) -> None:
    out = chat_llm.create_chat_completion(
        MESSAGES, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2
    )
    assert isinstance(out, dict)
    content = out["choices"][0]["logprobs"]["content"]
    # The tokens' bytes add up to the reply; a character cut by max_tokens (or split
    # across tokens) is whole only in the joined bytes.
    joined = b"".join(bytes(c["bytes"]) for c in content)
    assert joined.decode(errors="replace") == out["choices"][0]["message"]["content"]
    for c in content:
        assert c["logprob"] <= 0
        assert len(c["top_logprobs"]) == 2
        assert c["top_logprobs"][0]["logprob"] >= c["logprob"] - 1e-9
        assert bytes(c["bytes"]).decode(errors="replace") == c["token"]


# ---- tool calls ----------------------------------------------------------------------


def _check_calls(message: dict[str, Any], name: str | None) -> list[dict[str, Any]]:
    """Every call in ``message`` names a tool (``name``, if given) and its arguments
    validate against that tool's schema."""
    calls = message["tool_calls"]
    assert calls
    out = []
    for call in calls:
        fn = call["function"]
        assert call["type"] == "function"
        assert call["id"]
        tool = {"get_weather": WEATHER, "get_time": TIME}[fn["name"]]
        if name is not None:
            assert fn["name"] == name
        args: dict[str, Any] = json.loads(fn["arguments"])
        jsonschema.validate(args, tool["function"]["parameters"])
        out.append(args)
    return out


def _check_call(out: Any, name: str | None) -> list[dict[str, Any]]:
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    return _check_calls(choice["message"], name)


def streamed_message(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The message a client assembles from OpenAI's stream deltas."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not chunk["choices"]:
            continue
        delta = chunk["choices"][0]["delta"]
        content += delta.get("content") or ""
        for piece in delta.get("tool_calls", []):
            call = calls.setdefault(
                piece["index"],
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] += piece.get("id", "")
            call["function"]["name"] += piece["function"].get("name", "")
            call["function"]["arguments"] += piece["function"].get("arguments", "")
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)]}


QUESTION = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def end_after_calls(llm: lc.Llama, n: int = 1) -> Any:
    """A logits processor that ends the reply once ``n`` calls are closed, as a larger
    model would: this 270M one, free to, calls again and again until max_tokens."""
    close = "</tool_call>"
    start: list[int] = []  # the prompt's length: ids are the prompt, then the reply

    def processor(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        start[:] = start or [len(ids)]
        text = llm.detokenize(list(ids[-8:]), special=True).decode("utf-8", "replace")
        reply = llm.detokenize(list(ids[start[0] :]), special=True).decode("utf-8", "replace")
        if text.endswith(close) and reply.count(close) >= n:
            scores = np.full_like(scores, -np.inf)
            scores[llm.token_eos()] = 0.0
        return scores

    return processor


def one_call(llm: lc.Llama, seed: int = 1) -> dict[str, Any]:
    return {
        "parallel_tool_calls": False,
        "max_tokens": 200,
        "seed": seed,
        "logits_processor": [end_after_calls(llm)],
    }


def test_required_and_named_tool_choice_give_valid_calls(chat_llm: lc.Llama) -> None:
    # llama.cpp's "required" grammar lets text come first; the call must follow.
    out = chat_llm.create_chat_completion(
        QUESTION, tools=[WEATHER, TIME], tool_choice="required", **one_call(chat_llm)
    )
    assert len(_check_call(out, None)) == 1
    named = {"type": "function", "function": {"name": "get_time"}}
    out = chat_llm.create_chat_completion(
        QUESTION, tools=[WEATHER, TIME], tool_choice=named, **one_call(chat_llm)
    )
    assert len(_check_call(out, "get_time")) == 1


def test_parallel_tool_calls_reach_the_grammar_and_the_parser(chat_llm: lc.Llama) -> None:
    two = (
        '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}, '
        '{"name": "get_time", "arguments": {"zone": "CET"}}</tool_call>'
    )
    for parallel in (True, False):
        prompt = chat_llm.chat_template.apply(
            QUESTION, tools=[TIME], tool_choice="required", parallel_tool_calls=parallel
        )
        grammar = lc.LlamaSampler.grammar(chat_llm.model, prompt.grammar)
        for token in chat_llm.model.tokenize(prompt.generation_prompt + two, add_special=False):
            if not grammar.allows(int(token)):
                break
            grammar.accept(int(token))
        else:
            assert parallel, "one call only, yet the grammar took two"
            message = ChatParser(prompt).parse(two)
            assert [json.loads(c.arguments) for c in message.tool_calls] == [
                {"zone": "UTC"},
                {"zone": "CET"},
            ]
            continue
        assert not parallel, "parallel calls, yet the grammar refused two"
    # Left to the template, a template that supports them gets parallel calls.
    assert chat_llm.chat_template.caps["supports_parallel_tool_calls"]
    job = chat_llm.preparer.chat(QUESTION, tools=[TIME], tool_choice="required")
    assert job.chat is not None
    assert '"," space' in job.chat.grammar


def test_streamed_tool_calls_arrive_in_pieces_and_add_up(chat_llm: lc.Llama) -> None:
    # A named function: the call starts at the first token, on any CPU's arithmetic
    # ("required" lets this small model write text first, for as long as its sampling
    # path happens to run).
    named = {"type": "function", "function": {"name": "get_weather"}}
    kw: dict[str, Any] = {"tools": [WEATHER], "tool_choice": named}
    whole = chat_llm.create_chat_completion(QUESTION, **kw, **one_call(chat_llm))
    chat_llm.reset()  # the same numbers as the first run: no prompt prefix reused
    stream = chat_llm.create_chat_completion(QUESTION, stream=True, **kw, **one_call(chat_llm))
    chunks = list(stream)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    pieces = [c for ch in chunks for c in ch["choices"][0]["delta"].get("tool_calls", [])]
    # The arguments stream as they are generated, not in one piece at the end.
    assert sum(1 for p in pieces if p["function"].get("arguments")) > 3
    assert pieces[0]["id"]
    assert pieces[0]["function"]["name"] == "get_weather"
    got = streamed_message(chunks)
    _check_calls(got, "get_weather")
    assert isinstance(whole, dict)
    expected = whole["choices"][0]["message"]
    assert got["content"] == (expected["content"] or "")
    assert [c["function"] for c in got["tool_calls"]] == [
        c["function"] for c in expected["tool_calls"]
    ]


def test_tool_choice_none_and_auto(chat_llm: lc.Llama) -> None:
    question = [{"role": "user", "content": "Say hello."}]
    out = chat_llm.create_chat_completion(
        question, tools=[WEATHER], tool_choice="none", max_tokens=8, temperature=0
    )
    assert isinstance(out, dict)
    assert "tool_calls" not in out["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] in ("stop", "length")
    auto = chat_llm.create_chat_completion(question, tools=[WEATHER], max_tokens=8, temperature=0)
    assert isinstance(auto, dict)
    assert auto["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    with pytest.raises(ValueError, match="not among the tools"):
        chat_llm.create_chat_completion(
            question,
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )
    with pytest.raises(ValueError, match="tool_choice"):
        chat_llm.create_chat_completion(question, tools=[WEATHER], tool_choice="sometimes")
    with pytest.raises(ValueError, match="grammar cannot be combined with tools"):
        chat_llm.create_chat_completion(question, tools=[WEATHER], grammar='root ::= "a"')


def test_tools_under_a_template_with_no_tool_call_format_are_rendered_without(
    gemma_llm: lc.Llama, caplog: pytest.LogCaptureFixture
) -> None:
    """As llama-server: ChatML (the model has no template) renders no tools, so the
    reply is plain content, and a warning says so once per template."""
    import logging

    from llama_cy.prepare import _NO_TOOL_FORMAT_WARNED

    _NO_TOOL_FORMAT_WARNED.clear()
    question = [{"role": "user", "content": "Weather in Oslo?"}]
    plain = gemma_llm.create_chat_completion(question, max_tokens=8, temperature=0)
    with caplog.at_level(logging.WARNING, logger="llama_cy"):
        for choice in ("auto", "required", "none"):
            out = gemma_llm.create_chat_completion(
                question, tools=[WEATHER], tool_choice=choice, max_tokens=8, temperature=0
            )
            message = out["choices"][0]["message"]
            assert not message.get("tool_calls")
            assert message["content"] == plain["choices"][0]["message"]["content"]
    warnings = [r for r in caplog.records if "no tool-call format" in r.getMessage()]
    assert len(warnings) == 1


def test_auto_tool_grammar_wakes_at_the_tag(chat_llm: lc.Llama) -> None:
    # A logits processor makes the model write the tag; from there on the lazy grammar
    # alone must turn whatever the model wants to say into a valid call.
    tag = chat_llm.tokenize(b"<tool_call>", add_bos=False, special=True)
    step = 0

    def write_tag(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        nonlocal step
        if step < len(tag):
            forced = np.full_like(scores, -np.inf)
            forced[tag[step]] = 0.0
            scores = forced
        step += 1
        return scores

    question = [{"role": "user", "content": "What is the weather in Rome?"}]
    out = chat_llm.create_chat_completion(
        question,
        tools=[WEATHER],
        parallel_tool_calls=False,
        max_tokens=150,
        seed=3,
        logits_processor=[write_tag, end_after_calls(chat_llm)],
    )
    assert step > len(tag) + 5  # generation went on well past the tag
    _check_call(out, "get_weather")


def test_history_with_tool_calls_and_results_renders(
    gemma_llm: lc.Llama, chat_llm: lc.Llama
) -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Oslo", "unit": "celsius"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4 degrees"},
    ]
    prompt = chat_llm.apply_chat_template(history)
    assert "get_weather" in prompt
    assert "4 degrees" in prompt
    # ChatML knows no tool calls: the tool's answer still reaches the prompt.
    assert "4 degrees" in gemma_llm.apply_chat_template(history)


# ---- structured output ---------------------------------------------------------------------

SCHEMAS: list[dict[str, Any]] = [
    {  # nested objects and required fields
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "address": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 20},
                    "zip": {"type": "string", "maxLength": 8},
                },
                "required": ["city"],
            },
        },
        "required": ["name", "address"],
    },
    {  # arrays with bounds
        "type": "object",
        "properties": {
            "colours": {
                "type": "array",
                "items": {"type": "string", "maxLength": 12},
                "minItems": 2,
                "maxItems": 4,
            }
        },
        "required": ["colours"],
    },
    {  # enums and const
        "type": "object",
        "properties": {
            "size": {"enum": ["small", "medium", "large"]},
            "kind": {"const": "pizza"},
            "extra": {"enum": [1, 2.5, None, True]},
        },
        "required": ["size", "kind", "extra"],
    },
    {  # bounded numbers
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "score": {"type": "number"},
            "count": {"type": "integer", "exclusiveMinimum": -5, "maximum": 0},
        },
        "required": ["age", "score", "count"],
    },
    {  # string patterns and formats
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["code", "day"],
    },
    {  # $ref, anyOf, nullable types, optional properties, array of objects
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 0, "maximum": 999},
                    "tag": {"type": ["string", "null"], "maxLength": 10},
                },
                "required": ["id"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 3},
            "status": {"anyOf": [{"type": "boolean"}, {"type": "string", "format": "date"}]},
            "note": {"type": "string", "maxLength": 10},
        },
        "required": ["items", "status"],
    },
]


@pytest.mark.parametrize(
    "schema", SCHEMAS, ids=["nested", "array", "enum", "numbers", "pattern", "refs"]
)
@pytest.mark.parametrize("seed", [1, 2])
def test_json_schema_output_validates(
    gemma_llm: lc.Llama, schema: dict[str, Any], seed: int
) -> None:
    out = gemma_llm.create_chat_completion(
        [{"role": "user", "content": "Reply with a JSON example."}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        max_tokens=300,
        temperature=1.0,
        seed=seed,
    )
    assert isinstance(out, dict)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)


def test_json_object_mode_and_llama_cpp_python_schema_form(gemma_llm: lc.Llama) -> None:
    question = [{"role": "user", "content": "Describe a cat as JSON."}]
    schema = {
        "type": "object",
        "properties": {"legs": {"type": "integer", "minimum": 0, "maximum": 8}},
        "required": ["legs"],
    }
    out = gemma_llm.create_chat_completion(
        question, response_format={"type": "json_object", "schema": schema}, max_tokens=60, seed=1
    )
    assert isinstance(out, dict)
    jsonschema.validate(json.loads(out["choices"][0]["message"]["content"]), schema)
    with pytest.raises(ValueError, match="response_format"):
        gemma_llm.create_chat_completion(question, response_format={"type": "yaml"})


# The grammar itself, checked character by character with llama.cpp's grammar engine:
# Gemma spells digits, '-' and '.' as one token each.


def accepts(model: lc.LlamaModel, gbnf: str, text: str) -> bool:
    grammar = lc.LlamaSampler.grammar(model, gbnf)
    for ch in text:
        (token,) = model.tokenize(ch, add_special=False)
        if not grammar.allows(int(token)):
            return False
        grammar.accept(int(token))
    return grammar.allows(model.token_eos)  # complete: only the end may follow


@pytest.mark.parametrize(("lo", "hi"), [(-15, 250), (0, 9), (7, 7), (100, 1000), (-120, -3)])
def test_integer_ranges_are_exact(gemma_llm: lc.Llama, lo: int, hi: int) -> None:
    gbnf = json_schema_to_grammar({"type": "integer", "minimum": lo, "maximum": hi})
    for n in list(range(lo - 20, lo + 20)) + list(range(hi - 20, hi + 20)) + [0, -0, 10, 99, 101]:
        assert accepts(gemma_llm.model, gbnf, str(n)) == (lo <= n <= hi), n
    assert not accepts(gemma_llm.model, gbnf, "007")


def test_one_sided_and_exclusive_bounds(gemma_llm: lc.Llama) -> None:
    m = gemma_llm.model
    g = json_schema_to_grammar({"type": "integer", "exclusiveMinimum": 5})
    assert [n for n in range(0, 15) if accepts(m, g, str(n))] == list(range(6, 15))
    assert accepts(m, g, "123456789")
    g = json_schema_to_grammar({"type": "integer", "exclusiveMaximum": -2})
    assert [n for n in range(-8, 8) if accepts(m, g, str(n))] == list(range(-8, -2))


def test_string_patterns_are_enforced(gemma_llm: lc.Llama) -> None:
    g = json_schema_to_grammar({"type": "string", "pattern": "^[a-c]{2}-[0-9]+$"})
    for text, ok in [('"ab-1"', True), ('"cc-42"', True), ('"ad-1"', False), ('"ab-"', False)]:
        assert accepts(gemma_llm.model, g, text) == ok, text


def test_unsupported_schema_keywords_raise() -> None:
    # What llama.cpp's converter would pass over is refused, not silently dropped.
    with pytest.raises(ValueError, match="enforced only on integers"):
        json_schema_to_grammar({"type": "number", "minimum": 0})
    with pytest.raises(ValueError, match=r"'uniqueItems'.*#/properties/a"):
        json_schema_to_grammar({"properties": {"a": {"type": "array", "uniqueItems": True}}})
    with pytest.raises(ValueError, match="cannot resolve"):
        json_schema_to_grammar({"$ref": "#/$defs/missing"})
    with pytest.raises(ValueError, match="allows no integer"):
        json_schema_to_grammar({"type": "integer", "minimum": 3, "maximum": 1})


# ---- reasoning budget ------------------------------------------------------------------


@pytest.fixture(scope="module")
def thinking_tiny_path(model_cache: Path, llama_cpp_source: Path) -> Path:
    """A random-weight llama with Qwen 2's vocabulary plus <think> and </think> as one
    token each, as a thinking model has them."""
    path = model_cache / "tiny-llama-qwen2-think-v1.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, vocab="qwen2", extra_tokens=["<think>", "</think>"])
        partial.replace(path)
    return path


def test_reasoning_budget_forces_the_end_of_thought(
    thinking_tiny_path: Path, llama_cpp_source: Path
) -> None:
    # Qwen 3.5's template opens the thought in the prompt (its reply starts inside
    # <think>); the random-weight model would not close it on its own.
    source = (llama_cpp_source / "models" / "templates" / "Qwen3.5-4B.jinja").read_text()
    question = [{"role": "user", "content": "Hi"}]
    with lc.Llama(thinking_tiny_path, n_ctx=512, chat_template=source) as llm:
        # The first end tag the template marks, forced when the budget runs out.
        end = llm.model.tokenize("\n</think>", add_special=False, parse_special=True).tolist()

        def tokens(**kw: Any) -> list[int]:
            job = llm.preparer.chat(question, max_tokens=24, temperature=1.0, seed=5, **kw)
            return [t for chunk in llm.generate(job) for t in chunk.tokens]

        free = tokens()
        assert end[-1] not in free  # left alone, it does not end the thought
        # The budget counts from <think>, so the prompt's "\n" after it is one spent.
        spent = 1
        for n in (0, 3, 5):
            budgeted = tokens(reasoning_budget=n)
            k = max(n - spent, 0)
            assert budgeted[:k] == free[:k]  # the same thought until the budget runs out
            # ... then the end tag (less the newline the thought may already end with).
            assert end[-1] in budgeted[k : k + len(end)]
        message = tokens(reasoning_budget=3, reasoning_budget_message=" Enough.")
        # The message, then the end tag, each tokenized on its own (as llama-server).
        forced = llm.model.tokenize(" Enough.", add_special=False).tolist() + end
        assert message[2 : 2 + len(forced)] == forced
        # The reply parses into the two tokens of thought and the content after them.
        out = llm.create_chat_completion(
            question, max_tokens=24, temperature=1.0, seed=5, reasoning_budget=3
        )
        assert isinstance(out, dict)
        reasoning = out["choices"][0]["message"]["reasoning_content"]
        assert reasoning.strip() == llm.model.detokenize(free[:2]).strip()
        with pytest.raises(ValueError, match="reasoning_budget must be"):
            llm.create_chat_completion(question, reasoning_budget=-2)


def test_reasoning_budget_limits_nothing_without_reasoning(chat_llm: lc.Llama) -> None:
    # A template that marks no reasoning has none to limit: the budget holds as it is
    # and the reply is the same as without it (as llama-server accepts it).
    plain = chat_llm.create_chat_completion(MESSAGES, max_tokens=6, temperature=0)
    budget = chat_llm.create_chat_completion(
        MESSAGES, max_tokens=6, temperature=0, reasoning_budget=4
    )
    assert isinstance(plain, dict)
    assert isinstance(budget, dict)
    assert budget["choices"][0]["message"] == plain["choices"][0]["message"]
    # A default budget applies only where there is reasoning, as in llama-server.
    llm = lc.Llama.from_model(chat_llm.model, n_ctx=256, reasoning_budget=4)
    out = llm.create_chat_completion(MESSAGES, max_tokens=2)
    assert isinstance(out, dict)
    llm.close()
