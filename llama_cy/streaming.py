"""Generated tokens to chunks of text that are safe to show.

A token may end inside a multi-byte character, and a stop string may span several
tokens. :class:`TextAssembler` holds back exactly what could still turn out to be
either, and releases everything else at once. :class:`CompletionOutput` keeps the rest of
one generation's books (token limit, log-probabilities, the chunks), for
:class:`~llama_cy.Llama`'s loop and the server's slots alike.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from llama_cy._context import LlamaContext
from llama_cy._model import LlamaModel
from llama_cy.completion import CompletionChunk, StopReason, Timings, TokenLogprob

if TYPE_CHECKING:
    from llama_cy.chat import ChatPrompt

#: a sampler chain's candidates (``llama_cy.CANDIDATE_DTYPE``: id, logit, p)
Candidates = npt.NDArray[np.void]

__all__ = ["CompletionOutput", "TextAssembler", "preserved_tokens"]


class TextAssembler:
    """Feed token pieces (bytes) with :meth:`push`; emit what it returns.

    ``n_indent`` (> 0) is llama-server's minimum indentation of each line after the
    first: a line that starts with fewer spaces or tabs ends the text before its first
    other character (:attr:`short_line`). A newline and the blanks after it are held
    until that is known.
    """

    __slots__ = (
        "_decoder",
        "_indent",
        "_line",
        "_pending",
        "_stops",
        "emitted",
        "short_line",
        "stop",
    )

    def __init__(self, stop: Iterable[str] = (), n_indent: int = 0) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._stops = [s for s in stop if s]
        self._pending = ""
        self._indent = n_indent
        #: a newline and the blanks after it, held while n_indent is undecided
        self._line: str | None = None
        #: The stop string that ended the text, once one has matched.
        self.stop: str | None = None
        #: A line indented less than n_indent ended the text.
        self.short_line = False
        #: Number of characters released so far.
        self.emitted = 0

    @property
    def pending(self) -> str:
        """Text decoded but held back (a possible start of a stop string)."""
        return self._pending

    def push(self, piece: bytes) -> str:
        """Add a token's bytes; the text that can be shown now (may be empty)."""
        if self.stop is not None or self.short_line:
            return ""
        text = self._decoder.decode(piece)
        if self._indent > 0:
            text = self._indented(text)
        if not self._stops:
            self.emitted += len(text)
            return text
        self._pending += text
        return self._release(final=False)

    def finish(self) -> str:
        """End of generation: release the rest (a dangling partial character as U+FFFD)."""
        if self.stop is not None:
            return ""
        tail = "" if self.short_line else self._decoder.decode(b"", final=True)
        if self._line is not None:  # blanks at the end: no line that could be short
            tail, self._line = self._line + tail, None
        self._pending += tail
        return self._release(final=True)

    def _indented(self, text: str) -> str:
        """``text`` less what n_indent holds back (a newline and its blanks) or cuts off
        (a line indented less, from its first other character on)."""
        out: list[str] = []
        for c in text:
            if self._line is None:
                if c == "\n":
                    self._line = ""  # held with the blanks that follow
                else:
                    out.append(c)
            elif c in " \t":
                self._line += c
            else:  # the line's first other character (a newline too, as llama-server)
                blanks, self._line = self._line, None
                out.append("\n" + blanks)  # llama-server keeps the newline and blanks
                if len(blanks) < self._indent:
                    self.short_line = True
                    break
                if c == "\n":
                    self._line = ""
                else:
                    out.append(c)
        return "".join(out)

    def _release(self, final: bool) -> str:
        text = self._pending
        cut = -1
        for s in self._stops:
            i = text.find(s)
            if i != -1 and (cut == -1 or i < cut):
                cut, self.stop = i, s
        if cut != -1:
            self._pending = ""
            self.emitted += cut
            return text[:cut]
        hold = 0
        if not final:
            for s in self._stops:
                for k in range(min(len(s) - 1, len(text)), hold, -1):
                    if text.endswith(s[:k]):
                        hold = k
                        break
        out = text[: len(text) - hold]
        self._pending = text[len(out) :]
        self.emitted += len(out)
        return out


