"""Reading replies back with llama.cpp's chat engine, family by family.

The templates are llama.cpp's own (``models/templates/`` of the tree the package is
built from); each case's raw output and expected message are facts taken from
llama.cpp's ``tests/test-chat.cpp``. Every case is also streamed: the output is cut
into pieces at random places and the OpenAI deltas the parser gives for the growing
text must add up to the same message.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from llama_cy.chat import ChatMessage, ChatParser, ChatTemplate

TEMPLATES = (
    Path(__file__).resolve().parents[1] / "subprojects" / "llama.cpp" / "models" / "templates"
)

SPECIAL_FUNCTION = {
    "type": "function",
    "function": {
        "name": "special_function",
        "description": "I'm special",
        "parameters": {
            "type": "object",
            "properties": {"arg1": {"type": "integer", "description": "The arg."}},
            "required": ["arg1"],
        },
    },
}
USER = [{"role": "user", "content": "Hey there!"}]
HELLO = "Hello, world!\nWhat's up?"
THINKING = "I'm\nthinking"
CALL = ("special_function", {"arg1": 1})


@dataclass
class Case:
    template: str
    output: str
    content: str = ""
    reasoning: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    tools: bool = False
    reasoning_format: str = "none"
    enable_thinking: bool = True
    json_schema: dict[str, Any] | None = None
    ids: list[str] | None = None  # ids the model wrote itself


CASES = {
    # Hermes 2 Pro / Qwen 2.5: <tool_call> JSON
    "hermes2-content": Case("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", HELLO, HELLO),
    "hermes2-call": Case(
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
        calls=[CALL],
        tools=True,
    ),
    "hermes2-content-then-call": Case(
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
        HELLO + '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}</tool_call>',
        HELLO,
        calls=[CALL],
        tools=True,
    ),
    "qwen2.5-content": Case("Qwen-Qwen2.5-7B-Instruct", HELLO, HELLO),
    "qwen2.5-call": Case(
        "Qwen-Qwen2.5-7B-Instruct",
        '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>',
        calls=[CALL],
        tools=True,
    ),
    # Qwen 3.5 (Qwen3 family): thinking forced open, XML calls
    "qwen3.5-thinking": Case(
        "Qwen3.5-4B",
        "I'm\nthinking\n</think>\n\n" + HELLO,
        HELLO,
        THINKING,
        reasoning_format="auto",
    ),
    "qwen3.5-thinking-unparsed": Case(
        "Qwen3.5-4B",
        "I'm\nthinking\n</think>\n\n" + HELLO,
        "<think>\nI'm\nthinking\n</think>\n\n" + HELLO,
        reasoning_format="none",
    ),
    "qwen3.5-call-no-thinking": Case(
        "Qwen3.5-4B",
        "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
        "</function>\n</tool_call>",
        calls=[CALL],
        tools=True,
        reasoning_format="auto",
        enable_thinking=False,
    ),
    "qwen3.5-thinking-then-call": Case(
        "Qwen3.5-4B",
        "I'm\nthinking\n</think>\n\n<tool_call>\n<function=special_function>\n"
        "<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
        reasoning=THINKING,
        calls=[CALL],
        tools=True,
        reasoning_format="auto",
    ),
    "qwq-thinking": Case(
        "Qwen-QwQ-32B",
        "Let me think about this...\n</think>\nThe answer is 42.",
        "The answer is 42.",
        "Let me think about this...",
        reasoning_format="auto",
    ),
    # Qwen3-Coder: XML calls
    "qwen3-coder-content": Case("Qwen3-Coder", HELLO, HELLO),
    "qwen3-coder-call": Case(
        "Qwen3-Coder",
        "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
        "</function>\n</tool_call>",
        calls=[CALL],
        tools=True,
    ),
    "qwen3-coder-text-then-call-without-open-tag": Case(
        "Qwen3-Coder",
        "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
        "</function>\n</tool_call>",
        "Let me call it.\n",
        calls=[CALL],
        tools=True,
    ),
    # Llama 3.x
    "llama3.1-content-with-tools": Case(
        "meta-llama-Llama-3.1-8B-Instruct", HELLO, HELLO, tools=True
    ),
    "llama3.1-json-schema-fenced": Case(
        "meta-llama-Llama-3.1-8B-Instruct",
        '```json\n"42"\n```',
        '"42"',
        reasoning_format="auto",
        json_schema={"const": "42"},
    ),
    "llama3.2-content-with-tools": Case(
        "meta-llama-Llama-3.2-3B-Instruct", HELLO, HELLO, tools=True
    ),
    # Mistral Nemo: [TOOL_CALLS] with the model's own ids
    "mistral-nemo-call": Case(
        "mistralai-Mistral-Nemo-Instruct-2407",
        '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]',
        calls=[CALL],
        tools=True,
        ids=["123456789"],
    ),
    # DeepSeek R1
    "deepseek-r1-thinking": Case(
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "I'm\nthinking</think>" + HELLO,
        HELLO,
        THINKING,
        reasoning_format="deepseek",
    ),
    "deepseek-r1-call": Case(
        "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n"  # noqa: RUF001
        '```json\n{"arg1": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',  # noqa: RUF001
        calls=[CALL],
        tools=True,
        reasoning_format="deepseek",
        enable_thinking=False,
    ),
    # gpt-oss: channels
    "gpt-oss-final": Case("openai-gpt-oss-120b", "<|channel|>final<|message|>" + HELLO, HELLO),
    "gpt-oss-analysis-then-final": Case(
        "openai-gpt-oss-120b",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
        "<|channel|>final<|message|>" + HELLO,
        HELLO,
        THINKING,
        reasoning_format="auto",
    ),
    "gpt-oss-analysis-unparsed": Case(
        "openai-gpt-oss-120b",
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
        "<|channel|>final<|message|>" + HELLO,
        "<|channel|>analysis<|message|>I'm\nthinking<|end|>" + HELLO,
        reasoning_format="none",
    ),
    "gpt-oss-call": Case(
        "openai-gpt-oss-120b",
        ' to=functions.special_function<|channel|>analysis<|message|>{"arg1": 1}',
        calls=[CALL],
        tools=True,
        reasoning_format="auto",
    ),
    # Kimi K2
    "kimi-k2-content": Case("moonshotai-Kimi-K2", HELLO, HELLO),
    "kimi-k2-call": Case(
        "moonshotai-Kimi-K2",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
        '<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>',
        calls=[CALL],
        tools=True,
        ids=["functions.special_function:0"],
    ),
    # Functionary v3.1
    "functionary-3.1-content": Case("meetkai-functionary-medium-v3.1", HELLO, HELLO),
    "functionary-3.1-call": Case(
        "meetkai-functionary-medium-v3.1",
        '<function=special_function>{"arg1": 1}</function>',
        calls=[CALL],
        tools=True,
    ),
    # Command R7B
    "command-r7b-response": Case(
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
        "<|START_RESPONSE|>" + HELLO + "<|END_RESPONSE|>",
        HELLO,
    ),
    "command-r7b-thinking-then-call": Case(
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
        "<|START_THINKING|>I'm\nthinking<|END_THINKING|><|START_ACTION|>[\n"
        '    {"tool_call_id": "0", "tool_name": "special_function", "parameters": {"arg1": 1}}\n'
        "]<|END_ACTION|>",
        reasoning=THINKING,
        calls=[CALL],
        tools=True,
        reasoning_format="deepseek",
        ids=["0"],
    ),
    # Granite 3.3
    "granite-3.3-content": Case("ibm-granite-granite-3.3-2B-Instruct", HELLO, HELLO),
    "granite-3.3-thinking": Case(
        "ibm-granite-granite-3.3-2B-Instruct",
        "<think>I'm\nthinking</think>" + HELLO,
        HELLO,
        THINKING,
        reasoning_format="deepseek",
    ),
}


def _template(name: str) -> ChatTemplate:
    path = TEMPLATES / f"{name}.jinja"
    return ChatTemplate(None, path.read_text(encoding="utf-8"))


def _parser(case: Case, stream: bool = False) -> ChatParser:
    prompt = _template(case.template).apply(
        USER,
        tools=[SPECIAL_FUNCTION] if case.tools else None,
        json_schema=case.json_schema,
        reasoning_format=case.reasoning_format,
        enable_thinking=case.enable_thinking,
    )
    return ChatParser(prompt, stream=stream)


def _check(message: ChatMessage, case: Case, streamed: bool = False) -> None:
    # Compared as test-chat.cpp compares them: ends stripped, arguments as JSON.
    assert message.content.strip() == case.content.strip()
    assert message.reasoning_content.strip() == case.reasoning.strip()
    got = [(c.name, json.loads(c.arguments)) for c in message.tool_calls]
    assert got == case.calls
    if case.ids is not None:
        if not streamed:
            assert [c.id for c in message.tool_calls] == case.ids
    else:  # ids are made up, one per call, and kept
        assert len({c.id for c in message.tool_calls}) == len(case.calls)
        assert all(len(c.id) == 32 for c in message.tool_calls)


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_parses_to_the_expected_message(name: str) -> None:
    case = CASES[name]
    _check(_parser(case).parse(case.output), case)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_streamed_deltas_add_up_to_the_message(name: str, seed: int) -> None:
    case = CASES[name]
    parser = _parser(case, stream=True)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(case.output)), k=min(12, len(case.output) - 1)))
    content, reasoning = "", ""
    calls: dict[int, dict[str, str]] = {}
    for end in [*cuts, len(case.output)]:
        for delta in parser.update(case.output[:end], partial=end < len(case.output)):
            d = delta.to_openai()
            content += d.get("content", "")
            reasoning += d.get("reasoning_content", "")
            for piece in d.get("tool_calls", []):
                call = calls.setdefault(piece["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] += piece.get("id", "")
                call["name"] += piece["function"].get("name", "")
                call["arguments"] += piece["function"].get("arguments", "")
    # The deltas add up to the message the parser ends with, exactly, ids included. A
    # call's id is fixed when the call first shows (as in llama-server), so an id the
    # model writes is kept as far as it had been written then, or made up.
    final = parser.message
    _check(final, case, streamed=True)
    assert (content, reasoning) == (final.content, final.reasoning_content)
    assert [(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())] == [
        (c.id, c.name, c.arguments) for c in final.tool_calls
    ]


def test_a_final_reply_that_breaks_the_format_is_content() -> None:
    case = CASES["kimi-k2-call"]
    parser = _parser(case)
    broken = "<|tool_calls_section_begin|><|tool_call_begin|>nonsense"
    message = parser.parse(broken)
    assert (message.content, message.tool_calls) == (broken, ())


def test_bad_inputs_raise_value_errors() -> None:
    template = _template("Qwen-Qwen2.5-7B-Instruct")
    with pytest.raises(ValueError, match="tool_choice"):
        template.apply(USER, tools=[SPECIAL_FUNCTION], tool_choice="sometimes")
    with pytest.raises(ValueError, match="reasoning_format"):
        template.apply(USER, reasoning_format="verbose")
    with pytest.raises(ValueError, match="Missing 'role'"):
        template.apply([{"content": "no role"}])
    with pytest.raises(ValueError, match="grammar with tools"):
        template.apply(USER, tools=[SPECIAL_FUNCTION], grammar="root ::= [a-z]+")
    with pytest.raises(ValueError, match="parse"):
        ChatTemplate(None, "{% for x in %}")
    with pytest.raises(ValueError, match="model or a template"):
        ChatTemplate(None)
