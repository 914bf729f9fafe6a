"""``llama-cy serve --mmproj``: images and audio through the official ``openai`` client
and llama-server's own routes, checked against llama.cpp's mtmd evaluation."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from mtmd_reference import build_mtmd_reference, run_mtmd_reference
from serving import Server, free_port
from test_mtmd import AUDIO, IMAGE, data_uri, image_message
from test_rpc import _wait_port

import llama_cy as lc

CHAT_TEMPLATE = Path(__file__).parent / "data" / "chat_template.jinja"


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, vision_path: Path, audio_path: Path) -> Iterator[Server]:
    with Server(
        tiny_model_path,
        "--mmproj",
        str(vision_path),
        "-np",
        "2",
        "-c",
        "2048",
        "-t",
        "2",
        "--chat-template-file",
        str(CHAT_TEMPLATE),
        "--metrics",
    ) as s:
        yield s


def test_props_and_models_report_the_modalities(server: Server) -> None:
    status, _, props = server.request("GET", "/props")
    assert status == 200
    assert props["modalities"] == {"vision": True, "video": True, "audio": False}
    status, _, models = server.request("GET", "/v1/models")
    assert models["models"][0]["capabilities"] == ["completion", "multimodal"]
    # llama-server's architecture: the projector's input modalities (image, not audio)
    assert models["data"][0]["architecture"] == {
        "input_modalities": ["text", "image", "video"],
        "output_modalities": ["text"],
    }


def test_openai_client_image_equals_llama_cpps_greedy_tokens(
    server: Server,
    tiny_model_path: Path,
    vision_path: Path,
    audio_path: Path,
    model_cache: Path,
    tmp_path: Path,
) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    messages = image_message("What is this?", data_uri(IMAGE, "image/jpeg"))
    prompt = rendered_prompt(server, messages)
    assert prompt.count(lc._mtmd.default_marker()) == 1
    ref = run_mtmd_reference(
        build_mtmd_reference(model_cache),
        tiny_model_path,
        vision_path,
        prompt,
        [IMAGE],
        tmp_path / "r",
        n_predict=6,
    )
    reply = client.chat.completions.create(
        model="x",
        messages=messages,  # type: ignore[arg-type]
        temperature=0.0,
        max_tokens=6,
    )
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == ref["n_tokens"] - len(ref["tokens"])
    _, _, detok = server.request("POST", "/detokenize", {"tokens": ref["tokens"]})
    assert reply.choices[0].message.content == detok["content"]


def marker(server: Server) -> str:
    """The server's media marker, as llama-server gives it in /props (random per process)."""
    value = server.request("GET", "/props")[2]["media_marker"]
    assert isinstance(value, str)
    return value


def rendered_prompt(server: Server, messages: object) -> str:
    """The server's prompt for ``messages``, its media marker made libmtmd's default (what
    mtmd_ref's prompt holds)."""
    status, _, rendered = server.request("POST", "/apply-template", {"messages": messages})
    assert status == 200, rendered
    text = rendered["prompt"]
    assert isinstance(text, str)
    return text.replace(marker(server), lc._mtmd.default_marker())


def test_the_media_marker_is_the_servers_own(server: Server, tiny_model_path: Path) -> None:
    """As llama-server: a random marker per process, told in /props, so that text in a
    request cannot stand for media; $LLAMA_MEDIA_MARKER pins it."""
    import re

    assert re.fullmatch(r"<__media_[0-9A-Za-z]{32}__>", marker(server))
    data = base64.b64encode(IMAGE.read_bytes()).decode()
    literal = {"prompt_string": "Look: <__media__> It shows", "multimodal_data": [data]}
    status, _, err = server.request("POST", "/completion", {"prompt": literal, "n_predict": 1})
    assert status == 400, err  # no marker in it: one image too many
    with Server(tiny_model_path, env={"LLAMA_MEDIA_MARKER": "<image>"}) as plain:
        assert marker(plain) == "<image>"  # reported without a projector too


