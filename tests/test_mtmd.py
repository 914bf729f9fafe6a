"""Multimodal input (libmtmd): the building blocks and ``Llama``, against llama.cpp's own
evaluation (``support/reference/mtmd_ref.cpp``, the calls llama-mtmd-cli makes).

The projectors are tiny random-weight ones written by the tests: a LLaVA-1.5 ``mlp``
projector (the oldest and plainest vision projector clip.cpp has: a CLIP ViT and a GELU
MLP, no special tokens, causal decoding) and an ``ultravox`` audio projector (a Whisper
encoder with a stacked SwiGLU MLP), both feeding the tiny 64-wide llama. The image is
llama.cpp's own ``tools/mtmd/test-1.jpeg``; the audio its ``test-2.mp3``.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import child
import numpy as np
import pytest
from mtmd_reference import build_mtmd_reference, run_mtmd_reference
from offload import LOGITS_TOL
from tiny_model import LLAMA_CPP
from tiny_projectors import write_tiny_llava_projector

import llama_cy as lc
from llama_cy.errors import ClosedError, MediaError, ModelLoadError
from llama_cy.generation import media_token

IMAGE = LLAMA_CPP / "tools" / "mtmd" / "test-1.jpeg"
AUDIO = LLAMA_CPP / "tools" / "mtmd" / "test-2.mp3"


@pytest.fixture(scope="session")
def reference(model_cache: Path) -> Path:
    return build_mtmd_reference(model_cache)


@pytest.fixture(scope="module")
def vision(tiny: lc.LlamaModel, vision_path: Path) -> Iterator[lc.MtmdContext]:
    with lc.MtmdContext(tiny, vision_path, n_threads=2) as mctx:
        yield mctx


@pytest.fixture(scope="module")
def audio(tiny: lc.LlamaModel, audio_path: Path) -> Iterator[lc.MtmdContext]:
    with lc.MtmdContext(tiny, audio_path, n_threads=2) as mctx:
        yield mctx


def _greedy(ctx: lc.LlamaContext, model: lc.LlamaModel, n_past: int, n: int) -> list[int]:
    out: list[int] = []
    batch = lc.LlamaBatch(1)
    for _ in range(n):
        t = int(np.argmax(ctx.logits()))
        if model.is_eog(t):
            break
        out.append(t)
        batch.clear()
        batch.add(t, n_past, (0,), True)
        ctx.decode(batch)
        n_past += 1
    return out


# ---- the building blocks against llama.cpp's own evaluation ------------------------------


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_embeddings_logits_and_greedy_tokens_equal_llama_cpps(
    kind: str,
    tiny: lc.LlamaModel,
    tiny_model_path: Path,
    vision: lc.MtmdContext,
    audio: lc.MtmdContext,
    vision_path: Path,
    audio_path: Path,
    reference: Path,
    tmp_path: Path,
) -> None:
    mctx, proj, media = (
        (vision, vision_path, IMAGE) if kind == "image" else (audio, audio_path, AUDIO)
    )
    prompt = f"Here is some media: {mctx.marker} Tell me about it."
    ref = run_mtmd_reference(reference, tiny_model_path, proj, prompt, [media], tmp_path / "ref")

    chunks = mctx.tokenize(prompt, [mctx.bitmap(media)])
    assert [c.type for c in chunks] == ["text", kind, "text"]
    embd = np.array(mctx.encode(chunks[1]))
    assert embd.shape == (chunks[1].n_tokens, tiny.n_embd)
    np.testing.assert_allclose(embd.ravel(), ref["embd"][0], rtol=0, atol=LOGITS_TOL)

    ctx = lc.LlamaContext(tiny, n_ctx=2048, n_batch=512, n_threads=2, n_threads_batch=2)
    n_past = mctx.eval_chunks(ctx, chunks)
    assert n_past == ref["n_tokens"] - len(ref["tokens"]) == chunks.n_tokens
    np.testing.assert_allclose(ctx.logits(), ref["logits"], rtol=0, atol=LOGITS_TOL)
    assert _greedy(ctx, tiny, n_past, 8) == ref["tokens"]
    ctx.close()


def test_cached_embeddings_decode_as_a_fresh_encode(
    tiny: lc.LlamaModel, vision: lc.MtmdContext
) -> None:
    chunks = vision.tokenize(f"a {vision.marker} b", [vision.bitmap(IMAGE)])
    saved = np.array(vision.encode(chunks[1]))
    before = vision.n_encodes
    logits = []
    for embd in (None, saved):
        ctx = lc.LlamaContext(tiny, n_ctx=256, n_threads=2)
        n = vision.eval_chunk(ctx, chunks[0], 0)
        n = vision.eval_chunk(ctx, chunks[1], n, embd=embd)
        vision.eval_chunk(ctx, chunks[2], n, logits_last=True)
        logits.append(np.array(ctx.logits()))
        ctx.close()
    assert vision.n_encodes == before + 1  # the second pass took the saved embeddings
    np.testing.assert_array_equal(logits[0], logits[1])


def test_a_batch_encodes_a_prompts_images_at_once(
    tiny: lc.LlamaModel, vision: lc.MtmdContext, internvl_path: Path
) -> None:
    """encode_batch (libmtmd's mtmd_batch, as llama-server encodes a prompt's images)
    gives each image the embeddings of its own encode, in one projector run, up to
    batch_max_tokens (the first image always in). Only some projectors batch: InternVL
    does, LLaVA encodes one image a run."""
    pixels = np.array(lc.Bitmap.from_file(vision, IMAGE).data)
    with lc.MtmdContext(tiny, internvl_path, n_threads=2, warmup=False) as mctx:
        bitmaps = [mctx.bitmap(IMAGE), lc.Bitmap.from_array(pixels[::2, ::2].copy())]
        chunks = mctx.tokenize(f"a {mctx.marker} b {mctx.marker} c", bitmaps)
        media = [c for c in chunks if c.type == "image"]
        assert len(media) >= 2
        assert {c.n_tokens for c in media} == {4}
        alone = [np.array(mctx.encode(c)) for c in media]
        before = mctx.n_encodes
        together = mctx.encode_batch(media)
        assert mctx.n_encodes == before + 1
        assert len(together) == len(media)
        for x, y in zip(alone, together, strict=True):
            assert y.shape == x.shape == (4, tiny.n_embd)
            np.testing.assert_allclose(y, x, rtol=0, atol=LOGITS_TOL)
        assert len(mctx.encode_batch(media[1:])) == len(media) - 1
        with pytest.raises(ValueError, match="no chunk"):
            mctx.encode_batch([])
        with pytest.raises(ValueError, match="text chunk"):
            mctx.encode_batch([chunks[0]])
    for limit, n in ((4, 1), (8, 2), (0, 1)):
        with lc.MtmdContext(tiny, internvl_path, batch_max_tokens=limit, warmup=False) as small:
            chunks = small.tokenize(f"{small.marker}{small.marker}.", bitmaps)
            assert len(small.encode_batch([c for c in chunks if c.type == "image"])) == n, limit
    chunks = vision.tokenize(f"{vision.marker}{vision.marker}.", [vision.bitmap(IMAGE)] * 2)
    assert len(vision.encode_batch([c for c in chunks if c.type == "image"])) == 1


def test_bitmaps_from_bytes_array_and_audio(vision: lc.MtmdContext, audio: lc.MtmdContext) -> None:
    from_file = lc.Bitmap.from_file(vision, IMAGE)
    from_bytes = lc.Bitmap.from_bytes(vision, IMAGE.read_bytes())
    assert (from_file.nx, from_file.ny) == (640, 488)
    assert not from_file.is_audio
    assert from_file.id == from_bytes.id  # the id is the decoded content's hash
    pixels = np.array(from_file.data)
    assert pixels.shape == (488, 640, 3)
    assert pixels.dtype == np.uint8
    from_array = lc.Bitmap.from_array(pixels)
    assert from_array.id == from_file.id
    np.testing.assert_array_equal(np.array(from_array.data), pixels)
    pixels[0, 0, 0] ^= 1
    assert lc.Bitmap.from_array(pixels).id != from_file.id
    named = lc.Bitmap.from_array(pixels, id="mine")
    assert named.id == "mine"

    clip = lc.Bitmap.from_file(audio, AUDIO)
    assert clip.is_audio
    assert clip.ny == 1
    samples = np.array(clip.data)
    assert samples.dtype == np.float32
    assert samples.shape == (clip.nx,)
    assert lc.Bitmap.from_audio(samples).id == clip.id
    assert audio.audio_sample_rate == 16000
    assert audio.audio
    assert not audio.vision


def test_projector_caps_and_positions(
    vision: lc.MtmdContext,
    audio: lc.MtmdContext,
    vision_path: Path,
    audio_path: Path,
    tmp_path: Path,
) -> None:
    # What a file takes, read from its metadata without loading it, as the loaded context says.
    assert lc._mtmd.projector_caps(vision_path) == (vision.vision, vision.audio) == (True, False)
    assert lc._mtmd.projector_caps(audio_path) == (audio.vision, audio.audio) == (False, True)
    assert not vision.uses_mrope  # LLaVA: one position a token
    with pytest.raises(ModelLoadError, match="not found"):
        lc._mtmd.projector_caps("/nonexistent/mmproj.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file")
    assert lc._mtmd.projector_caps(junk) == (False, False)


def test_chunks_report_tokens_positions_and_ids(vision: lc.MtmdContext) -> None:
    bm = vision.bitmap(IMAGE)
    chunks = vision.tokenize(f"one {vision.marker} two {vision.marker} three", [bm, bm])
    kinds = [c.type for c in chunks]
    assert kinds == ["text", "image", "text", "image", "text"]
    images = [c for c in chunks if c.type == "image"]
    assert all(c.n_tokens == c.n_pos == 16 and c.id == bm.id for c in images)
    assert chunks.n_tokens == sum(c.n_tokens for c in chunks) == chunks.n_pos
    assert len(chunks[0].tokens) == chunks[0].n_tokens
    assert len(images[0].tokens) == 0
    assert chunks[-1].id is None


# ---- bad input -----------------------------------------------------------------------------


def test_bad_media_raise_media_error(vision: lc.MtmdContext, audio: lc.MtmdContext) -> None:
    png = _png(np.full((32, 48, 3), 200, dtype=np.uint8))
    assert lc.Bitmap.from_bytes(vision, png).nx == 48
    with pytest.raises(MediaError, match="could not be decoded"):
        lc.Bitmap.from_bytes(vision, b"this is not an image at all")
    with pytest.raises(MediaError, match="could not be decoded"):
        lc.Bitmap.from_bytes(vision, png[: len(png) // 2])  # cut short
    with pytest.raises(MediaError, match="empty"):
        lc.Bitmap.from_bytes(vision, b"")
    with pytest.raises(MediaError, match="cannot read"):
        lc.Bitmap.from_file(vision, "/nonexistent/image.png")
    with pytest.raises(MediaError, match="no audio input"):
        vision.tokenize(f"x {vision.marker}", [lc.Bitmap.from_file(audio, AUDIO)])
    with pytest.raises(MediaError, match="no image input"):
        audio.tokenize(f"x {audio.marker}", [lc.Bitmap.from_file(vision, IMAGE)])
    with pytest.raises(ValueError, match="1 media markers"):
        vision.tokenize(f"x {vision.marker}", [])
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8"):
        lc.Bitmap.from_array(np.zeros((4, 4), dtype=np.uint8))
    with pytest.raises(TypeError, match="expected an MtmdContext"):
        lc.Bitmap.from_bytes(object(), b"x")  # type: ignore[arg-type]
    with pytest.raises(MediaError, match="NaN"):
        lc.Bitmap.from_audio(np.array([0.0, np.nan], dtype=np.float32))


def test_too_large_image(vision: lc.MtmdContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lc._bitmap, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(MediaError, match="too large"):
        lc.Bitmap.from_file(vision, IMAGE)
    with pytest.raises(MediaError, match="too large"):
        lc.Bitmap.from_array(np.zeros((100, 100, 3), dtype=np.uint8))


def test_bad_projectors_raise(tiny: lc.LlamaModel, tmp_path: Path, vision_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        lc.MtmdContext(tiny, tmp_path / "missing.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(vision_path.read_bytes()[:5000])
    with pytest.raises(ModelLoadError, match="failed to load the projector"):
        lc.MtmdContext(tiny, truncated)
    wide = write_tiny_llava_projector(tmp_path / "wide.gguf", n_embd_text=96)
    with pytest.raises(ModelLoadError, match="embedding size"):
        lc.MtmdContext(tiny, wide)  # made for a 96-wide model
    with pytest.raises(ValueError, match="image_min_tokens"):
        lc.MtmdContext(tiny, vision_path, image_min_tokens=0)
    for n in (0, -1, 100_000):  # ggml crashes on these: the contexts' check applies
        with pytest.raises(ValueError, match="n_threads must be in"):
            lc.MtmdContext(tiny, vision_path, n_threads=n)


HOSTILE = """
import sys
import llama_cy as lc
from llama_cy.errors import ClosedError, ContextOverflowError, InvalidBatchError
model = lc.LlamaModel.load(sys.argv[1])
other = lc.LlamaModel.load(sys.argv[1])
mctx = lc.MtmdContext(model, sys.argv[2], n_threads=1)
chunks = mctx.tokenize("a " + mctx.marker + " b", [mctx.bitmap(sys.argv[3])])
ctx = lc.LlamaContext(model, n_ctx=32, n_seq_max=2)
errors = []
def expect(exc, f, *a, **k):
    try:
        f(*a, **k)
    except exc as e:
        errors.append(type(e).__name__)
    else:
        raise SystemExit(f"no {exc.__name__} from {f.__name__}{a}")
