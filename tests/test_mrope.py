"""M-RoPE (Qwen-VL): an image's tokens take fewer positions than tokens (each gets a time,
row and column position; the image as a whole takes ``max(rows, columns)``), and the
text after it follows on from there. Checked against llama.cpp's own evaluation
(``support/reference/mtmd_ref.cpp``: mtmd-helper's calls) through the building blocks, ``Llama``
and the server, with tiny ``qwen2vl`` and ``qwen3vl`` text models and their projectors
(``qwen2vl_merger``; ``qwen3vl_merger`` with deepstack features) written by the tests.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import child
import numpy as np
import openai
import pytest
from mtmd_reference import build_mtmd_reference, run_mtmd_reference
from offload import LOGITS_TOL
from serving import Server
from test_mtmd import IMAGE, _greedy, _write_ppm, data_uri, image_message
from test_server_mtmd import CHAT_TEMPLATE, rendered_prompt
from tiny_model import write_tiny_llama
from tiny_projectors import write_tiny_qwen2vl_projector, write_tiny_qwen3vl_projector

import llama_cy as lc
from llama_cy.generation import common_prefix

#: the text model's architecture, its M-RoPE rope type, and how to write the pair
FAMILIES: dict[str, tuple[str, int, Callable[[Path], Path]]] = {
    "qwen2vl": ("mrope", 0, write_tiny_qwen2vl_projector),
    "qwen3vl": ("imrope", 1, write_tiny_qwen3vl_projector),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> str:
    """Qwen2-VL (M-RoPE) and Qwen3-VL (interleaved M-RoPE, deepstack features)."""
    return str(request.param)


@pytest.fixture(scope="module")
def qwen_path(model_cache: Path, family: str) -> Path:
    """A 2-layer text model of ``family`` (M-RoPE sections 2, 3, 3 of 8 rotary pairs)."""
    path = model_cache / f"tiny-{family}-v1.gguf"
    if not path.is_file():
        partial = path.with_suffix(".partial")
        deepstack = FAMILIES[family][1]
        write_tiny_llama(
            partial, arch=family, rope_sections=(2, 3, 3, 0), seed=5, deepstack=deepstack
        )
        partial.replace(path)
    return path


@pytest.fixture(scope="module")
def projector(model_cache: Path, family: str) -> Path:
    path = model_cache / f"tiny-{family}-mmproj-v2.gguf"
    if not path.is_file():
        FAMILIES[family][2](path.with_suffix(".partial")).replace(path)
    return path


@pytest.fixture(scope="module")
def qwen(qwen_path: Path) -> Iterator[lc.LlamaModel]:
    with lc.LlamaModel.load(qwen_path) as model:
        yield model


@pytest.fixture(scope="module")
def picture(model_cache: Path, tiny: lc.LlamaModel, vision_path: Path) -> Path:
    """llama.cpp's test image at 80x61: 20 tokens over 5 positions (5x4 merged patches)."""
    path = model_cache / "test-1-80x61.ppm"
    if not path.is_file():
        with lc.MtmdContext(tiny, vision_path, warmup=False) as mctx:
            pixels = np.array(lc.Bitmap.from_file(mctx, IMAGE).data)[::8, ::8].copy()
        buf = io.BytesIO()
        _write_ppm(buf, pixels)
        path.write_bytes(buf.getvalue())
    return path


@pytest.fixture(scope="module")
def reference(model_cache: Path) -> Path:
    return build_mtmd_reference(model_cache)


