"""Sampling parameters (llama-cpp-python's names) and the llama.cpp sampler chain they make.

The chain follows llama.cpp's common sampler: logit bias, penalties, DRY, top-n-sigma,
top-k, typical, top-p, min-p, XTC, temperature, then the draw (or mirostat); or the
order ``samplers`` gives, as llama-server's ``--samplers`` and request field. A grammar
is kept outside the chain and consulted only when the chain's pick breaks it, as
llama.cpp does, so a constrained step usually costs no more than a free one.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from llama_cy._chat import reasoning_budget_sampler
from llama_cy._model import LlamaModel
from llama_cy._sampler import LlamaSampler
from llama_cy.grammar import json_schema_to_grammar
from llama_cy.sampling_settings import check, defaults

__all__ = [
    "SAMPLER_TYPES",
    "LlamaGrammar",
    "LogitsProcessor",
    "MinTokensLogitsProcessor",
    "SamplingParams",
    "build_sampler",
    "eog_bias",
    "sampler_types",
]

_log = logging.getLogger("llama_cy")

#: llama.cpp's sampler types (``common_sampler_type``) by name, with each one's
#: ``--sampler-seq`` letter; the default order is llama.cpp's.
SAMPLER_TYPES: dict[str, str] = {
    "penalties": "e",
    "dry": "d",
    "top_n_sigma": "s",
    "top_k": "k",
    "typ_p": "y",
    "top_p": "p",
    "min_p": "m",
    "xtc": "x",
    "temperature": "t",
    "infill": "i",
    "adaptive_p": "a",
}
DEFAULT_SAMPLERS = tuple(SAMPLER_TYPES)[:9]
# common_sampler_types_from_names' spellings: kebab-case and undashed forms of the
# names with an underscore, and three more.
_SAMPLER_NAMES: dict[str, str] = {
    **{n.replace("_", sep): n for n in SAMPLER_TYPES if "_" in n for sep in ("-", "")},
    "nucleus": "top_p",
    "temp": "temperature",
    "typ": "typ_p",
    **{n: n for n in SAMPLER_TYPES},
}
_SAMPLER_CHARS = {ch: n for n, ch in SAMPLER_TYPES.items()}


def eog_bias(model: LlamaModel) -> dict[int, float]:
    """Every end-of-generation token biased to never (llama.cpp's ``logit_bias_eog``:
    ``--ignore-eos``, a request's ``ignore_eos``)."""
    return {t: float("-inf") for t in range(model.n_vocab) if model.is_eog(t)}


def sampler_types(value: str | Sequence[str]) -> tuple[str, ...]:
    """llama.cpp's reading of a sampler order: a list of names (any case, with its
    aliases) or a string of ``--sampler-seq`` letters. As llama.cpp, an unknown name or
    letter is skipped with a warning."""
    if isinstance(value, str):
        pairs = [(ch, _SAMPLER_CHARS.get(ch)) for ch in value]
    else:
        if not all(isinstance(x, str) for x in value):
            raise ValueError("samplers must be a string of letters or a list of names")
        pairs = [(x, _SAMPLER_NAMES.get(x.lower())) for x in value]
    for given, name in pairs:
        if name is None:
            _log.warning("unable to match sampler %r: skipped", given)
    return tuple(name for _, name in pairs if name is not None)


#: llama-cpp-python's ``logits_processor``: (tokens so far, scores) -> new scores.
LogitsProcessor = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], npt.NDArray[np.single]]


class MinTokensLogitsProcessor:
    """llama-cpp-python's: its end-of-sequence token is not sampled before ``min_tokens``
    tokens were generated (counted from the first call, which sees the prompt). The
    server's ``min_tokens`` field uses it, as llama-cpp-python's server does."""

    def __init__(self, min_tokens: int, token_eos: int) -> None:
        self.min_tokens = min_tokens
        self.token_eos = token_eos
        self.prompt_tokens: int | None = None

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        if len(input_ids) - self.prompt_tokens < self.min_tokens and self.token_eos >= 0:
            scores[self.token_eos] = -np.inf
        return scores


