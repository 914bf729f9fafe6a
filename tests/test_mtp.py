"""Drafting from the target's hidden states, through llama.cpp's ``common_speculative``:
MTP (llama-server's ``--spec-type draft-mtp``: the target model's own NextN layer, in an
MTP context on the target, ``LLAMA_CONTEXT_TYPE_MTP`` with ``ctx_other``) and EAGLE3
(``draft-eagle3``: a draft model reading three of the target's layers). The models are
tiny ones written by the tests (a GLM-4.5-style MoE with one NextN layer; an EAGLE3
draft for the tiny llama). As with every speculative type, the output equals plain
greedy decoding.
"""

from __future__ import annotations

import logging
from pathlib import Path

import child
import pytest
from serving import Server
from tiny_mtp import write_tiny_eagle3

import llama_cy as lc
from llama_cy.errors import ContextCreationError

PROMPT = "Once upon a time, in a quiet village by the sea, there lived"


@pytest.fixture(scope="module")
def plain_tokens(mtp_path: Path) -> list[int]:
    """The greedy reply without drafting."""
    with lc.Llama(str(mtp_path), n_ctx=1024, n_threads=2) as llm:
        out = lc.completion.join_chunks(
            llm.generate(llm.preparer.completion(PROMPT, max_tokens=48, temperature=0.0))
        )
    return out.tokens


def test_the_mtp_layer_loads_on_request(mtp_path: Path) -> None:
    with lc.LlamaModel.load(mtp_path) as model:
        assert model.n_layer_nextn == 1
        assert not model.mtp  # llama.cpp skips the NextN layer unless asked
        ctx = lc.LlamaContext(model, n_ctx=256)
        with pytest.raises(ContextCreationError, match="load_mtp=True"):
            lc.LlamaContext(model, ctx_type="mtp", ctx_other=ctx)
        ctx.close()
    with lc.LlamaModel.load(mtp_path, load_mtp=True) as model:
        assert model.mtp
        ctx = lc.LlamaContext(model, n_ctx=256, n_threads=2)
        mtp = lc.LlamaContext(model, ctx_type="mtp", ctx_other=ctx, n_threads=2)
        assert mtp.ctx_other is ctx
        assert mtp.n_ctx == ctx.n_ctx
        other = lc.LlamaContext(model, n_ctx=256)
        again = lc.LlamaModel.load(mtp_path, load_mtp=True)
        with again, pytest.raises(ContextCreationError, match="same model"):
            lc.LlamaContext(again, ctx_type="mtp", ctx_other=other)
        ctx.close()  # the MTP context keeps its target until it goes
        assert not mtp.closed
        mtp.close()
        other.close()


def test_llama_drafts_with_mtp_and_keeps_greedy_output(
    mtp_path: Path, plain_tokens: list[int]
) -> None:
    with lc.Llama(str(mtp_path), n_ctx=1024, n_threads=2, draft_model="draft-mtp") as llm:
        assert llm.model.mtp
        spec = llm._spec
        assert spec is not None
        assert spec.types == "draft-mtp"
        assert spec.all_outputs
        job = llm.preparer.completion(PROMPT, max_tokens=48, temperature=0.0)
        out = lc.completion.join_chunks(llm.generate(job))
        assert out.tokens == plain_tokens
        timings = out.timings
        assert timings is not None
        assert timings.draft_n > 0  # the NextN layer drafted
        assert 0 <= timings.draft_n_accepted <= timings.draft_n
    with pytest.raises(ValueError, match="draft-simple and draft-eagle3 types only"):
        lc.Speculator(lc.LlamaContext(lc.LlamaModel.load(mtp_path, load_mtp=True)),
                      "draft-mtp", draft_model=lc.LlamaModel.load(mtp_path))  # fmt: skip


@pytest.mark.parametrize("flags", [[], ["--no-spec-draft-backend-sampling"]])
def test_server_draft_mtp(mtp_path: Path, plain_tokens: list[int], flags: list[str]) -> None:
    body = {"prompt": PROMPT, "n_predict": 48, "temperature": 0, "return_tokens": True}
    with Server(mtp_path, "--spec-type", "draft-mtp", "-c", "1024", "-t", "2", *flags) as server:
        status, _, out = server.request("POST", "/completion", body)
        assert status == 200, out
        assert out["tokens"] == plain_tokens
        assert out["timings"]["draft_n"] > 0  # llama-server's acceptance figures
        assert 0 <= out["timings"]["draft_n_accepted"] <= out["timings"]["draft_n"]