class CompletionOutput:
    """One generation's state after the prompt: feed each sampled token to :meth:`add`.

    :meth:`add` sets :attr:`reason` when the model ends its turn, a stop string matches
    or ``max_tokens`` are reached; the caller may set it for its own reasons (a full
    context). While :attr:`reason` is ``None``, text returned by :meth:`add` goes out
    as :meth:`chunk`; the last text goes out with :meth:`finish`.
    """

    __slots__ = (
        "_logprobs",
        "_t_first",
        "_tokens",
        "generated",
        "limit",
        "max_predict_s",
        "model",
        "n_logprobs",
        "n_prompt",
        "prompt",
        "reason",
        "special_tokens",
        "text",
    )

    def __init__(
        self,
        model: LlamaModel,
        stop: Iterable[str],
        max_tokens: int | None,
        n_logprobs: int | None,
        n_prompt: int,
        special_tokens: frozenset[int] | None = None,
        *,
        n_indent: int = 0,
        t_max_predict_ms: int = 0,
    ) -> None:
        self.model = model
        #: the special tokens shown as text (None: all; llama-server shows those its chat
        #: format preserves, or all with -sp; a control token is otherwise empty text)
        self.special_tokens = special_tokens
        self.text = TextAssembler(stop, n_indent)
        self.limit = max_tokens if max_tokens is not None and max_tokens > 0 else None
        #: llama-server's t_max_predict_ms: past it, the next newline ends the text
        self.max_predict_s = t_max_predict_ms / 1000 if t_max_predict_ms > 0 else None
        self._t_first = 0.0
        self.n_logprobs = n_logprobs
        self.n_prompt = n_prompt
        self.generated: list[int] = []
        self.reason: StopReason | None = None
        self._tokens: list[int] = []
        self._logprobs: list[TokenLogprob] | None = [] if n_logprobs is not None else None
        #: the prompt's log-probabilities, for a job that asks for them (set by its
        #: sequence); the first chunk carries them
        self.prompt: PromptLogprobs | None = None

    def add(
        self, ctx: LlamaContext, token: int, i: int = -1, candidates: Candidates | None = None
    ) -> str:
        """Take the token sampled from output row ``i``; the text that can be shown now.
        With ``candidates`` (what the sampler chain left), logprobs are theirs."""
        if self.model.is_eog(token):
            self.reason = "eog"
            return ""
        self.generated.append(token)
        self._tokens.append(token)
        shown = self.special_tokens
        piece = self.model.token_to_piece(token, special=shown is None or token in shown)
        if self._logprobs is not None:
            offset = self.text.emitted + len(self.text.pending)
            n_top = self.n_logprobs or 0
            self._logprobs.append(
                token_logprob(ctx, self.model, token, piece, n_top, offset, i)
                if candidates is None
                else sampled_logprob(candidates, self.model, token, piece, n_top, offset)
            )
        if self.max_predict_s is not None and len(self.generated) == 1:
            self._t_first = time.perf_counter()
        out = self.text.push(piece)
        if self.text.stop is not None:
            self.reason = "stop"
        elif (
            self.text.short_line
            or (self.limit is not None and len(self.generated) >= self.limit)
            or (
                self.max_predict_s is not None
                and "\n" in out
                and time.perf_counter() - self._t_first > self.max_predict_s
            )
        ):  # n_indent: llama-server's limit stop
            self.reason = "length"
        return out

    def chunk(self, text: str) -> CompletionChunk:
        """A chunk of ``text`` with the tokens (and logprobs) since the last chunk."""
        chunk = CompletionChunk(text, self._tokens, self._logprobs)
        self._tokens = []
        self._logprobs = [] if self._logprobs is not None else None
        if self.prompt is not None:
            chunk.prompt_logprobs, self.prompt = self.prompt.entries, None
        return chunk

    def finish(self, text: str, timings: Timings) -> CompletionChunk:
        """The last chunk: ``text`` and whatever was held back, the stop reason, timings."""
        if self.text.stop is None:
            text += self.text.finish()
            if self.text.stop is not None:
                self.reason = "stop"
        if self.reason is None:
            raise RuntimeError("CompletionOutput.finish() before a stop reason was set")
        logprobs = self._logprobs
        if logprobs is not None:  # tokens of a cut stop string are not part of the text
            logprobs = [lp for lp in logprobs if lp.offset < self.text.emitted]
        chunk = CompletionChunk(
            text, self._tokens, logprobs, self.reason, timings, self.n_prompt, self.text.stop
        )
        if self.prompt is not None:
            chunk.prompt_logprobs, self.prompt = self.prompt.entries, None
        return chunk