def test_completion_multimodal_data_and_prefix_reuse(server: Server) -> None:
    data = base64.b64encode(IMAGE.read_bytes()).decode()
    body = {
        "prompt": {"prompt_string": f"Look: {marker(server)} It shows", "multimodal_data": [data]},
        "n_predict": 3,
        "temperature": 0,
        "id_slot": 1,
        "cache_prompt": True,
    }
    status, _, first = server.request("POST", "/completion", body)
    assert status == 200, first
    assert first["tokens_evaluated"] > 16
    status, _, again = server.request("POST", "/completion", body)
    assert status == 200
    assert again["content"] == first["content"]
    # The image came from the slot's cache: only the last prompt token was decoded.
    assert again["timings"]["prompt_n"] == 1
    assert again["tokens_cached"] >= first["tokens_evaluated"] - 1


def test_v1_completions_multimodal_data_and_echo(server: Server) -> None:
    data = base64.b64encode(IMAGE.read_bytes()).decode()
    prompt = {"prompt_string": f"Look: {marker(server)} It shows", "multimodal_data": [data]}
    body = {"prompt": prompt, "max_tokens": 3, "temperature": 0, "echo": True}
    status, _, out = server.request("POST", "/v1/completions", body)
    assert status == 200, out
    assert out["usage"]["prompt_tokens"] > 16
    echoed = out["choices"][0]["text"]  # the prompt echoed, its image as the marker
    assert echoed.lstrip().startswith(f"Look: {marker(server)} It shows")
    status, _, native = server.request(
        "POST", "/completion", {"prompt": prompt, "n_predict": 3, "temperature": 0}
    )
    assert status == 200
    assert echoed.endswith("It shows" + native["content"])


def test_bad_media_get_400_and_the_server_goes_on(server: Server) -> None:
    bad = [
        image_message("x", "data:image/png;base64," + base64.b64encode(b"not an image").decode()),
        image_message("x", "data:image/png;base64,@@@"),
        image_message("x", "data:text/plain;base64,aGk="),
        image_message("x", "file:///etc/passwd"),  # no --media-path
        image_message("x", "https://example.com/a.png"),  # remote media not allowed
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
                ],
            }
        ],
        [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "x"}}]}],
    ]
    for messages in bad:
        status, _, err = server.request(
            "POST", "/v1/chat/completions", {"messages": messages, "max_tokens": 2}
        )
        assert status == 400, (messages, err)
        assert err["error"]["message"]
    status, _, err = server.request(
        "POST",
        "/completion",
        {"prompt": {"prompt_string": f"a {marker(server)}", "multimodal_data": ["@@"]}},
    )
    assert status == 400
    status, _, err = server.request(
        "POST",
        "/completion",
        {
            "prompt": {
                "prompt_string": "no marker",
                "multimodal_data": [base64.b64encode(IMAGE.read_bytes()).decode()],
            }
        },
    )
    assert status == 400
    assert "marker" in err["error"]["message"]
    status, _, ok = server.request(
        "POST",
        "/v1/chat/completions",
        {"messages": image_message("fine", data_uri(IMAGE, "image/jpeg")), "max_tokens": 2},
    )
    assert status == 200
    assert ok["choices"]


def test_audio_server(tiny_model_path: Path, vision_path: Path, audio_path: Path) -> None:
    with Server(
        tiny_model_path,
        "--mmproj",
        str(audio_path),
        "-np",
        "1",
        "-c",
        "2048",
        "--chat-template-file",
        str(CHAT_TEMPLATE),
    ) as s:
        status, _, props = s.request("GET", "/props")
        assert props["modalities"] == {"vision": False, "video": False, "audio": True}
        data = base64.b64encode(AUDIO.read_bytes()).decode()
        status, _, reply = s.request(
            "POST",
            "/v1/chat/completions",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Hear:"},
                            {"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}},
                        ],
                    }
                ],
                "max_tokens": 2,
            },
        )
        assert status == 200, reply
        assert reply["usage"]["prompt_tokens"] > 375
        status, _, err = s.request(
            "POST",
            "/v1/chat/completions",
            {"messages": image_message("x", data_uri(IMAGE, "image/jpeg"))},
        )
        assert status == 400
        assert "image" in err["error"]["message"]


