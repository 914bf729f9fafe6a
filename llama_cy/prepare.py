"""Preparation: a completion or chat request turned into a :class:`~llama_cy.generation.Job`.

:class:`Preparer` is the one place where a prompt becomes tokens, a message list becomes
a rendered chat prompt, tools and ``response_format`` become a grammar, and sampling
keywords become checked :class:`~llama_cy.sampling.SamplingParams` with the right
defaults. ``Llama`` and the server both prepare through it; each chooses its own
presentation (llama-cpp-python's dicts, llama-server's shapes) from the job it gets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from llama_cy._bitmap import Bitmap
from llama_cy._model import LlamaModel
from llama_cy._mtmd import MtmdContext
from llama_cy.chat import REASONING_FORMATS, ChatPrompt, ChatRender, ChatTemplate, render_here
from llama_cy.chat_sampling import chat_grammar, chat_reasoning_budget
from llama_cy.errors import InvalidTokenError, MediaError
from llama_cy.flags import default as _flag
from llama_cy.generation import Job, Media, StoppingCriteria
from llama_cy.grammar import check_schema
from llama_cy.job import PROMPT_LOGPROB_VALUES
from llama_cy.media import MediaSource, extract_media, has_media
from llama_cy.openai_fields import check_tools, response_format_schema, tool_choice_name
from llama_cy.sampling import SamplingParams, sampler_types
from llama_cy.sampling_settings import Profile, check, defaults

__all__ = ["CHAT_POSITIONAL", "COMPLETION_POSITIONAL", "Preparer", "positional"]

_log = logging.getLogger("llama_cy")

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
_STRUCTURED = frozenset(["seed", "grammar", "logit_bias", "logits_processor", "samplers"])
_DEFAULTABLE = _STRUCTURED - {"seed", "logits_processor"}  # serve's --grammar, -l, --samplers
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

    The chat template is the model's, or ``chat_template`` (Jinja source, or a file's
    text), or ``chat_format`` (a name llama-cpp-python or llama.cpp's built-in templates
    know, see :meth:`ChatTemplate.from_format`); ``use_jinja=False`` renders the model's
    or ``chat_template`` with the built-in formatter, as llama-server's ``--no-jinja``.
    ``reasoning_format``, ``reasoning_budget`` (with ``reasoning_budget_message``) and
    ``chat_template_kwargs`` and ``reasoning_effort`` are defaults for chat requests
    (llama-server's ``--reasoning-format``, ``--reasoning-budget``,
    ``--chat-template-kwargs`` and ``--reasoning-effort``); a
    default budget applies to templates that mark reasoning, as in llama-server.

    ``mtmd`` (a multimodal projector) takes the images and audio of chat messages
    (``image_url`` and ``input_audio`` parts, from the places ``media_source`` allows)
    and of :meth:`media_prompt`.

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
        use_jinja: bool = _flag("jinja"),
        reasoning_format: str = _flag("reasoning_format"),
        reasoning_budget: int = _flag("reasoning_budget"),
        reasoning_budget_message: str = _flag("reasoning_budget_message"),
        reasoning_effort: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        profile: str = "llama-cpp-python",
        seed: int | None = None,
        overrides: Mapping[str, Any] | None = None,
        prefill_assistant: bool = _flag("prefill_assistant"),
        force_pure_content: bool = _flag("skip_chat_parsing"),
        mtmd: MtmdContext | None = None,
        media_source: MediaSource | None = None,
    ) -> None:
        if profile not in ("llama-cpp-python", "server"):
            raise ValueError(f"profile must be 'llama-cpp-python' or 'server', not {profile!r}")
        if chat_format is not None and chat_template is not None:
            raise ValueError("give chat_format or chat_template, not both")
        if reasoning_format not in REASONING_FORMATS:
            raise ValueError(
                f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}, "
                f"not {reasoning_format!r}"
            )
        self.model = model
        self.chat_format = chat_format
        self.chat_template = chat_template
        self.use_jinja = use_jinja
        self.reasoning_format = reasoning_format
        self.reasoning_budget = _budget(reasoning_budget)
        self.reasoning_budget_message = reasoning_budget_message
        self.reasoning_effort = reasoning_effort
        self.prefill_assistant = prefill_assistant  #: llama-server's --prefill-assistant
        self.force_pure_content = force_pure_content  #: --skip-chat-parsing: all content
        # llama-server's default (--reasoning-preserve): reasoning kept in the whole history
        self.chat_template_kwargs = {"preserve_reasoning": True, **dict(chat_template_kwargs or {})}
        self.profile = profile
        self.seed = None if seed is None or seed < 0 else seed
        self.overrides = dict(overrides or {})
        check(self.overrides)
        unknown = set(self.overrides) - set(defaults("server")) - _DEFAULTABLE
        if unknown:
            raise ValueError(f"unknown sampling setting(s): {', '.join(sorted(unknown))}")
        if self.overrides.get("samplers") is not None:
            self.overrides["samplers"] = sampler_types(self.overrides["samplers"])
        self.mtmd = mtmd
        self.media_source = media_source if media_source is not None else MediaSource()
        self._template: ChatTemplate | None = None
        if chat_format is not None:  # checked now, not at the first chat
            self._template = ChatTemplate.from_format(model, chat_format)

    # ---- pieces ----------------------------------------------------------------------

    @property
    def template(self) -> ChatTemplate:
        """The chat template in llama.cpp's chat engine (made at first use)."""
        if self._template is None:
            self._template = ChatTemplate(self.model, self.chat_template, use_jinja=self.use_jinja)
        return self._template

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

    def text(self, tokens: Sequence[int], media: Media | None = None) -> str:
        """The text of ``tokens`` as a prompt echo shows it (special tokens as nothing;
        ``media``'s images and clips as the media marker)."""
        if media is not None:
            return media.detokenize(list(tokens), unparse_special=False)
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
            given["logits_processor"] = _callables(given["logits_processor"])
        if "dry_sequence_breakers" in given:  # JSON gives a list
            given["dry_sequence_breakers"] = tuple(given["dry_sequence_breakers"])
        if "samplers" in given:  # llama.cpp's spellings, or letters
            given["samplers"] = sampler_types(given["samplers"])
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
        stopping_criteria: Sequence[StoppingCriteria] | StoppingCriteria | None = None,
        add_bos: bool = True,
        media: Media | None = None,
        prompt_logprobs: bool = False,
        **sampling: Any,
    ) -> Job:
        """A text completion's job (``suffix``: fill-in-the-middle; ``media``: the
        images of ``prompt``, tokens from :meth:`media_prompt`; ``prompt_logprobs``: the
        prompt's log-probabilities too, where ``logprobs`` is given)."""
        if media is not None:
            if suffix is not None:
                raise ValueError("a prompt with media cannot take a suffix")
            if prompt_logprobs and logprobs is not None:
                raise ValueError(
                    "echo with logprobs: a prompt with media has no log-probabilities "
                    "at its images' positions"
                )
            tokens = [int(t) for t in prompt]
        else:
            tokens = self._completion_tokens(prompt, suffix, add_bos)
        params = self.sampling(self._profile(chat=False), **sampling)
        if logprobs is not None and logprobs < 0:
            raise ValueError(f"logprobs must be >= 0, got {logprobs}")
        if prompt_logprobs and logprobs is not None:
            n_values = len(tokens) * (1 + min(logprobs, self.model.n_vocab))
            if n_values > PROMPT_LOGPROB_VALUES:
                raise ValueError(
                    f"echo with logprobs: {len(tokens)} prompt tokens x (1 + {logprobs}) "
                    f"log-probabilities, above the {PROMPT_LOGPROB_VALUES} one answer holds"
                )
        return Job(
            tokens,
            params,
            max_tokens,
            _stops(stop),
            logprobs,
            _callables(stopping_criteria),
            media=media,
            prompt_logprobs=prompt_logprobs and logprobs is not None,
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
        """The prompt text the chat template renders for ``messages`` (``kwargs``: the
        template's own variables, as ``chat_template_kwargs``)."""
        return self.template.apply(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            chat_template_kwargs={**self.chat_template_kwargs, **kwargs},
        ).prompt

    def chat_tokens(self, text: str) -> list[int]:
        """A rendered chat prompt's tokens."""
        return self.tokens(self._strip_bos(text), add_bos=True)

    def _strip_bos(self, text: str) -> str:
        # The template may write BOS as text; the tokenizer adds it too: keep one.
        m = self.model
        bos = m.token_text(m.token_bos) if m.token_bos >= 0 else ""
        if m.add_bos and bos and text.startswith(bos):
            text = text[len(bos) :]
        return text

    def _mtmd(self) -> MtmdContext:
        if self.mtmd is None:
            raise MediaError(
                "image or audio input needs a multimodal projector: load the model with "
                "mmproj=... (llama-cy serve --mmproj FILE)"
            )
        return self.mtmd

    def bitmaps(self, files: Sequence[bytes]) -> list[Bitmap]:
        """Decoded media for this model's projector."""
        mtmd = self._mtmd()
        return [Bitmap.from_bytes(mtmd, f) for f in files]

    def media_prompt(
        self, text: str, bitmaps: Sequence[Bitmap], add_bos: bool = True
    ) -> tuple[list[int], Media]:
        """Tokens (media positions as stand-ins) and media of a prompt whose media markers
        stand for ``bitmaps``, in order."""
        mtmd = self._mtmd()
        chunks = mtmd.tokenize(text, bitmaps, add_special=add_bos, parse_special=True)
        return Media.from_chunks(mtmd, chunks)

    def split_media(
        self, messages: Sequence[Mapping[str, Any]]
    ) -> tuple[Sequence[Mapping[str, Any]], list[Bitmap]]:
        """Messages with their media parts as media markers, and the media."""
        if not has_media(messages):
            return messages, []
        mtmd = self._mtmd()
        kinds = {"vision": mtmd.vision, "audio": mtmd.audio, "video": mtmd.video}
        out, files = extract_media(messages, mtmd.marker, self.media_source, **kinds)
        return out, self.bitmaps(files)

    def chat_prompt(
        self, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> tuple[ChatPrompt, bool]:
        """:meth:`chat_prompt_steps` with each render done in this thread."""
        return render_here(self.chat_prompt_steps(messages, **options))

    def chat_prompt_steps(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        functions: Sequence[Mapping[str, Any]] | None = None,
        function_call: str | Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: Mapping[str, Any] | None = None,
        grammar: Any = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_format: str | None = None,
        reasoning_effort: str | None = None,
        add_generation_prompt: bool | None = None,
        continue_final_message: bool | str | None = None,
    ) -> Generator[ChatRender, dict[str, Any], tuple[ChatPrompt, bool]]:
        """The rendered chat for a request (what llama-server's ``/apply-template``
        shows), and whether its reply is to be read for tool calls.

        A final assistant message is continued, not closed (llama-server's prefill,
        unless ``prefill_assistant`` is off); ``continue_final_message`` asks for that
        explicitly (vLLM's name) and excludes ``add_generation_prompt``."""
        add_gen = True if add_generation_prompt is None else add_generation_prompt
        if (
            continue_final_message in (None, False)
            and self.prefill_assistant
            and messages
            and messages[-1].get("role") == "assistant"
        ):
            if len(messages) >= 2 and messages[-2].get("role") == "assistant":
                raise ValueError("cannot have 2 or more assistant messages at the end of the list")
            continue_final_message, add_gen = True, False
        if continue_final_message not in (None, False):
            if add_gen and add_generation_prompt is not None:
                raise ValueError(
                    "add_generation_prompt and continue_final_message cannot both be true"
                )
            add_gen = False
            if (
                messages
                and messages[-1].get("role") == "assistant"
                and messages[-1].get("tool_calls")
            ):
                raise ValueError("cannot continue an assistant message that has tool calls")
        if functions and not tools:
            tools = [{"type": "function", "function": f} for f in functions]
            if isinstance(function_call, Mapping):
                tool_choice = {"type": "function", "function": dict(function_call)}
            elif function_call is not None:
                tool_choice = function_call
        check_tools(tools)
        choice = tool_choice_name(tools, tool_choice)
        named = bool(tools) and choice not in ("auto", "none", "required")
        if named:
            if parallel_tool_calls is None:
                parallel_tool_calls = False  # OpenAI's named function: one call
            tools = [t for t in (tools or ()) if t["function"]["name"] == choice]
            if not tools:
                raise ValueError(f"tool_choice names {choice!r}, which is not among the tools")
            choice = "auto"
        schema = response_format_schema(response_format)
        if grammar is not None and tools and choice != "none":
            raise ValueError("a grammar cannot be combined with tools")
        if grammar is not None and schema is not None:
            raise ValueError("a grammar cannot be combined with a response_format schema")
        if schema is not None:
            check_schema(schema)
        kwargs = {**self.chat_template_kwargs, **dict(chat_template_kwargs or {})}
        # As llama-server: thinking is on where the template can turn it on, unless
        # enable_thinking says otherwise or reasoning_effort is "none".
        thinking = kwargs.get(
            "enable_thinking",
            self.template.use_jinja and self.template.caps.get("supports_enable_thinking", False),
        )
        if not isinstance(thinking, bool):
            raise ValueError("chat_template_kwargs.enable_thinking must be a boolean")
        if reasoning_effort is None:
            reasoning_effort = self.reasoning_effort
        if reasoning_effort is not None:
            if not isinstance(reasoning_effort, str):
                raise ValueError("reasoning_effort must be a string")
            if reasoning_effort == "none":
                thinking = False
                kwargs.pop("reasoning_effort", None)
            elif reasoning_effort:
                kwargs["reasoning_effort"] = reasoning_effort
        template = self.template
        options: dict[str, Any] = dict(
            add_generation_prompt=add_gen,
            continue_final_message=continue_final_message or None,
            tools=tools or None,
            parallel_tool_calls=parallel_tool_calls,
            json_schema=schema,
            reasoning_format=reasoning_format or self.reasoning_format,
            enable_thinking=thinking,
            chat_template_kwargs=kwargs,
            force_pure_content=self.force_pure_content,
        )

        def render(tool_choice: str) -> Generator[ChatRender, dict[str, Any], ChatPrompt]:
            request = template.request(messages, tool_choice=tool_choice, **options)
            return template.prompt(request, (yield ChatRender(template.templates, request)))

        prompt = yield from render(choice if tools else "auto")
        if named:
            # OpenAI's named function (and llama-cpp-python's): the reply is that call,
            # from its first token. The family's lazy grammar, applied from the start,
            # is exactly that; a format without one gets llama.cpp's "required".
            if prompt.grammar_lazy and any(t.kind != "token" for t in prompt.grammar_triggers):
                # Its root is a choice of trigger rules; "tool-call" is one call alone.
                one = "tool-call" if re.search(r"^tool-call ::=", prompt.grammar, re.M) else "root"
                prompt = replace(
                    prompt, grammar_lazy=False, grammar_triggers=(), grammar_root=one, prefill=False
                )
            else:
                prompt = yield from render("required")
        return prompt, bool(tools) and choice != "none"

    def chat(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> Job:
        """A chat completion's job: :meth:`chat_steps` with each render done in this
        thread."""
        return render_here(self.chat_steps(messages, **options))

    def chat_steps(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int | None = None,
        stop: str | Sequence[str] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        stopping_criteria: Sequence[StoppingCriteria] | StoppingCriteria | None = None,
        functions: Sequence[Mapping[str, Any]] | None = None,
        function_call: str | Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_format: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_budget: int | None = None,
        reasoning_budget_message: str | None = None,
        add_generation_prompt: bool | None = None,
        continue_final_message: bool | str | None = None,
        **sampling: Any,
    ) -> Generator[ChatRender, dict[str, Any], Job]:
        """A chat completion's job, rendered by llama.cpp's chat engine: a generator
        that yields each :class:`~llama_cy.chat.ChatRender` it needs and is sent the
        result, so that the caller chooses the thread (:meth:`chat` renders in its own).

        ``tools``/``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or a named
        function) and ``parallel_tool_calls`` give the model family's tool-call grammar
        (lazy for ``"auto"``: it wakes at the family's tool-call marker); a template
        with no tool-call format renders without them, as llama-server does, and a
        warning says so once per template. ``response_format`` ``{"type":
        "json_object"}`` (optionally with ``"schema"``) or ``{"type": "json_schema",
        "json_schema": {"schema": ...}}`` is enforced by a grammar made from the schema.
        ``reasoning_format`` (llama-server's values), ``reasoning_effort`` (OpenAI's;
        ``"none"`` turns thinking off) and ``chat_template_kwargs`` (``enable_thinking``
        among them; by default thinking is on where the template supports it) are
        llama-server's, as is ``reasoning_budget``: at most that many tokens of thought
        (-1: no limit) before ``reasoning_budget_message`` and the end tag are forced;
        under a template that marks no reasoning there is nothing to limit.
        """
        grammar = sampling.pop("grammar", None)
        messages, bitmaps = self.split_media(messages)
        prompt, parse_tools = yield from self.chat_prompt_steps(
            messages,
            functions=functions,
            function_call=function_call,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            response_format=response_format,
            grammar=grammar,
            chat_template_kwargs=chat_template_kwargs,
            reasoning_format=reasoning_format,
            reasoning_effort=reasoning_effort,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
        )
        if parse_tools and not prompt.grammar:
            # As llama-server: the template renders without them and the reply is plain
            # content; said once per template, since the model cannot call them.
            _warn_no_tool_format(self.template.source)
            parse_tools = False
        media = None
        if bitmaps:
            tokens, media = self.media_prompt(self._strip_bos(prompt.prompt), bitmaps)
        else:
            tokens = self.chat_tokens(prompt.prompt)
        if grammar is None and prompt.grammar:
            grammar = chat_grammar(self.model, prompt)
        # the request's budget, else this preparer's default (as llama-server's flag)
        n = self.reasoning_budget if reasoning_budget is None else _budget(reasoning_budget)
        if reasoning_budget_message is None:
            reasoning_budget_message = self.reasoning_budget_message
        budget = chat_reasoning_budget(prompt, n, reasoning_budget_message)
        params = self.sampling(self._profile(chat=True), grammar=grammar, **sampling)
        if top_logprobs is not None and top_logprobs < 0:
            raise ValueError(f"top_logprobs must be >= 0, got {top_logprobs}")
        n_logprobs = (top_logprobs or 0) if logprobs else None
        return Job(
            tokens,
            params,
            max_tokens,
            _stops(stop) + prompt.additional_stops,
            n_logprobs,
            _callables(stopping_criteria),
            chat=prompt,
            parse_tool_calls=parse_tools,
            reasoning_budget=budget,
            media=media,
        )


def _budget(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < -1:
        raise ValueError(f"reasoning_budget must be an integer >= -1 (-1: no limit), not {n!r}")
    return n


def _stops(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None or isinstance(stop, str):
        return (stop,) if stop else ()
    if not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of strings")
    return tuple(stop)


def _callables(given: Any) -> tuple[Any, ...]:
    """llama-cpp-python's ``logits_processor``/``stopping_criteria``: a list of callables
    (its ``LogitsProcessorList``/``StoppingCriteriaList``) or one bare callable."""
    if given is None:
        return ()
    if callable(given) and not isinstance(given, list | tuple):
        return (given,)
    return tuple(given)


#: the templates already warned about (their sources)
_NO_TOOL_FORMAT_WARNED: set[str] = set()


def _warn_no_tool_format(source: str) -> None:
    if source in _NO_TOOL_FORMAT_WARNED:
        return
    _NO_TOOL_FORMAT_WARNED.add(source)
    _log.warning(
        "this chat template has no tool-call format: tools are rendered without a "
        "tool-call grammar and the replies are plain content, as in llama-server "
        "(give a template that renders tools with chat_template=... to call them)"
    )
