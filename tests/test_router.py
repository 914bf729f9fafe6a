"""llama-server's router mode: ``llama-cy serve`` with no model runs a child server per
model, routes by ``"model"``, keeps at most ``--models-max`` loaded, and reads its
models from ``--models-dir`` and ``--models-preset`` (common/preset.cpp's INI)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import gguf
import pytest
from offload import timeout as stretched
from serving import Server, free_port

from llama_cy import hf_cache
from llama_cy.server import Router, modalities
from llama_cy.server.presets import (
    Preset,
    PresetError,
    from_argv,
    load_from_ini,
    load_from_models_dir,
)

# ---- presets (no server) ---------------------------------------------------------------


def test_ini_keys_values_sections(tmp_path: Path) -> None:
    ini = tmp_path / "p.ini"
    ini.write_text(
        "version = 1\n"
        "; a comment\n"
        "[*]\n"
        "ctx-size = 512   # trailing comment\n"
        "\n"
        "[org/model:q4_k_m]\n"
        "LLAMA_ARG_N_PARALLEL = 2\n"
        "no-warmup = true\n"
        "temp = 0.5\n"
        "load-on-startup = 1\n"
        "[other]\r\n"
        "model = /x/y.gguf\r\n"
        "jinja = false\r\n"
    )
    glob, presets = load_from_ini(str(ini))
    assert glob.options == {"ctx_size": "512"}
    assert set(presets) == {"org/model:Q4_K_M", "other"}  # the tag as the cache spells it
    p = presets["org/model:Q4_K_M"]
    # an env name and a flag name are the same key; no-warmup = true is warmup false
    assert p.options["parallel"] == "2"
    assert p.options["warmup"] == "false"
    assert p.to_args() == ["--parallel", "2", "--no-warmup", "--temperature", "0.5"]
    assert presets["other"].to_args() == ["--model", "/x/y.gguf", "--no-jinja"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[m]\nnot-a-flag = 1\n", "option 'not-a-flag' not recognized in preset 'm'"),
        ("[m]\nthis line is junk\n", "failed to parse server config file"),
    ],
)
def test_ini_errors(tmp_path: Path, text: str, message: str) -> None:
    ini = tmp_path / "bad.ini"
    ini.write_text(text)
    with pytest.raises(PresetError, match=message):
        load_from_ini(str(ini))
    with pytest.raises(PresetError, match="does not exist"):
        load_from_ini(str(tmp_path / "missing.ini"))


def test_models_dir(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").write_bytes(b"")
    (tmp_path / "mmproj-a.gguf").write_bytes(b"")  # a companion, no model of its own
    (tmp_path / "notes.txt").write_bytes(b"")
    sub = tmp_path / "big"
    sub.mkdir()
    for name in ("big-00001-of-00002.gguf", "big-00002-of-00002.gguf", "mmproj-big.gguf"):
        (sub / name).write_bytes(b"")
    (sub / "mtp-big.gguf").write_bytes(b"")
    presets = load_from_models_dir(str(tmp_path))
    assert set(presets) == {"a", "big"}
    assert presets["a"].options == {"model": str(tmp_path / "a.gguf")}
    assert presets["big"].options == {
        "model": str(sub / "big-00001-of-00002.gguf"),
        "mmproj": str(sub / "mmproj-big.gguf"),
        "model_draft": str(sub / "mtp-big.gguf"),
    }
    with pytest.raises(PresetError, match="does not exist or is not a directory"):
        load_from_models_dir(str(tmp_path / "nowhere"))


def projector(path: Path, vision: bool, audio: bool) -> Path:
    """A projector's metadata alone (what the router reads of it before a model runs)."""
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_bool(modalities.VISION, vision)
    writer.add_bool(modalities.AUDIO, audio)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_architecture_from_the_projector(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = {"input_modalities": ["text"], "output_modalities": ["text"]}
    assert modalities.from_projector(None) == text
    both = modalities.from_projector(str(projector(tmp_path / "p.gguf", True, True)))
    assert both["input_modalities"] == ["text", "image", "audio"]
    audio = modalities.from_projector(str(projector(tmp_path / "a.gguf", False, True)))
    assert audio["input_modalities"] == ["text", "audio"]
    (tmp_path / "junk.gguf").write_bytes(b"not gguf")
    assert modalities.from_projector(str(tmp_path / "junk.gguf")) == text
    assert "failed to read the multimodal capabilities" in caplog.text


def test_router_command_line_as_preset() -> None:
    p = from_argv(["-c", "128", "--no-jinja", "--temp=0.1", "-c", "256", "--metrics"])
    assert p.options == {"jinja": "0", "temperature": "0.1", "ctx_size": "256", "metrics": "1"}
    with pytest.raises(PresetError, match="invalid argument"):
        from_argv(["--bogus"])


# ---- the router (one child server per model) -----------------------------------------


@pytest.fixture(autouse=True)
def no_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty download cache, and a Hub that is not there (the servers inherit both)."""
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MODEL_ENDPOINT", f"http://127.0.0.1:{free_port()}/")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Path:
    folder = tmp_path_factory.mktemp("models")
    shutil.copy(tiny_model_path, folder / "alpha.gguf")
    sub = folder / "beta"
    sub.mkdir()
    shutil.copy(tiny_model_path, sub / "beta-q8_0.gguf")
    return folder


def test_router_shaped_for_another_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The router's arguments for a server of another shape (compat's several-model
    server): a default model for unnamed or unknown names, no download cache in the list,
    and children started by a command of the caller's."""
    monkeypatch.setattr(hf_cache, "list_cached_models", lambda: ["org/repo:Q8_0"])
    extra = {"a": Preset("a"), "b": Preset("b")}
    plain = Router(Preset("*"), extra=extra)
    assert set(plain.models) == {"org/repo:Q8_0", "a", "b"}
    assert plain.route("") is None
    assert plain.route("nope") is None
    assert "serve" in plain.models["b"].args  # llama-cy serve
    shaped = Router(
        Preset("*"),
        extra=extra,
        default_model="a",
        cached_models=False,
        command=lambda m: ["run", m.name, str(m.port)],
    )
    assert list(shaped.models) == ["a", "b"]
    routed = [shaped.route(n) for n in ("", "nope", "b")]
    assert [m.name if m else None for m in routed] == ["a", "a", "b"]
    assert shaped.models["b"].args == ["run", "b", "0"]


def statuses(server: Server) -> dict[str, str]:
    status, _, body = server.request("GET", "/models")
    assert status == 200, body
    return {m["id"]: m["status"]["value"] for m in body["data"]}


def wait_status(server: Server, name: str, want: str) -> None:
    deadline = time.monotonic() + stretched(60)
    while statuses(server).get(name) != want:
        assert time.monotonic() < deadline, f"{name} never became {want}: {statuses(server)}"
        time.sleep(0.05)


def chat(server: Server, model: str, **extra: Any) -> tuple[int, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    status, _, out = server.request("POST", "/v1/chat/completions", {**body, **extra})
    return status, out


def listen(server: Server, events: list[dict[str, Any]], ready: threading.Event) -> None:
    with urllib.request.urlopen(server.url + "/models/sse", timeout=stretched(60)) as r:
        ready.set()
        for line in r:
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))


