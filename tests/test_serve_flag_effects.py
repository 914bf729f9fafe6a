"""Flags of ``llama-cy serve`` seen from a client: ``--path``, ``--prefill-assistant``,
``--override-kv``, ``--reasoning`` and ``--embd-normalize``, each against the same
server without it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from serving import Server

PARTIAL = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello th"}]


def prompt(server: Server, messages: list[dict[str, Any]]) -> str:
    status, _, out = server.request("POST", "/apply-template", {"messages": messages})
    assert status == 200, out
    return str(out["prompt"])


def test_path_and_prefill_assistant(tiny_model_path: Path, tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<p>static-page-here</p>")
    with Server(tiny_model_path, "--path", str(tmp_path), "-c", "256") as s:
        status, _, page = s.request("GET", "/")
        assert status == 200
        assert "static-page-here" in page
        prefilled = prompt(s, PARTIAL)
    assert prefilled.rstrip().endswith("Hello th")  # the reply goes on from there
    with Server(tiny_model_path, "--no-prefill-assistant", "-c", "256") as s:
        assert s.request("GET", "/")[2] != page  # the built-in page
        closed = prompt(s, PARTIAL)
    assert closed != prefilled
    assert not closed.rstrip().endswith("Hello th")  # a new turn after the message


def test_override_kv(tiny_model_path: Path) -> None:
    with Server(tiny_model_path, "-c", "256") as s:
        with_bos = s.request("POST", "/tokenize", {"content": "Hello", "add_special": True})[2]
    flag = ["--override-kv", "tokenizer.ggml.add_bos_token=bool:false", "-c", "256"]
    with Server(tiny_model_path, *flag) as s:
        without = s.request("POST", "/tokenize", {"content": "Hello", "add_special": True})[2]
    assert len(with_bos["tokens"]) == len(without["tokens"]) + 1
    assert with_bos["tokens"][1:] == without["tokens"]


def test_reasoning_off_closes_the_thought(tiny_model_path: Path, llama_cpp_source: Path) -> None:
    template = llama_cpp_source / "models" / "templates" / "Qwen3.5-4B.jinja"
    args = ["-c", "256", "--jinja", "--chat-template-file", str(template)]
    question = [{"role": "user", "content": "Hi"}]
    with Server(tiny_model_path, *args) as s:
        on = prompt(s, question)
    with Server(tiny_model_path, *args, "--reasoning", "off") as s:
        off = prompt(s, question)
    assert on != off
    assert "</think>" in off[len(off) - 40 :]  # an empty thought, closed in the prompt


def norms(server: Server) -> list[float]:
    status, _, out = server.request("POST", "/v1/embeddings", {"input": ["a cat", "a dog"]})
    assert status == 200, out
    return [float(np.linalg.norm(d["embedding"])) for d in out["data"]]


def test_embd_normalize(tiny_bert_path: Path) -> None:
    with Server(tiny_bert_path, "--embedding", "-c", "256") as s:
        assert np.allclose(norms(s), 1.0, atol=1e-3)  # 2: L2, llama-server's default
    with Server(tiny_bert_path, "--embedding", "-c", "256", "--embd-normalize", "-1") as s:
        raw = norms(s)
    assert not np.allclose(raw, 1.0, atol=1e-3)


def test_context_shift_and_keep(tiny_model_path: Path) -> None:
    """--context-shift goes on past the context (-c 64, which llama.cpp pads to 256);
    without, it stops there. With --keep, the prompt's first tokens survive the shift
    (the reply differs)."""
    body = {"prompt": "Once upon a time", "n_predict": 400, "temperature": 0}
    body["logit_bias"] = [[t, False] for t in (1, 2)]  # no end of text
    with Server(tiny_model_path, "-c", "64", "-np", "1") as s:
        stopped = s.request("POST", "/completion", body)[2]
    assert stopped["tokens_predicted"] < 256
    replies = []
    for keep in ("0", "4"):
        args = ["-c", "64", "-np", "1", "--context-shift", "--keep", keep]
        with Server(tiny_model_path, *args) as s:
            out = s.request("POST", "/completion", body)[2]
            assert out["tokens_predicted"] == 400
            replies.append(out["content"])
            if keep == "0":  # a request's n_keep and n_discard: llama-server's fields
                asked = s.request("POST", "/completion", {**body, "n_keep": 4})[2]
                dropped = s.request("POST", "/completion", {**body, "n_discard": 7})[2]
                assert "n_keep = 5, n_left = " in s.output()  # after the BOS, as there
                assert "n_discard = 7" in s.output()
                assert dropped["generation_settings"]["n_discard"] == 7
                assert dropped["content"] != out["content"]
    assert replies[0] != replies[1]
    assert asked["content"] == replies[1]  # as --keep 4


def test_reuse_port_and_tls(tiny_model_path: Path, tmp_path: Path) -> None:
    """--reuse-port lets two servers listen on one port; --ssl-key-file and
    --ssl-cert-file serve HTTPS."""
    import ssl
    import subprocess
    import urllib.request

    from serving import free_port

    port = free_port()
    with Server(tiny_model_path, "--reuse-port", "-c", "128", port=port):  # noqa: SIM117
        with Server(tiny_model_path, "--reuse-port", "-c", "128", port=port) as second:
            assert second.request("GET", "/health")[0] == 200
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    cmd = ["--ssl-key-file", str(key), "--ssl-cert-file", str(cert), "-c", "128"]
    # started by hand: serving.Server's health check speaks plain HTTP
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cy",
            "serve",
            "-m",
            str(tiny_model_path),
            "--port",
            str(port),
            *cmd,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/health", context=context, timeout=2
                ) as r:
                    assert r.status == 200
                    break
            except (TimeoutError, OSError):
                assert time.monotonic() < deadline, "no HTTPS server"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_spm_infill(tmp_path: Path) -> None:
    """--spm-infill puts the suffix first (suffix-prefix-middle), as llama-server."""
    from tiny_model import write_tiny_llama

    fim = write_tiny_llama(tmp_path / "fim.gguf", fim=True)
    body = {"input_prefix": "def f(", "input_suffix": "return x", "n_predict": 1}
    body["verbose"] = True
    prompts = []
    for flags in ([], ["--spm-infill"]):
        with Server(fim, "-c", "256", "-np", "1", *flags) as s:
            status, _, out = s.request("POST", "/infill", body)
            assert status == 200, out
            prompts.append(out["prompt"])
    psm, spm = prompts
    assert psm.index("def f(") < psm.index("return x")
    assert spm.index("return x") < spm.index("def f(")


def test_reasoning_budget_and_message(llama_cpp_source: Path, model_cache: Path) -> None:
    """--reasoning-budget ends the thought after N tokens (0: none at all), and
    --reasoning-budget-message is what closes it; without, a random model thinks on."""
    from tiny_model import write_tiny_llama

    path = model_cache / "tiny-llama-qwen2-think-v1.gguf"
    if not path.is_file():  # as test_chat writes it
        partial = path.with_suffix(".partial")
        write_tiny_llama(partial, vocab="qwen2", extra_tokens=["<think>", "</think>"])
        partial.replace(path)
    template = llama_cpp_source / "models" / "templates" / "Qwen3.5-4B.jinja"
    args = ["-c", "512", "-np", "1", "--jinja", "--chat-template-file", str(template)]
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12}
    body["temperature"] = 0
    out = {}
    for name, flags in (
        ("free", []),
        ("none", ["--reasoning-budget", "0"]),
        ("short", ["--reasoning-budget", "3", "--reasoning-budget-message", " Enough."]),
    ):
        with Server(path, *args, *flags) as s:
            status, _, reply = s.request("POST", "/v1/chat/completions", body)
            assert status == 200, reply
            out[name] = reply["choices"][0]["message"]
    assert out["free"]["reasoning_content"]
    assert not out["free"]["content"]  # still thinking when the tokens ran out
    assert not out["none"].get("reasoning_content")
    assert out["none"]["content"]
    assert out["short"]["reasoning_content"].rstrip().endswith("Enough.")
    assert out["short"]["content"]


def test_check_tensors(tiny_model_path: Path, tmp_path: Path) -> None:
    """--check-tensors refuses a model whose weights hold a NaN; without it, it loads."""
    import gguf
    import pytest

    bad = tmp_path / "nan.gguf"
    bad.write_bytes(tiny_model_path.read_bytes())
    reader = gguf.GGUFReader(str(bad))
    tensor = next(t for t in reader.tensors if t.tensor_type == gguf.GGMLQuantizationType.F32)
    with open(bad, "r+b") as f:
        f.seek(int(tensor.data_offset))
        f.write(np.array([np.nan], np.float32).tobytes())
    with Server(bad, "-c", "128") as s:
        assert s.request("GET", "/health")[0] == 200
    with pytest.raises(RuntimeError, match="exited") as refused:
        Server(bad, "-c", "128", "--check-tensors")
    assert "invalid data" in str(refused.value)  # llama.cpp's reason, in the log
    assert "cancelled" not in str(refused.value)  # not the progress bar's doing


def test_log_disable_and_numa(tiny_model_path: Path) -> None:
    """--log-disable silences the log that -lv 4 asks for (llama.cpp's lines with it);
    --numa calls llama.cpp's NUMA set-up before the load (one node here: the server still
    serves, as llama-server does)."""
    flags = ["-np", "1", "-lv", "4"]
    with Server(tiny_model_path, *flags, "--numa", "distribute") as s:
        assert s.request("GET", "/health")[0] == 200
        loud = s.output()
    with Server(tiny_model_path, *flags, "--log-disable") as s:
        assert s.request("GET", "/health")[0] == 200
        quiet = s.output()
    assert "llama_model_loader" in loud
    assert "llama_model_loader" not in quiet