class LlamaGrammar:
    """A GBNF grammar, as llama-cpp-python's ``LlamaGrammar`` (parsed when sampling starts).

    A ``lazy`` grammar applies only once the output matches one of ``triggers`` (regular
    expressions, from the match's first group on) or holds one of ``trigger_tokens``
    (llama.cpp's lazy grammar); giving triggers makes it lazy. ``prefill`` is text the
    prompt already ends with that the grammar's sentences start with (a chat template's
    opening of the assistant turn): the grammar accepts its tokens before sampling.
    """

    def __init__(
        self,
        gbnf: str,
        root: str = "root",
        triggers: Sequence[str] = (),
        *,
        trigger_tokens: Sequence[int] = (),
        lazy: bool = False,
        prefill: str = "",
    ) -> None:
        self.gbnf = gbnf
        self.root = root
        self.triggers = tuple(triggers)
        self.trigger_tokens = tuple(trigger_tokens)
        self.lazy = lazy or bool(self.triggers or self.trigger_tokens)
        self.prefill = prefill

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> LlamaGrammar:
        return cls(grammar)

    @classmethod
    def from_file(cls, path: str, verbose: bool = True) -> LlamaGrammar:
        # os.fspath: open() would take an int as a descriptor, and close it
        with open(os.fspath(path), encoding="utf-8") as f:
            return cls(f.read())

    @classmethod
    def from_json_schema(
        cls, json_schema: str | Mapping[str, Any], verbose: bool = True
    ) -> LlamaGrammar:
        """The grammar of a JSON schema, by llama.cpp's ``json_schema_to_grammar``."""
        return cls(json_schema_to_grammar(json_schema))


@dataclass(frozen=True, slots=True)
class ReasoningBudget:
    """A reasoning budget, as llama-server's ``reasoning_budget_tokens``: at most
    ``tokens`` tokens after ``start`` (a thinking model's opening tag) before ``message``
    and the first of ``end`` are forced, unless the model closes the block itself.
    ``prefill`` is the prompt's opening of the reply, which may already open the block.
    """

    tokens: int
    start: str
    end: tuple[str, ...]
    message: str = ""
    prefill: str = ""

    def sampler(self, model: LlamaModel) -> LlamaSampler:
        """llama.cpp's sampler for this budget, fed the prefill (first in a chain)."""
        special = partial(model.tokenize, add_special=False, parse_special=True)
        end = [special(e).tolist() for e in self.end]
        forced = (special(self.message).tolist() if self.message else []) + end[0]
        s = reasoning_budget_sampler([special(self.start).tolist()], end, forced, self.tokens)
        for token in _prefill_tokens(model, self.prefill):
            s.accept(token)
        return s


_D = defaults("completion")


@dataclass(slots=True)
class SamplingParams:
    """Every sampling knob of a completion call; the defaults are llama-cpp-python's, from
    :data:`~llama_cy.sampling_settings.SAMPLING_SETTINGS`, and out-of-range values raise ValueError.

    ``temperature <= 0`` means greedy. ``seed=None`` draws a fresh random seed.
    """

    temperature: float = _D["temperature"]
    top_k: int = _D["top_k"]
    top_p: float = _D["top_p"]
    min_p: float = _D["min_p"]
    typical_p: float = _D["typical_p"]
    repeat_penalty: float = _D["repeat_penalty"]
    frequency_penalty: float = _D["frequency_penalty"]
    presence_penalty: float = _D["presence_penalty"]
    penalty_last_n: int = _D["penalty_last_n"]
    dry_multiplier: float = _D["dry_multiplier"]
    dry_base: float = _D["dry_base"]
    dry_allowed_length: int = _D["dry_allowed_length"]
    dry_penalty_last_n: int = _D["dry_penalty_last_n"]
    dry_sequence_breakers: Sequence[str] = _D["dry_sequence_breakers"]
    xtc_probability: float = _D["xtc_probability"]
    xtc_threshold: float = _D["xtc_threshold"]
    top_n_sigma: float = _D["top_n_sigma"]
    dynatemp_range: float = _D["dynatemp_range"]
    dynatemp_exponent: float = _D["dynatemp_exponent"]
    mirostat_mode: int = _D["mirostat_mode"]
    mirostat_tau: float = _D["mirostat_tau"]
    mirostat_eta: float = _D["mirostat_eta"]
    adaptive_target: float = _D["adaptive_target"]
    adaptive_decay: float = _D["adaptive_decay"]
    min_keep: int = _D["min_keep"]
    seed: int | None = None
    logit_bias: Mapping[int, float] | None = None
    grammar: LlamaGrammar | str | None = None
    logits_processor: Sequence[LogitsProcessor] = field(default_factory=tuple)
    #: the chain's order, names of :data:`SAMPLER_TYPES` (None: llama.cpp's default)
    samplers: Sequence[str] | None = None

    def __post_init__(self) -> None:
        check({name: getattr(self, name) for name in _D})
        if self.samplers is not None:
            bad = [x for x in self.samplers if x not in SAMPLER_TYPES]
            if isinstance(self.samplers, str) or bad:
                raise ValueError(
                    f"samplers must be names of {', '.join(SAMPLER_TYPES)} "
                    "(sampler_types() reads llama.cpp's other spellings)"
                )
        if self.seed is not None and not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be in [0, 2**32) or None (random), got {self.seed}")

    @property
    def uses_history(self) -> bool:
        """Whether the chain must see the prompt tokens (penalties, DRY, processors)."""
        return bool(
            self.repeat_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or self.dry_multiplier > 0.0
            or self.logits_processor
        )