def test_media_path_serves_local_files(
    tiny_model_path: Path, vision_path: Path, audio_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "cat.jpeg").write_bytes(IMAGE.read_bytes())
    with Server(
        tiny_model_path,
        "--mmproj",
        str(vision_path),
        "-np",
        "1",
        "-c",
        "1024",
        "--media-path",
        str(tmp_path),
        "--chat-template-file",
        str(CHAT_TEMPLATE),
    ) as s:
        status, _, reply = s.request(
            "POST",
            "/v1/chat/completions",
            {"messages": image_message("x", "file://cat.jpeg"), "max_tokens": 2},
        )
        assert status == 200, reply
        status, _, err = s.request(
            "POST",
            "/v1/chat/completions",
            {"messages": image_message("x", "file://../etc/passwd"), "max_tokens": 2},
        )
        assert status == 400
        assert "not allowed" in err["error"]["message"]


def test_mmproj_flag_conflicts(tiny_model_path: Path, vision_path: Path, audio_path: Path) -> None:
    with pytest.raises(RuntimeError, match="speculative"):
        Server(tiny_model_path, "--mmproj", str(vision_path), "--spec-type", "ngram-simple")
    with pytest.raises(RuntimeError, match="projector"):
        Server(tiny_model_path, "--mmproj", "/nonexistent/mmproj.gguf")


def test_anthropic_and_responses_routes_take_images(server: Server) -> None:
    data = base64.b64encode(IMAGE.read_bytes()).decode()
    status, _, msg = server.request(
        "POST",
        "/v1/messages",
        {
            "model": "x",
            "max_tokens": 2,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/jpeg", "data": data},
                        },
                        {"type": "text", "text": "What is it?"},
                    ],
                }
            ],
        },
    )
    assert status == 200, msg
    assert msg["usage"]["input_tokens"] > 16
    status, _, resp = server.request(
        "POST",
        "/v1/responses",
        {
            "model": "x",
            "max_output_tokens": 2,
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is it?"},
                        {"type": "input_image", "image_url": data_uri(IMAGE, "image/jpeg")},
                    ],
                }
            ],
        },
    )
    assert status == 200, resp
    assert resp["usage"]["input_tokens"] > 16


def test_an_image_joins_a_running_batch(server: Server) -> None:
    """A slot's image is encoded and decoded inside the engine's step: an image request
    sent while another slot generates a long reply finishes first."""
    import threading
    import time

    done: dict[str, float] = {}

    def long_text() -> None:
        status, _, r = server.request(
            "POST",
            "/completion",
            {"prompt": "Once upon a time", "n_predict": 900, "ignore_eos": True, "id_slot": 0},
        )
        assert status == 200, r
        assert r["tokens_predicted"] == 900
        done["text"] = time.monotonic()

    t = threading.Thread(target=long_text)
    t.start()
    deadline = time.monotonic() + 30
    while not server.slots()[0]["is_processing"]:  # the text slot is generating
        assert time.monotonic() < deadline
        time.sleep(0.005)
    status, _, r = server.request(
        "POST",
        "/v1/chat/completions",
        {"messages": image_message("What is it?", data_uri(IMAGE, "image/jpeg")), "max_tokens": 4},
    )
    done["image"] = time.monotonic()
    t.join()
    assert status == 200, r
    assert done["image"] < done["text"]


