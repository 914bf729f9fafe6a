"""Backend sampling: sampler chains run inside the graph (``llama_set_sampler``).

llama.cpp runs them on the CPU backend too, so these run in every build; offloaded
(``LLAMA_CY_N_GPU_LAYERS=-1``) the same tests run the chains on the GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from offload import LOGITS_TOL, OFFLOADED
from serving import Server
from test_hazards import hazard
from tiny_model import write_tiny_llama

import llama_cy as lc
from llama_cy import _sampler
from llama_cy.errors import ClosedError, LlamaError

PROMPT = "Once upon a time"
N = 24


def chain(*samplers: lc.LlamaSampler) -> lc.LlamaSampler:
    return lc.LlamaSampler.chain(list(samplers))


def generate(
    model: lc.LlamaModel, pick: object, *, samplers: dict[int, lc.LlamaSampler] | None = None
) -> list[int]:
    """N tokens after PROMPT, each picked by ``pick(ctx)`` and decoded."""
    ctx = lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=2, samplers=samplers)
    batch = lc.LlamaBatch(64)
    tokens = model.tokenize(PROMPT)
    batch.add_sequence(tokens, 0, 0)
    ctx.decode(batch)
    out: list[int] = []
    for i in range(N):
        token = pick(ctx)  # type: ignore[operator]
        out.append(token)
        batch.clear()
        batch.add(token, len(tokens) + i, (0,), True)
        ctx.decode(batch)
    ctx.close()
    return out


def checked_run(model: lc.LlamaModel, make: Callable[[], list[lc.LlamaSampler]]) -> list[int]:
    """Generate with ``make()``'s chain in the graph, checking each step's probabilities
    against the same chain on the CPU, fed the same tokens in a context of its own."""
    in_graph, cpu = chain(*make()), chain(*make())
    ref = lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=2)
    b = lc.LlamaBatch(64)
    prompt = model.tokenize(PROMPT)
    b.add_sequence(prompt, 0, 0)
    ref.decode(b)
    pos = [len(prompt)]

    def pick(ctx: lc.LlamaContext) -> int:
        token = in_graph.sample(ctx, -1)
        ids, probs = ctx.sampled_candidates(-1).tolist(), ctx.sampled_probs(-1).tolist()
        p_graph = dict(zip(ids, probs, strict=True))
        cpu.sample(ref, -1, accept=False, candidates=True)
        p_cpu = {int(c["id"]): float(c["p"]) for c in cpu.candidates() if c["p"] > 1e-6}
        assert p_graph[token] > 0
        for t, p in p_cpu.items():
            assert p_graph.get(t, 0.0) == pytest.approx(p, abs=1e-4), t
        cpu.accept(token)
        b.clear()
        b.add(token, pos[0], (0,), True)
        ref.decode(b)
        pos[0] += 1
        return token

    out = generate(model, pick, samplers={0: in_graph})
    ref.close()
    return out


# ---- the same tokens as the CPU chain --------------------------------------------------


def test_greedy_in_the_graph_equals_the_argmax(tiny: lc.LlamaModel) -> None:
    want = generate(tiny, lambda ctx: int(np.argmax(ctx.logits(-1))))
    g = chain(lc.LlamaSampler.greedy())
    got = generate(tiny, lambda ctx: ctx.sampled_token(-1), samplers={0: g})
    assert got == want
    # sample() takes the graph's token and accepts it, as llama_sampler_sample does
    g2 = chain(lc.LlamaSampler.greedy())
    assert generate(tiny, lambda ctx: g2.sample(ctx, -1), samplers={0: g2}) == want


def test_seeded_chain_in_the_graph_equals_the_cpu_chain(tiny: lc.LlamaModel) -> None:
    """top-k then top-p hand dist the candidates sorted, as the CPU chain does: the same
    seed draws the same numbers, and picks the same tokens."""

    def make() -> lc.LlamaSampler:
        return chain(lc.LlamaSampler.top_k(40), lc.LlamaSampler.top_p(0.9), lc.LlamaSampler.dist(7))

    cpu = make()
    want = generate(tiny, lambda ctx: cpu.sample(ctx, -1))
    in_graph = make()
    got = generate(tiny, lambda ctx: in_graph.sample(ctx, -1), samplers={0: in_graph})
    assert got == want
    assert len(set(want)) > 3  # a real draw, not a greedy run in disguise


@pytest.mark.parametrize(
    "make",
    [
        lambda: [lc.LlamaSampler.dist(7)],
        lambda: [lc.LlamaSampler.temp(0.8), lc.LlamaSampler.dist(7)],
        lambda: [lc.LlamaSampler.top_k(40), lc.LlamaSampler.temp(0.8), lc.LlamaSampler.dist(7)],
    ],
    ids=["dist", "temp-dist", "top_k-temp-dist"],
)
def test_seeded_chain_in_the_graph_draws_from_the_cpu_distribution(
    tiny: lc.LlamaModel, make: object
) -> None:
    """Where the graph's candidates reach dist in another order (a top-k's unsorted
    output) or its float32 running sum crosses a boundary the CPU's double one does not,
    the same draw can land on another token: llama.cpp promises the distribution, not
    the token. Each step's probabilities equal the CPU chain's, the pick is one of them,
    and the same seed gives the same tokens again."""
    runs = [checked_run(tiny, make) for _ in range(2)]  # type: ignore[arg-type]
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 3


def test_stages_the_backend_lacks_finish_on_the_cpu(tiny: lc.LlamaModel) -> None:
    """typical has no backend version: top_k runs in the graph and leaves candidates,
    typical and dist finish them on the CPU, with the CPU chain's tokens."""

    def make() -> lc.LlamaSampler:
        return chain(
            lc.LlamaSampler.top_k(20), lc.LlamaSampler.typical(0.9), lc.LlamaSampler.dist(3)
        )

    cpu = make()
    want = generate(tiny, lambda ctx: cpu.sample(ctx, -1))
    mixed = make()
    seen: list[int] = []

    def pick(ctx: lc.LlamaContext) -> int:
        assert ctx.sampled_token(-1) is None  # the graph stopped before a pick
        seen.append(len(ctx.sampled_candidates(-1)))
        return mixed.sample(ctx, -1)

    assert generate(tiny, pick, samplers={0: mixed}) == want
    assert set(seen) == {20}


