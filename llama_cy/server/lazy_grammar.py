"""llama-server's /completion fields that make a grammar lazy: ``grammar_lazy``,
``grammar_triggers`` (``[{"type", "value", "token"}]``, common_grammar_trigger_type's
numbers) and ``preserved_tokens`` (special tokens shown as text, which a one-token
trigger word must be), read as server-schema.cpp reads them and turned into the
trigger patterns and tokens common_sampler gives llama.cpp's lazy grammar."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llama_cy._model import LlamaModel
from llama_cy.sampling import LlamaGrammar
from llama_cy.server.schema import ApiError

__all__ = ["lazy_grammar"]

TOKEN, WORD, PATTERN, PATTERN_FULL = range(4)  # common_grammar_trigger_type
_SPECIAL = re.compile(r"[.^$|()*+?\[\]{}\\]")  # common's regex_escape


def lazy_grammar(
    model: LlamaModel, grammar: Any, body: Mapping[str, Any]
) -> tuple[Any, frozenset[int]]:
    """The request's grammar (lazy if ``grammar_lazy``; ``grammar`` as given otherwise)
    and the ids of its preserved tokens."""
    special = [model.tokenize(t, add_special=False, parse_special=True).tolist()
               for t in _strings(body, "preserved_tokens")]  # fmt: skip
    preserved = frozenset(ids[0] for ids in special if len(ids) == 1)
    patterns: list[str] = []
    tokens: list[int] = []
    for t in body.get("grammar_triggers") or ():
        kind, value = _trigger(t, model.n_vocab)
        if kind == WORD:
            ids = model.tokenize(value, add_special=False, parse_special=True).tolist()
            if len(ids) == 1 and ids[0] not in preserved:
                raise _error("Grammar trigger word should be marked as preserved token: " + value)
            if len(ids) == 1:
                tokens.append(ids[0])
            else:
                patterns.append(_SPECIAL.sub(lambda m: "\\" + m.group(0), value))
        elif kind == PATTERN:
            patterns.append(value)
        elif kind == PATTERN_FULL:
            patterns.append(
                "^$" if not value else ("" if value[0] == "^" else "^") + value
                + ("" if value[-1] == "$" else "$")
            )  # fmt: skip
        else:
            tokens.append(int(t["token"]))
    if body.get("grammar_lazy") and not (patterns or tokens):
        raise _error("Error: no triggers set for lazy grammar!")
    if grammar is None or not body.get("grammar_lazy"):
        return grammar, preserved
    gbnf = grammar.gbnf if isinstance(grammar, LlamaGrammar) else grammar
    return LlamaGrammar(gbnf, triggers=patterns, trigger_tokens=tokens, lazy=True), preserved


def _strings(body: Mapping[str, Any], name: str) -> list[str]:
    value = body.get(name) or []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ApiError(400, f"'{name}' must be an array of strings", param=name)
    return value


def _trigger(t: Any, n_vocab: int) -> tuple[int, str]:
    """One trigger, checked: llama.cpp asserts on a type it does not know."""
    ok = isinstance(t, dict) and isinstance(t.get("value"), str)
    kind = t.get("type") if ok else None
    if not isinstance(kind, int) or isinstance(kind, bool) or kind not in range(4):
        raise _error('each trigger is {"type": 0 to 3, "value": string}')
    token = t.get("token")
    if kind == TOKEN and not (isinstance(token, int) and 0 <= token < n_vocab):
        raise _error(f'a token trigger\'s "token" is a token id below {n_vocab}')
    return kind, t["value"]


def _error(message: str) -> ApiError:
    return ApiError(400, f"Field 'grammar_triggers': {message}", param="grammar_triggers")