def test_router_routes_loads_and_evicts(models_dir: Path) -> None:
    with Server(None, "--models-dir", str(models_dir), "--models-max", "1", "-c", "256") as s:
        status, _, props = s.request("GET", "/props")
        assert status == 200
        assert props["role"] == "router"
        assert props["max_instances"] == 1
        assert props["models_autoload"] is True
        assert props["build_info"].startswith("b")
        listed = statuses(s)
        assert listed["alpha"] == listed["beta"] == "unloaded"

        events: list[dict[str, Any]] = []
        ready = threading.Event()
        threading.Thread(target=listen, args=(s, events, ready), daemon=True).start()
        assert ready.wait(stretched(10))

        # a request loads its model (the child is told its name: it answers as "alpha")
        status, out = chat(s, "alpha")
        assert status == 200, out
        assert out["model"] == "alpha"
        assert out["choices"][0]["message"]["content"]
        entry = next(m for m in s.request("GET", "/models")[2]["data"] if m["id"] == "alpha")
        assert entry["status"]["value"] == "loaded"
        assert "--ctx-size" in entry["status"]["args"]  # the router's own flags
        assert entry["meta"]["n_vocab"] > 0  # the child's own entry, merged in
        assert entry["architecture"]["input_modalities"] == ["text"]  # the child's

        # a second model: the limit is 1, so alpha (idle) goes
        status, _, tok = s.request("POST", "/tokenize", {"model": "beta", "content": "hello"})
        assert status == 200
        assert tok["tokens"]
        assert statuses(s) == {**listed, "alpha": "unloaded", "beta": "loaded"}

        # a GET names its model in the query
        status, _, slots = s.request("GET", "/slots?model=beta")
        assert status == 200
        assert isinstance(slots, list)

        # /models/unload, then /models/load
        assert s.request("POST", "/models/unload", {"model": "beta"})[0] == 200
        wait_status(s, "beta", "unloaded")
        assert s.request("POST", "/models/load", {"model": "alpha"})[0] == 200
        wait_status(s, "alpha", "loaded")
        status, _, body = s.request("POST", "/models/load", {"model": "alpha"})
        assert status == 400
        assert body["error"]["message"] == "model is already running"

        seen = {(e["event"], e["model"], e.get("data", {}).get("status")) for e in events}
        assert ("status_change", "alpha", "loaded") in seen
        assert ("status_change", "alpha", "unloaded") in seen
        assert ("status_change", "beta", "loaded") in seen

        # bad requests: 4xx JSON, and the router still serves
        for body, message in [
            ({"messages": []}, "model name is missing from the request"),
            ({"model": "nope", "messages": []}, "model 'nope' not found"),
        ]:
            status, _, out = s.request("POST", "/v1/chat/completions", body)
            assert status == 400
            assert out["error"]["message"] == message
        assert s.request("POST", "/models/load", raw=b"{not json")[0] == 400
        assert s.request("POST", "/models/load", {"model": "nope"})[0] == 404
        assert s.request("POST", "/models/unload", {"model": "beta"})[0] == 400
        # a download the Hub cannot confirm (no Hub here): 400
        assert s.request("POST", "/models", {"model": "org/repo"})[0] == 400
        assert chat(s, "alpha")[0] == 200


