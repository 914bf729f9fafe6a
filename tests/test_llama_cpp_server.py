"""``python -m llama_cpp.server``: llama-cpp-python's server command and settings, running
llama-cy's server."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from child import run_python
from llama_cpp._prompt_formats import FORMATS
from llama_cpp.llama_chat_format import FORMATTERS
from llama_cpp.server.__main__ import serve_argv
from serving import free_port, post, start_module, stop

from llama_cy import cli
from llama_cy.chat import ChatTemplate
from llama_cy.cli.serve import check_flags


def test_flags_serve_completions_and_chat(tiny_model_path: Path) -> None:
    proc, port = start_module(
        "--model", str(tiny_model_path), "--model_alias", "tiny", "--n_ctx", "256",
        "--verbose", "False",
    )  # fmt: skip
    try:
        out = post(port, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0})
        assert out["object"] == "text_completion"
        assert out["usage"]["completion_tokens"] == 4
        # its request types' defaults: max_tokens 16 on completions (null: no limit), and
        # repeat_penalty 1.1 (llama-server's: until the end, 1.0)
        body = {"prompt": "Hello", "ignore_eos": True}
        assert post(port, "/v1/completions", body)["usage"]["completion_tokens"] == 16
        # the route GitHub Copilot calls (llama-cpp-python's Code Completion guide)
        copilot = post(port, "/v1/engines/copilot-codex/completions", {**body, "max_tokens": 3})
        assert copilot["usage"]["completion_tokens"] == 3
        unlimited = post(port, "/v1/completions", {**body, "max_tokens": None})
        assert unlimited["usage"]["completion_tokens"] > 16
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/props", timeout=10) as r:
            params = json.loads(r.read())["default_generation_settings"]["params"]
        assert params["repeat_penalty"] == pytest.approx(1.1)
        chat = post(
            port, "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
        )  # fmt: skip
        assert chat["choices"][0]["message"]["role"] == "assistant"
        # a model without a chat template gets llama-cpp-python's llama-2 format
        messages = CONVERSATIONS[0]
        want = FORMATTERS["llama-2"](messages=messages).prompt
        assert post(port, "/apply-template", {"messages": messages})["prompt"] == want
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            assert "tiny" in [m["id"] for m in json.loads(r.read())["data"]]
    finally:
        stop(proc)


def test_request_types_bodies_are_served(tiny_model_path: Path) -> None:
    """llama_cpp.server.types: the bodies its request models dump, every field included
    (as a client built on them sends), are served; its defaults are the server's."""
    from llama_cpp.server.types import (
        CreateChatCompletionRequest,
        CreateCompletionRequest,
        CreateEmbeddingRequest,
        TokenizeInputRequest,
        TokenizeInputResponse,
    )

    completion = CreateCompletionRequest(prompt="Hello")
    chat = CreateChatCompletionRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert (completion.max_tokens, completion.repeat_penalty) == (16, 1.1)
    assert CreateChatCompletionRequest().max_tokens is None
    proc, port = start_module(
        "--model", str(tiny_model_path), "--n_ctx", "256", "--verbose", "False"
    )
    try:
        out = post(port, "/v1/completions", {**completion.model_dump(), "ignore_eos": True})
        assert out["usage"]["completion_tokens"] == completion.max_tokens
        out = post(port, "/v1/chat/completions", chat.model_dump())
        assert out["usage"]["completion_tokens"] <= 2
        tokens = post(port, "/extras/tokenize", TokenizeInputRequest(input="Hi").model_dump())
        assert TokenizeInputResponse.model_validate(tokens).tokens
    finally:
        stop(proc)
    assert CreateEmbeddingRequest(input=["a", "b"]).model_dump()["input"] == ["a", "b"]