def test_token_only_brings_back_the_token_alone(tiny: lc.LlamaModel) -> None:
    """A greedy chain in the graph leaves the whole row of logits beside its token, and
    llama.cpp copies it back; token_only drops it (and a dist chain's probabilities):
    the same tokens, nothing else on the host."""
    want = generate(tiny, lambda ctx: int(np.argmax(ctx.logits(-1))))
    full = chain(lc.LlamaSampler.greedy())
    lean = chain(lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only())
    rows: list[int] = []

    def pick_full(ctx: lc.LlamaContext) -> int:
        rows.append(len(ctx.sampled_logits(-1)))
        return ctx.sampled_token(-1)  # type: ignore[return-value]

    def pick_lean(ctx: lc.LlamaContext) -> int:
        for view in (ctx.sampled_logits, ctx.sampled_probs, ctx.sampled_candidates):
            with pytest.raises(IndexError, match="backend-sampled"):
                view(-1)
        return lean.sample(ctx, -1)

    assert generate(tiny, pick_full, samplers={0: full}) == want
    assert set(rows) == {tiny.n_vocab}  # what token_only saves: a row of logits a token
    assert generate(tiny, pick_lean, samplers={0: lean}) == want

    def make(*tail: lc.LlamaSampler) -> lc.LlamaSampler:
        return chain(lc.LlamaSampler.temp(0.8), lc.LlamaSampler.dist(7), *tail)

    seeded = make()
    probs: list[int] = []

    def pick_seeded(ctx: lc.LlamaContext) -> int:
        probs.append(len(ctx.sampled_probs(-1)))
        return seeded.sample(ctx, -1)

    drawn = generate(tiny, pick_seeded, samplers={0: seeded})
    assert set(probs) == {tiny.n_vocab}
    lean_seeded = make(lc.LlamaSampler.token_only())
    assert generate(tiny, lambda c: lean_seeded.sample(c, -1), samplers={0: lean_seeded}) == drawn
    assert len(set(drawn)) > 3