def test_building_blocks_equal_llama_cpps(
    family: str,
    qwen: lc.LlamaModel,
    qwen_path: Path,
    projector: Path,
    picture: Path,
    reference: Path,
    tmp_path: Path,
) -> None:
    prompt = f"Look: {lc._mtmd.default_marker()} What is it?"
    ref = run_mtmd_reference(reference, qwen_path, projector, prompt, [picture], tmp_path / "r")
    with lc.MtmdContext(qwen, projector, n_threads=2) as mctx:
        assert mctx.uses_mrope
        assert qwen.rope_type == FAMILIES[family][0]
        assert mctx.n_embd == qwen.n_embd * (2 if family == "qwen3vl" else 1)
        chunks = mctx.tokenize(prompt, [mctx.bitmap(picture)])
        image = chunks[1]
        assert (image.type, image.n_tokens, image.n_pos) == ("image", 20, 5)
        assert chunks.n_pos == chunks.n_tokens - 15
        np.testing.assert_allclose(
            np.array(mctx.encode(image)).ravel(), ref["embd"][0], rtol=0, atol=LOGITS_TOL
        )
        ctx = lc.LlamaContext(qwen, n_ctx=512, n_threads=2)
        n_past = mctx.eval_chunks(ctx, chunks)
        assert n_past == chunks.n_pos == ref["n_tokens"] - len(ref["tokens"])
        np.testing.assert_allclose(ctx.logits(), ref["logits"], rtol=0, atol=LOGITS_TOL)
        assert _greedy(ctx, qwen, n_past, 8) == ref["tokens"]
        ctx.close()


def _turn(
    llm: lc.Llama, messages: list[dict[str, object]], n: int
) -> tuple[list[int], int, list[int]]:
    """The greedy reply's tokens, the prompt tokens decoded for it, and the prompt's."""
    handler = llm.chat_handler
    assert handler is not None
    job = llm.preparer.chat(handler.prepare(messages), temperature=0.0, max_tokens=n)
    chunks = list(llm.generate(job))
    timings = chunks[-1].timings
    assert timings is not None
    return [t for c in chunks for t in c.tokens], timings.prompt_n, job.tokens


def test_llama_chat_equals_llama_cpps_and_reuses_the_image(
    qwen_path: Path, projector: Path, picture: Path, reference: Path, tmp_path: Path
) -> None:
    handler = lc.Qwen25VLChatHandler(clip_model_path=str(projector))
    with lc.Llama(str(qwen_path), chat_handler=handler, n_ctx=1024, n_threads=2) as llm:
        url = data_uri(picture, "image/x-portable-pixmap")
        first = image_message("What is in this picture?", url)
        marked, _ = llm.preparer.split_media(handler.prepare(first))
        prompt = llm.apply_chat_template(marked)
        assert "<|im_start|>user\nWhat is in this picture?" in prompt
        ref = run_mtmd_reference(
            reference, qwen_path, projector, prompt, [picture], tmp_path / "r", n_predict=8
        )
        tokens, _, job_tokens = _turn(llm, first, 8)
        assert tokens == ref["tokens"]
        mctx = llm.mtmd
        assert mctx is not None
        assert mctx.n_encodes == 1
        # A second question about the same image decodes only what is new.
        history: list[dict[str, object]] = [
            *first,
            {"role": "assistant", "content": llm.model.detokenize(tokens)},
            {"role": "user", "content": "And the colours?"},
        ]
        marked, _ = llm.preparer.split_media(handler.prepare(history))
        prompt2 = llm.apply_chat_template(marked)
        ref2 = run_mtmd_reference(
            reference, qwen_path, projector, prompt2, [picture], tmp_path / "r2", n_predict=8
        )
        tokens2, decoded2, job2_tokens = _turn(llm, history, 8)
        assert tokens2 == ref2["tokens"]
        assert mctx.n_encodes == 1
        # The cache held the first prompt and the reply but its last token (never decoded).
        kept = common_prefix([*job_tokens, *tokens[:-1]], job2_tokens)
        assert kept > job_tokens.index(min(job_tokens)) + 20  # past the image
        assert decoded2 == len(job2_tokens) - kept


