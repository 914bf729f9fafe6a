"""Preparation: a completion or chat request turned into a :class:`~llama_cy.generation.Job`.

:class:`Preparer` is the one place where a prompt becomes tokens, a message list becomes
a rendered chat prompt, tools and ``response_format`` become a grammar, and sampling
keywords become checked :class:`~llama_cy.sampling.SamplingParams` with the right
defaults. ``Llama`` and the server both prepare through it; each chooses its own
presentation (llama-cpp-python's dicts, llama-server's shapes) from the job it gets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from llama_cy._model import LlamaModel
from llama_cy.chat import TOOL_CALL_OPEN, ChatFormatter, tool_call_grammar, tools_system_prompt
from llama_cy.errors import InvalidTokenError
from llama_cy.generation import Job, StoppingCriteria
from llama_cy.grammar import json_schema_to_gbnf
from llama_cy.sampling import LlamaGrammar, SamplingParams
from llama_cy.settings import Profile, check, defaults

__all__ = ["CHAT_POSITIONAL", "COMPLETION_POSITIONAL", "Preparer", "positional"]

#: llama-cpp-python's positional order for create_completion's arguments after ``prompt``.
COMPLETION_POSITIONAL = (
    "suffix",
    "max_tokens",
    "temperature",
    "top_p",
    "min_p",
    "typical_p",
    "logprobs",
    "echo",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "repeat_penalty",
    "top_k",
)
#: ... and for create_chat_completion's after ``messages``.
CHAT_POSITIONAL = (
    "functions",
    "function_call",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "stream",
    "stop",
    "seed",
    "response_format",
    "max_tokens",
)

# Keywords of llama-cpp-python's calls that are not sampling settings but shape the job.
_STRUCTURED = frozenset(["seed", "grammar", "logit_bias", "logits_processor"])
# llama-cpp-python's tfs_z: the sampler is gone from llama.cpp, and 1.0 is "off".
_REMOVED = {"tfs_z": 1.0}


def positional(names: Sequence[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Fold positional arguments into ``kwargs`` by llama-cpp-python's order."""
    if len(args) > len(names):
        raise TypeError(f"takes at most {len(names) + 1} positional arguments")
    for name, value in zip(names, args, strict=False):
        if name in kwargs:
            raise TypeError(f"got multiple values for argument {name!r}")
        kwargs[name] = value