expect(ValueError, mctx.eval_chunk, lc.LlamaContext(other, n_ctx=64), chunks[1], 0)
expect(ValueError, mctx.eval_chunk, ctx, chunks[1], 0, 5)      # sequence id
expect(ValueError, mctx.eval_chunk, ctx, chunks[1], -1)        # position
expect(ContextOverflowError, mctx.eval_chunk, ctx, chunks[1], ctx.n_ctx_seq - 8)
expect(ValueError, mctx.encode, chunks[0])                     # text has no media
expect(TypeError, mctx.bitmap, 1)    # not a path: open(1) would take and close stdout
expect(ValueError, mctx.eval_chunk, ctx, chunks[1], 0, embd=[[1.0, 2.0]])
view = mctx.encode(chunks[1])
expect(lc.LlamaError, mctx.encode, chunks[1])                  # would overwrite the view
del view
chunk = chunks[1]
n = chunk.n_tokens
chunks.close()                        # freed once its chunk goes; no new calls meanwhile
expect(ClosedError, lambda: chunk.parent.n_tokens)
expect(ClosedError, lambda: chunk.type)
chunk.close()
mctx2 = lc.MtmdContext(model, sys.argv[2], n_threads=1)
c2 = mctx2.tokenize("a " + mctx2.marker + " b", [mctx2.bitmap(sys.argv[3])])
expect(ValueError, mctx.eval_chunk, ctx, c2[1], 0)             # another projector's chunk
mctx.close()
expect(ClosedError, mctx.tokenize, "x")
# still works afterwards
n_past = mctx2.eval_chunks(ctx, c2)
assert n_past == c2.n_tokens and ctx.logits().shape == (model.n_vocab,)
print(n, len(errors))
"""


def test_hostile_calls_raise_and_the_process_goes_on(
    tiny_model_path: Path, vision_path: Path
) -> None:
    r = child.run_python(HOSTILE, str(tiny_model_path), str(vision_path), str(IMAGE))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["16", "12"]


def test_closing_the_model_waits_for_the_projector(
    tiny_model_path: Path, vision_path: Path
) -> None:
    model = lc.LlamaModel.load(tiny_model_path)
    mctx = lc.MtmdContext(model, vision_path, n_threads=1)
    model.close()  # the projector still uses it
    chunks = mctx.tokenize(f"x {mctx.marker} y", [mctx.bitmap(IMAGE)])
    assert chunks.n_tokens > 16
    mctx.close()
    with pytest.raises(ClosedError):
        mctx.bitmap(IMAGE)


# ---- Llama ----------------------------------------------------------------------------------


def data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


def image_message(text: str, url: str) -> list[dict[str, object]]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]


@pytest.fixture
def llava(tiny_model_path: Path, vision_path: Path) -> Iterator[lc.Llama]:
    handler = lc.Llava15ChatHandler(clip_model_path=str(vision_path))
    with lc.Llama(
        str(tiny_model_path), chat_handler=handler, n_ctx=1024, n_threads=2, seed=1
    ) as llm:
        yield llm


def test_llama_chat_with_an_image_equals_llama_cpps_greedy_tokens(
    llava: lc.Llama, tiny_model_path: Path, vision_path: Path, reference: Path, tmp_path: Path
) -> None:
    messages = image_message("What is in this picture?", data_uri(IMAGE, "image/jpeg"))
    # The prompt as the handler renders it: LLaVA-1.5's format, the image first.
    marked, _bitmaps = llava.preparer.split_media(llava.chat_handler.prepare(messages))  # type: ignore[union-attr]
    prompt = llava.apply_chat_template(marked)
    assert prompt.startswith("A chat between a curious human")
    assert f"USER: {lc._mtmd.default_marker()}What is in this picture?ASSISTANT: " in prompt
    ref = run_mtmd_reference(
        reference, tiny_model_path, vision_path, prompt, [IMAGE], tmp_path / "r", n_predict=6
    )

    job = llava.preparer.chat(llava.chat_handler.prepare(messages), temperature=0.0, max_tokens=6)  # type: ignore[union-attr]
    out = lc.completion.join_chunks(llava.generate(job))
    assert out.tokens == ref["tokens"]
    assert out.prompt_tokens == ref["n_tokens"] - len(ref["tokens"])

    reply = llava.create_chat_completion(messages, temperature=0.0, max_tokens=6)
    assert reply["usage"]["prompt_tokens"] == out.prompt_tokens
    assert reply["choices"][0]["message"]["content"] == llava.model.detokenize(ref["tokens"])


def test_a_second_question_about_the_same_image_encodes_nothing(llava: lc.Llama) -> None:
    url = data_uri(IMAGE, "image/jpeg")
    mctx = llava.mtmd
    assert mctx is not None
    first = llava.create_chat_completion(image_message("Describe it.", url), max_tokens=4)
    assert mctx.n_encodes == 1
    history = [
        *image_message("Describe it.", url),
        {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
        {"role": "user", "content": "And the colours?"},
    ]
    llava.create_chat_completion(history, max_tokens=4)
    assert mctx.n_encodes == 1  # the image's tokens were reused from the KV cache
    # Another image in the same place is not mistaken for the cached one.
    pixels = np.array(lc.Bitmap.from_file(mctx, IMAGE).data)[::2, ::2].copy()
    from_png = io.BytesIO()
    _write_ppm(from_png, pixels)
    other = "data:image/x-portable-pixmap;base64," + base64.b64encode(from_png.getvalue()).decode()
    llava.create_chat_completion(image_message("Describe it.", other), max_tokens=4)
    assert mctx.n_encodes == 2


def _png(pixels: np.ndarray) -> bytes:
    """A PNG of ``(H, W, 3)`` uint8 pixels (no imaging library needed)."""
    import struct
    import zlib

    def block(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    h, w, _ = pixels.shape
    raw = b"".join(b"\0" + pixels[y].tobytes() for y in range(h))
    return (
        b"\x89PNG\r\n\x1a\n"
        + block(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + block(b"IDAT", zlib.compress(raw))
        + block(b"IEND", b"")
    )


def _write_ppm(f: io.BytesIO, pixels: np.ndarray) -> None:
    f.write(b"P6 %d %d 255\n" % (pixels.shape[1], pixels.shape[0]))
    f.write(pixels.tobytes())


def test_llama_audio_chat(tiny_model_path: Path, audio_path: Path) -> None:
    with lc.Llama(
        str(tiny_model_path),
        mmproj=str(audio_path),
        n_ctx=1024,
        n_threads=2,
        chat_template=(Path(__file__).parent / "data" / "chat_template.jinja").read_text(),
    ) as llm:
        data = base64.b64encode(AUDIO.read_bytes()).decode()
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Transcribe:"},
                    {"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}},
                ],
            }
        ]
        reply = llm.create_chat_completion(messages, max_tokens=3, temperature=0.0)
        assert reply["usage"]["prompt_tokens"] > 375  # the clip's 375 tokens and the text
        assert llm.mtmd is not None
        assert llm.mtmd.n_encodes == 1
        with pytest.raises(MediaError, match="image input is not supported"):
            llm.create_chat_completion(image_message("x", data_uri(IMAGE, "image/jpeg")))


def test_llama_media_sources_and_refusals(llava: lc.Llama, tiny_model_path: Path) -> None:
    ok = llava.create_chat_completion(image_message("x", IMAGE.as_uri()), max_tokens=2)
    assert ok["usage"]["prompt_tokens"] > 16  # a file:// URL
    with pytest.raises(MediaError, match="remote media"):
        llava.create_chat_completion(image_message("x", "https://example.com/cat.png"))
    with pytest.raises(MediaError, match="base64"):
        llava.create_chat_completion(image_message("x", "data:image/png;base64,@@@"))
    with pytest.raises(MediaError, match="could not be decoded"):
        llava.create_chat_completion(
            image_message("x", "data:image/png;base64," + base64.b64encode(b"nope").decode())
        )
    with pytest.raises(MediaError, match="unsupported data: URI"):
        llava.create_chat_completion(image_message("x", "data:text/plain;base64,aGk="))
    # the Llama still answers after the refusals
    assert llava.create_chat_completion(image_message("y", IMAGE.as_uri()), max_tokens=2)["choices"]
    with (
        lc.Llama(str(tiny_model_path), n_ctx=256) as plain,
        pytest.raises(MediaError, match="projector"),
    ):
        plain.create_chat_completion(image_message("x", IMAGE.as_uri()), chat_template_kwargs={})


LCP_FIXTURES = json.loads(
    (Path(__file__).parent / "data" / "lcp_chat_formats.json").read_text(encoding="utf-8")
)


def with_image(messages: object, old: str, new: str) -> object:
    """``messages`` with the fixture's image URL replaced by a loadable one."""
    return json.loads(json.dumps(messages).replace(old, new))