class _ProcessorSampler:
    """llama-cpp-python logits processors as a Python sampler at the head of the chain."""

    def __init__(self, processors: Sequence[LogitsProcessor], history: list[int]) -> None:
        self.processors = processors
        self.history = history

    def apply(self, candidates: npt.NDArray[np.void]) -> None:
        ids = np.asarray(self.history, dtype=np.intc)
        logits = candidates["logit"]
        scores = np.empty(len(candidates), dtype=np.single)
        scores[candidates["id"]] = logits
        for proc in self.processors:
            scores = proc(ids, scores)
        logits[:] = scores[candidates["id"]]

    def accept(self, token: int) -> None:
        self.history.append(token)

    def reset(self) -> None:
        self.history.clear()


def _window(name: str, n: int, n_ctx: int) -> int:
    """A penalty window as llama-server reads it: -1 is the context, and no window is
    longer than the context (llama.cpp would allocate all of it up front)."""
    if n < -1:
        raise ValueError(f"{name} must be -1 (the context size), 0 (off) or positive, got {n}")
    return n_ctx if n == -1 else min(n, n_ctx)


def _prefill_tokens(model: LlamaModel, text: str) -> list[int]:
    """``text``'s tokens as common_sampler_init feeds them to a grammar: a first token
    that is only the space some tokenizers put before a special token is left out."""
    if not text:
        return []
    tokens: list[int] = model.tokenize(text, add_special=False, parse_special=True).tolist()
    if tokens and not text[0].isspace():
        first = model.token_to_piece(tokens[0], special=True)
        if first[:1].isspace():
            tokens = tokens[1:]
    return tokens


def build_sampler(
    model: LlamaModel,
    p: SamplingParams,
    history: list[int] | None = None,
    *,
    n_ctx: int,
    budget: ReasoningBudget | None = None,
) -> tuple[LlamaSampler, LlamaSampler | None]:
    """The sampler chain for ``p`` (after ``budget``'s sampler, if given) and, if
    ``p.grammar`` is set, its grammar sampler.

    ``history`` is the list that logits processors see as the tokens so far (the chain
    appends each accepted token to it). ``n_ctx`` is the sequence's context size, which
    bounds the penalty windows.
    """
    n_vocab = model.n_vocab
    seed = p.seed if p.seed is not None else random.getrandbits(32)
    chain: list[Any] = [budget.sampler(model)] if budget is not None else []
    if p.logits_processor:
        chain.append(_ProcessorSampler(p.logits_processor, history if history is not None else []))
    if p.logit_bias:
        chain.append(
            LlamaSampler.logit_bias(n_vocab, {int(k): float(v) for k, v in p.logit_bias.items()})
        )
    # A sampler order (llama-server's --samplers) places the penalties and DRY itself.
    ordered = p.samplers is not None and p.mirostat_mode == 0
    if not ordered and (p.repeat_penalty, p.frequency_penalty, p.presence_penalty) != (1, 0, 0):
        chain.append(_penalties(model, p, n_ctx))
    if not ordered and p.dry_multiplier > 0.0:
        chain.append(_dry(model, p, n_ctx))
    if ordered:
        chain += _ordered(model, p, seed, n_ctx)
    elif p.temperature <= 0.0:
        chain.append(LlamaSampler.greedy())
    elif p.mirostat_mode == 1:
        chain.append(LlamaSampler.temp(p.temperature))
        chain.append(LlamaSampler.mirostat(n_vocab, seed, p.mirostat_tau, p.mirostat_eta))
    elif p.mirostat_mode == 2:
        chain.append(LlamaSampler.temp(p.temperature))
        chain.append(LlamaSampler.mirostat_v2(seed, p.mirostat_tau, p.mirostat_eta))
    elif p.mirostat_mode != 0:
        raise ValueError(f"mirostat_mode must be 0, 1 or 2, not {p.mirostat_mode}")
    else:
        keep = p.min_keep or 1  # llama-cpp-python's chain keeps one at least
        if p.top_n_sigma > 0.0:
            chain.append(LlamaSampler.top_n_sigma(p.top_n_sigma))
        if p.top_k > 0:
            chain.append(LlamaSampler.top_k(p.top_k))
        if p.typical_p < 1.0:
            chain.append(LlamaSampler.typical(p.typical_p, keep))
        if p.top_p < 1.0:
            chain.append(LlamaSampler.top_p(p.top_p, keep))
        if p.min_p > 0.0:
            chain.append(LlamaSampler.min_p(p.min_p, keep))
        if p.xtc_probability > 0.0:
            chain.append(LlamaSampler.xtc(p.xtc_probability, p.xtc_threshold, keep, seed))
        if p.dynatemp_range > 0.0:
            chain.append(
                LlamaSampler.temp_ext(p.temperature, p.dynatemp_range, p.dynatemp_exponent)
            )
        else:
            chain.append(LlamaSampler.temp(p.temperature))
        chain.append(LlamaSampler.dist(seed))
    # Attached to the context (backend sampling), the chain's pick comes back without the
    # row of logits or probabilities llama.cpp would copy beside it; nothing here reads
    # them (n_probs keeps a job on the CPU chain). On the CPU it does nothing.
    chain.append(LlamaSampler.token_only())
    grammar = None
    if p.grammar is not None:
        g = p.grammar if isinstance(p.grammar, LlamaGrammar) else LlamaGrammar(p.grammar)
        if g.lazy:
            grammar = LlamaSampler.grammar_lazy_patterns(
                model, g.gbnf, g.root, g.triggers, g.trigger_tokens
            )
        else:
            grammar = LlamaSampler.grammar(model, g.gbnf, g.root)
            for token in _prefill_tokens(model, g.prefill):
                grammar.accept(token)
    return LlamaSampler.chain(chain, no_perf=True), grammar