def test_server_with_the_openai_client(
    qwen: lc.LlamaModel,
    qwen_path: Path,
    projector: Path,
    picture: Path,
    reference: Path,
    tmp_path: Path,
) -> None:
    """``llama-cy serve --mmproj`` with a Qwen-VL projector: the reply is llama.cpp's, and
    a second question about the image decodes only what follows the cached prefix."""
    url = data_uri(picture, "image/x-portable-pixmap")
    first = image_message("What is this?", url)
    args = ("--mmproj", str(projector), "-np", "1", "-c", "1024", "-t", "2")
    with Server(qwen_path, *args, "--chat-template-file", str(CHAT_TEMPLATE)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        replies: list[str] = []
        for turn in (first, None):
            messages: list[dict[str, object]] = turn or [
                *first,
                {"role": "assistant", "content": replies[0]},
                {"role": "user", "content": "And the colours?"},
            ]
            prompt = rendered_prompt(server, messages)
            ref = run_mtmd_reference(
                reference, qwen_path, projector, prompt, [picture],
                tmp_path / f"r{len(replies)}", n_predict=8,
            )  # fmt: skip
            reply = client.chat.completions.create(
                model="x",
                messages=messages,  # type: ignore[arg-type]
                temperature=0.0,
                max_tokens=8,
            )
            pieces = b"".join(qwen.token_to_piece(t) for t in ref["tokens"])
            assert reply.choices[0].message.content == pieces.decode()
            assert reply.usage is not None
            # usage counts tokens, as llama-server's: the image's 20, not its 5 positions
            assert reply.usage.prompt_tokens == ref["n_tokens"] - len(ref["tokens"]) + 15
            timings = (reply.model_extra or {})["timings"]
            n_prompt = reply.usage.prompt_tokens
            replies.append(reply.choices[0].message.content or "")
        assert timings["cache_n"] > 20
        assert timings["prompt_n"] + timings["cache_n"] == n_prompt
        assert timings["prompt_n"] < n_prompt - 20


HOSTILE = """
import sys
import numpy as np
import llama_cy as lc
model = lc.LlamaModel.load(sys.argv[1])
mctx = lc.MtmdContext(model, sys.argv[2], n_threads=1)
chunks = mctx.tokenize("a " + mctx.marker + " b", [mctx.bitmap(sys.argv[3])])
ctx = lc.LlamaContext(model, n_ctx=256)
errors = []
def expect(exc, f, *a, **k):
    try:
        f(*a, **k)
    except exc as e:
        errors.append(type(e).__name__)
    else:
        raise SystemExit(f"no {exc.__name__} from {f.__name__}{a}")
n_past = mctx.eval_chunk(ctx, chunks[0], 0)
n_past = mctx.eval_chunk(ctx, chunks[1], n_past)
# positions that go back, into what the cache holds: llama.cpp's batch check refuses them
expect(lc.LlamaError, mctx.eval_chunk, ctx, chunks[2], 0)
expect(lc.LlamaError, mctx.eval_chunk, ctx, chunks[1], 0)
batch = lc.LlamaBatch(4)
batch.add_sequence([1, 2], 1, 0, logits_last=True)
expect(lc.LlamaError, ctx.decode, batch)
# llama.cpp asserts one position per embedding in seq_add/seq_div, before their no-op
# checks: a zero shift or a division by one is done here, a real one refused
ctx.seq_add(0, 0, -1, 0)
ctx.seq_div(0, 0, -1, 1)
expect(lc.LlamaError, ctx.seq_add, 0, 0, -1, 1)
expect(lc.LlamaError, ctx.seq_div, 0, 0, -1, 2)
# the sequence goes on where it was
end = mctx.eval_chunk(ctx, chunks[2], n_past, logits_last=True)
assert end == chunks.n_pos and np.isfinite(ctx.logits()).all()
print(len(errors))
"""


def test_hostile_positions_raise_and_the_process_goes_on(
    qwen_path: Path, projector: Path, picture: Path
) -> None:
    r = child.run_python(HOSTILE, str(qwen_path), str(projector), str(picture))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["5"]
