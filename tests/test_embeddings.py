"""Embeddings through ``Llama``: shapes, pooling, normalisation, packing many inputs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import llama_cy as lc

TEXTS = ["The cat sat on the mat.", "Quantum chromodynamics", "猫がマットの上に座った。", "a"]


@pytest.fixture(scope="module")
def embedder(gemma_path: Path) -> Iterator[lc.Llama]:
    llm = lc.Llama(gemma_path, embedding=True, pooling_type="mean", n_ctx=1024, n_threads=2)
    yield llm
    llm.close()


def test_create_embedding_shape_and_unit_norm(embedder: lc.Llama) -> None:
    out = embedder.create_embedding(TEXTS)
    assert out["object"] == "list"
    assert len(out["data"]) == len(TEXTS)
    vectors = np.array([d["embedding"] for d in out["data"]])
    assert vectors.shape == (len(TEXTS), embedder.n_embd())
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert [d["index"] for d in out["data"]] == list(range(len(TEXTS)))
    n_tokens = sum(len(embedder.tokenize(t.encode())) for t in TEXTS)
    assert out["usage"] == {"prompt_tokens": n_tokens, "total_tokens": n_tokens}


def test_embed_is_unnormalised_by_default_and_single_input_gives_one_vector(
    embedder: lc.Llama,
) -> None:
    one = embedder.embed(TEXTS[0])
    assert isinstance(one[0], float)
    assert len(one) == embedder.n_embd()
    assert abs(np.linalg.norm(one) - 1.0) > 1e-3
    unit = np.array(embedder.embed(TEXTS[0], normalize=True))
    np.testing.assert_allclose(unit, np.array(one) / np.linalg.norm(one), rtol=1e-4, atol=1e-6)
    vectors, count = embedder.embed(TEXTS, return_count=True)
    assert len(vectors) == len(TEXTS)
    assert count == sum(len(embedder.tokenize(t.encode())) for t in TEXTS)


def test_packed_inputs_embed_as_they_do_alone(embedder: lc.Llama) -> None:
    packed = np.array(embedder.embed(TEXTS, normalize=True))
    alone = np.array([embedder.embed(t, normalize=True) for t in TEXTS])
    # Same vectors up to the rounding of a different batch shape (measured: cosine
    # 0.9993 at worst); sequences in one batch do not see each other (their cosine is
    # 0.36 here), which a leak between them would raise.
    cosines = np.sum(packed * alone, axis=1)
    assert np.all(cosines > 0.998), cosines
    assert float(packed[0] @ packed[1]) < 0.9


def test_mean_pooling_is_the_mean_of_token_embeddings(gemma_path: Path, embedder: lc.Llama) -> None:
    with lc.Llama(
        gemma_path, embedding=True, pooling_type="none", n_ctx=512, n_threads=2
    ) as per_token:
        rows = np.array(per_token.embed(TEXTS[0]))
        assert rows.shape == (len(per_token.tokenize(TEXTS[0].encode())), per_token.n_embd())
        out = per_token.create_embedding(TEXTS[:2], normalize=False)
        assert np.array(out["data"][0]["embedding"]).shape == rows.shape
    mean = rows.mean(axis=0)
    pooled = np.array(embedder.embed(TEXTS[0]))
    assert float(mean @ pooled / np.linalg.norm(mean) / np.linalg.norm(pooled)) > 0.9999


def test_many_inputs_need_several_batches(gemma_path: Path) -> None:
    texts = [f"sentence number {i} about topic {i % 7}" for i in range(150)]
    with lc.Llama(
        gemma_path, embedding=True, pooling_type="last", n_ctx=512, n_batch=128, n_threads=2
    ) as llm:
        assert llm.ctx.n_seq_max > 1
        vectors = np.array(llm.embed(texts, normalize=True))
        assert vectors.shape == (150, llm.n_embd())
        again = np.array(llm.embed(texts[37], normalize=True))
        assert float(vectors[37] @ again) > 0.998


def test_embedding_errors(embedder: lc.Llama, gemma_llm: lc.Llama) -> None:
    with pytest.raises(ValueError, match="embedding=True"):
        gemma_llm.embed("x")
    with pytest.raises(ValueError, match="embedding=True"):
        embedder.complete("x")
    with pytest.raises(ValueError, match="rank"):
        embedder.rerank("q", ["d"])
    with pytest.raises(lc.errors.ContextOverflowError):
        embedder.embed("word " * 2000, truncate=False)
    truncated = embedder.embed("word " * 2000)
    assert len(truncated) == embedder.n_embd()