@pytest.mark.parametrize("name", sorted(LCP_FIXTURES["handlers"]))
def test_vision_handlers_render_llama_cpp_pythons_prompts(
    name: str, tiny_model_path: Path, vision_path: Path
) -> None:
    """Each llama-cpp-python vision handler, under its name in llama_cy and in
    llama_cpp.llama_chat_format, renders the prompt llama-cpp-python's own gives libmtmd
    (tools/lcp_chat_fixtures.py) for chats with and without images, over several turns,
    quirks included (LLaVA-1.5's second ``USER: ``, Qwen2.5-VL's final line)."""
    from llama_cpp import llama_chat_format

    # llama_cpp's class is llama_cy's in llama-cpp-python's class tree (with from_pretrained)
    assert issubclass(getattr(llama_chat_format, name), getattr(lc, name))
    for cls in (getattr(lc, name), getattr(llama_chat_format, name)):
        handler = cls(clip_model_path=str(vision_path))
        with lc.Llama(str(tiny_model_path), chat_handler=handler, n_ctx=512, n_threads=2) as llm:
            for messages, want in zip(
                LCP_FIXTURES["handler_conversations"], LCP_FIXTURES["handlers"][name], strict=True
            ):
                messages = with_image(
                    messages, LCP_FIXTURES["handler_image"], data_uri(IMAGE, "image/jpeg")
                )
                marked, bitmaps = llm.preparer.split_media(handler.prepare(messages))
                assert llm.apply_chat_template(marked) == want, cls
                assert len(bitmaps) == want.count(lc._mtmd.default_marker())