def test_token_only_without_a_pick_or_off_the_graph_changes_nothing(tiny: lc.LlamaModel) -> None:
    """Before a pick (top-k alone in the graph) the candidates still come back; on the CPU,
    and cloned, a chain ending in token_only samples as the chain without it."""
    k = chain(lc.LlamaSampler.top_k(5), lc.LlamaSampler.token_only())
    ctx = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2, samplers={0: k})
    b = lc.LlamaBatch(32)
    b.add_sequence(tiny.tokenize(PROMPT), 0, 0)
    ctx.decode(b)
    assert ctx.sampled_token(-1) is None
    assert len(ctx.sampled_candidates(-1)) == len(ctx.sampled_logits(-1)) == 5
    ctx.close()
    want = generate(tiny, lambda ctx: int(np.argmax(ctx.logits(-1))))
    lean = chain(lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only())
    assert generate(tiny, lambda ctx: lean.sample(ctx, -1)) == want
    twin = lean.clone()
    assert generate(tiny, lambda ctx: twin.sample(ctx, -1), samplers={0: twin}) == want


@pytest.fixture
def split_on_host() -> Iterator[None]:
    """Greedy's split argmax (a device's, for large vocabularies) on the CPU backend, for
    rows of 1,000 logits and more: the tiny model's 32,000 become 160 rows of 200."""
    old = _sampler._split_greedy_setup(1000, True)
    yield
    _sampler._split_greedy_setup(*old)


def test_split_greedy_picks_the_argmax(tiny: lc.LlamaModel, split_on_host: None) -> None:
    want = generate(tiny, lambda ctx: int(np.argmax(ctx.logits(-1))))
    built = _sampler._split_greedy_built()
    for tail in ([], [lc.LlamaSampler.token_only()]):
        g = chain(lc.LlamaSampler.greedy(), *tail)
        assert generate(tiny, lambda ctx, g=g: g.sample(ctx, -1), samplers={0: g}) == want
        assert _sampler._split_greedy_built() > built  # the split graph ran
        built = _sampler._split_greedy_built()
    twin = chain(lc.LlamaSampler.greedy()).clone()
    assert generate(tiny, lambda ctx: ctx.sampled_token(-1), samplers={0: twin}) == want


def test_split_greedy_on_a_large_vocabulary(model_cache: Path, llama_cpp_source: Path) -> None:
    """Qwen 2's 151,936 logits, at the size the split starts by default (128 rows of
    1,187): the argmax's tokens. On the host it is off by default, and let onto it here;
    on a device (an offloaded run) it runs by default."""
    path = model_cache / "tiny-llama-qwen2-v1.gguf"
    if not path.is_file():
        write_tiny_llama(path.with_suffix(".partial"), vocab="qwen2").replace(path)
    model = lc.LlamaModel.load(path)
    assert model.n_vocab == 151936
    want = generate(model, lambda ctx: int(np.argmax(ctx.logits(-1))))
    built = _sampler._split_greedy_built()
    g = chain(lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only())
    assert generate(model, lambda ctx: g.sample(ctx, -1), samplers={0: g}) == want
    if OFFLOADED:  # the logits in a device's buffer: the split ran
        assert _sampler._split_greedy_built() > built
        built = _sampler._split_greedy_built()
    else:  # host buffers keep llama.cpp's graph
        assert _sampler._split_greedy_built() == built
    old = _sampler._split_greedy_setup(100000, True)
    try:
        g = chain(lc.LlamaSampler.greedy(), lc.LlamaSampler.token_only())
        assert generate(model, lambda ctx: g.sample(ctx, -1), samplers={0: g}) == want
    finally:
        _sampler._split_greedy_setup(*old)
    assert _sampler._split_greedy_built() > built
    model.close()