def _penalties(model: LlamaModel, p: SamplingParams, n_ctx: int) -> LlamaSampler:
    window = _window("penalty_last_n", p.penalty_last_n, n_ctx)
    return LlamaSampler.penalties(
        model.n_vocab, window, p.repeat_penalty, p.frequency_penalty, p.presence_penalty
    )


def _dry(model: LlamaModel, p: SamplingParams, n_ctx: int) -> LlamaSampler:
    window = _window("dry_penalty_last_n", p.dry_penalty_last_n, n_ctx)
    return LlamaSampler.dry(
        model, p.dry_multiplier, p.dry_base, p.dry_allowed_length, window, p.dry_sequence_breakers
    )


def _ordered(model: LlamaModel, p: SamplingParams, seed: int, n_ctx: int) -> list[LlamaSampler]:
    """``p.samplers``' stages in their order, then the draw: common_sampler_init's loop,
    where a stage is added whatever its setting (a stage at its neutral value passes
    the candidates through) and the temperature applies only if listed."""
    stages: list[LlamaSampler] = []
    for name in p.samplers or ():
        if name == "penalties":
            stages.append(_penalties(model, p, n_ctx))
        elif name == "dry":
            stages.append(_dry(model, p, n_ctx))
        elif name == "top_n_sigma":
            stages.append(LlamaSampler.top_n_sigma(p.top_n_sigma))
        elif name == "top_k":
            stages.append(LlamaSampler.top_k(p.top_k))
        elif name == "typ_p":
            stages.append(LlamaSampler.typical(p.typical_p, p.min_keep))
        elif name == "top_p":
            stages.append(LlamaSampler.top_p(p.top_p, p.min_keep))
        elif name == "min_p":
            stages.append(LlamaSampler.min_p(p.min_p, p.min_keep))
        elif name == "xtc":
            stages.append(LlamaSampler.xtc(p.xtc_probability, p.xtc_threshold, p.min_keep, seed))
        elif name == "temperature":
            stages.append(
                LlamaSampler.temp_ext(p.temperature, p.dynatemp_range, p.dynatemp_exponent)
            )
        elif name == "infill":
            stages.append(LlamaSampler.infill(model))
    if "adaptive_p" in (p.samplers or ()):  # listed: it draws, in place of dist
        stages.append(LlamaSampler.adaptive_p(p.adaptive_target, p.adaptive_decay, seed))
    else:
        stages.append(LlamaSampler.dist(seed))
    return stages
