"""Probabilistic drafting (llama-server's ``--spec-draft-sampling probabilistic``): the
draft model samples its draft and reports each token's distribution q; the target keeps
a drafted token x with probability min(1, p(x)/q(x)), else draws from max(0, p - q), so
its tokens follow its own distribution p whatever q is, and at a temperature above 0 it
keeps more of a draft than matching the draft's argmax would."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from serving import Server

import llama_cy as lc
from llama_cy.rejection import verify

PROMPT = "Once upon a time, in a quiet village by the sea, there lived"


def test_rejection_sampling_keeps_the_targets_distribution(tiny_model_path: Path) -> None:
    with lc.LlamaModel.load(tiny_model_path) as model:
        ctx = lc.LlamaContext(model, n_ctx=256, n_threads=2)
        tokens = model.tokenize(PROMPT).tolist()
        batch = lc.LlamaBatch(len(tokens))
        batch.add_sequence(tokens, 0, 0, logits_last=True)
        ctx.decode(batch)
        s = lc.LlamaSampler
        chain = s.chain([s.top_k(3), s.temp(1.0), s.dist(7)])
        chain.sample(ctx, -1, accept=False, candidates=True)
        cand = chain.candidates()
        p = dict(zip(cand["id"].tolist(), cand["p"].tolist(), strict=True))
        ids = list(p)
        # A draft distribution far from p, with one of p's tokens missing from it.
        q = (np.array(ids[:2], dtype=np.intc), np.array([0.9, 0.1], dtype=np.float32))
        assert abs(p[ids[0]] - 0.9) > 0.2  # far enough from q for the check to tell
        draws = random.Random(3)
        n = 3000
        seen: Counter[int] = Counter()
        kept = 0
        for _ in range(n):
            drafted = ids[0] if draws.random() < 0.9 else ids[1]
            token, accepted = verify(chain, ctx, -1, drafted, q, draws)
            seen[token] += 1
            kept += accepted and token == drafted
        ctx.close()
    assert set(seen) <= set(ids)
    for t in ids:  # the target's own distribution, not the draft's
        assert abs(seen[t] / n - p[t]) < 0.04, (t, seen[t] / n, p[t], p)
    assert 0 < kept < n


def test_a_probabilistic_speculator_reports_its_distributions(tiny_model_path: Path) -> None:
    with lc.LlamaModel.load(tiny_model_path) as model:
        ctx = lc.LlamaContext(model, n_ctx=256, n_threads=2)
        tokens = model.tokenize(PROMPT).tolist()
        for probabilistic in (False, True):
            spec = lc.Speculator(ctx, draft_model=model, probabilistic=probabilistic, n_max=4)
            assert spec.probabilistic is probabilistic
            batch = lc.LlamaBatch(len(tokens))
            batch.add_sequence(tokens[:-1], 0, 0, logits_last=True)
            ctx.clear()
            ctx.decode(batch)
            spec.process(batch)
            spec.begin(tokens[:-1])
            spec.request(tokens[:-1], tokens[-1], temp=0.8, seed=5, distributions=True)
            spec.draft_all()
            draft = spec.result().tolist()
            q = spec.result_q()
            assert draft
            if not probabilistic:
                assert q == []  # greedy drafting reports none: matching verifies it
                spec.close()
                continue
            assert len(q) == len(draft)
            for token, (q_ids, q_p) in zip(draft, q, strict=True):
                assert token in q_ids.tolist()  # sampled from it
                assert 0.99 < float(q_p.sum()) < 1.01
            spec.close()
        ctx.close()


def acceptance(server: Server, seed: int) -> tuple[int, int]:
    body = {"prompt": PROMPT, "n_predict": 48, "temperature": 1.0, "seed": seed}
    status, _, out = server.request("POST", "/completion", body)
    assert status == 200, out
    return out["timings"]["draft_n_accepted"], out["timings"]["draft_n"]


@pytest.mark.parametrize("sampling", ["greedy", "probabilistic"])
def test_server_spec_draft_sampling(tiny_model_path: Path, sampling: str) -> None:
    """The model drafting for itself at temperature 1: sampled drafts come from the
    distribution the target samples from, so most are kept; argmax drafts are kept only
    when the target's sample happens to be its argmax."""
    args = ["-md", str(tiny_model_path), "-c", "1024", "-t", "2", "--no-warmup",
            "--spec-draft-sampling", sampling, "--top-k", "10"]  # fmt: skip
    with Server(tiny_model_path, *args) as server:
        kept = total = 0
        for seed in range(4):
            a, n = acceptance(server, seed)
            kept, total = kept + a, total + n
    assert total > 0
    rate = kept / total
    if sampling == "probabilistic":
        assert rate > 0.6, rate
    else:
        assert rate < 0.5, rate
