"""llama-cpp-python's named chat formats (``chat_format="vicuna"``, ...), once: each as a
Jinja template of its prompt and the stop its answer ends at. ``llama_chat_format``'s
formatters render them with Jinja2; ``python -m llama_cpp.server --chat_format NAME``
gives them to llama-cy serve, whose chat engine (llama-server's) renders Jinja.

llama.cpp's built-in templates of the same names (llama-2, chatml, gemma, ...) render
other prompts, so every format has one here. They render llama-cpp-python's prompts
(tests/data/lcp_chat_formats.json, made by llama-cpp-python itself), in Jinja2 and in
llama-server's engine alike."""

from __future__ import annotations

import json
from typing import Literal, NamedTuple

__all__ = ["FORMATS", "PromptFormat"]


class PromptFormat(NamedTuple):
    """A format's prompt (a Jinja template over ``messages``) and the stop of its answer."""

    template: str
    stop: str | None = None


_VICUNA_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The "
    "assistant gives helpful, detailed, and polite answers to the user's questions."
)


_OPENBUDDY_SYSTEM = (
    "You are a helpful, respectful and honest INTP-T AI Assistant named Buddy. You are "
    "talking to a human User.\nAlways answer as helpfully and logically as possible, while "
    "being safe. Your answers should not include any harmful, political, religious, "
    "unethical, racist, sexist, toxic, dangerous, or illegal content. Please ensure that "
    "your responses are socially unbiased and positive in nature.\nIf a question does not "
    "make any sense, or is not factually coherent, explain why instead of answering "
    "something not correct. If you don't know the answer to a question, please don't "
    "share false information.\nYou can speak fluently in many languages, for example: "
    "English, Chinese.\nYou cannot access the internet, but you have vast knowledge, "
    "cutoff: 2021-09.\nYou are trained by OpenBuddy team, (https://openbuddy.ai, "
    "https://github.com/OpenBuddy/OpenBuddy), you are based on LLaMA and Falcon "
    "transformers model, not related to GPT or OpenAI.\n\n"
)


_SNOOZY_SYSTEM = (
    "The prompt below is a question to answer, a task to complete, or a conversation "
    "to respond to; decide which and write an appropriate response."
)


_OPEN_ORCA_SYSTEM = (
    "You are a helpful assistant. Please answer truthfully and write out your "
    "thinking step by step to be sure you get the right answer. If you make a mistake "
    "or encounter an error in your thinking, say so out loud and attempt to correct "
    "it. If you don't know or aren't sure about something, say so clearly. You will "
    "act as a professional logician, mathematician, and physicist. You will also act "
    "as the most appropriate type of expert to answer any particular question or "
    "solve the relevant problem; state which expert type your are, if so. Also think "
    "of any particular named expert that would be ideal to answer the relevant "
    "question or solve the relevant problem; name and act as them, if appropriate."
)


Style = Literal["colon", "bare", "chatml"]

# The first system message's text, as the formatters' _system() reads it.
_SYSTEM = (
    "{%- set ns = namespace(system='', found=false, i=0) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'system' and not ns.found -%}"
    "{%- set ns.system = m['content'] if m['content'] is string else '' -%}"
    "{%- set ns.found = true -%}{%- endif -%}{%- endfor -%}"
)


def _q(text: str) -> str:
    """A Jinja string literal (JSON's escapes are Jinja's)."""
    return json.dumps(text)


def _turn(style: Style, label: str, text: str, sep: str, open_: str) -> str:
    """One turn: with text, or (an empty text, the answer) the label alone."""
    if style == "colon":
        return f"{{%- if {text} -%}}{{{{- {label} + ': ' + {text} + {sep} -}}}}" + (
            f"{{%- else -%}}{{{{- {label} + {_q(open_)} -}}}}{{%- endif -%}}"
        )
    if style == "bare":
        return (
            f"{{%- if {text} -%}}{{{{- {label} + {text} + {sep} -}}}}"
            f"{{%- else -%}}{{{{- {label} -}}}}{{%- endif -%}}"
        )
    return (
        f"{{%- if {text} -%}}{{{{- {label} + '\\n' + {text} + {sep} + '\\n' -}}}}"
        f"{{%- else -%}}{{{{- {label} + '\\n' -}}}}{{%- endif -%}}"
    )


