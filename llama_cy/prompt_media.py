"""A prompt's images and clips in the generation core: the stand-in tokens their
positions hold in a job's tokens and a sequence's cache, the chunks that encode them,
and the positions they take (fewer than their tokens with M-RoPE: Qwen-VL)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from llama_cy._context import LlamaContext
from llama_cy._mtmd import InputChunk, InputChunks, MtmdContext

__all__ = ["Media", "media_token"]


def media_token(chunk_id: str) -> int:
    """The stand-in token of every position of a media chunk in a :class:`Job`'s tokens
    and a sequence's cache: negative (never a vocabulary id) and derived from the
    media's content id, so that a cached prefix holding the same image compares equal,
    token by token, and another image of the same size does not."""
    return -2 - int.from_bytes(hashlib.blake2b(chunk_id.encode(), digest_size=7).digest(), "little")


@dataclass(frozen=True, slots=True)
class Media:
    """The images and clips of a job's prompt: ``spans`` maps the index in the job's
    tokens where a media chunk starts to the chunk (its positions hold
    :func:`media_token` of its id); ``chunks`` (the tokenized prompt) keeps them alive."""

    mctx: MtmdContext
    chunks: InputChunks
    spans: dict[int, InputChunk]
    #: embeddings encoded ahead, by start: a batch encodes the media after its first too
    encoded: dict[int, npt.NDArray[np.float32]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def embeddings(self, start: int, ctx: LlamaContext) -> npt.NDArray[np.float32]:
        """The embeddings of the media chunk at ``start``, for ``ctx``. Not yet encoded,
        it is encoded with as many of the prompt's following media chunks as one libmtmd
        batch takes (llama-server's ``--mtmd-batch-max-tokens``), and theirs kept for
        their turn."""
        if start not in self.encoded:
            starts = sorted(s for s in self.spans if s >= start)
            arrays = self.mctx.encode_batch([self.spans[s] for s in starts], ctx)
            self.encoded.update(zip(starts, arrays, strict=False))
        return self.encoded.pop(start)

    @classmethod
    def from_chunks(cls, mctx: MtmdContext, chunks: InputChunks) -> tuple[list[int], Media]:
        """The job's tokens for a tokenized prompt, and its media."""
        tokens: list[int] = []
        spans: dict[int, InputChunk] = {}
        for chunk in chunks:
            if chunk.type == "text":
                tokens.extend(chunk.tokens.tolist())
                continue
            spans[len(tokens)] = chunk
            tokens.extend([media_token(chunk.id or "")] * chunk.n_tokens)
        if not tokens or tokens[-1] < 0:
            raise ValueError("a prompt must end with text after its last image or clip")
        return tokens, cls(mctx, chunks, spans)

    def detokenize(self, tokens: list[int], unparse_special: bool = True) -> str:
        """The text of a job's ``tokens``, each image or clip shown as the media marker."""
        model = self.mctx.model
        parts: list[str] = []
        i = 0
        for start in sorted(self.spans):
            parts.append(model.detokenize(tokens[i:start], unparse_special=unparse_special))
            parts.append(self.mctx.marker)
            i = start + self.spans[start].n_tokens
        parts.append(model.detokenize(tokens[i:], unparse_special=unparse_special))
        return "".join(parts)

    def pos(self, i: int) -> int:
        """The position of index ``i`` of the job's tokens (a text token's, or where a
        media chunk starting there goes): ``i``, less what the M-RoPE media before it
        save. Such an image of ``n_tokens`` takes ``n_pos`` positions (its rows or
        columns: Qwen-VL), and the text after it follows on (llama-server's ``pos_next``)."""
        return i - sum(c.n_tokens - c.n_pos for s, c in self.spans.items() if s + c.n_tokens <= i)

    @property
    def first_mrope(self) -> int | None:
        """Where the first media chunk with fewer positions than tokens starts: up to it a
        token's position is its index."""
        return min((s for s, c in self.spans.items() if c.n_pos != c.n_tokens), default=None)

    def start_of(self, i: int) -> int:
        """Where the media chunk holding token ``i`` starts (``i`` if none does)."""
        for start, chunk in self.spans.items():
            if start < i < start + chunk.n_tokens:
                return start
        return i

    def next_start(self, i: int) -> int | None:
        """The first media chunk starting at or after ``i``."""
        return min((s for s in self.spans if s >= i), default=None)