def test_environment_and_config_file(tiny_model_path: Path, tmp_path: Path) -> None:
    """As in llama-cpp-python, a config file holds the server settings too: the command
    line's are not read then."""
    port = free_port()
    config = tmp_path / "config.json"
    model = {"model": str(tiny_model_path), "n_ctx": 128}
    config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": [model]}))
    for args, env in (([], {"MODEL": str(tiny_model_path), "N_CTX": "128"}),
                      (["--config_file", str(config)], {})):  # fmt: skip
        proc, port = start_module(*args, env=env, port=port)
        try:
            out = post(port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
            assert out["usage"]["completion_tokens"] == 2
        finally:
            stop(proc)


def test_settings_without_a_llama_server_counterpart_are_refused(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    model = str(tiny_model_path)
    with pytest.raises(ValueError, match="--cache_type disk"):
        serve_argv({}, {"model": model, "cache": True, "cache_type": "disk"})
    with pytest.raises(ValueError, match="--vocab_only"):
        serve_argv({}, {"model": model, "vocab_only": True})
    argv = serve_argv({"port": 9999}, {"model": model, "type_k": 8, "split_mode": 0})
    assert argv[argv.index("-ctk") + 1] == "q8_0"
    assert argv[argv.index("-sm") + 1] == "none"
    assert argv[argv.index("--port") + 1] == "9999"
    # llama-cpp-python's RAM prompt cache is llama-server's (off unless asked, as there)
    assert argv[argv.index("--cache-ram") + 1] == "0"
    argv = serve_argv({}, {"model": model, "cache": True, "cache_size": 256 << 20})
    assert argv[argv.index("--cache-ram") + 1] == "256"
    # prompt-lookup-decoding: n-grams of 2, draft_model_num_pred_tokens drafted
    argv = serve_argv({}, {"model": model, "draft_model": "prompt-lookup-decoding"})
    assert argv[argv.index("--spec-ngram-simple-size-m") + 1] == "10"
    args = cli.parser().parse_args(["serve", *argv])
    check_flags(args, argv)  # every flag given is one llama-cy serve takes


def test_settings_keep_llama_cpp_pythons_bounds(tiny_model_path: Path) -> None:
    """Its pydantic bounds (ge=), after -1 -> the CPU count for the thread settings:
    -3 threads was passed on, and llama-server took it for "all"."""
    model = {"model": str(tiny_model_path)}
    for name, value, lowest in (
        ("n_threads", -3, 1), ("n_threads", 0, 1), ("n_threads_batch", -2, 0),
        ("n_gpu_layers", -2, -1), ("main_gpu", -1, 0), ("last_n_tokens_size", -1, 0),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=f"--{name}: .* equal to {lowest}"):
            serve_argv({}, {**model, name: value})
    with pytest.raises(ValueError, match="'ram' or 'disk'"):
        serve_argv({}, {**model, "cache_type": "tape"})
    argv = serve_argv({}, {**model, "n_threads": -1, "n_threads_batch": 0})
    assert argv[argv.index("-t") + 1] == str(os.cpu_count())
    assert argv[argv.index("-tb") + 1] == "0"  # llama-cpp-python's Llama: 0 is all CPUs too


def test_hf_tokenizer_config_gives_the_chat_template(tiny_model_path: Path, tmp_path: Path) -> None:
    """chat_format="hf-tokenizer-config": the chat_template of hf_tokenizer_config_path
    renders chats (by llama-server's Jinja engine); the path alone changes nothing, as
    in llama-cpp-python."""
    template = "{% for m in messages %}<<{{ m.role }}|{{ m.content }}>>{% endfor %}[reply]"
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": template, "bos_token": "<s>",
                                  "eos_token": "</s>"}))  # fmt: skip
    model = {"model": str(tiny_model_path), "hf_tokenizer_config_path": str(config)}
    assert template not in serve_argv({}, model)
    argv = serve_argv({}, {**model, "chat_format": "hf-tokenizer-config"})
    assert argv[argv.index("--chat-template") + 1] == template
    with pytest.raises(ValueError, match="hf_tokenizer_config_path"):
        serve_argv({}, {"model": str(tiny_model_path), "chat_format": "hf-tokenizer-config"})
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="no chat_template"):
        serve_argv({}, {**model, "chat_format": "hf-tokenizer-config",
                        "hf_tokenizer_config_path": str(tmp_path / "bad.json")})  # fmt: skip
    with pytest.raises(ValueError, match="hf_pretrained_model_name_or_path"):
        serve_argv({}, {**model, "hf_pretrained_model_name_or_path": "org/tok"})
    flags = ["--chat_format", "hf-tokenizer-config", "--hf_tokenizer_config_path", str(config)]
    proc, port = start_module("--model", str(tiny_model_path), "--n_ctx", "256", *flags)
    try:
        body = {"messages": [{"role": "user", "content": "Hi"}]}
        out = post(port, "/apply-template", body)
        assert out["prompt"] == "<<user|Hi>>[reply]"
    finally:
        stop(proc)