class Preparer:
    """Prepares jobs for ``model``.

    ``chat_format`` or ``chat_template`` choose the chat template (default: the model's).
    ``profile`` chooses whose sampling defaults apply: ``"llama-cpp-python"`` (temperature
    0.8 for completions, 0.2 for chat) or ``"server"`` (llama-server's, 0.8 for both).
    ``overrides`` replace some of those defaults (``Llama``'s ``last_n_tokens_size``, the
    server's sampling flags). ``seed`` is used when a request gives none (None or -1: a
    fresh one per request).
    """

    def __init__(
        self,
        model: LlamaModel,
        *,
        chat_format: str | None = None,
        chat_template: str | None = None,
        profile: str = "llama-cpp-python",
        seed: int | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if profile not in ("llama-cpp-python", "server"):
            raise ValueError(f"profile must be 'llama-cpp-python' or 'server', not {profile!r}")
        self.model = model
        self.chat_format = chat_format
        self.chat_template = chat_template
        self.profile = profile
        self.seed = None if seed is None or seed < 0 else seed
        self.overrides = dict(overrides or {})
        check(self.overrides)
        unknown = set(self.overrides) - set(defaults("server"))
        if unknown:
            raise ValueError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        self._formatter: ChatFormatter | None = None

    # ---- pieces ----------------------------------------------------------------------

    @property
    def formatter(self) -> ChatFormatter:
        """The chat formatter (the model's template, or ``chat_format``/``chat_template``)."""
        if self._formatter is None:
            self._formatter = ChatFormatter(self.model, self.chat_format, self.chat_template)
        return self._formatter

    def tokens(self, prompt: str | bytes | Sequence[int], add_bos: bool = True) -> list[int]:
        """The prompt's tokens (text is tokenized with special tokens parsed); token ids
        are range-checked. ValueError if the prompt is empty."""
        if isinstance(prompt, (str, bytes)):
            tokens: list[int] = self.model.tokenize(
                prompt, add_special=add_bos, parse_special=True
            ).tolist()
        else:
            tokens = [int(t) for t in prompt]
            n_vocab = self.model.n_vocab
            bad = [t for t in tokens if not 0 <= t < n_vocab]
            if bad:
                raise InvalidTokenError(f"token id(s) {bad[:5]} outside [0, {n_vocab})")
        if not tokens:
            raise ValueError("the prompt is empty (and the model adds no BOS token)")
        return tokens

    def text(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` as a prompt echo shows it (special tokens as nothing)."""
        piece = self.model.token_to_piece
        return b"".join(piece(t) for t in tokens).decode("utf-8", "replace")

    def sampling(self, profile: Profile, **kw: Any) -> SamplingParams:
        """Checked sampling parameters: ``kw`` over ``profile``'s defaults. A value of
        None means the default."""
        for name, off in _REMOVED.items():
            value = kw.pop(name, None)
            if value is not None and value != off:
                raise ValueError(f"{name} is not supported: llama.cpp has removed that sampler")
        base = {**defaults(profile), **self.overrides}
        unknown = set(kw) - set(base) - _STRUCTURED
        if unknown:
            raise TypeError(f"unexpected sampling keyword(s): {', '.join(sorted(unknown))}")
        given = {k: v for k, v in kw.items() if v is not None}
        seed = given.pop("seed", None)
        if seed is None or seed == -1:  # -1: a random seed, as llama-server and llama.cpp
            seed = self.seed if seed is None else None
        bias = given.get("logit_bias")
        if bias:  # JSON gives string keys
            given["logit_bias"] = {int(k): float(v) for k, v in bias.items()}
        if given.get("logits_processor") is not None:
            given["logits_processor"] = tuple(given["logits_processor"])
        if "dry_sequence_breakers" in given:
            given["dry_sequence_breakers"] = tuple(given["dry_sequence_breakers"])
        return SamplingParams(**{**base, **given, "seed": seed})

    def _profile(self, chat: bool) -> Profile:
        if self.profile == "server":
            return "server"
        return "chat" if chat else "completion"

    # ---- completions -----------------------------------------------------------------

    def completion(
        self,
        prompt: str | bytes | Sequence[int],
        *,
        suffix: str | None = None,
        max_tokens: int | None = 16,
        logprobs: int | None = None,
        stop: str | Sequence[str] | None = None,
        stopping_criteria: Sequence[StoppingCriteria] | None = None,
        add_bos: bool = True,
        **sampling: Any,
    ) -> Job:
        """A text completion's job (``suffix``: fill-in-the-middle)."""
        tokens = self._completion_tokens(prompt, suffix, add_bos)
        params = self.sampling(self._profile(chat=False), **sampling)
        if logprobs is not None and logprobs < 0:
            raise ValueError(f"logprobs must be >= 0, got {logprobs}")
        return Job(
            tokens,
            params,
            max_tokens,
            _stops(stop),
            logprobs,
            tuple(stopping_criteria or ()),
        )

    def _completion_tokens(
        self, prompt: str | bytes | Sequence[int], suffix: str | None, add_bos: bool
    ) -> list[int]:
        if suffix is None:
            return self.tokens(prompt, add_bos)
        m = self.model
        if min(m.token_fim_pre, m.token_fim_suf, m.token_fim_mid) < 0:
            raise ValueError("suffix (fill-in-the-middle) needs a model with FIM tokens")
        pre = self.tokens(prompt, add_bos=False) if prompt else []
        suf: list[int] = m.tokenize(suffix, add_special=False).tolist()
        head = [m.token_bos] if m.add_bos and add_bos else []
        return [*head, m.token_fim_pre, *pre, m.token_fim_suf, *suf, m.token_fim_mid]

    # ---- chat ------------------------------------------------------------------------

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text the chat template renders for ``messages``."""
        return self.formatter.render(
            messages, add_generation_prompt=add_generation_prompt, tools=tools, **kwargs
        )

    def chat_tokens(self, text: str) -> list[int]:
        """A rendered chat prompt's tokens."""
        # The template writes BOS as text; the tokenizer adds it too: keep one.
        bos = self.formatter.bos_token
        if self.model.add_bos and bos and text.startswith(bos):
            text = text[len(bos) :]
        return self.tokens(text, add_bos=True)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        functions: Sequence[Mapping[str, Any]] | None = None,
        function_call: str | Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        stopping_criteria: Sequence[StoppingCriteria] | None = None,
        **sampling: Any,
    ) -> Job:
        """A chat completion's job.

        ``tools``/``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or a named
        function) make the job's output a tool call: a required or named call is enforced
        by a grammar, an automatic one by a grammar that wakes at ``<tool_call>``.
        ``response_format`` ``{"type": "json_object"}`` (optionally with ``"schema"``) or
        ``{"type": "json_schema", "json_schema": {"schema": ...}}`` is enforced likewise.
        """
        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, Mapping):
                tool_choice = {"type": "function", "function": dict(function_call)}
            elif function_call is not None:
                tool_choice = function_call
        check_tools(tools)
        choice = tool_choice_name(tools, tool_choice)
        messages = list(messages)
        render_tools = None
        if choice != "none" and tools:
            if self.formatter.supports_tools:
                render_tools = tools
            else:
                messages = _with_system(messages, tools_system_prompt(tools))
        text = self.apply_chat_template(
            messages, tools=render_tools, **dict(chat_template_kwargs or {})
        )
        tokens = self.chat_tokens(text)
        grammar = sampling.pop("grammar", None)
        if grammar is None and tools and choice != "none":
            if choice == "auto":
                grammar = LlamaGrammar(
                    tool_call_grammar(tools), triggers=[r"[\s\S]*?(" + TOOL_CALL_OPEN + r")[\s\S]*"]
                )
            else:
                named = None if choice == "required" else choice
                grammar = LlamaGrammar(tool_call_grammar(tools, named, tagged=False))
        elif grammar is None and response_format is not None:
            grammar = response_format_grammar(response_format)
        params = self.sampling(self._profile(chat=True), grammar=grammar, **sampling)
        if top_logprobs is not None and top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0, got {top_logprobs}")
        n_logprobs = (top_logprobs or 0) if logprobs else None
        return Job(
            tokens,
            params,
            max_tokens,
            _stops(stop),
            n_logprobs,
            tuple(stopping_criteria or ()),
            tool_calls=bool(tools) and choice != "none",
        )


def _stops(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None or isinstance(stop, str):
        return (stop,) if stop else ()
    if not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of strings")
    return tuple(stop)


def tool_choice_name(
    tools: Sequence[Mapping[str, Any]] | None, choice: str | Mapping[str, Any] | None
) -> str:
    """ "none", "auto", "required" or the name of the one function to call."""
    if not tools:
        return "none"
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise ValueError(
                f"tool_choice must be 'none', 'auto', 'required' or a function, not {choice!r}"
            )
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str):
        raise ValueError(
            "tool_choice must name a function: {'type': 'function', 'function': {'name': ...}}"
        )
    return name


def check_tools(tools: Sequence[Mapping[str, Any]] | None) -> None:
    """OpenAI's tool list shape, checked before templates and grammars see it."""
    if tools is None:
        return
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise ValueError("tools must be an array of {'type': 'function', 'function': {...}}")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("parameters", {}), (Mapping, bool))
        ):
            raise ValueError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name': str, "
                "'parameters': a JSON schema}}"
            )


def _with_system(messages: list[Mapping[str, Any]], text: str) -> list[Mapping[str, Any]]:
    """``messages`` with ``text`` added to (or as) the system message."""
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}\n\n{text}".strip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def response_format_grammar(fmt: Mapping[str, Any]) -> LlamaGrammar | None:
    """The grammar that enforces OpenAI's ``response_format`` (None for plain text)."""
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return LlamaGrammar(json_schema_to_gbnf(fmt.get("schema")))
    if kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema", fmt.get("schema"))
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
        if isinstance(schema, str):
            schema = json.loads(schema)
        return LlamaGrammar(json_schema_to_gbnf(schema))
    raise ValueError(f"response_format type must be text, json_object or json_schema, not {kind!r}")