def test_draft_backend_sampling_attaches_a_chain_to_the_mtp_context(
    mtp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """--spec-draft-backend-sampling (llama.cpp's default: on): common_speculative samples
    the drafts in the MTP context's graph, through a chain it attaches to each sequence
    (llama_set_sampler, which llama.cpp logs); off, it attaches none."""
    with lc.LlamaModel.load(mtp_path, load_mtp=True) as model:
        ctx = lc.LlamaContext(model, n_ctx=256, n_threads=2, n_seq_max=2)
        attached = {}
        for on in (None, True, False):
            caplog.clear()
            with caplog.at_level(logging.DEBUG, logger="llama_cy"):
                spec = lc.Speculator(ctx, "draft-mtp", backend_sampling=on)
            text = caplog.text
            attached[on] = [f"seq_id = {i}, sampler = 0x" in text for i in range(2)]
            spec.close()
        ctx.close()
    assert attached == {None: [True, True], True: [True, True], False: [False, False]}


HOSTILE = """
import sys
import llama_cy as lc
errors = []
for kw in ({"draft_model": "draft-mtp"},):  # a model without NextN layers
    try:
        lc.Llama(sys.argv[1], n_ctx=256, **kw)
    except (ValueError, lc.errors.ContextCreationError) as e:
        errors.append(type(e).__name__)
llm = lc.Llama(sys.argv[2], n_ctx=256, draft_model="draft-mtp")  # the process goes on
out = llm("Hello", max_tokens=4, temperature=0)
print(len(errors), out["usage"]["completion_tokens"], llm._spec.types)
"""


def test_a_model_without_mtp_layers_is_refused(tiny_model_path: Path, mtp_path: Path) -> None:
    r = child.run_python(HOSTILE, str(tiny_model_path), str(mtp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "4", "draft-mtp"]


# ---- EAGLE3: a draft model of its own kind, reading three of the target's layers --------


@pytest.fixture(scope="module")
def eagle3_path(model_cache: Path) -> Path:
    """An EAGLE3 draft for the tiny llama (64 wide, 2 layers): it reads the inputs of
    layers 0 and 1 and the trunk's output (layer 2)."""
    path = model_cache / "tiny-eagle3-v2.gguf"
    if not path.is_file():
        write_tiny_eagle3(path.with_suffix(".partial")).replace(path)
    return path


def test_eagle3_drafts_and_keeps_greedy_output(tiny_model_path: Path, eagle3_path: Path) -> None:
    def run(**kw: object) -> lc.completion.Completion:
        with lc.Llama(str(tiny_model_path), n_ctx=1024, n_threads=2, **kw) as llm:  # type: ignore[arg-type]
            if kw:
                assert llm._spec is not None
                assert llm._spec.types == "draft-eagle3"  # inferred from the draft's kind
                assert llm._spec.all_outputs
            job = llm.preparer.completion(PROMPT, max_tokens=48, temperature=0.0)
            return lc.completion.join_chunks(llm.generate(job))

    plain, drafted = run(), run(draft_model=str(eagle3_path))
    assert drafted.tokens == plain.tokens
    assert drafted.timings is not None
    assert drafted.timings.draft_n > 0
    with Server(
        tiny_model_path, "--spec-type", "draft-eagle3", "-md", str(eagle3_path), "-c", "1024",
        "-t", "2",
    ) as server:  # fmt: skip
        body = {"prompt": PROMPT, "n_predict": 48, "temperature": 0, "return_tokens": True}
        status, _, out = server.request("POST", "/completion", body)
        assert status == 200, out
        assert out["tokens"] == plain.tokens
        assert out["timings"]["draft_n"] > 0


EAGLE3_PAIRS = """
import sys
import llama_cy as lc
target = lc.LlamaModel.load(sys.argv[1])
ctx = lc.LlamaContext(target, n_ctx=256)
errors = []
for path in sys.argv[2:]:  # a draft for a wider target; one reading a layer it lacks; not EAGLE3
    draft = lc.LlamaModel.load(path)
    try:
        lc.Speculator(ctx, "draft-eagle3", draft_model=draft)
    except ValueError as e:
        errors.append(str(e).split(":")[0])
try:
    lc.Speculator(ctx, "draft-eagle3")
except ValueError as e:
    errors.append("none")
good = lc.LlamaModel.load(sys.argv[2].replace("wide", "ok"))
ok = lc.Speculator(ctx, "draft-eagle3", draft_model=good)
print(len(errors), ok.types)
"""


def test_mismatched_eagle3_pairs_are_refused(tiny_model_path: Path, tmp_path: Path) -> None:
    wide = write_tiny_eagle3(tmp_path / "wide.gguf", n_embd_target=96)
    deep = write_tiny_eagle3(tmp_path / "deep.gguf", target_layers=(0, 1, 7))
    write_tiny_eagle3(tmp_path / "ok.gguf")
    r = child.run_python(EAGLE3_PAIRS, str(tiny_model_path), str(wide), str(deep),
                         str(tiny_model_path))  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["4", "draft-eagle3"]


EMBEDDINGS_OF_A_DRAFT = """
import sys
import numpy as np
import llama_cy as lc
draft = lc.LlamaModel.load(sys.argv[1])
target = lc.LlamaContext(lc.LlamaModel.load(sys.argv[2]), n_ctx=64, n_batch=8, n_threads=1)
try:
    lc.LlamaContext(draft, n_ctx=64, n_batch=8, n_threads=1)
except lc.errors.ContextCreationError as e:
    print("alone:", "is a draft" in str(e))
ctx = lc.LlamaContext(draft, n_batch=8, n_threads=1, ctx_other=target)
try:
    ctx.set_embeddings(True)
except lc.LlamaError as e:
    print("embeddings:", "no embeddings" in str(e))
batch = lc.LlamaBatch(4)
batch.add_sequence([1, 2, 3], 0, 0)
try:  # its inputs pair tokens with the target's features: only the Speculator gives them
    ctx.decode(batch)
except lc.errors.InvalidBatchError as e:
    print("decode:", "Speculator" in str(e))
target.decode(batch)
print(bool(np.isfinite(target.logits(-1)).all()))
"""


def test_an_eagle3_draft_alone_and_its_embeddings_are_refused(
    eagle3_path: Path, tiny_model_path: Path
) -> None:
    """An EAGLE3 draft decodes from its target's features: a context without the target's
    (ctx_other) would read memory nothing set, and is refused. Its graph has no embeddings
    output: llama.cpp asserts at the next decode after llama_set_embeddings(true), so
    set_embeddings refuses instead, and the process goes on. A decode of its context
    from Python is refused too: a token batch leaves the features half unset."""
    r = child.run_python(EMBEDDINGS_OF_A_DRAFT, str(eagle3_path), str(tiny_model_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["alone:", "True", "embeddings:", "True", "decode:", "True", "True"]