CONVERSATIONS: list[list[Any]] = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [
        {"role": "system", "content": "S1"},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ],
    [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "system", "content": "late"},
        {"role": "user", "content": ""},
    ],
]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_python_chat_formats_as_jinja_render_the_same_prompts(name: str) -> None:
    """Each format's template renders, in llama-server's engine (what the server is given),
    the prompt the formatter of that name renders with Jinja2."""
    template = ChatTemplate(None, FORMATS[name].template)
    for messages in CONVERSATIONS:
        want = FORMATTERS[name](messages=messages).prompt
        assert template.apply(messages).prompt == want, messages


def test_chat_format_flags(tiny_model_path: Path) -> None:
    """A chat_format is a template the server renders and the formatter's stops, or a
    clear refusal at start (it was passed on as a template's text: "alpaca" rendered
    every chat as the word alpaca)."""
    model = {"model": str(tiny_model_path)}

    def argv(name: str, **more: str) -> list[str]:
        return serve_argv({}, {**model, "chat_format": name, **more})

    def stops(flags: list[str]) -> list[str]:
        return [flags[i + 1] for i, f in enumerate(flags) if f == "-r"]

    alpaca = argv("alpaca")
    assert alpaca[alpaca.index("--chat-template") + 1] == FORMATS["alpaca"].template
    assert "--jinja" in alpaca
    assert stops(argv("pygmalion")) == ["\n"]
    assert stops(argv("chatml")) == ["<|im_end|>"]
    chatml = argv("chatml")  # llama.cpp's built-in chatml renders another prompt
    assert chatml[chatml.index("--chat-template") + 1] == FORMATS["chatml"].template
    phi3 = argv("phi3")  # not one of llama-cpp-python's: llama.cpp's template of that name
    assert phi3[phi3.index("--chat-template") + 1] == "phi3"
    # a vision format's handler brings its projector and template (test_vision_chat_formats)
    assert "--mmproj" not in argv("mtmd", clip_model_path="p.gguf")
    assert "--chat-template" not in argv("llava-1-5", clip_model_path="p.gguf")
    for name, message in (
        ("nope", "Invalid chat handler"),
        ("llava-1-5", "needs --clip_model_path"),
        ("functionary", "in Python"),
        ("functionary-v2", "in Python"),
        ("mtmd", "needs --clip_model_path"),
    ):
        with pytest.raises(ValueError, match=message):
            argv(name)
    args = cli.parser().parse_args(["serve", *alpaca])
    check_flags(args, alpaca)
    proc, port = start_module(
        "--model", str(tiny_model_path), "--n_ctx", "256", "--chat_format", "qwen"
    )
    try:
        messages = CONVERSATIONS[2]
        out = post(port, "/apply-template", {"messages": messages})
        assert out["prompt"] == FORMATTERS["qwen"](messages=messages).prompt
    finally:
        stop(proc)


def test_default_chat_format_is_llama_cpp_pythons(
    tiny_model_path: Path, gemma_chat_path: Path
) -> None:
    """No chat_format: the model's own template, else llama-2 (llama-server's is ChatML)."""
    tiny = serve_argv({}, {"model": str(tiny_model_path)})
    assert tiny[tiny.index("--chat-template") + 1] == FORMATS["llama-2"].template
    assert "--chat-template" not in serve_argv({}, {"model": str(gemma_chat_path)})
    missing = serve_argv({}, {"model": "/nonexistent.gguf"})  # the server reports it
    assert "--chat-template" not in missing


