"""What ``Llama(draft_model=...)`` takes, turned into :class:`~llama_cy.Speculator` settings.

``draft_model`` is llama-cpp-python's argument: there it takes a ``LlamaDraftModel``,
in practice :class:`LlamaPromptLookupDecoding`. Here it takes that class (mapped onto
llama.cpp's ``ngram-simple``), a draft model (a path or a loaded
:class:`~llama_cy.LlamaModel`: llama.cpp's ``draft-simple``, or ``draft-eagle3`` for an
EAGLE3 draft), or llama-server's ``--spec-type`` names for the n-gram types and
``draft-mtp`` (the model's own MTP layers, loaded for it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy._speculative import SPEC_TYPES, Speculator

__all__ = [
    "DraftModel",
    "LlamaPromptLookupDecoding",
    "speculator",
    "speculator_settings",
    "uses_mtp",
]


@dataclass(frozen=True, slots=True)
class LlamaPromptLookupDecoding:
    """llama-cpp-python's prompt lookup decoding: draft the ``num_pred_tokens`` tokens
    that followed the last time the sequence's latest ``max_ngram_size`` tokens
    appeared in it. Run by llama.cpp's ``ngram-simple`` drafter (``size_n`` =
    ``max_ngram_size``, ``size_m`` = ``num_pred_tokens``), which looks for that n-gram
    only, where llama-cpp-python also tries shorter ones.
    """

    # llama-cpp-python's order, for positional calls.
    max_ngram_size: int = 2
    num_pred_tokens: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.num_pred_tokens <= 1024:
            raise ValueError(f"num_pred_tokens must be in [1, 1024], got {self.num_pred_tokens}")
        if not 1 <= self.max_ngram_size <= 1024:
            raise ValueError(f"max_ngram_size must be in [1, 1024], got {self.max_ngram_size}")

    @staticmethod
    def find_candidate_pred_tokens(
        input_ids: npt.NDArray[np.integer[Any]], max_ngram_size: int, num_pred_tokens: int
    ) -> npt.NDArray[np.integer[Any]]:
        """llama-cpp-python's lookup in NumPy: the up to ``num_pred_tokens`` tokens that
        followed the first earlier occurrence of the sequence's last n-gram, trying
        ``n = max_ngram_size`` down to 1; empty when none occurred."""
        ids = np.asarray(input_ids)
        for n in range(min(max_ngram_size, len(ids) - 1), 0, -1):
            windows = np.lib.stride_tricks.sliding_window_view(ids, n)
            # Windows that end before the last token: the tail itself is no match.
            hits = np.flatnonzero(np.all(windows[: len(ids) - n] == ids[-n:], axis=1))
            if hits.size:
                start = int(hits[0]) + n
                return ids[start : start + num_pred_tokens]
        return ids[:0]


#: What ``draft_model=`` takes.
DraftModel = LlamaPromptLookupDecoding | LlamaModel | str | os.PathLike[str]


def speculator_settings(
    draft_model: DraftModel,
    *,
    draft_max: int | None = None,
    draft_min: int | None = None,
    draft_p_min: float | None = None,
    load: Callable[[str | os.PathLike[str]], LlamaModel],
) -> dict[str, Any]:
    """:class:`~llama_cy.Speculator` keywords for ``draft_model``; ``load`` loads a draft
    model from a path. ``draft_max``/``draft_min``/``draft_p_min`` (llama-server's
    ``--draft-max``/``--draft-min``/``--draft-p-min``) bound a draft model's drafts,
    so they are refused with the n-gram types, which have no use for them."""
    if isinstance(draft_model, LlamaPromptLookupDecoding):
        settings: dict[str, Any] = {
            "types": "ngram-simple",
            "ngram_simple": {
                "size_n": draft_model.max_ngram_size,
                "size_m": draft_model.num_pred_tokens,
            },
        }
    elif isinstance(draft_model, LlamaModel):
        settings = {"types": _draft_type(draft_model), "draft_model": draft_model}
    elif isinstance(draft_model, str) and _is_type_list(draft_model):
        for kind in ("draft-simple", "draft-eagle3"):
            if kind in draft_model:
                raise ValueError(f"{kind} needs a draft model: pass its path or LlamaModel")
        settings = {"types": draft_model}
    elif isinstance(draft_model, (str, os.PathLike)):
        model = load(draft_model)
        settings = {"types": _draft_type(model), "draft_model": model}
    else:
        raise TypeError(
            "draft_model must be a LlamaPromptLookupDecoding, a draft model (path or "
            f"LlamaModel) or speculative type names ({', '.join(SPEC_TYPES[1:])}), "
            f"not {type(draft_model).__name__}"
        )
    given = {"draft_max": draft_max, "draft_min": draft_min, "draft_p_min": draft_p_min}
    given = {k: v for k, v in given.items() if v is not None}
    if given and "draft_model" not in settings and not uses_mtp(settings):
        raise ValueError(
            f"{', '.join(given)}: bounds for a draft model's drafts, and there is none"
        )
    if draft_max is not None:
        if draft_max < 1:
            raise ValueError(f"draft_max must be at least 1, got {draft_max}")
        settings["n_max"] = draft_max
    if draft_min is not None:
        settings["n_min"] = draft_min
    if draft_p_min is not None:
        settings["p_min"] = draft_p_min
    return settings


def _draft_type(model: LlamaModel) -> str:
    """An EAGLE3 draft model drafts as draft-eagle3 (llama-server infers it from the
    draft's kind too), any other as draft-simple."""
    return "draft-eagle3" if model.meta_val("general.architecture") == "eagle3" else "draft-simple"


def uses_mtp(settings: Mapping[str, Any]) -> bool:
    """Whether ``settings`` draft with the target's own MTP layers (``draft-mtp``): the
    model must be loaded with them (``LlamaModel.load(load_mtp=True)``)."""
    types = settings.get("types") or ()
    names = types.split(",") if isinstance(types, str) else types
    return "draft-mtp" in [str(n).strip() for n in names]


def _is_type_list(text: str) -> bool:
    names = [t.strip() for t in text.split(",")]
    return bool(names) and all(n in SPEC_TYPES for n in names)


def speculator(ctx: LlamaContext, settings: dict[str, Any], context: dict[str, Any]) -> Speculator:
    """A :class:`~llama_cy.Speculator` on ``ctx`` from ``settings`` (its keywords); a draft
    context gets the KV and thread settings of ``context`` (the target's keywords)
    unless ``settings["draft_context"]`` sets them."""
    if ctx.model.is_recurrent or ctx.model.is_hybrid:
        raise ValueError(
            "speculative decoding needs a KV cache that can drop a rejected draft: "
            "recurrent and hybrid models are not supported"
        )
    kw = dict(settings)
    if kw.get("draft_model") is not None or uses_mtp(kw):
        shared = ("kv_unified", "n_threads", "n_threads_batch", "flash_attn")
        draft_context = {k: context[k] for k in shared if context.get(k) is not None}
        # the draft's SWA cache is sized as the target's (llama-server's draft params)
        draft_context["swa_full"] = ctx.swa_full
        draft_context.update(kw.get("draft_context") or {})
        kw["draft_context"] = draft_context
    return Speculator(ctx, **kw)
