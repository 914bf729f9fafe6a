"""Embeddings and reranking over an embedding context.

:class:`Embedder` packs as many inputs into each decode as the batch and the context's
sequence limit allow, and reads one vector per input (pooled) or per token (pooling
"none"). ``Llama`` and the server's ``--embeddings`` mode both embed through it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from llama_cy._batch import LlamaBatch
from llama_cy._context import LlamaContext
from llama_cy.errors import ContextOverflowError

__all__ = ["Embedder", "normalized"]


class Embedder:
    """Embeds token lists with ``ctx`` (an ``embeddings=True`` context) and ``batch``.

    The caller holds the context exclusively while it embeds; the KV cache is cleared
    before each decode and after the last.
    """

    def __init__(self, ctx: LlamaContext, batch: LlamaBatch) -> None:
        self.ctx = ctx
        self.model = ctx.model
        self.batch = batch
        #: tokens embedded, decodes and seconds so far (a server's /metrics)
        self.n_tokens = 0
        self.n_decode = 0
        self.t_s = 0.0

    @property
    def limit(self) -> int:
        """The most tokens one input may have."""
        return min(self.ctx.n_ctx, self.ctx.n_batch)

    def inputs(self, texts: Sequence[str], truncate: bool) -> list[list[int]]:
        """The token lists of ``texts`` (EOS added where the model wants one); longer than
        :attr:`limit` is cut, or ContextOverflowError without ``truncate``."""
        m = self.model
        out = []
        for text in texts:
            tokens: list[int] = m.tokenize(text, add_special=True, parse_special=False).tolist()
            if m.add_eos and (not tokens or tokens[-1] != m.token_eos):
                tokens.append(m.token_eos)
            if len(tokens) > self.limit:
                if not truncate:
                    raise ContextOverflowError(len(tokens), self.limit)
                tokens = tokens[: self.limit]
            if not tokens:
                raise ValueError("cannot embed an empty input (the model adds no BOS token)")
            out.append(tokens)
        return out

    def rerank_inputs(self, query: str, documents: Sequence[str]) -> list[list[int]]:
        """One input per document for a ranking head, by the model's rerank template."""
        if self.ctx.pooling_type != "rank":
            raise ValueError('rerank needs Llama(..., embedding=True, pooling_type="rank")')
        m = self.model
        template = m.chat_template("rerank")
        inputs = []
        for doc in documents:
            if template is not None:
                text = template.replace("{query}", query).replace("{document}", doc)
                tokens = m.tokenize(text, add_special=False, parse_special=True).tolist()
            else:
                q = m.tokenize(query, add_special=False).tolist()
                d = m.tokenize(doc, add_special=False).tolist()
                tokens = [m.token_bos, *q, m.token_eos, m.token_sep, *d, m.token_eos]
                tokens = [t for t in tokens if t >= 0]
            inputs.append(tokens[: self.limit])
        return inputs

    def embed(self, inputs: Sequence[list[int]], normalize: bool) -> list[npt.NDArray[np.float32]]:
        """One embedding per input (a row per token when the pooling is "none")."""
        ctx, batch = self.ctx, self.batch
        pooled = ctx.pooling_type != "none"
        encoder = self.model.has_encoder and not self.model.has_decoder
        results: list[npt.NDArray[np.float32]] = []
        room = min(batch.capacity, ctx.n_ctx)
        try:
            i = 0
            while i < len(inputs):
                batch.clear()
                ctx.clear()
                seqs: list[list[int]] = []
                while (
                    i < len(inputs)
                    and len(seqs) < ctx.n_seq_max
                    and batch.n_tokens + len(inputs[i]) <= room
                ):
                    for pos, token in enumerate(inputs[i]):
                        batch.add(token, pos, len(seqs), True)
                    seqs.append(inputs[i])
                    i += 1
                t0 = time.perf_counter()
                if encoder:
                    ctx.encode(batch)
                else:
                    ctx.decode(batch)
                self.t_s += time.perf_counter() - t0
                self.n_decode += 1
                self.n_tokens += batch.n_tokens
                row = 0
                for s, seq in enumerate(seqs):
                    if pooled:
                        vec = np.array(ctx.sequence_embeddings(s), dtype=np.float32)
                    else:
                        vec = np.array([ctx.embeddings(row + j) for j in range(len(seq))])
                    row += len(seq)
                    results.append(normalized(vec) if normalize else vec)
        finally:
            ctx.clear()
        return results


def normalized(v: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``v`` (or each row of it) scaled to unit L2 norm."""
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    out: npt.NDArray[np.float32] = (v / np.maximum(norm, 1e-12)).astype(np.float32)
    return out
