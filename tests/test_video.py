"""Video, as llama-server reads it: libmtmd's helper runs ffmpeg, takes ``--video-fps``
frames a second and puts a text timestamp every ``--video-timestamp-interval`` ms; each
frame is an image to the projector. Checked against llama.cpp's own reading and
evaluation (``support/reference/mtmd_ref.cpp``: the helper calls llama-server makes) on
llama.cpp's ``tools/mtmd/test-3.mp4`` (10 s, 720x358), through the building blocks,
``Llama`` and the server. Needs ffmpeg and ffprobe (Debian's ``ffmpeg`` package).
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import child
import numpy as np
import openai
import pytest
from mtmd_reference import build_mtmd_reference, run_mtmd_reference
from offload import LOGITS_TOL
from serving import Server
from test_mtmd import _greedy
from test_server_mtmd import CHAT_TEMPLATE, rendered_prompt
from tiny_model import LLAMA_CPP

import llama_cy as lc
from llama_cy.errors import MediaError

VIDEO = LLAMA_CPP / "tools" / "mtmd" / "test-3.mp4"
FPS, TS_MS = 1.0, 4000  # 10 frames, a timestamp every 4 s
KINDS = {"text": 0, "image": 1, "audio": 2}

pytestmark = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
    reason="video needs ffmpeg and ffprobe on the PATH (Debian's ffmpeg package)",
)


@pytest.fixture(scope="module")
def reference(model_cache: Path) -> Path:
    return build_mtmd_reference(model_cache)


@pytest.fixture(scope="module")
def video_uri() -> str:
    return "data:video/mp4;base64," + base64.b64encode(VIDEO.read_bytes()).decode()


def _ref(reference: Path, model: Path, proj: Path, prompt: str, out: Path) -> dict[str, Any]:
    return run_mtmd_reference(
        reference, model, proj, prompt, [VIDEO], out, n_predict=8, video_fps=FPS,
        video_timestamp_interval=TS_MS,
    )  # fmt: skip


def test_building_blocks_read_a_video_as_llama_cpp(
    tiny: lc.LlamaModel, tiny_model_path: Path, vision_path: Path, reference: Path, tmp_path: Path
) -> None:
    prompt = f"Watch: {lc._mtmd.default_marker()} What happens?"
    ref = _ref(reference, tiny_model_path, vision_path, prompt, tmp_path / "r")
    with lc.MtmdContext(
        tiny, vision_path, n_threads=2, video_fps=FPS, video_timestamp_interval_ms=TS_MS
    ) as mctx:
        assert mctx.video
        video = mctx.bitmap(VIDEO)
        assert video.is_video
        assert (video.nx, video.ny) == (720, 358)
        info = video.video_info
        assert info["fps"] == FPS
        chunks = mctx.tokenize(prompt, [video])
        # frames and timestamps exactly as llama.cpp's helper reads them
        assert [[KINDS[c.type], c.n_tokens] for c in chunks] == ref["chunks"]
        frames = [c for c in chunks if c.type == "image"]
        assert len(frames) == info["n_frames"] == 10
        texts = [tiny.detokenize(c.tokens.tolist()) for c in chunks if c.type == "text"]
        # the prompt's two texts, and a timestamp before the frames of 0 s, 4 s and 8 s
        assert len(texts) == 5, texts
        assert all("s]" in t for t in texts[1:4]), texts
        with pytest.raises(ValueError, match="read once"):
            mctx.tokenize(prompt, [video])
        with pytest.raises(ValueError, match="no pixels"):
            video.data  # noqa: B018
        for frame, want in zip(frames, ref["embd"], strict=True):
            np.testing.assert_allclose(np.array(mctx.encode(frame)).ravel(), want, atol=LOGITS_TOL)
        ctx = lc.LlamaContext(tiny, n_ctx=2048, n_batch=512, n_threads=2)
        n_past = mctx.eval_chunks(ctx, chunks)
        assert n_past == chunks.n_tokens
        np.testing.assert_allclose(ctx.logits(), ref["logits"], rtol=0, atol=LOGITS_TOL)
        assert _greedy(ctx, tiny, n_past, 8) == ref["tokens"]
        ctx.close()
    # Without ffmpeg the video is refused with the reason.
    no_ffmpeg = lc.MtmdContext(tiny, vision_path, n_threads=2, video_ffmpeg_dir=tmp_path)
    with no_ffmpeg, pytest.raises(MediaError, match="ffmpeg"):
        no_ffmpeg.bitmap(VIDEO)


@pytest.fixture
def llm(tiny_model_path: Path, vision_path: Path) -> Iterator[lc.Llama]:
    with lc.Llama(
        str(tiny_model_path),
        mmproj=str(vision_path),
        n_ctx=2048,
        n_threads=2,
        video_fps=FPS,
        video_timestamp_interval=TS_MS,
        chat_template=CHAT_TEMPLATE.read_text(),
    ) as llm:
        yield llm


def test_llama_chat_about_a_video(
    llm: lc.Llama, tiny_model_path: Path, vision_path: Path, reference: Path, tmp_path: Path,
    video_uri: str,
) -> None:  # fmt: skip
    for part in (
        {"type": "video_url", "video_url": {"url": video_uri}},
        {"type": "input_video", "input_video": {"data": video_uri}},
    ):
        messages = [{"role": "user", "content": [part, {"type": "text", "text": "What is it?"}]}]
        marked, _ = llm.preparer.split_media(messages)
        ref = _ref(reference, tiny_model_path, vision_path, llm.apply_chat_template(marked),
                   tmp_path / "r")  # fmt: skip
        job = llm.preparer.chat(messages, temperature=0.0, max_tokens=8)
        out = lc.completion.join_chunks(llm.generate(job))
        assert out.tokens == ref["tokens"]
        assert out.prompt_tokens == sum(n for _, n in ref["chunks"])
    with pytest.raises(ValueError, match="mmproj"):
        lc.Llama(str(tiny_model_path), video_fps=2.0)


def test_server_takes_video_parts(
    tiny_model_path: Path, vision_path: Path, reference: Path, tmp_path: Path, video_uri: str
) -> None:
    args = ("--video-fps", str(FPS), "--video-timestamp-interval", str(TS_MS))
    with Server(
        tiny_model_path, "--mmproj", str(vision_path), "-c", "2048", "-t", "2", *args,
        "--chat-template-file", str(CHAT_TEMPLATE),
    ) as server:  # fmt: skip
        status, _, props = server.request("GET", "/props")
        assert props["modalities"] == {"vision": True, "video": True, "audio": False}
        status, _, models = server.request("GET", "/v1/models")
        assert "video" in models["data"][0]["architecture"]["input_modalities"]
        part = {"type": "video_url", "video_url": {"url": video_uri}}
        messages = [{"role": "user", "content": [part, {"type": "text", "text": "What is it?"}]}]
        ref = _ref(reference, tiny_model_path, vision_path, rendered_prompt(server, messages),
                   tmp_path / "r")  # fmt: skip
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="x",
            messages=messages,  # type: ignore[arg-type]
            temperature=0.0,
            max_tokens=8,
        )
        with lc.LlamaModel.load(tiny_model_path, vocab_only=True) as vocab:
            pieces = b"".join(vocab.token_to_piece(t) for t in ref["tokens"])
        assert reply.choices[0].message.content == pieces.decode()
        # a video that is not one: 400, and the server goes on
        bad = {"type": "input_video", "input_video": {"data": "data:video/mp4;base64,AAAA"}}
        status, _, err = server.request(
            "POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": [bad]}]}
        )
        assert status == 400, err
        status, _, ok = server.request(
            "POST", "/completion", {"prompt": "Hello", "n_predict": 2, "temperature": 0}
        )
        assert status == 200, ok


HOSTILE = """
import sys
import llama_cy as lc
from llama_cy.errors import MediaError
model = lc.LlamaModel.load(sys.argv[1])
mctx = lc.MtmdContext(model, sys.argv[2], n_threads=1, video_fps=1.0)
errors = []
for data in (open(sys.argv[3], "rb").read()[:5000], b"\\\\x00" * 64):  # cut short; not media
    try:
        chunks = mctx.tokenize("a " + mctx.marker, [mctx.bitmap(data)])
    except (MediaError, ValueError) as e:
        errors.append(type(e).__name__)
video = mctx.bitmap(sys.argv[3])
for bitmaps in ([video, video], [video]):  # one read, one tokenize
    try:
        mctx.tokenize(mctx.marker + mctx.marker * (len(bitmaps) - 1), bitmaps)
    except ValueError as e:
        errors.append("ValueError")
video.close()
# still works afterwards
chunks = mctx.tokenize("a " + mctx.marker + " b", [mctx.bitmap(sys.argv[3])])
print(len(errors), sum(c.type == "image" for c in chunks))
"""


def test_hostile_videos_raise_and_the_process_goes_on(
    tiny_model_path: Path, vision_path: Path
) -> None:
    r = child.run_python(HOSTILE, str(tiny_model_path), str(vision_path), str(VIDEO))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["3", "10"]