def test_llama_mmproj_argument_checks(tiny_model_path: Path, vision_path: Path) -> None:
    handler = lc.Llava15ChatHandler(clip_model_path=str(vision_path))
    with pytest.raises(ValueError, match="not both"):
        lc.Llama(str(tiny_model_path), mmproj=str(vision_path), chat_handler=handler)
    with pytest.raises(ValueError, match="brings its chat format"):
        lc.Llama(str(tiny_model_path), chat_handler=handler, chat_format="chatml")
    with pytest.raises(ValueError, match="need mmproj"):
        lc.Llama(str(tiny_model_path), image_max_tokens=64)
    with pytest.raises(ValueError, match="cannot be combined"):
        lc.Llama(str(tiny_model_path), mmproj=str(vision_path), draft_model="ngram-simple")
    with pytest.raises(FileNotFoundError):
        lc.Llava15ChatHandler(clip_model_path="/nonexistent.gguf")
    with pytest.raises(TypeError, match="chat handler"):
        lc.Llama(str(tiny_model_path), chat_handler=object())


def test_media_token_stand_ins_are_negative_and_distinct() -> None:
    a, b = media_token("a"), media_token("b")
    assert a < -1
    assert b < -1
    assert a != b
    assert media_token("a") == a


# ---- the command line -----------------------------------------------------------------------


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llama_cy", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=300,
    )