def test_hf_model_repo_id_names_a_file_of_the_repository(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """As llama-cpp-python's server: ``model`` is a file (a glob) of the repository,
    fetched through huggingface_hub (here from its cache, offline)."""
    from test_llama_cpp_compat import _hub_cache

    cache = _hub_cache(tmp_path / "hub", "someone/tiny-GGUF", "tiny-q8_0.gguf", tiny_model_path)
    code = """
import sys
from llama_cpp._prompt_formats import FORMATS
from llama_cpp.llama_chat_format import FORMATTERS
from llama_cpp.server.__main__ import serve_argv
argv = serve_argv({}, {"model": "*q8_0.gguf", "hf_model_repo_id": "someone/tiny-GGUF"})
print(argv[argv.index("-m") + 1])
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
    result = run_python(code, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    path = Path(result.stdout.strip())
    assert path.name == "tiny-q8_0.gguf"
    assert "snapshots" in path.parts
    assert path.read_bytes() == tiny_model_path.read_bytes()


def test_a_config_file_with_several_models_swaps_them(
    tiny_model_path: Path, tiny_bert_path: Path, tmp_path: Path
) -> None:
    """One model loaded at a time, swapped by the request's "model" (an unknown or missing
    name is the first model), as llama-cpp-python's server does; a model whose child
    cannot start fails its request, and the others still serve."""
    port = free_port()
    config = tmp_path / "two.json"
    models = [
        {"model": str(tiny_model_path), "model_alias": "chat", "n_ctx": 128},
        {"model": str(tiny_bert_path), "model_alias": "embed", "embedding": True},
        {"model": str(tmp_path / "missing.gguf"), "model_alias": "gone"},
    ]
    config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": models}))
    proc, port = start_module("--config_file", str(config), port=port)

    def running() -> list[str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/models", timeout=10) as r:
            data = json.loads(r.read())["data"]
        return [m["id"] for m in data if m["status"]["value"] in ("loading", "loaded")]

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["chat", "embed", "gone"]
        out = post(port, "/v1/completions", {"model": "chat", "prompt": "Hi", "max_tokens": 2})
        assert out["usage"]["completion_tokens"] == 2
        assert running() == ["chat"]
        emb = post(port, "/v1/embeddings", {"model": "embed", "input": "hello"})
        assert len(emb["data"][0]["embedding"]) == 64
        assert running() == ["embed"]
        out = post(port, "/v1/completions", {"model": "nope", "prompt": "Hi", "max_tokens": 2})
        assert out["model"] == "chat"
        out = post(port, "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        assert out["usage"]["completion_tokens"] == 2
        assert running() == ["chat"]
        with pytest.raises(urllib.error.HTTPError) as failed:
            post(port, "/v1/completions", {"model": "gone", "prompt": "Hi", "max_tokens": 2})
        assert failed.value.code == 500
        assert "gone failed to load" in json.loads(failed.value.read())["error"]["message"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            data=json.dumps(
                {"model": "chat", "prompt": "Hi", "max_tokens": 3, "stream": True}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            events = [line for line in r.read().decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]"
    finally:
        stop(proc)


def test_several_models_behind_an_api_key(tiny_model_path: Path, tmp_path: Path) -> None:
    """The router checks a config file's api_key; its children, on loopback, do not get
    it (as llama-server's router keeps its key from its children)."""
    port = free_port()
    config = tmp_path / "keyed.json"
    models = [{"model": str(tiny_model_path), "model_alias": a, "n_ctx": 128} for a in "ab"]
    config.write_text(
        json.dumps({"host": "127.0.0.1", "port": port, "api_key": "sk-k", "models": models})
    )
    proc, port = start_module("--config_file", str(config), port=port)
    key = {"Authorization": "Bearer sk-k"}
    body = {"model": "b", "prompt": "Hi", "max_tokens": 2}
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(port, "/v1/completions", body)
        assert refused.value.code == 401
        assert post(port, "/v1/completions", body, key)["usage"]["completion_tokens"] == 2
        listing = urllib.request.Request(f"http://127.0.0.1:{port}/models", headers=key)
        with urllib.request.urlopen(listing, timeout=10) as r:
            args = {m["id"]: m["status"]["args"] for m in json.loads(r.read())["data"]}
        assert "--model_alias" in args["b"]
        assert not any("sk-k" in a for argv in args.values() for a in argv)
    finally:
        stop(proc)


def test_extras_tokenize_and_detokenize(tiny_model_path: Path) -> None:
    """llama-cpp-python's /extras routes: its shapes, and its tokenization (BOS, special
    tokens parsed; detokenized without them)."""
    from llama_cy import LlamaModel

    proc, port = start_module("--model", str(tiny_model_path), "--n_ctx", "256")
    try:
        model = LlamaModel.load(tiny_model_path, vocab_only=True)
        want = model.tokenize("Hello world", add_special=True, parse_special=True).tolist()
        n_bos = int(model.add_bos)
        model.close()
        assert post(port, "/extras/tokenize", {"input": "Hello world"}) == {"tokens": want}
        count = post(port, "/extras/tokenize/count", {"input": "Hello world", "model": "x"})
        assert count == {"count": len(want)}
        assert post(port, "/extras/detokenize", {"tokens": want}) == {"text": "Hello world"}
        # model is Optional[str] in llama-cpp-python's request types
        assert post(port, "/extras/tokenize", {"input": "Hello world", "model": None}) == {
            "tokens": want
        }
        assert post(port, "/extras/detokenize", {"tokens": want, "model": None})["text"]
        for path, body in (
            ("/extras/tokenize", {"input": "x", "model": 3}),
            ("/extras/detokenize", {"tokens": [10**9]}),
            ("/extras/detokenize", {"tokens": ["a"]}),
            ("/extras/tokenize", {"input": 3}),
            ("/extras/tokenize", {}),
        ):
            with pytest.raises(urllib.error.HTTPError) as err:
                post(port, path, body)
            assert err.value.code == 400, (path, body)
        assert post(port, "/extras/tokenize/count", {"input": ""}) == {"count": n_bos}
    finally:
        stop(proc)


def test_settings_classes_are_the_command_lines_settings() -> None:
    """llama_cpp.server.settings' pydantic classes: the command line's names, in its order,
    with its defaults; llama-cpp-python's bounds, its -1 threads, the environment."""
    from llama_cpp.server.serve_args import CPUS, MODEL_SETTINGS, SERVER_SETTINGS
    from llama_cpp.server.settings import (
        ConfigFileSettings,
        ModelSettings,
        ServerSettings,
        Settings,
    )
    from pydantic import ValidationError

    for cls, table in ((ModelSettings, MODEL_SETTINGS), (ServerSettings, SERVER_SETTINGS)):
        assert list(cls.model_fields) == list(table)
        for name, (_, default, _) in table.items():
            if name != "model":  # required, as there
                assert cls.model_fields[name].default == default, name
    assert set(Settings.model_fields) == set(MODEL_SETTINGS) | set(SERVER_SETTINGS)
    assert "models" in ConfigFileSettings.model_fields
    s = Settings(model="m.gguf", n_threads=-1, n_threads_batch=-1)
    assert (s.n_threads, s.n_threads_batch) == (CPUS, CPUS)
    for bad in ({"n_gpu_layers": -2}, {"n_batch": 0}, {"cache_type": "tape"}, {"n_threads": 0}):
        with pytest.raises(ValidationError):
            Settings(model="m.gguf", **bad)
    with pytest.raises(ValidationError):
        Settings()  # type: ignore[call-arg]  # no model, and none in the environment
    os.environ.update(MODEL="env.gguf", N_CTX="123")
    try:
        from_env = Settings()  # type: ignore[call-arg]
        assert (from_env.model, from_env.n_ctx) == ("env.gguf", 123)
    finally:
        del os.environ["MODEL"], os.environ["N_CTX"]


def test_load_mode_and_numa_settings(tiny_model_path: Path) -> None:
    """use_mmap/use_mlock become llama-server's --load-mode (llama-server b11434 has no
    --mlock or --no-mmap), mlock on by default as there; numa takes True or a
    ggml_numa_strategy number, as llama_cpp.Llama."""
    model = str(tiny_model_path)

    def flag(name: str, **settings: Any) -> str:
        argv = serve_argv({}, {"model": model, **settings})
        return argv[argv.index(name) + 1]

    assert flag("-lm") == "mmap+mlock"
    assert flag("-lm", use_mlock=False) == "mmap"
    assert flag("-lm", use_mmap=False) == "mlock"
    assert flag("-lm", use_mmap=False, use_mlock=False) == "none"
    assert flag("--numa", numa=True) == "distribute"
    assert flag("--numa", numa=2) == "isolate"
    assert "--numa" not in serve_argv({}, {"model": model})
    with pytest.raises(ValueError, match="numa"):
        serve_argv({}, {"model": model, "numa": 9})
    # what each mode gives is llama-cy serve's (-lm): the flags parse there
    for argv in (serve_argv({}, {"model": model, "use_mmap": False}),
                 serve_argv({}, {"model": model, "numa": 3})):  # fmt: skip
        args = cli.parser().parse_args(["serve", *argv])
        check_flags(args, argv)


def test_create_app_serves_in_process(tiny_model_path: Path) -> None:
    """llama_cpp.server.app.create_app: llama-cy's server over the settings' model, in
    this process; the first request starts the engine where no lifespan ran (Starlette's
    TestClient outside ``with``), as llama-cpp-python's app needs none."""
    code = """
        import sys
        from starlette.testclient import TestClient
        from llama_cpp.server.app import create_app
        from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

        settings = Settings(model=sys.argv[1], model_alias="tiny", n_ctx=256, verbose=False)
        app = create_app(settings)
        client = TestClient(app)  # no lifespan
        out = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 4})
        assert out.status_code == 200, out.text
        assert out.json()["usage"]["completion_tokens"] == 4
        assert [m["id"] for m in client.get("/v1/models").json()["data"]] == ["tiny"]
        with TestClient(app) as c:  # the lifespan too
            chat = c.post("/v1/chat/completions",
                          json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
            assert chat.json()["usage"]["completion_tokens"] == 2
        # the key as there: server_settings and model_settings
        keyed = create_app(server_settings=ServerSettings(api_key="k"),
                           model_settings=[ModelSettings(model=sys.argv[1], n_ctx=128)])
        with TestClient(keyed) as c:
            assert c.post("/v1/completions", json={"prompt": "Hi"}).status_code == 401
            ok = c.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 1},
                        headers={"Authorization": "Bearer k"})
            assert ok.status_code == 200
        for bad in ({"server_settings": ServerSettings()},
                    {"server_settings": ServerSettings(), "model_settings": []}):
            try:
                create_app(**bad)
            except ValueError as e:
                print("refused:", e)
        print("ok")
    """
    out = run_python(code, str(tiny_model_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "provided together" in out.stdout
    assert "lists no models" in out.stdout
    assert out.stdout.rstrip().endswith("ok")


def test_create_app_under_uvicorn_factory(tiny_model_path: Path, tmp_path: Path) -> None:
    """The documented way: ``uvicorn --factory llama_cpp.server.app:create_app`` with the
    settings in the environment, and a config file (``CONFIG_FILE``) of two models, which
    swap as ``python -m llama_cpp.server`` swaps them."""
    config = tmp_path / "two.yaml"
    config.write_text(
        "models:\n"
        f"  - {{model: {json.dumps(str(tiny_model_path))}, model_alias: a, n_ctx: 128}}\n"
        f"  - {{model: {json.dumps(str(tiny_model_path))}, model_alias: b, n_ctx: 64}}\n"
    )
    for env in ({"MODEL": str(tiny_model_path), "N_CTX": "128", "MODEL_ALIAS": "tiny"},
                {"CONFIG_FILE": str(config)}):  # fmt: skip
        # uvicorn puts its folder first on sys.path: not the source tree's
        proc, port = start_module(
            "--factory", "llama_cpp.server.app:create_app", env=env, module="uvicorn", cwd=tmp_path
        )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
                ids = [m["id"] for m in json.loads(r.read())["data"]]
            assert ids == (["tiny"] if "MODEL" in env else ["a", "b"])
            body = {"model": ids[-1], "prompt": "Hi", "max_tokens": 3}
            assert post(port, "/v1/completions", body)["usage"]["completion_tokens"] == 3
        finally:
            stop(proc)


def test_llama_proxy_builds_models_as_the_server_does(tiny_model_path: Path) -> None:
    """llama_cpp.server.model.LlamaProxy: models by alias, one loaded at a time; each
    Llama built from its ModelSettings (KV overrides, cache, draft model, and
    chat_template_kwargs reaching a Python chat format's formatter)."""
    code = """
        import sys
        from llama_cpp import LlamaRAMCache
        from llama_cpp.llama_chat_format import ChatFormatterResponse, register_chat_format
        from llama_cpp.server.model import LlamaProxy
        from llama_cpp.server.settings import ModelSettings

        seen = []

        @register_chat_format("probe")
        def probe(messages, **kwargs):
            seen.append(kwargs.get("enable_thinking"))
            return ChatFormatterResponse(prompt="Hi")

        path = sys.argv[1]
        proxy = LlamaProxy([
            ModelSettings(model=path, model_alias="a", n_ctx=256, verbose=False),
            ModelSettings(model=path, n_ctx=512, verbose=False, cache=True, cache_size=1 << 20,
                          kv_overrides=["general.name=str:renamed", "skipped"],
                          draft_model="prompt-lookup-decoding", chat_format="probe",
                          chat_template_kwargs={"enable_thinking": False}),
        ])
        assert list(proxy) == ["a", path]
        first = proxy()
        assert proxy("unknown") is first and first.n_ctx() == 256
        second = proxy(path)
        assert second is not first and second.n_ctx() == 512
        assert isinstance(second.cache, LlamaRAMCache)
        assert second.metadata["general.name"] == "renamed"
        out = second.create_chat_completion([{"role": "user", "content": "x"}], max_tokens=2)
        assert out["usage"]["completion_tokens"] <= 2
        assert seen == [False]
        assert proxy[path]["chat_format"] == "probe"
        try:
            LlamaProxy.load_llama_from_model_settings(
                ModelSettings(model=path, chat_format="llava-1-5"))
        except ValueError as e:
            print("refused:", e)
        proxy.free()
        print("ok")
    """
    out = run_python(code, str(tiny_model_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "needs clip_model_path" in out.stdout
    assert out.stdout.rstrip().endswith("ok")


def test_vision_chat_formats_serve_llama_cpp_pythons_prompts(
    tiny_model_path: Path, vision_path: Path, tmp_path: Path
) -> None:
    """``--chat_format llava-1-5 --clip_model_path P`` (llama-cpp-python's server docs'
    multimodal example) and the other vision formats: the server renders the prompt that
    format's handler renders in llama-cpp-python (tests/data/lcp_chat_formats.json), images
    included; from the command line, from create_app, and in a config file of several
    models."""
    from llama_cpp.server.app import create_app
    from starlette.testclient import TestClient
    from test_mtmd import IMAGE, LCP_FIXTURES, data_uri, with_image

    image = data_uri(IMAGE, "image/jpeg")
    conversations = [
        with_image(m, LCP_FIXTURES["handler_image"], image)
        for m in LCP_FIXTURES["handler_conversations"]
    ]

    def check(fetch: Any, handler: str) -> None:
        for messages, want in zip(conversations, LCP_FIXTURES["handlers"][handler], strict=True):
            prompt = fetch("/apply-template", {"messages": messages})["prompt"]
            # the server's marker is random per process, as llama-server's get_media_marker
            assert re.sub(r"<__media_\w+__>", "<__media__>", prompt) == want
        body = {"messages": conversations[0], "max_tokens": 2}
        assert fetch("/v1/chat/completions", body)["usage"]["completion_tokens"] <= 2

    proc, port = start_module(
        "--model", str(tiny_model_path), "--n_ctx", "512", "--chat_format", "llava-1-5",
        "--clip_model_path", str(vision_path), "--verbose", "False",
    )  # fmt: skip
    try:
        check(lambda path, body: post(port, path, body), "Llava15ChatHandler")
    finally:
        stop(proc)
    settings: dict[str, Any] = {"model": str(tiny_model_path), "n_ctx": 512, "verbose": False}
    from llama_cpp.server.settings import Settings

    app = create_app(
        Settings(**settings, chat_format="moondream", clip_model_path=str(vision_path))
    )
    with TestClient(app) as client:
        check(lambda path, body: client.post(path, json=body).json(), "MoondreamChatHandler")
    config = tmp_path / "two.json"
    models = [
        {**settings, "model_alias": "text"},
        {**settings, "model_alias": "qwen", "chat_format": "qwen2.5-vl",
         "clip_model_path": str(vision_path)},
    ]  # fmt: skip
    port = free_port()  # a config file holds the server settings: the flags' are not read
    config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": models}))
    proc, port = start_module("--config_file", str(config), port=port)
    try:
        check(lambda path, body: post(port, path, {**body, "model": "qwen"}), "Qwen25VLChatHandler")
    finally:
        stop(proc)
