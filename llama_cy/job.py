"""What to generate: a :class:`Job` (the prompt's tokens, how to sample, when to stop,
what to report), as the generation core (:mod:`llama_cy.generation`) takes it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from llama_cy._sampler import LlamaSampler
from llama_cy._speculative import Speculator
from llama_cy.prompt_media import Media
from llama_cy.sampling import ReasoningBudget, SamplingParams

if TYPE_CHECKING:
    from llama_cy.chat import ChatPrompt

__all__ = [
    "PROMPT_LOGPROB_ROWS",
    "PROMPT_LOGPROB_VALUES",
    "Job",
    "StoppingCriteria",
    "backend_sampling_blocker",
]

#: Prompt positions decoded per step for :attr:`Job.prompt_logprobs`: each is an output
#: row of n_vocab floats in llama.cpp's buffer (64 MiB at Gemma's 262k vocabulary).
PROMPT_LOGPROB_ROWS = 64
#: The most log-probabilities (each prompt token's and its alternatives') one job's prompt
#: gives: about 400 MB of Python objects, where a client's logprobs times a long prompt
#: could otherwise ask for billions.
PROMPT_LOGPROB_VALUES = 1 << 22

#: StoppingCriteria as llama-cpp-python calls them: (tokens so far, last logits) -> stop?
StoppingCriteria = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], bool]


@dataclass(frozen=True, slots=True)
class Job:
    """What to generate: the prompt's tokens, how to sample, and when to stop.

    ``max_tokens`` of None (or <= 0) runs until the model stops or the context is full.
    ``n_logprobs`` of None computes no log-probabilities; N >= 0 computes each token's
    and the N best alternatives': the model's, or with ``post_sampling_probs`` those the
    sampler chain left. ``parse_tool_calls``: the reply is read for tool calls.
    """

    tokens: list[int]
    params: SamplingParams
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    n_logprobs: int | None = None
    stopping_criteria: tuple[StoppingCriteria, ...] = ()
    chat: ChatPrompt | None = None
    parse_tool_calls: bool = False
    reasoning_budget: ReasoningBudget | None = None
    #: every chunk carries the timings so far (llama-server's ``timings_per_token``)
    timings_per_token: bool = False
    #: chunks report the prompt's progress while it is decoded (``return_progress``)
    progress: bool = False
    #: logprobs from the sampler chain's candidates, not the raw logits
    post_sampling_probs: bool = False
    #: the prompt's images and clips (their positions in ``tokens`` are stand-ins)
    media: Media | None = None
    #: sample in the graph (llama-server's ``backend_sampling``); None: the sequence's default
    backend_sampling: bool | None = None
    #: (role, text) where messages start, for checkpoints (llama-server's message_delimiters)
    message_delimiters: tuple[tuple[str, str], ...] = ()
    #: llama-server's n_indent, t_max_predict_ms (0: off), a context shift's n_keep (after
    #: the BOS; -1: all; None: the sequence's) and n_discard (0: half), and the special
    #: tokens shown as text besides the chat format's (its preserved_tokens)
    n_indent: int = 0
    t_max_predict_ms: int = 0
    n_keep: int | None = None
    n_discard: int = 0
    preserved: frozenset[int] = frozenset()
    #: the prompt's log-probabilities too, each token's given those before it
    #: (llama-cpp-python's ``echo=True`` with ``logprobs``): the whole prompt is decoded
    #: again, every position an output row, in chunks of :data:`PROMPT_LOGPROB_ROWS`
    prompt_logprobs: bool = False


def backend_sampling_blocker(
    job: Job, grammar: LlamaSampler | None, spec: Speculator | None
) -> str | None:
    """Why ``job`` cannot sample in the graph, or None. The graph keeps no full logits for
    an attached sequence, and picks its token before any CPU stage could veto it."""
    if grammar is not None or job.params.grammar is not None:
        return "grammar"  # llama.cpp's common sampler says the same
    if job.reasoning_budget is not None:
        return "reasoning budget"
    if job.n_logprobs is not None:
        return "log-probabilities (n_probs: the CPU chain's candidates give them)"
    if job.stopping_criteria:
        return "stopping criteria (they read the full logits)"
    if job.params.logits_processor:
        return "logits processors (they read the full logits)"
    if spec is not None:
        return "speculative decoding in llama_cy (drafts are verified on the CPU chain)"
    if job.media is not None:
        return "media input"
    return None
