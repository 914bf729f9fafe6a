"""llama.cpp's downloads (``-hf``, ``-hff``, ``-mu``, ``-mmu``, ``--offline``,
``--cache-list``) against a Hub served on loopback (:mod:`fake_hub`): the files each flag
picks, the Hub's cache layout, ETags and resumes, the router's cache models, and clear
errors when there is no network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import COMMIT, FakeHub
from offload import timeout as stretched
from serving import Server

from llama_cy import download, hf_cache
from llama_cy.download import DownloadError


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    h = FakeHub()
    monkeypatch.setenv("MODEL_ENDPOINT", h.url)
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(download, "RETRY_DELAY", 0)
    yield h
    h.close()


def env(hub: FakeHub) -> dict[str, str]:
    return {"MODEL_ENDPOINT": hub.url, "LLAMA_CACHE": os.environ["LLAMA_CACHE"]}


def test_which_file_a_tag_means(hub: FakeHub) -> None:
    hub.repos["org/many"] = {
        "README.md": b"hi",
        "many-F16.gguf": b"f16",
        "many-Q8_0.gguf": b"q8",
        "big/many-Q4_K_M-00001-of-00002.gguf": b"a",
        "big/many-Q4_K_M-00002-of-00002.gguf": b"b",
        "mmproj-many-f16.gguf": b"p16",
        "big/mmproj-many-Q8_0.gguf": b"p8",
    }
    plan = download.hf_plan("org/many")  # no tag: Q4_K_M first, its shards, its projector
    assert plan.primary is not None
    assert plan.primary.path == "big/many-Q4_K_M-00001-of-00002.gguf"
    assert [f.path for f in plan.model_files] == [
        "big/many-Q4_K_M-00001-of-00002.gguf",
        "big/many-Q4_K_M-00002-of-00002.gguf",
    ]
    assert plan.mmproj is not None
    assert plan.mmproj.path == "big/mmproj-many-Q8_0.gguf"  # the model's folder wins
    plan = download.hf_plan("org/many:f16")  # a tag in any case
    assert plan.primary is not None
    assert plan.primary.path == "many-F16.gguf"
    assert plan.mmproj is not None
    assert plan.mmproj.path == "mmproj-many-f16.gguf"
    plan = download.hf_plan("org/many", "many-Q8_0.gguf", mmproj=False)
    assert plan.primary is not None
    assert plan.primary.path == "many-Q8_0.gguf"
    assert plan.mmproj is None
    with pytest.raises(DownloadError, match="no GGUF files found in repository org/many"):
        download.hf_plan("org/many:IQ2_XS")
    with pytest.raises(DownloadError, match=r"file 'nope\.gguf' not found"):
        download.hf_plan("org/many", "nope.gguf")
    with pytest.raises(ValueError, match="expected <user>/<model>"):
        download.hf_plan("just-a-name")
    assert hf_cache.split_info("x/m-q4_k_m-00002-of-00003.gguf") == hf_cache.SplitInfo(
        "x/m-q4_k_m", "Q4_K_M", 2, 3
    )


def test_hf_repo_cache_layout_and_reuse(hub: FakeHub) -> None:
    hub.repos["org/tiny"] = {"tiny-Q8_0.gguf": b"weights" * 1000, "mmproj-tiny.gguf": b"p"}
    got = download.resolve(hf_repo="org/tiny:Q8_0")
    repo_dir = Path(os.environ["LLAMA_CACHE"]) / "models--org--tiny"
    assert (repo_dir / "refs" / "main").read_text() == COMMIT
    snapshot = repo_dir / "snapshots" / COMMIT
    assert got.model == str(snapshot / "tiny-Q8_0.gguf")
    assert got.mmproj == str(snapshot / "mmproj-tiny.gguf")
    link = Path(got.model)
    assert link.is_symlink()  # into blobs/, by its sha256
    assert link.resolve().parent == (repo_dir / "blobs").resolve()
    assert link.read_bytes() == b"weights" * 1000
    assert hub.gets("/resolve/") == 2

    # again: the Hub is asked for its file list, the blobs are not fetched again
    assert download.resolve(hf_repo="org/tiny:Q8_0").model == got.model
    assert hub.gets("/resolve/") == 2
    # the flags, as serve reads them: --no-mmproj leaves the projector out
    from llama_cy import cli
    from llama_cy.cli.common import fetch_models

    for flags, mmproj in (([], got.mmproj), (["--no-mmproj"], None)):
        args = cli.parser().parse_args(["serve", "-hf", "org/tiny:Q8_0", *flags])
        assert fetch_models(args, "serve") is None
        assert (args.model, args.mmproj) == (got.model, mmproj)
    # offline: the cache alone, not a single request
    before = len(hub.log)
    assert download.resolve(hf_repo="org/tiny:Q8_0", offline=True).model == got.model
    assert len(hub.log) == before
    assert hf_cache.list_cached_models() == ["org/tiny:Q8_0"]
    assert hf_cache.resolve_cached_path("org/tiny:q8_0") == got.model
    assert hf_cache.remove_cached("org/tiny:Q8_0")
    assert hf_cache.list_cached_models() == []
    assert not link.resolve().exists()  # its blob went with it


def test_model_url_etag_and_resume(hub: FakeHub, tmp_path: Path) -> None:
    data = bytes(range(256)) * 400
    hub.files["plain.gguf"] = data
    url = hub.url + "files/plain.gguf"
    got = download.resolve(model_url=url + "?download=true")
    path = Path(os.environ["LLAMA_CACHE"]) / "plain.gguf"
    assert got.model == str(path)
    assert path.read_bytes() == data
    assert Path(str(path) + ".etag").read_text().startswith('"')
    # the same ETag: a HEAD, no transfer
    download.resolve(model_url=url)
    assert hub.gets("/files/plain.gguf") == 1
    # an interrupted transfer resumes with a range request
    out = tmp_path / "resumed.gguf"
    Path(str(out) + ".downloadInProgress").write_bytes(data[:1000])
    download.download_file(url, str(out))
    assert out.read_bytes() == data


def test_token_file_projector_url_and_docker(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.repos["org/two"] = {"a-Q8_0.gguf": b"a", "b-Q8_0.gguf": b"b"}
    hub.files["proj.gguf"] = b"projector"
    token = "hf_" + "x" * 34
    got = download.resolve(
        hf_repo="org/two",
        hf_file="b-Q8_0.gguf",
        mmproj_url=hub.url + "files/proj.gguf",
        token=token,
    )
    assert Path(got.model or "").read_bytes() == b"b"  # -hff picks the file
    assert got.mmproj == str(Path(os.environ["LLAMA_CACHE"]) / "proj.gguf")  # -mmu
    assert f"Bearer {token}" in hub.auth  # -hft goes to the Hub
    # -dr: Docker Hub's registry (here the same loopback server)
    hub.docker[("ai/tiny", "latest")] = b"gguf-bytes"
    monkeypatch.setattr(download, "DOCKER_AUTH", hub.url + "token")
    monkeypatch.setattr(download, "DOCKER_REGISTRY", hub.url + "v2/")
    path = download.resolve(docker_repo="tiny").model
    assert path == str(Path(os.environ["LLAMA_CACHE"]) / "ai_tiny_latest.gguf")
    assert Path(path).read_bytes() == b"gguf-bytes"
    assert "Bearer docker-token" in hub.auth
    with pytest.raises(DownloadError):
        download.resolve(docker_repo="ai/absent:1")
    # the flags, as serve reads them: --docker-repo, and --spec-draft-hf for the draft
    from llama_cy import cli
    from llama_cy.cli.common import fetch_models

    argv = ["serve", "--docker-repo", "tiny", "--spec-draft-hf", "org/two:Q8_0"]
    args = cli.parser().parse_args(argv)
    assert fetch_models(args, "serve") is None
    assert args.model == path
    assert Path(args.model_draft).read_bytes() == b"a"  # the first file of the tag


def test_no_network_is_an_error_not_a_hang(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/"
    monkeypatch.setenv("MODEL_ENDPOINT", dead)
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match="has no files"):
        download.resolve(hf_repo="org/tiny")
    with pytest.raises(DownloadError, match="cannot download"):
        download.resolve(model_url=dead + "m.gguf")
    with pytest.raises(DownloadError, match="not available in cache"):
        download.resolve(model_url=dead + "m.gguf", offline=True)
    assert time.monotonic() - t0 < 10


# ---- the flags, end to end --------------------------------------------------------------


def run_cli(hub: FakeHub, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "llama_cy", *argv],
        capture_output=True,
        text=True,
        timeout=stretched(120),
        env={**os.environ, **env(hub)},
    )


def test_serve_hf_then_offline(hub: FakeHub, tiny_model_path: Path) -> None:
    hub.repos["org/tiny"] = {"tiny-Q8_0.gguf": tiny_model_path.read_bytes()}
    with Server(None, "-hf", "org/tiny", "-c", "256", env=env(hub)) as s:
        status, _, out = s.request("POST", "/completion", {"prompt": "hi", "n_predict": 3})
        assert status == 200, out
        assert out["tokens_predicted"] == 3
    listed = run_cli(hub, "serve", "--cache-list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == ["number of models in cache: 1", "   1. org/tiny:Q8_0"]
    hub.close()  # no Hub any more: --offline serves from the cache
    with Server(None, "-hf", "org/tiny:Q8_0", "--offline", "-c", "256", env=env(hub)) as s:
        assert s.request("POST", "/completion", {"prompt": "hi", "n_predict": 2})[0] == 200


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-hf", "not-a-repo"], "invalid HF repo format"),
        (["-hf", "org/missing"], "failed to download model"),
        (["-mu", "URL/files/absent.gguf"], "failed to download model"),
    ],
)
def test_serve_bad_downloads_exit_cleanly(hub: FakeHub, argv: list[str], message: str) -> None:
    argv = [a.replace("URL/", hub.url) for a in argv]
    proc = run_cli(hub, "serve", *argv, "--port", "0")
    assert proc.returncode == 1
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def sse(url: str, events: list[dict[str, Any]], ready: threading.Event) -> None:
    with urllib.request.urlopen(url + "/models/sse", timeout=stretched(60)) as r:
        ready.set()
        for line in r:
            if line.startswith(b"data: "):
                events.append(json.loads(line[6:]))


def test_router_cache_download_and_remove(hub: FakeHub, tiny_model_path: Path) -> None:
    weights = tiny_model_path.read_bytes()
    hub.repos["org/tiny"] = {"tiny-Q8_0.gguf": weights}
    hub.repos["org/other"] = {"other-F16.gguf": weights}
    download.resolve(hf_repo="org/tiny")  # in the cache before the router starts
    with Server(None, "-c", "256", env=env(hub)) as s:
        status, _, body = s.request("GET", "/models")
        tiny = next(m for m in body["data"] if m["id"] == "org/tiny:Q8_0")
        assert tiny["source"] == "cache"
        assert tiny["can_remove"] is True
        status, _, out = s.request("POST", "/tokenize", {"model": "org/tiny:Q8_0", "content": "a"})
        assert status == 200, out

        events: list[dict[str, Any]] = []
        ready = threading.Event()
        threading.Thread(target=sse, args=(s.url, events, ready), daemon=True).start()
        assert ready.wait(stretched(10))
        assert s.request("POST", "/models", {"model": "org/other"})[0] == 200
        deadline = time.monotonic() + stretched(60)
        while not any(e["event"] == "download_finished" for e in events):
            assert time.monotonic() < deadline, events
            time.sleep(0.05)
        assert any(e["event"] == "download_progress" for e in events)
        ids = {m["id"] for m in s.request("GET", "/models")[2]["data"]}
        assert "org/other:F16" in ids
        assert s.request("POST", "/models", {"model": "org/nothing"})[0] == 400

        assert s.request("DELETE", "/models?model=org/tiny:Q8_0")[0] == 200
        ids = {m["id"] for m in s.request("GET", "/models")[2]["data"]}
        assert "org/tiny:Q8_0" not in ids
        assert hf_cache.list_cached_models() == ["org/other:F16"]
        assert s.request("DELETE", "/models?model=org/tiny:Q8_0")[0] == 404


def test_a_preset_repository_starts_the_router(hub: FakeHub, tiny_model_path: Path) -> None:
    """-hf on a repository holding a preset.ini: llama-server runs the router over it."""
    hub.repos["org/tiny"] = {"tiny-Q8_0.gguf": tiny_model_path.read_bytes()}
    hub.repos["org/presets"] = {"preset.ini": b"[my-tiny]\nhf-repo = org/tiny:Q8_0\nc = 256\n"}
    with Server(None, "-hf", "org/presets", env=env(hub)) as s:
        status, _, props = s.request("GET", "/props")
        assert props["role"] == "router"
        ids = {m["id"] for m in s.request("GET", "/models")[2]["data"]}
        assert "my-tiny" in ids
        status, _, out = s.request("POST", "/tokenize", {"model": "my-tiny", "content": "hi"})
        assert status == 200, out