# ---- the candidate views ----------------------------------------------------------------


def test_top_k_candidates_are_views_of_the_graph_output(tiny: lc.LlamaModel) -> None:
    ref = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2)
    k5 = chain(lc.LlamaSampler.top_k(5))
    ctx = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2, samplers={0: k5})
    for c in (ref, ctx):
        b = lc.LlamaBatch(32)
        b.add_sequence(tiny.tokenize(PROMPT), 0, 0)
        c.decode(b)
    full = ref.logits(-1)
    ids, logits = ctx.sampled_candidates(-1), ctx.sampled_logits(-1)
    assert ids.dtype == np.int32
    assert logits.dtype == np.float32
    assert len(ids) == len(logits) == 5
    assert not ids.flags.writeable
    assert not logits.flags.writeable
    assert set(ids.tolist()) == set(np.argsort(-full)[:5].tolist())
    np.testing.assert_allclose(logits, full[ids], rtol=LOGITS_TOL, atol=LOGITS_TOL)
    assert ctx.sampled_token(-1) is None
    with pytest.raises(IndexError, match="probabilities"):
        ctx.sampled_probs(-1)  # top_k computes none
    with pytest.raises(IndexError, match="sampled on the backend"):
        ctx.logits(-1)  # llama.cpp kept no full logits for this row
    with pytest.raises(IndexError, match="backend samplers"):
        ctx.all_logits()
    ref.close()
    ctx.close()


def test_dist_leaves_probabilities(tiny: lc.LlamaModel) -> None:
    d = chain(lc.LlamaSampler.top_k(8), lc.LlamaSampler.dist(1))
    ctx = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2, samplers={0: d})
    b = lc.LlamaBatch(32)
    b.add_sequence(tiny.tokenize(PROMPT), 0, 0)
    ctx.decode(b)
    token = ctx.sampled_token(-1)
    assert token is not None
    probs = ctx.sampled_probs(-1)
    ids = ctx.sampled_candidates(-1)
    assert len(probs) == len(ids) == 8
    assert probs.sum() == pytest.approx(1.0, abs=1e-4)
    assert token in ids.tolist()
    ctx.close()


def test_views_hold_until_the_next_decode_and_are_refused_after(tiny: lc.LlamaModel) -> None:
    k = chain(lc.LlamaSampler.top_k(4))
    ctx = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2, samplers={0: k})
    b = lc.LlamaBatch(32)
    tokens = tiny.tokenize(PROMPT)
    b.add_sequence(tokens, 0, 0)
    ctx.decode(b)
    ids = ctx.sampled_candidates(-1)
    before = ids.copy()
    # Valid until the next decode: the view still reads the same four ids.
    assert ids.tolist() == before.tolist()
    # A decode with no output row: the row the view came from is gone, and asked for
    # again it is refused.
    b.clear()
    b.add(int(before[0]), len(tokens), (0,), False)
    ctx.decode(b)
    with pytest.raises(IndexError):
        ctx.sampled_candidates(-1)
    # A sampler change moves llama.cpp's output buffer at the next decode: refused while
    # a view is alive, allowed once it is dropped.
    ctx.set_sampler(0, None)
    b.clear()
    b.add(int(before[1]), len(tokens) + 1, (0,), True)
    with pytest.raises(LlamaError, match="backend sampler was attached or removed"):
        ctx.decode(b)
    del ids
    ctx.decode(b)
    with pytest.raises(IndexError, match="no backend sampler"):
        ctx.sampled_candidates(-1)
    assert ctx.logits(-1).shape == (tiny.n_vocab,)  # full logits again
    ctx.close()