def test_router_no_autoload_and_api_key(models_dir: Path) -> None:
    with Server(None, "--models-dir", str(models_dir), "--no-models-autoload", api_key="sk-r") as s:
        status, _, out = s.request("GET", "/models", auth=False)
        assert status == 401
        assert out["error"]["type"] == "authentication_error"
        status, out = chat(s, "alpha")
        assert status == 400
        assert out["error"]["message"] == "model is not loaded"
        # ?autoload=1 overrides the flag for one request
        status, _, out = s.request(
            "POST", "/tokenize?autoload=1", {"model": "alpha", "content": "x"}
        )
        assert status == 200, out
        assert chat(s, "alpha")[0] == 200


def test_router_presets_reload_and_aliases(tmp_path: Path, tiny_model_path: Path) -> None:
    ini = tmp_path / "models.ini"
    ini.write_text(
        f"[*]\nctx-size = 128\n\n[one]\nmodel = {tiny_model_path}\nalias = first,uno\n"
        f"\n[two]\nmodel = {tiny_model_path}\n"
    )
    with Server(None, "--models-preset", str(ini)) as s:
        status, _, body = s.request("GET", "/models")
        one = next(m for m in body["data"] if m["id"] == "one")
        assert one["aliases"] == ["first", "uno"]
        assert one["source"] == "preset"
        assert "ctx-size = 128" in one["status"]["preset"]
        status, out = chat(s, "uno")  # an alias routes to its model
        assert status == 200
        assert out["model"] == "one"

        ini.write_text(f"[two]\nmodel = {tiny_model_path}\n[three]\nmodel = {tiny_model_path}\n")
        status, _, body = s.request("GET", "/models?reload=1")
        assert status == 200
        assert {m["id"] for m in body["data"]} >= {"two", "three"}
        assert "one" not in {m["id"] for m in body["data"]}  # stopped, then dropped
        assert chat(s, "uno")[0] == 400
        assert chat(s, "three")[0] == 200


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models-dir", "/no/such/folder"], "does not exist or is not a directory"),
        (["--models-preset", "BAD"], "not recognized in preset"),
    ],
)
def test_router_bad_sources_stop_the_start(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.ini"
    bad.write_text("[m]\nwhat = 1\n")
    args = [str(bad) if a == "BAD" else a for a in args]
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "llama_cy", "serve", *args, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=stretched(60),
    )
    assert proc.returncode == 1
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


