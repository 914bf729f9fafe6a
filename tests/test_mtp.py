"""MTP drafting (llama-server's ``--spec-type draft-mtp``): the target model's own NextN
layer drafts the next tokens from the trunk's hidden state, through llama.cpp's
``common_speculative`` and an MTP context on the target (``LLAMA_CONTEXT_TYPE_MTP``,
``ctx_other``). The model is a tiny GLM-4.5-style MoE with one NextN layer, written by
the tests. As with every speculative type, the output equals plain greedy decoding.
"""

from __future__ import annotations

from pathlib import Path

import child
import pytest
from serving import Server
from tiny_mtp import write_tiny_glm4moe_mtp

import llama_cy as lc
from llama_cy.errors import ContextCreationError

PROMPT = "Once upon a time, in a quiet village by the sea, there lived"


@pytest.fixture(scope="module")
def mtp_path(model_cache: Path) -> Path:
    path = model_cache / "tiny-glm4moe-mtp-v1.gguf"
    if not path.is_file():
        write_tiny_glm4moe_mtp(path.with_suffix(".partial")).replace(path)
    return path


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
            lc.LlamaContext(model, mtp_of=ctx)
        ctx.close()
    with lc.LlamaModel.load(mtp_path, load_mtp=True) as model:
        assert model.mtp
        ctx = lc.LlamaContext(model, n_ctx=256, n_threads=2)
        mtp = lc.LlamaContext(model, mtp_of=ctx, n_threads=2)
        assert mtp.mtp_of is ctx
        assert mtp.n_ctx == ctx.n_ctx
        other = lc.LlamaContext(model, n_ctx=256)
        again = lc.LlamaModel.load(mtp_path, load_mtp=True)
        with again, pytest.raises(ContextCreationError, match="same model"):
            lc.LlamaContext(again, mtp_of=other)
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
    with pytest.raises(ValueError, match="draft-simple type only"):
        lc.Speculator(lc.LlamaContext(lc.LlamaModel.load(mtp_path, load_mtp=True)),
                      "draft-mtp", draft_model=lc.LlamaModel.load(mtp_path))  # fmt: skip


def test_server_draft_mtp(mtp_path: Path, plain_tokens: list[int]) -> None:
    body = {"prompt": PROMPT, "n_predict": 48, "temperature": 0, "return_tokens": True}
    with Server(mtp_path, "--spec-type", "draft-mtp", "-c", "1024", "-t", "2") as server:
        status, _, out = server.request("POST", "/completion", body)
        assert status == 200, out
        assert out["tokens"] == plain_tokens
        assert out["timings"]["draft_n"] > 0  # llama-server's acceptance figures
        assert 0 <= out["timings"]["draft_n_accepted"] <= out["timings"]["draft_n"]


HOSTILE = """
import sys
import llama_cy as lc
errors = []
for kw in ({"draft_model": "draft-mtp"},):  # a model without NextN layers
    try:
        lc.Llama(sys.argv[1], n_ctx=256, **kw)
    except (ValueError, lc.errors.ContextCreationError) as e:
        errors.append(type(e).__name__)
llm = lc.Llama(sys.argv[2], n_ctx=256, draft_model="draft-mtp")
print(len(errors), len(llm("Hello", max_tokens=4, temperature=0)["choices"][0]["text"]) >= 0)
"""


def test_a_model_without_mtp_layers_is_refused(tiny_model_path: Path, mtp_path: Path) -> None:
    r = child.run_python(HOSTILE, str(tiny_model_path), str(mtp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "True"]