def test_attach_detach_and_two_sequences(tiny: lc.LlamaModel) -> None:
    ctx = lc.LlamaContext(tiny, n_ctx=256, n_batch=32, n_seq_max=2, n_threads=2)
    g = chain(lc.LlamaSampler.greedy())
    assert ctx.set_sampler(1, g) is True
    assert ctx.samplers == {1: g}
    b = lc.LlamaBatch(32, n_seq_max=1)
    tokens = tiny.tokenize(PROMPT)
    b.add_sequence(tokens, 0, 0)
    b.add_sequence(tokens, 0, 1)
    ctx.decode(b)
    # Row of sequence 0: no sampler, full logits; row of sequence 1: the graph's argmax.
    row0, row1 = len(tokens) - 1, 2 * len(tokens) - 1
    assert ctx.sampled_token(row0) is None
    assert ctx.sampled_token(row1) == int(np.argmax(ctx.logits(row0)))
    ctx.set_sampler(1, None)
    assert ctx.samplers == {}
    g.close()  # detached: closing frees it
    ctx.close()


def test_a_closed_chain_stays_alive_while_attached(tiny: lc.LlamaModel) -> None:
    g = chain(lc.LlamaSampler.greedy())
    ctx = lc.LlamaContext(tiny, n_ctx=128, n_batch=32, n_threads=2, samplers={0: g})
    g.close()
    b = lc.LlamaBatch(32)
    b.add_sequence(tiny.tokenize(PROMPT), 0, 0)
    ctx.decode(b)  # the context still runs it
    assert ctx.sampled_token(-1) is not None
    with pytest.raises(ClosedError):
        g.sample(ctx, -1)
    ctx.close()


# ---- bad chains raise, and the process lives on ------------------------------------------


def test_bad_chains_raise(tiny_model_path: Path) -> None:
    hazard(
        """
g = lc.LlamaSampler.chain([lc.LlamaSampler.greedy()])
ctx = lc.LlamaContext(model, n_ctx=128, n_batch=32, n_seq_max=2, n_threads=1, samplers={0: g})
# llama.cpp asserts on a chain set up twice: a second context, a second sequence, again
expect(ValueError, ctx.set_sampler, 1, g, match="clone()")
expect(ValueError, lc.LlamaContext, model, n_ctx=128, samplers={0: g}, match="clone()")
two = lc.LlamaSampler.chain([lc.LlamaSampler.greedy()])
expect(ValueError, lc.LlamaContext, model, n_ctx=128, n_seq_max=2, samplers={0: two, 1: two},
       match="two sequences")
assert ctx.set_sampler(1, g.clone())  # a clone is a fresh chain
# only chains, not empty, of this context's sequences
expect(TypeError, ctx.set_sampler, 0, lc.LlamaSampler.greedy(), match="must be a chain")
expect(ValueError, ctx.set_sampler, 0, lc.LlamaSampler.chain([]), match="at least one")
expect(ValueError, ctx.set_sampler, 2, lc.LlamaSampler.chain([lc.LlamaSampler.greedy()]))
expect(ValueError, ctx.set_sampler, -1, lc.LlamaSampler.chain([lc.LlamaSampler.greedy()]))
expect(ValueError, lc.LlamaContext, model, n_ctx=128, samplers={5: lc.LlamaSampler.chain(
       [lc.LlamaSampler.greedy()])}, match="outside")
expect(TypeError, lc.LlamaContext, model, n_ctx=128, samplers=[g])
expect(TypeError, ctx.set_sampler, 0, "greedy")
closed = lc.LlamaSampler.chain([lc.LlamaSampler.greedy()])
closed.close()
expect(ClosedError, ctx.set_sampler, 0, closed)
# an attached chain cannot move into another chain, which would free it under the context
expect(ValueError, lc.LlamaSampler.chain, [g], match="clone()")
expect(ValueError, lc.LlamaContext, model, n_outputs_max_per_seq=-1)
# a grammar cannot run in the graph: the chain's grammar stage stays on the CPU
gr = lc.LlamaSampler.chain([lc.LlamaSampler.grammar(model, 'root ::= "a" | "b"'),
                            lc.LlamaSampler.greedy()])
gctx = lc.LlamaContext(model, n_ctx=128, n_batch=32, n_threads=1, samplers={0: gr})
b = lc.LlamaBatch(32)
b.add_sequence(model.tokenize("hello"), 0, 0)
gctx.decode(b)
t = gr.sample(gctx, -1)
assert model.token_to_piece(t) in (b"a", b"b"), model.token_to_piece(t)
# a greedy chain in the graph picks before any grammar kept outside it could say no
g1 = lc.LlamaSampler.chain([lc.LlamaSampler.greedy()])
gctx.set_sampler(0, g1)
gctx.clear()
gctx.decode(b)
expect(GrammarError, g1.sample, gctx, -1,
       grammar=lc.LlamaSampler.grammar(model, 'root ::= "a"'), match="backend sampler")
# the context dies with its chains attached; the chains outlive it
del ctx, gctx
print(g.name, two.name)
""",
        tiny_model_path,
    )