class PromptLogprobs:
    """A prompt's log-probabilities as llama-cpp-python's ``echo=True`` gives them: one
    entry per token after a leading BOS (BOS tokens are skipped), each the token's
    log-probability given the tokens before it, with the ``n_top`` best alternatives; the
    first entry has no row to come from (NaN). Offsets are characters of the prompt's
    text (pieces without special tokens, invalid UTF-8 dropped), from its start."""

    __slots__ = ("_chars", "_decoder", "entries", "first", "model", "n_top", "tokens")

    def __init__(self, model: LlamaModel, tokens: list[int], n_top: int) -> None:
        self.model, self.tokens, self.n_top = model, tokens, n_top
        self.entries: list[TokenLogprob] = []
        self.first = 1 if tokens and tokens[0] == model.token_bos else 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._chars = 0

    def rows(self, ctx: LlamaContext, start: int, row: int, n: int) -> None:
        """Take output rows ``row`` .. ``row + n - 1``: the logits after prompt positions
        ``start`` .. ``start + n - 1`` (the chunk just decoded)."""
        tokens, model = self.tokens, self.model
        if start == 0:  # the tokens before the first entry have no entry of their own
            for t in tokens[: self.first]:
                self._chars += len(self._decoder.decode(model.token_to_piece(t)))
            if self.first < len(tokens):
                self._add(ctx, self.first, -1)
        for k in range(n):
            q = start + k + 1  # the token that row predicts
            if self.first < q < len(tokens):
                self._add(ctx, q, row + k)

    def _add(self, ctx: LlamaContext, q: int, row: int) -> None:
        token = self.tokens[q]
        piece = self.model.token_to_piece(token)
        offset = self._chars
        self._chars += len(self._decoder.decode(piece))
        if token == self.model.token_bos:
            return
        if row < 0:
            self.entries.append(TokenLogprob(token, piece, float("nan"), (), offset))
        else:
            self.entries.append(
                token_logprob(ctx, self.model, token, piece, self.n_top, offset, row)
            )


def token_logprob(
    ctx: LlamaContext, model: LlamaModel, token: int, piece: bytes, n_top: int, offset: int, i: int
) -> TokenLogprob:
    """Log-softmax of output row ``i``'s logits at ``token``, and the ``n_top`` best."""
    logits = ctx.logits(i)
    peak = float(logits.max())
    lse = peak + float(np.log(np.exp(logits - peak, dtype=np.float64).sum()))
    top: tuple[tuple[int, bytes, float], ...] = ()
    if n_top > 0:
        n_top = min(n_top, logits.shape[0])
        best = np.argpartition(logits, -n_top)[-n_top:]
        best = best[np.argsort(-logits[best], kind="stable")]
        top = tuple(
            (int(t), model.token_to_piece(int(t), special=True), float(logits[t]) - lse)
            for t in best
        )
    return TokenLogprob(token, piece, float(logits[token]) - lse, top, offset)


def sampled_logprob(
    candidates: Candidates, model: LlamaModel, token: int, piece: bytes, n_top: int, offset: int
) -> TokenLogprob:
    """``token``'s log-probability among the sampler chain's ``candidates`` (sorted, most
    likely first), and the ``n_top`` best with a probability above 0: llama-server's
    post-sampling probabilities."""
    with np.errstate(divide="ignore"):
        logp = np.log(candidates["p"].astype(np.float64))
    hit = np.flatnonzero(candidates["id"] == token)
    top = tuple(
        (int(t), model.token_to_piece(int(t), special=True), float(lp))
        for t, lp in zip(candidates["id"][:n_top], logp[:n_top], strict=True)
        if lp > -np.inf
    )
    return TokenLogprob(token, piece, float(logp[hit[0]]) if hit.size else -np.inf, top, offset)


def preserved_tokens(model: LlamaModel, chat: ChatPrompt | None) -> frozenset[int]:
    """The tokens a chat format preserves (its tool-call and reasoning markers that are
    one token each), which llama-server shows as text though they are special."""
    if chat is None or not chat.preserved_tokens:
        return frozenset()
    ids = (model.tokenize(t, add_special=False, parse_special=True) for t in chat.preserved_tokens)
    return frozenset(int(t[0]) for t in ids if len(t) == 1)