# ---- the queue for a free slot (LLAMA_SERVER_DEBUG_FAKE_TIMING: loads and requests
# take 2 s longer, as llama-server's own router tests use it) --------------------------


class Background:
    """One request in a thread: its status (or error) and when it ended."""

    def __init__(self, server: Server, model: str, timeout: float | None = None) -> None:
        self.status: int | None = None
        self.error: Exception | None = None
        self.done_at = 0.0
        body = json.dumps({"model": model, "content": "hello world"}).encode()
        self.req = urllib.request.Request(
            server.url + "/tokenize", data=body, headers={"Content-Type": "application/json"}
        )
        self.timeout = timeout or stretched(120)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with urllib.request.urlopen(self.req, timeout=self.timeout) as r:
                self.status = r.status
        except Exception as exc:
            self.error = exc
        self.done_at = time.monotonic()

    def join(self) -> Background:
        self.thread.join(stretched(120))
        assert not self.thread.is_alive()
        return self


@pytest.fixture(scope="module")
def three_models(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Path:
    folder = tmp_path_factory.mktemp("three")
    for name in ("a", "b", "c"):
        shutil.copy(tiny_model_path, folder / f"{name}.gguf")
    return folder


def abc(server: Server) -> dict[str, str]:
    """The states of the three models (the demo model is listed too)."""
    return {k: v for k, v in statuses(server).items() if k in ("a", "b", "c")}


def slow_router(folder: Path) -> Server:
    return Server(
        None,
        "--models-dir",
        str(folder),
        "--models-max",
        "1",
        "-c",
        "256",
        env={"LLAMA_SERVER_DEBUG_FAKE_TIMING": "1"},
    )


def test_router_queue_keeps_busy_model_and_is_fifo(three_models: Path) -> None:
    with slow_router(three_models) as s:
        assert s.request("POST", "/models/load", {"model": "a"})[0] == 200
        wait_status(s, "a", "loaded")
        busy = Background(s, "a")
        time.sleep(0.5)  # a is serving it: the only slot is taken
        first = Background(s, "b")
        time.sleep(1)
        second = Background(s, "c")
        for r in (busy, first, second):
            r.join()
            assert r.error is None
            assert r.status == 200
        # a was not stopped under its request, and the queue went in arrival order
        assert first.done_at < second.done_at
        assert abc(s) == {"a": "unloaded", "b": "unloaded", "c": "loaded"}


def test_router_queue_client_that_leaves_keeps_model(three_models: Path) -> None:
    with slow_router(three_models) as s:
        assert s.request("POST", "/models/load", {"model": "a"})[0] == 200
        wait_status(s, "a", "loaded")
        busy = Background(s, "a")
        time.sleep(0.5)
        gone = Background(s, "b", timeout=1).join()  # gives up while queued
        assert gone.error is not None
        busy.join()
        assert busy.status == 200
        time.sleep(3)  # nobody waits any more, so a keeps its slot
        assert abc(s) == {"a": "loaded", "b": "unloaded", "c": "unloaded"}


def test_router_serves_the_demo_model(gemma_path: Path) -> None:
    """The README's quick start: no flags but the port, and the demo model by name."""
    with Server(None, "-c", "512") as s:
        name = gemma_path.name.removesuffix(".gguf")
        assert statuses(s)[name] == "unloaded"
        status, out = chat(s, name, temperature=0)
        assert status == 200, out
        assert out["choices"][0]["message"]["content"]


def test_router_lists_a_projectors_modalities(tmp_path: Path, tiny_model_path: Path) -> None:
    """Before its model runs, the router reads a model's projector for /models'
    architecture, as llama-server's update_caps does."""
    folder = tmp_path / "models" / "seer"
    folder.mkdir(parents=True)
    shutil.copy(tiny_model_path, folder / "seer.gguf")
    projector(folder / "mmproj-seer.gguf", vision=True, audio=False)
    with Server(None, "--models-dir", str(folder.parent), "--no-models-autoload") as s:
        entry = next(m for m in s.request("GET", "/models")[2]["data"] if m["id"] == "seer")
        assert entry["status"]["value"] == "unloaded"
        assert entry["architecture"]["input_modalities"] == ["text", "image"]