def test_a_chats_images_are_encoded_in_one_batch(
    tiny_model_path: Path, internvl_path: Path
) -> None:
    """Two images in one message, with a projector that batches: one projector run
    (llama-server's batching), and the reply equals the one where each image was
    encoded on its own, as llama.cpp's mtmd-cli does."""
    url = data_uri(IMAGE, "image/jpeg")
    with lc.Llama(str(tiny_model_path), mmproj=str(internvl_path), n_ctx=1024, n_threads=2) as llm:
        mctx = llm.mtmd
        assert mctx is not None
        pixels = np.array(lc.Bitmap.from_file(mctx, IMAGE).data)[::2, ::2].copy()
        ppm = io.BytesIO()
        _write_ppm(ppm, pixels)
        other = "data:image/x-portable-pixmap;base64," + base64.b64encode(ppm.getvalue()).decode()
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": url}},
                    {"type": "image_url", "image_url": {"url": other}},
                    {"type": "text", "text": "Compare them."},
                ],
            }
        ]
        before = mctx.n_encodes
        job = llm.preparer.chat(messages, temperature=0.0, max_tokens=6)
        out = lc.completion.join_chunks(llm.generate(job))
        assert mctx.n_encodes == before + 1
        marked, bitmaps = llm.preparer.split_media(messages)
        chunks = mctx.tokenize(llm.apply_chat_template(marked), bitmaps)
        assert [c.type for c in chunks].count("image") >= 2
        ctx = lc.LlamaContext(llm.model, n_ctx=512, n_threads=2)
        n_past = 0
        for chunk in chunks:  # one image at a time, as llama.cpp's mtmd-cli
            n_past = mctx.eval_chunk(ctx, chunk, n_past, logits_last=True)
        assert _greedy(ctx, llm.model, n_past, 6) == out.tokens
        ctx.close()