# ---- Llama and the server ------------------------------------------------------------------


def test_llama_backend_sampling_gives_the_cpu_tokens(
    tiny_model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = lc.Llama(tiny_model_path, n_ctx=256, n_threads=2, seed=11)
    bs = lc.Llama(tiny_model_path, n_ctx=256, n_threads=2, seed=11, backend_sampling=True)
    try:
        for params in ({"temperature": 0}, {"temperature": 0.8, "top_k": 40, "top_p": 0.95}):
            want = plain.complete(PROMPT, max_tokens=16, **params)
            got = bs.complete(PROMPT, max_tokens=16, **params)
            assert got.tokens == want.tokens, params
            assert bs.ctx.samplers  # the call's chain ran in the graph
        # logprobs need the full logits: that call samples on the CPU, with a warning
        with caplog.at_level(logging.WARNING, logger="llama_cy"):
            reply = bs.create_completion(PROMPT, max_tokens=4, temperature=0, logprobs=2)
        assert "backend sampling is not compatible with log-probabilities" in caplog.text
        plain_reply = plain.create_completion(PROMPT, max_tokens=4, temperature=0, logprobs=2)
        assert reply["choices"][0]["text"] == plain_reply["choices"][0]["text"]
        assert not bs.ctx.samplers
    finally:
        plain.close()
        bs.close()


def test_server_backend_sampling_flag_and_field(tiny_model_path: Path) -> None:
    # Greedy, and the whole prompt decoded each time: on a GPU a cached prefix changes the
    # batch's shape, and so the logits' last bits, against the plain server's run.
    body = {"prompt": PROMPT, "n_predict": 12, "temperature": 0, "cache_prompt": False}
    body["return_tokens"] = True
    common = ["-c", "512", "-t", "2", "--no-warmup"]
    with Server(tiny_model_path, *common) as plain:
        status, _, want = plain.request("POST", "/completion", body)
        assert status == 200, want
    # llama-server's spelling and its underscore form (what its own test suite passes)
    for flag in ("-bs", "--backend_sampling"):
        with Server(tiny_model_path, *common, flag) as s:
            status, _, props = s.request("GET", "/props")
            assert props["default_generation_settings"]["params"]["backend_sampling"] is True
            status, _, got = s.request("POST", "/completion", body)
            assert status == 200, got
            assert got["tokens"] == want["tokens"]
            assert got["generation_settings"]["backend_sampling"] is True
            status, _, off = s.request("POST", "/completion", {**body, "backend_sampling": False})
            assert off["tokens"] == want["tokens"]
            assert off["generation_settings"]["backend_sampling"] is False
            status, _, bad = s.request("POST", "/completion", {**body, "backend_sampling": "yes"})
            assert status == 400, bad
