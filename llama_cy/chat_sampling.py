"""What a rendered chat (:class:`~llama_cy.chat.ChatPrompt`, llama.cpp's
``common_chat_params``) asks of the sampler, set up as llama-server sets it up: the
grammar of its tool calls or response format, lazy with its triggers, and the budget of
its reasoning."""

from __future__ import annotations

from dataclasses import replace

from llama_cy._model import LlamaModel
from llama_cy.chat import ChatPrompt
from llama_cy.sampling import LlamaGrammar, ReasoningBudget

__all__ = ["chat_grammar", "chat_reasoning_budget"]


def chat_grammar(model: LlamaModel, prompt: ChatPrompt) -> LlamaGrammar:
    """The sampler's grammar for ``prompt``: a word trigger that is one (preserved) token
    of ``model`` becomes a token trigger; a grammar that applies from the start first
    accepts the assistant turn's opening."""
    if not prompt.grammar_lazy:
        prefill = prompt.generation_prompt if prompt.prefill else ""
        return LlamaGrammar(prompt.grammar, prompt.grammar_root, prefill=prefill)

    def special(text: str) -> list[int]:
        ids: list[int] = model.tokenize(text, add_special=False, parse_special=True).tolist()
        return ids

    preserved = {ids[0] for ids in map(special, prompt.preserved_tokens) if len(ids) == 1}
    tokens = []
    words = []
    for t in prompt.grammar_triggers:
        ids = special(t.value) if t.kind == "word" else []
        if len(ids) == 1:
            if ids[0] not in preserved:
                raise ValueError(f"the grammar trigger {t.value!r} is not a preserved token")
            tokens.append(ids[0])
        else:
            words.append(t)
    patterns = replace(prompt, grammar_triggers=tuple(words)).grammar_trigger_patterns()
    if not patterns and not tokens:
        raise ValueError("the chat template gave a lazy grammar without triggers")
    return LlamaGrammar(prompt.grammar, triggers=patterns, trigger_tokens=tokens, lazy=True)


def chat_reasoning_budget(prompt: ChatPrompt, n: int, message: str) -> ReasoningBudget | None:
    """At most ``n`` tokens of thought (-1: no limit) for a template that marks
    reasoning, then ``message`` and the end tag; None where there is nothing to limit."""
    if n < 0 or not (prompt.thinking_start_tag and prompt.thinking_end_tags):
        return None
    return ReasoningBudget(
        n, prompt.thinking_start_tag, prompt.thinking_end_tags, message, prompt.generation_prompt
    )