def _template(
    style: Style,
    roles: dict[str, str],
    system: str,
    seps: tuple[str, ...],
    *,
    answer: str | None = None,
    open_: str = ":",
) -> str:
    """``system`` is a Jinja expression over ``ns.system``; ``seps`` alternate between
    turns (``colon``; the others have one); ``answer`` is the label the prompt ends with."""
    seps_j = "[" + ", ".join(_q(s) for s in seps) + "]"
    sep = "seps[ns.i % (seps | length)]"
    head = {
        "colon": f"{{{{- {system} + seps[0] -}}}}",
        "bare": f"{{{{- {system} -}}}}",
        "chatml": f"{{%- if {system} -%}}{{{{- {system} + seps[0] + '\\n' -}}}}{{%- endif -%}}",
    }[style]
    roles_j = "{" + ", ".join(f"{_q(k)}: {_q(v)}" for k, v in roles.items()) + "}"
    body = (
        f"{{%- set roles = {roles_j} -%}}{{%- set seps = {seps_j} -%}}{head}"
        "{%- for m in messages -%}{%- if m['role'] in roles -%}"
        "{%- set text = m['content'] if m['content'] is string else '' -%}"
        + _turn(style, "roles[m['role']]", "text", sep, open_)
        + "{%- set ns.i = ns.i + 1 -%}{%- endif -%}{%- endfor -%}"
    )
    if answer is not None:
        body += _turn(style, _q(answer), "''", sep, open_)
    return _SYSTEM + body


def _with_default(default: str) -> str:
    return f"(ns.system or {_q(default)})"


