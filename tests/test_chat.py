"""Chat templates, tool calls and structured output (JSON schema) through ``Llama``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

import llama_cy as lc
from llama_cy._chat import chat_apply_template
from llama_cy.chat import parse_tool_calls
from llama_cy.grammar import json_schema_to_gbnf

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! ✨"},
    {"role": "user", "content": "Name a colour."},
]

WEATHER = {
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
TIME = {
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
        expected = render_directly(
            template,
            messages=messages,
            tools=tools,
            add_generation_prompt=True,
            bos_token="<bos>",
            eos_token="<eos>",
        )
        assert chat_llm.apply_chat_template(messages, tools=tools) == expected
    assert "get_weather" in chat_llm.apply_chat_template(MESSAGES[1:2], tools=[WEATHER])
    # The template's BOS text and the tokenizer's BOS make one BOS token, not two.
    tokens = chat_llm.preparer.chat_tokens(chat_llm.apply_chat_template(MESSAGES))
    assert tokens[0] == chat_llm.token_bos()
    assert tokens[1] != chat_llm.token_bos()


def test_template_errors_surface(chat_llm: lc.Llama) -> None:
    from jinja2.exceptions import TemplateError

    with pytest.raises(TemplateError, match="unknown role: narrator"):
        chat_llm.apply_chat_template([{"role": "narrator", "content": "x"}])


def test_a_model_without_a_template_uses_llama_cpp_built_in_one(gemma_llm: lc.Llama) -> None:
    assert gemma_llm.model.chat_template() is None
    expected = chat_apply_template("gemma", MESSAGES, True)
    assert gemma_llm.apply_chat_template(MESSAGES) == expected
    assert expected.startswith("<start_of_turn>user\nYou are terse.")
    named = lc.Llama.from_model(gemma_llm.model, n_ctx=256, chat_format="chatml")
    assert (
        named.apply_chat_template(MESSAGES[1:2])
        == "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    )
    named.close()


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
    assert "".join(c["token"] for c in content) == out["choices"][0]["message"]["content"]
    for c in content:
        assert c["logprob"] <= 0
        assert len(c["top_logprobs"]) == 2
        assert c["top_logprobs"][0]["logprob"] >= c["logprob"] - 1e-9
        assert bytes(c["bytes"]).decode() == c["token"]


# ---- tool calls ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (
            'Sure.<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
            "Sure.",
            [("get_weather", {"city": "Oslo"})],
        ),
        (
            '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call><tool_call>{"name": "b", '
            '"arguments": {"x": 1}}</tool_call>',
            None,
            [("a", {}), ("b", {"x": 1})],
        ),
        (
            '{"name": "get_time", "parameters": {"zone": "UTC"}}',
            None,
            [("get_time", {"zone": "UTC"})],
        ),
        ('[TOOL_CALLS] [{"name": "f", "arguments": {"q": "é"}}]', None, [("f", {"q": "é"})]),
        ("Just text.", "Just text.", []),
        ('<tool_call>{"name": broken</tool_call>', '<tool_call>{"name": broken</tool_call>', []),
        ('{"not": "a call"}', '{"not": "a call"}', []),
    ],
)
def test_parse_tool_calls(
    text: str, content: str | None, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    got_content, got = parse_tool_calls(text)
    assert got_content == content
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got] == calls
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in got)


def _check_call(out: Any, name: str | None) -> dict[str, Any]:
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    fn = call["function"]
    tool = {"get_weather": WEATHER, "get_time": TIME}[fn["name"]]
    if name is not None:
        assert fn["name"] == name
    args: dict[str, Any] = json.loads(fn["arguments"])
    jsonschema.validate(args, tool["function"]["parameters"])  # type: ignore[index]
    return args


@pytest.mark.parametrize("llm_name", ["gemma_llm", "chat_llm"])
def test_required_and_named_tool_choice_give_valid_calls(
    llm_name: str, request: pytest.FixtureRequest
) -> None:
    llm: lc.Llama = request.getfixturevalue(llm_name)
    question = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    out = llm.create_chat_completion(
        question, tools=[WEATHER, TIME], tool_choice="required", max_tokens=80
    )
    _check_call(out, None)
    named = {"type": "function", "function": {"name": "get_time"}}
    out = llm.create_chat_completion(
        question, tools=[WEATHER, TIME], tool_choice=named, max_tokens=80
    )
    _check_call(out, "get_time")
    # Streaming gives the same call in a delta.
    chunks = list(
        llm.create_chat_completion(
            question, tools=[WEATHER], tool_choice="required", max_tokens=80, stream=True
        )
    )
    delta_calls = [c for ch in chunks for c in ch["choices"][0]["delta"].get("tool_calls", [])]
    assert len(delta_calls) == 1
    assert delta_calls[0]["function"]["name"] == "get_weather"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_choice_none_and_auto(chat_llm: lc.Llama) -> None:
    question = [{"role": "user", "content": "Say hello."}]
    out = chat_llm.create_chat_completion(
        question, tools=[WEATHER], tool_choice="none", max_tokens=8, temperature=0
    )
    assert isinstance(out, dict)
    assert "tool_calls" not in out["choices"][0]["message"]
    # tool_choice "none": the template is rendered without the tools.
    assert "get_weather" not in chat_llm.apply_chat_template(question)
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
        question, tools=[WEATHER], max_tokens=80, seed=3, logits_processor=[write_tag]
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
    for llm in (gemma_llm, chat_llm):
        prompt = llm.apply_chat_template(history)
        assert "get_weather" in prompt
        assert "4 degrees" in prompt


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
            "score": {"type": "number", "minimum": -1, "exclusiveMaximum": 1},
            "count": {"type": "integer", "exclusiveMinimum": -5, "maximum": 0},
        },
        "required": ["age", "score", "count"],
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


@pytest.mark.parametrize("schema", SCHEMAS, ids=["nested", "array", "enum", "numbers", "refs"])
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
    gbnf = json_schema_to_gbnf({"type": "integer", "minimum": lo, "maximum": hi})
    for n in list(range(lo - 20, lo + 20)) + list(range(hi - 20, hi + 20)) + [0, -0, 10, 99, 101]:
        assert accepts(gemma_llm.model, gbnf, str(n)) == (lo <= n <= hi), n
    assert not accepts(gemma_llm.model, gbnf, "007")


def test_one_sided_and_exclusive_bounds(gemma_llm: lc.Llama) -> None:
    m = gemma_llm.model
    g = json_schema_to_gbnf({"type": "integer", "exclusiveMinimum": 5})
    assert [n for n in range(0, 15) if accepts(m, g, str(n))] == list(range(6, 15))
    assert accepts(m, g, "123456789")
    g = json_schema_to_gbnf({"type": "number", "minimum": -1.5, "exclusiveMaximum": 2})
    for text, ok in [
        ("-1", True),
        ("-0.5", True),
        ("0", True),
        ("1.999", True),
        ("2", False),
        ("2.5", False),
        ("-2", False),
        ("1.50", False),
        ("-1.6", False),
    ]:
        assert accepts(m, g, text) == ok, text
        if ok:
            assert -1.5 <= float(text) < 2


def test_unsupported_schema_keywords_raise() -> None:
    with pytest.raises(ValueError, match="pattern"):
        json_schema_to_gbnf({"type": "string", "pattern": "^a+$"})
    with pytest.raises(ValueError, match="does not resolve"):
        json_schema_to_gbnf({"$ref": "#/$defs/missing"})
    with pytest.raises(ValueError, match="empty integer range"):
        json_schema_to_gbnf({"type": "integer", "minimum": 3, "maximum": 1})