def test_cli_run_with_images_and_audio_equals_the_library(
    llava: lc.Llama, tiny_model_path: Path, vision_path: Path, audio_path: Path
) -> None:
    r = _cli(
        "run",
        "-m",
        str(tiny_model_path),
        "--mmproj",
        str(vision_path),
        "--image",
        str(IMAGE),
        "--image",
        str(IMAGE),
        "-p",
        "Describe:",
        "-n",
        "5",
        "--temp",
        "0",
        "--no-display-prompt",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "prompt: 36 tokens" in r.stderr  # BOS, two images of 16 and the text
    mctx = llava.mtmd
    assert mctx is not None
    bm = mctx.bitmap(IMAGE)
    tokens, media = llava.preparer.media_prompt(f"{mctx.marker}{mctx.marker}Describe:", [bm, bm])
    job = llava.preparer.completion(tokens, media=media, max_tokens=5, temperature=0.0)
    assert r.stdout.rstrip("\n") == lc.completion.join_chunks(llava.generate(job)).text

    r = _cli(
        "run",
        "-m",
        str(tiny_model_path),
        "--mmproj",
        str(audio_path),
        "--audio",
        str(AUDIO),
        "-p",
        "Hear:",
        "-n",
        "2",
        "--temp",
        "0",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "prompt: 379 tokens" in r.stderr  # BOS, the clip's 375, "Hear:"

    r = _cli("run", "-m", str(tiny_model_path), "--image", str(IMAGE), "-p", "x")
    assert r.returncode != 0
    assert "--image needs --mmproj" in r.stderr
    r = _cli(
        "run",
        "-m",
        str(tiny_model_path),
        "--mmproj",
        str(vision_path),
        "--image",
        "/nonexistent.png",
        "-p",
        "x",
    )
    assert r.returncode != 0
    assert "cannot read" in r.stderr


def test_cli_chat_image_command(tiny_model_path: Path, vision_path: Path) -> None:
    template = Path(__file__).parent / "data" / "chat_template.jinja"
    r = _cli(
        "chat",
        "-m",
        str(tiny_model_path),
        "--mmproj",
        str(vision_path),
        "--chat-template-file",
        str(template),
        "-n",
        "3",
        "--temp",
        "0",
        stdin=f"/image {IMAGE}\nWhat is it?\n/image /nonexistent.png\nAnd now?\n",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "added to the next message" in r.stderr
    assert "cannot read" in r.stderr
    assert len(r.stdout.strip().splitlines()) == 2  # two replies


def test_threads_share_a_projector(tiny: lc.LlamaModel, vision: lc.MtmdContext) -> None:
    """Two threads evaluating images through one MtmdContext take turns at the projector
    and get what one thread alone gets."""
    import threading

    chunks = vision.tokenize(f"a {vision.marker} b", [vision.bitmap(IMAGE)])
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            ctx = lc.LlamaContext(tiny, n_ctx=256, n_threads=1)
            for _ in range(5):
                ctx.clear()
                vision.eval_chunks(ctx, chunks)
                results.append(np.array(ctx.logits()))
            ctx.close()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 10
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


# ---- Gemma 3: image tokens between special tokens, decoded with non-causal attention -------


def test_gemma3_non_causal_image_equals_llama_cpps(
    gemma_model: lc.LlamaModel,
    gemma_path: Path,
    gemma3_projector: Path,
    reference: Path,
    tmp_path: Path,
) -> None:
    mctx = lc.MtmdContext(gemma_model, gemma3_projector, n_threads=2)
    prompt = f"<start_of_turn>user\n{mctx.marker}What is this?<end_of_turn>\n<start_of_turn>model\n"
    ref = run_mtmd_reference(
        reference, gemma_path, gemma3_projector, prompt, [IMAGE], tmp_path / "g"
    )
    chunks = mctx.tokenize(prompt, [mctx.bitmap(IMAGE)])
    texts = [gemma_model.detokenize(c.tokens.tolist()) for c in chunks if c.type == "text"]
    assert texts[0].endswith("<start_of_image>")
    assert texts[1].startswith("<end_of_image>")
    embd = np.array(mctx.encode(chunks[1]))
    np.testing.assert_allclose(embd.ravel(), ref["embd"][0], rtol=0, atol=LOGITS_TOL)
    ctx = lc.LlamaContext(gemma_model, n_ctx=512, n_threads=2, n_threads_batch=2)
    n_past = mctx.eval_chunks(ctx, chunks)
    np.testing.assert_allclose(ctx.logits(), ref["logits"], rtol=0, atol=LOGITS_TOL)
    assert _greedy(ctx, gemma_model, n_past, 8) == ref["tokens"]
    # Non-causal attention sees the image in one micro-batch: a smaller one is refused.
    small = lc.LlamaContext(gemma_model, n_ctx=512, n_batch=8, n_ubatch=2)
    n = mctx.eval_chunk(small, chunks[0], 0)
    with pytest.raises(lc.errors.InvalidBatchError, match="n_ubatch >= 4"):
        mctx.eval_chunk(small, chunks[1], n)
    ctx.clear()  # and the projector and the context still work
    assert mctx.eval_chunks(ctx, chunks) == n_past
    ctx.close()
    small.close()
    mctx.close()