_IM = {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"}

_LLAMA3 = {
    r: f"<|start_header_id|>{r}<|end_header_id|>\n\n" for r in ("system", "user", "assistant")
}

_TEMPLATES: dict[str, str] = {
    # llama-2's first turn after a system prompt goes without its label, as there.
    "llama-2": (
        _SYSTEM
        + "{%- set sys = ('[INST] <<SYS>>\\n' + ns.system + '\\n<</SYS>>') if ns.system else '' -%}"
        "{{- sys + ' ' -}}{%- set roles = {'user': '<s>[INST]', 'assistant': '[/INST]'} -%}"
        "{%- set seps = [' ', '</s>'] -%}"
        "{%- for m in messages -%}{%- if m['role'] in roles -%}"
        "{%- set text = m['content'] if m['content'] is string else '' -%}"
        "{%- if sys and ns.i == 0 -%}{{- text + seps[0] -}}"
        "{%- elif text -%}{{- roles[m['role']] + text + ' ' + seps[ns.i % 2] -}}"
        "{%- else -%}{{- roles[m['role']] + ' ' -}}{%- endif -%}"
        "{%- set ns.i = ns.i + 1 -%}{%- endif -%}{%- endfor -%}{{- '[/INST]' -}}"
    ),
    "llama-3": _template("bare", _LLAMA3, "''", ("<|eot_id|>",), answer=_LLAMA3["assistant"]),
    "chatml": _template(
        "chatml",
        _IM,
        "'<|im_start|>system\\n' + ns.system",
        ("<|im_end|>",),
        answer=_IM["assistant"],
    ),
    # It leaves system messages out; reading them (_SYSTEM) keeps llama.cpp's chat engine
    # from folding them into the first user message, as for a template without a system role.
    "mistral-instruct": (
        _SYSTEM + "{%- for m in messages -%}"
        "{%- if m['role'] == 'user' and m['content'] is string -%}{{- '[INST] ' + m['content'] -}}"
        "{%- elif m['role'] == 'assistant' and m['content'] is string -%}"
        "{{- ' [/INST]' + m['content'] + '</s>' -}}{%- endif -%}{%- endfor -%}{{- ' [/INST]' -}}"
    ),
    "zephyr": _template(
        "chatml",
        {"user": "<|user|>\n", "assistant": "<|assistant|>\n"},
        "'<|system|>\\n' + ns.system",
        ("</s>",),
        answer="<|assistant|>\n",
    ),
    "gemma": _template(
        "bare",
        {"user": "<start_of_turn>user\n", "assistant": "<start_of_turn>model\n"},
        "''",
        ("<end_of_turn>\n",),
        answer="<start_of_turn>model\n",
    ),
    "openchat": _template(
        "chatml",
        {"user": "GPT4 Correct User: ", "assistant": "<|end_of_turn|>GPT4 Correct Assistant: "},
        "ns.system + '<|end_of_turn|>'",
        ("<|end_of_turn|>",),
        answer="<|end_of_turn|>GPT4 Correct Assistant: ",
    ),
    "vicuna": _template(
        "colon",
        {"user": "USER", "assistant": "ASSISTANT"},
        _q(_VICUNA_SYSTEM),
        (" ", "</s>"),
        answer="ASSISTANT",
    ),
    "alpaca": _template(
        "colon",
        {"user": "### Instruction", "assistant": "### Response"},
        "ns.system",
        ("\n\n", "</s>"),
    ),
    "qwen": _template(
        "chatml",
        _IM,
        "'<|im_start|>system\\n' + " + _with_default("You are a helpful assistant."),
        ("<|im_end|>",),
        answer=_IM["assistant"],
    ),
    "phind": _template(
        "colon",
        {"user": "### User Message", "assistant": "### Assistant"},
        _q("### System Prompt\nYou are an intelligent programming assistant."),
        ("\n\n",),
        answer="### Assistant",
    ),
    "oasst_llama": _template(
        "bare",
        {"user": "<|prompter|>", "assistant": "<|assistant|>"},
        "'[INST] <<SYS>>\\n' + ns.system + '\\n<</SYS>>\\n\\n'",
        ("</s>",),
        answer="<|assistant|>",
    ),
    "baichuan-2": _template(
        "bare",
        {"user": "<reserved_106>", "assistant": "<reserved_107>"},
        "ns.system",
        ("",),
        answer="<reserved_107>",
    ),
    "baichuan": _template(
        "bare",
        {"user": "<reserved_102>", "assistant": "<reserved_103>"},
        "ns.system",
        ("",),
        answer="<reserved_103>",
    ),
    "openbuddy": _template(
        "colon",
        {"user": "User", "assistant": "Assistant"},
        _q(_OPENBUDDY_SYSTEM),
        ("\n",),
        answer="Assistant",
    ),
    "redpajama-incite": _template(
        "colon",
        {"user": "<human>", "assistant": "<bot>"},
        "ns.system",
        ("\n",),
        answer="<bot>",
    ),
    "snoozy": _template(
        "colon",
        {"user": "### Prompt", "assistant": "### Response"},
        _with_default(_SNOOZY_SYSTEM),
        ("\n",),
        answer="### Response",
    ),
    "intel": _template(
        "colon",
        {"user": "### User:", "assistant": "### Assistant:"},
        _q("### System:\n{system_message}"),
        ("\n",),
        answer="### Assistant:",
    ),
    # Its roles are "User" and "Assistant", capitalised, as llama-cpp-python maps them.
    "open-orca": _template(
        "colon",
        {"User": "User", "Assistant": "Assistant"},
        _q(_OPEN_ORCA_SYSTEM),
        ("<|end_of_turn|>\n",),
        answer="Assistant",
        open_=": ",
    ),
    "mistrallite": _template(
        "bare",
        {"user": "<|prompter|>", "assistant": "</s>\n<|assistant|>"},
        "'<|system|>' + ns.system + '</s>'",
        (" ",),
        answer="</s>\n<|assistant|>",
    ),
    "pygmalion": _template(
        "chatml",
        {"user": "<|user|>", "assistant": "<|model|>"},
        "'<|system|>' + ns.system",
        ("\n",),
        answer="<|model|>",
    ),
    "chatglm3": (
        _SYSTEM + "{{- '<|system|>\\n' + ns.system -}}"
        "{%- set roles = {'user': '<|user|>', 'assistant': '<|assistant|>'} -%}"
        "{%- for m in messages -%}{%- if m['role'] in roles -%}"
        "{%- if m['content'] is string and m['content'] -%}"
        "{{- roles[m['role']] + '\\n ' + m['content'] -}}"
        "{%- else -%}{{- roles[m['role']] -}}{%- endif -%}{%- endif -%}{%- endfor -%}"
        "{{- '<|assistant|>' -}}"
    ),
    # Roles user, bot and system, as llama-cpp-python maps them: assistant turns are left out.
    "saiga": (
        "{%- for m in messages -%}{%- if m['role'] in ['user', 'bot', 'system'] -%}"
        "{%- if m['content'] is string and m['content'] -%}"
        "{{- '<s>' + m['role'] + '\\n' + m['content'] + '</s>' -}}"
        "{%- else -%}{{- '<s>' + m['role'] + '\\n' -}}{%- endif -%}{%- endif -%}{%- endfor -%}"
        "{{- '<s>bot' -}}"
    ),
}

#: The stop each format's answer ends at (llama-cpp-python's; none for the others).
_STOPS = {
    "llama-3": "<|eot_id|>",
    "qwen": "<|endoftext|>",
    "chatml": "<|im_end|>",
    "mistral-instruct": "</s>",
    "zephyr": "</s>",
    "gemma": "<end_of_turn>\n",
    "openchat": "<|end_of_turn|>",
    "redpajama-incite": "<human>",
    "snoozy": "###",
    "open-orca": "User",
    "pygmalion": "\n",
    "chatglm3": "</s>",
}

#: llama-cpp-python's chat formats, by name.
FORMATS: dict[str, PromptFormat] = {
    name: PromptFormat(template, _STOPS.get(name)) for name, template in _TEMPLATES.items()
}