def test_mmproj_device_places_the_projector(tiny_model_path: Path, vision_path: Path) -> None:
    """-mmdev: the projector's device. With no GPU here, an RPC server on loopback is the
    device (its name, RPC0, comes with --rpc); clip logs the backend it runs on."""
    if not lc.supports_rpc():
        pytest.skip("built with -Drpc=false")
    port = free_port()
    rpc = subprocess.Popen(
        [sys.executable, "-m", "llama_cy", "rpc-server", "-p", str(port), "-t", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = ["--mmproj", str(vision_path), "-c", "1024", "-t", "2", "--no-warmup", "-v"]
    base += ["--chat-template-file", str(CHAT_TEMPLATE), "--rpc", f"127.0.0.1:{port}"]
    try:
        _wait_port(port, rpc)
        for device, backend in (("RPC0", "CLIP using RPC0"), ("none", "CLIP using CPU")):
            with Server(tiny_model_path, *base, "-ngl", "0", "-mmdev", device) as server:
                assert backend in server.output()
                body = {"messages": image_message("What?", data_uri(IMAGE, "image/jpeg"))}
                status, _, out = server.request("POST", "/v1/chat/completions", {
                    **body, "max_tokens": 2})  # fmt: skip
                assert status == 200, out
        with pytest.raises(RuntimeError, match="unknown device"):
            Server(tiny_model_path, *base, "-mmdev", "GPU9")
    finally:
        rpc.terminate()
        rpc.wait(timeout=30)


def test_server_settings_with_a_chat_handler(vision_path: Path, audio_path: Path) -> None:
    """ServerSettings.with_chat_handler (llama-cpp-python's vision formats, for
    ``python -m llama_cpp.server``): the handler's projector, template and image token
    bounds become the server's; a second projector or template, or no handler, is refused."""
    from llama_cy.server.settings import ServerSettings

    handler = lc.Llava15ChatHandler(str(vision_path), image_max_tokens=64)
    s = ServerSettings(model="m.gguf").with_chat_handler(handler)
    assert (s.chat_handler, s.mmproj, s.chat_template) == (
        handler,
        str(vision_path),
        handler.chat_template,
    )
    assert s.use_jinja
    assert s.image_max_tokens == 64
    mtmd = ServerSettings(model="m.gguf", chat_template="chatml").with_chat_handler(
        lc.MtmdChatHandler(str(vision_path))
    )
    assert mtmd.chat_template == "chatml"  # a handler without a format keeps the server's
    with pytest.raises(ValueError, match="not both"):
        ServerSettings(model="m.gguf", mmproj=str(audio_path)).with_chat_handler(handler)
    with pytest.raises(ValueError, match="brings its chat format"):
        ServerSettings(model="m.gguf", chat_template="chatml").with_chat_handler(handler)
    with pytest.raises(TypeError, match="llama_cy chat handler"):
        ServerSettings(model="m.gguf").with_chat_handler(print)  # type: ignore[arg-type]


def test_audio_transcriptions(
    tiny_model_path: Path, vision_path: Path, audio_path: Path, server: Server
) -> None:
    """OpenAI's /v1/audio/transcriptions, as llama-server answers it: a chat asking to
    "Transcribe audio to text" (in the form's language) with the file after it; the
    transcript equals that chat's reply. Its errors: no audio projector (501), no file,
    a response_format other than json (400)."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.APIStatusError, match="does not support audio input") as e:
        client.audio.transcriptions.create(model="x", file=AUDIO)
    assert e.value.status_code == 501  # the module's server has a vision projector only
    args = ["--mmproj", str(audio_path), "-np", "1", "-c", "2048"]
    with Server(tiny_model_path, *args, "--chat-template-file", str(CHAT_TEMPLATE)) as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        out = client.audio.transcriptions.create(
            model="x", file=AUDIO, language="en", extra_body={"max_tokens": "4", "temperature": "0"}
        )
        data = base64.b64encode(AUDIO.read_bytes()).decode()
        content = [
            {"type": "text", "text": "Transcribe audio to text (language: en)"},
            {"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}},
        ]
        chat = {"messages": [{"role": "user", "content": content}], "max_tokens": 4,
                "temperature": 0}  # fmt: skip
        status, _, reply = s.request("POST", "/v1/chat/completions", chat)
        assert status == 200, reply
        assert out.text == reply["choices"][0]["message"]["content"]
        status, _, raw = s.request("POST", "/v1/audio/transcriptions", {"prompt": "x"})
        assert (status, raw["error"]["message"]) == (400, "No input file found for transcription")
        with pytest.raises(openai.BadRequestError, match="Only 'json' response_format"):
            client.audio.transcriptions.create(model="x", file=AUDIO, response_format="text")
        events = list(
            client.audio.transcriptions.create(
                model="x", file=AUDIO, stream=True, language="en",
                extra_body={"max_tokens": "4", "temperature": "0"},
            )
        )  # fmt: skip
        assert events[-1].type == "transcript.text.done"
        assert events[-1].text == out.text
        deltas = "".join(e.delta for e in events if e.type == "transcript.text.delta")
        assert deltas == out.text
