"""llama-cpp-python's ``llama_cpp.llama_chat_format``: its named prompt formats, the
registry of chat handlers, Jinja2 and Hugging Face formatters, and its vision handlers.

A format here is a function from messages to a :class:`ChatFormatterResponse` (the
prompt text and stop strings), rendered as llama-cpp-python renders it (the tests
compare each with prompts rendered by llama-cpp-python itself). ``Llama`` uses one when
``chat_format`` names a format registered with :func:`register_chat_format` (or
``chat_handler`` is a handler function); llama.cpp's chat engine otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from llama_cy import chat_handlers as _handlers

from . import llama_types
from ._chat_shapes import chunks_to_chat as _chunks_to_chat
from ._chat_shapes import chunks_to_tool_call as _chunks_to_tool_call
from ._chat_shapes import completion_to_chat as _completion_to_chat
from ._chat_shapes import completion_to_tool_call as _completion_to_tool_call
from ._prompt_formats import FORMATS

__all__ = [
    "ChatFormatter",
    "ChatFormatterResponse",
    "Gemma4ChatHandler",
    "Jinja2ChatFormatter",
    "Llama3VisionAlpha",
    "Llama3VisionAlphaChatHandler",
    "LlamaChatCompletionHandler",
    "LlamaChatCompletionHandlerNotFoundException",
    "LlamaChatCompletionHandlerRegistry",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "MTMDChatHandler",
    "MiniCPMv26ChatHandler",
    "MoondreamChatHandler",
    "NanoLlavaChatHandler",
    "ObsidianChatHandler",
    "Qwen25VLChatHandler",
    "chat_formatter_to_chat_completion_handler",
    "functionary_chat_handler",
    "get_chat_completion_handler",
    "guess_chat_format_from_gguf_metadata",
    "hf_autotokenizer_to_chat_formatter",
    "hf_tokenizer_config_to_chat_formatter",
    "register_chat_completion_handler",
    "register_chat_format",
]

Messages = Sequence[llama_types.ChatCompletionRequestMessage]


@dataclasses.dataclass
class ChatFormatterResponse:
    """A rendered prompt, the stops that end its answer, and whether the prompt
    already holds the special tokens (then no BOS is added)."""

    prompt: str
    stop: str | list[str] | None = None
    stopping_criteria: Any = None
    added_special: bool = False


class ChatFormatter(Protocol):
    def __call__(self, *, messages: Messages, **kwargs: Any) -> ChatFormatterResponse: ...


class LlamaChatCompletionHandler(Protocol):
    """A chat handler: given ``llama`` and the request, it returns the response."""

    def __call__(self, *, llama: Any, messages: Messages, **kwargs: Any) -> Any: ...


class LlamaChatCompletionHandlerNotFoundException(Exception):  # noqa: N818 (its name there)
    pass


class LlamaChatCompletionHandlerRegistry:
    """The chat handlers by name (one registry per process)."""

    _instance: LlamaChatCompletionHandlerRegistry | None = None

    def __new__(cls) -> LlamaChatCompletionHandlerRegistry:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._handlers = {}
        return cls._instance

    _handlers: dict[str, LlamaChatCompletionHandler]

    def register_chat_completion_handler(
        self, name: str, handler: LlamaChatCompletionHandler, overwrite: bool = False
    ) -> None:
        if not overwrite and name in self._handlers:
            raise ValueError(f"a chat completion handler named {name!r} is registered already")
        self._handlers[name] = handler

    def unregister_chat_handler(self, name: str) -> None:
        if name not in self._handlers:
            raise ValueError(f"no chat completion handler named {name!r}")
        del self._handlers[name]

    def get_chat_completion_handler_by_name(self, name: str) -> LlamaChatCompletionHandler:
        try:
            return self._handlers[name]
        except KeyError:
            raise LlamaChatCompletionHandlerNotFoundException(
                f"invalid chat handler: {name} (valid formats: {sorted(self._handlers)})"
            ) from None

    def names(self) -> list[str]:
        return list(self._handlers)


def get_chat_completion_handler(name: str) -> LlamaChatCompletionHandler:
    return LlamaChatCompletionHandlerRegistry().get_chat_completion_handler_by_name(name)


def register_chat_completion_handler(
    name: str,
) -> Callable[[LlamaChatCompletionHandler], LlamaChatCompletionHandler]:
    def decorator(handler: LlamaChatCompletionHandler) -> LlamaChatCompletionHandler:
        LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(name, handler)
        return handler

    return decorator


#: The formatter of each named format (llama-cpp-python's and registered ones).
FORMATTERS: dict[str, ChatFormatter] = {}


def register_chat_format(name: str) -> Callable[[ChatFormatter], ChatFormatter]:
    """Register ``formatter`` under ``name`` as a chat handler (and a chat format)."""

    def decorator(formatter: ChatFormatter) -> ChatFormatter:
        FORMATTERS[name] = formatter
        LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
            name, chat_formatter_to_chat_completion_handler(formatter), overwrite=True
        )
        return formatter

    return decorator


# ---- formatter -> handler ---------------------------------------------------------------


def chat_formatter_to_chat_completion_handler(
    chat_formatter: ChatFormatter,
) -> LlamaChatCompletionHandler:
    """A handler that renders the prompt with ``chat_formatter`` and completes it, as
    llama-cpp-python's: its chat defaults (temperature 0.2, repeat penalty 1.1), JSON
    ``response_format`` and a named ``tool_choice`` as grammars, legacy ``functions``
    and ``function_call`` as tools."""

    def handler(
        *,
        llama: Any,
        messages: Messages,
        functions: list[Any] | None = None,
        function_call: Any = None,
        tools: list[Any] | None = None,
        tool_choice: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: str | list[str] | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
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
        logit_bias: dict[str, float] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        **kwargs: Any,
    ) -> Any:
        result = chat_formatter(
            messages=messages,
            functions=functions,
            function_call=function_call,
            tools=tools,
            tool_choice=tool_choice,
            **kwargs,
        )
        prompt = llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
        if result.stop is not None:
            stops += result.stop if isinstance(result.stop, list) else [result.stop]
        if response_format is not None and response_format.get("type") == "json_object":
            grammar = _grammar_for_response_format(response_format)
        if functions is not None:
            tools = [{"type": "function", "function": f} for f in functions]
        if isinstance(function_call, str) and function_call in ("none", "auto"):
            tool_choice = function_call
        elif isinstance(function_call, dict) and "name" in function_call:
            tool_choice = {"type": "function", "function": {"name": function_call["name"]}}
        tool_name = None
        if isinstance(tool_choice, dict) and tools is not None:
            tool_name = tool_choice["function"]["name"]
            tool = next((t for t in tools if t["function"]["name"] == tool_name), None)
            if tool is None:
                raise ValueError(f"Tool choice '{tool_name}' not found in tools.")
            grammar = _grammar_for_schema(tool["function"].get("parameters"))
        completion = llama.create_completion(
            prompt=prompt,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            typical_p=typical_p,
            logprobs=top_logprobs if logprobs else None,
            stream=stream,
            stop=stops,
            seed=seed,
            max_tokens=max_tokens,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            repeat_penalty=repeat_penalty,
            mirostat_mode=mirostat_mode,
            mirostat_tau=mirostat_tau,
            mirostat_eta=mirostat_eta,
            model=model,
            logits_processor=logits_processor,
            stopping_criteria=result.stopping_criteria,
            grammar=grammar,
            logit_bias=logit_bias,
        )
        if tool_name is not None:
            if stream:
                return _chunks_to_tool_call(tool_name, completion)
            return _completion_to_tool_call(tool_name, completion)
        if stream:
            return _chunks_to_chat(completion)
        return _completion_to_chat(completion)

    return handler


def _grammar_for_schema(schema: Any) -> Any:
    from .llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

    try:
        return LlamaGrammar.from_string(json_schema_to_gbnf(schema or {}))
    except ValueError:  # a schema llama.cpp's converter refuses: any JSON, as there
        return LlamaGrammar.from_string(JSON_GBNF)


def _grammar_for_response_format(response_format: dict[str, Any]) -> Any:
    from .llama_grammar import JSON_GBNF, LlamaGrammar, json_schema_to_gbnf

    if response_format.get("type") != "json_object":
        return None
    schema = response_format.get("schema")
    return LlamaGrammar.from_string(json_schema_to_gbnf(schema) if schema else JSON_GBNF)


# ---- Jinja2 and Hugging Face formatters ---------------------------------------------------


class Jinja2ChatFormatter:
    """A Jinja2 chat template (Hugging Face's), rendered in a sandbox."""

    def __init__(
        self,
        template: str,
        eos_token: str,
        bos_token: str,
        add_generation_prompt: bool = True,
        stop_token_ids: list[int] | None = None,
    ) -> None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.template = template
        self.eos_token = eos_token
        self.bos_token = bos_token
        self.add_generation_prompt = add_generation_prompt
        self.stop_token_ids = set(stop_token_ids) if stop_token_ids is not None else None
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._environment = env.from_string(template)

    def __call__(
        self,
        *,
        messages: Messages,
        functions: Any = None,
        function_call: Any = None,
        tools: Any = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatFormatterResponse:
        def raise_exception(message: str) -> None:
            raise ValueError(message)

        def strftime_now(fmt: str) -> str:
            return time.strftime(fmt)

        prompt = self._environment.render(
            messages=messages,
            eos_token=self.eos_token,
            bos_token=self.bos_token,
            raise_exception=raise_exception,
            strftime_now=strftime_now,
            add_generation_prompt=self.add_generation_prompt,
            functions=functions,
            function_call=function_call,
            tools=tools,
            tool_choice=tool_choice,
        )
        return ChatFormatterResponse(prompt=prompt, stop=[self.eos_token], added_special=True)

    def to_chat_handler(self) -> LlamaChatCompletionHandler:
        return chat_formatter_to_chat_completion_handler(self)


def hf_autotokenizer_to_chat_formatter(pretrained_model_name_or_path: str) -> ChatFormatter:
    """A formatter from a ``transformers`` tokenizer's chat template."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(pretrained_model_name_or_path)

    def format_autotokenizer(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
        tokenizer.use_default_system_prompt = False
        prompt: str = tokenizer.apply_chat_template(messages, tokenize=False)
        return ChatFormatterResponse(prompt=prompt, stop=tokenizer.eos_token)

    return format_autotokenizer


def hf_autotokenizer_to_chat_completion_handler(
    pretrained_model_name_or_path: str,
) -> LlamaChatCompletionHandler:
    return chat_formatter_to_chat_completion_handler(
        hf_autotokenizer_to_chat_formatter(pretrained_model_name_or_path)
    )


def hf_tokenizer_config_to_chat_formatter(
    tokenizer_config: dict[str, Any], add_generation_prompt: bool = True
) -> ChatFormatter:
    """A formatter from a Hugging Face ``tokenizer_config.json``'s chat template. As
    llama-cpp-python's, it asks for the answer by rendering an empty assistant message
    after the conversation."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    for key in ("chat_template", "bos_token", "eos_token"):
        if not isinstance(tokenizer_config.get(key), str):
            raise ValueError(f"tokenizer_config needs a string {key!r}")
    bos, eos = tokenizer_config["bos_token"], tokenizer_config["eos_token"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(tokenizer_config["chat_template"])

    def format_tokenizer_config(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
        msgs: list[Any] = list(messages)
        if add_generation_prompt:
            msgs.append({"role": "assistant", "content": ""})
        prompt = template.render(messages=msgs, bos_token=bos, eos_token=eos, **kwargs)
        return ChatFormatterResponse(prompt=prompt, stop=[eos, bos], added_special=True)

    return format_tokenizer_config


def hf_tokenizer_config_to_chat_completion_handler(
    tokenizer_config: dict[str, Any], add_generation_prompt: bool = True
) -> LlamaChatCompletionHandler:
    return chat_formatter_to_chat_completion_handler(
        hf_tokenizer_config_to_chat_formatter(tokenizer_config, add_generation_prompt)
    )


# Templates of the GGUF files llama-cpp-python recognises by their exact text.
_KNOWN_TEMPLATES = {
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}",
}


def guess_chat_format_from_gguf_metadata(metadata: dict[str, str]) -> str | None:
    """llama-cpp-python's name for a GGUF's chat template, when it is one it knows."""
    template = metadata.get("tokenizer.chat_template")
    for name, text in _KNOWN_TEMPLATES.items():
        if template == text:
            return name
    return None


# ---- llama-cpp-python's named formats ------------------------------------------------------


def _named_format(name: str) -> ChatFormatter:
    """llama-cpp-python's format ``name``: its template (``_prompt_formats``, also what
    ``python -m llama_cpp.server`` serves it with), rendered with Jinja2, and its stop."""
    prompt_format = FORMATS[name]
    compiled: list[Any] = []  # compiled at the first use, not at import

    def formatter(*, messages: Messages, **kwargs: Any) -> ChatFormatterResponse:
        if not compiled:
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            compiled.append(ImmutableSandboxedEnvironment().from_string(prompt_format.template))
        prompt: str = compiled[0].render(messages=messages)
        return ChatFormatterResponse(prompt=prompt, stop=prompt_format.stop)

    return register_chat_format(name)(formatter)


format_llama2 = _named_format("llama-2")
format_llama3 = _named_format("llama-3")
format_alpaca = _named_format("alpaca")
format_qwen = _named_format("qwen")
format_vicuna = _named_format("vicuna")
format_chatml = _named_format("chatml")
format_mistral_instruct = _named_format("mistral-instruct")
format_zephyr = _named_format("zephyr")
format_gemma = _named_format("gemma")
format_openchat = _named_format("openchat")
format_phind = _named_format("phind")
format_oasst_llama = _named_format("oasst_llama")
format_baichuan2 = _named_format("baichuan-2")
format_baichuan = _named_format("baichuan")
format_openbuddy = _named_format("openbuddy")
format_redpajama_incite = _named_format("redpajama-incite")
format_snoozy = _named_format("snoozy")
format_intel = _named_format("intel")
format_open_orca = _named_format("open-orca")
format_mistrallite = _named_format("mistrallite")
format_pygmalion = _named_format("pygmalion")
format_chatglm3 = _named_format("chatglm3")
format_saiga = _named_format("saiga")


# ---- vision handlers under llama-cpp-python's names ----------------------------------------

# llama-cpp-python's vision handlers, each rendering its format (llama_cy.chat_handlers),
# in its class tree (the Llava family under Llava15ChatHandler, Gemma4 under MTMD), with
# its from_pretrained: the projector from the Hugging Face Hub, as Llama.from_pretrained.


class _FromPretrained:
    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: str | None,
        local_dir: str | os.PathLike[str] | None = None,
        local_dir_use_symlinks: bool | str = "auto",
        cache_dir: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The handler over ``filename`` (a glob) of the Hugging Face repository
        ``repo_id``: the projector, downloaded with ``huggingface_hub`` or found in its
        cache when offline; ``kwargs`` go to the constructor."""
        from .llama_hub import download

        path = download(repo_id, filename, None, local_dir, cache_dir)
        handler: Any = cls  # a handler class: this mixin comes first in its bases
        return handler(clip_model_path=str(path), **kwargs)


class MTMDChatHandler(_FromPretrained, _handlers.MtmdChatHandler):
    """The model's own chat template with its projector (llama_cy.MtmdChatHandler)."""


class Gemma4ChatHandler(MTMDChatHandler, _handlers.Gemma4ChatHandler):
    """Gemma 4's (llama_cy.Gemma4ChatHandler)."""


class Llava15ChatHandler(_FromPretrained, _handlers.Llava15ChatHandler):
    """LLaVA 1.5's prompt (llama_cy.Llava15ChatHandler); the base of the Llava family."""


class ObsidianChatHandler(Llava15ChatHandler, _handlers.ObsidianChatHandler):
    """Obsidian's prompt (llama_cy.ObsidianChatHandler)."""


class Llava16ChatHandler(Llava15ChatHandler, _handlers.Llava16ChatHandler):
    """LLaVA 1.6's prompt (llama_cy.Llava16ChatHandler)."""


class MoondreamChatHandler(Llava15ChatHandler, _handlers.MoondreamChatHandler):
    """Moondream's prompt (llama_cy.MoondreamChatHandler)."""


class NanoLlavaChatHandler(Llava15ChatHandler, _handlers.NanoLlavaChatHandler):
    """nanoLLaVA's prompt (llama_cy.NanoLlavaChatHandler)."""


class Llama3VisionAlphaChatHandler(Llava15ChatHandler, _handlers.Llama3VisionAlphaChatHandler):
    """llama-3-vision-alpha's prompt (llama_cy.Llama3VisionAlphaChatHandler)."""


Llama3VisionAlpha = Llama3VisionAlphaChatHandler  # its alias there


class MiniCPMv26ChatHandler(Llava15ChatHandler, _handlers.MiniCPMv26ChatHandler):
    """MiniCPM-V 2.6's prompt (llama_cy.MiniCPMv26ChatHandler)."""


class Qwen25VLChatHandler(Llava15ChatHandler, _handlers.Qwen25VLChatHandler):
    """Qwen2.5-VL's prompt (llama_cy.Qwen25VLChatHandler)."""


# ---- function calling ------------------------------------------------------------------------

# MeetKai's functionary v0 (prompt and call flow as there); "chatml-function-calling" is
# run by llama_cy's chat engine (its template, llama.cpp's tool-call parsing).
from ._functionary import functionary_chat_handler  # noqa: E402

register_chat_completion_handler("functionary")(functionary_chat_handler)
