"""``llama-cy serve`` against a hostile client on loopback, each case as it was found
(issue 49): the API key on every path, llama-server's 100 MiB body cap, slot files
checked before llama.cpp reads them and written atomically, the router's form and path
handling, and no request of any size or shape holding the event loop: ``/health``
answers within :data:`STALL` seconds while each one runs."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from offload import timeout as stretched
from serving import HealthProbe, Server, free_port

KEY = "sk-hostile"
#: The longest /health may wait while a hostile request is processed.
STALL = 0.5
PROMPT = "Once upon a time, in a land far away, there lived a curious little fox. "


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("www")
    (folder / "secret.txt").write_text("s3cret")
    (folder / "index.html").write_text("<html>the page</html>")
    return folder


@pytest.fixture(scope="module")
def slot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, static_dir: Path, slot_dir: Path) -> Iterator[Server]:
    args = ["-np", "2", "-c", "4096", "-t", "2", "--no-warmup"]
    args += ["--path", str(static_dir), "--slot-save-path", str(slot_dir)]
    with Server(tiny_model_path, *args, api_key=KEY) as s:
        yield s


def assert_serves(server: Server) -> None:
    body = {"prompt": "Hello", "n_predict": 4, "temperature": 0}
    status, _, out = server.request("POST", "/completion", body)
    assert status == 200, out
    assert server.proc.poll() is None


def raw_exchange(server: Server, head: bytes, body: Iterable[bytes] = ()) -> bytes:
    """Send ``head`` and then ``body``'s pieces until the server answers (or stops
    reading); the first bytes of its answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=stretched(30)) as sock:
        sock.sendall(head)
        try:
            for piece in body:
                sock.sendall(piece)
        except OSError:
            pass  # it answered and closed while we still sent: as it should
        reply = b""
        while b"\r\n\r\n" not in reply or len(reply) < _answer_size(reply):
            piece = sock.recv(65536)
            if not piece:
                break
            reply += piece
        return reply


def _answer_size(reply: bytes) -> int:
    head, _, _ = reply.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(head) + 4 + int(line.split(b":")[1])
    return 0


# -- the API key ------------------------------------------------------------------------


def test_the_key_guards_every_path_but_health_and_the_page(server: Server) -> None:
    # --path's files were served without the key (llama-server: 401)
    status, _, out = server.request("GET", "/secret.txt", auth=False)
    assert status == 401, out
    assert out["error"]["type"] == "authentication_error"
    status, _, text = server.request("GET", "/secret.txt")
    assert (status, text) == (200, "s3cret")
    assert server.request("GET", "/secret.txt", headers={"X-Api-Key": KEY}, auth=False)[2] == (
        "s3cret"
    )
    # unknown routes and wrong methods: the key first, as llama-server's pre-routing check
    for method, path in [
        ("GET", "/no/such/route"),
        ("POST", "/no/such/route"),
        ("GET", "/v1/chat/completions"),
        ("DELETE", "/v1/models"),
        ("PUT", "/completion"),
    ]:
        status, _, out = server.request(method, path, auth=False)
        assert status == 401, (method, path, out)
        status, _, out = server.request(method, path)
        assert status in (404, 405), (method, path, out)
    # public: health and the page
    assert server.request("GET", "/health", auth=False)[0] == 200
    assert server.request("GET", "/v1/health", auth=False)[0] == 200
    status, _, page = server.request("GET", "/", auth=False)
    assert status == 200
    assert "the page" in page
    assert server.request("GET", "/v1/models", auth=False)[0] == 401


# -- the body cap -----------------------------------------------------------------------


def test_a_declared_body_over_100_mib_is_refused_before_it_is_read(server: Server) -> None:
    head = (
        b"POST /completion HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: 209715200\r\n\r\n"
    )  # fmt: skip
    t0 = time.monotonic()
    reply = raw_exchange(server, head, iter([b'{"prompt": "']))  # 200 MB announced, 12 sent
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b"larger than the server takes" in reply
    assert time.monotonic() - t0 < stretched(5)
    # a multipart form, the same (was parsed on the event loop: 1.3 GB of RSS)
    form = head.replace(b"application/json", b"multipart/form-data; boundary=x")
    form = form.replace(b"/completion", b"/v1/audio/transcriptions")
    assert raw_exchange(server, form).startswith(b"HTTP/1.1 413")
    assert_serves(server)


def test_a_chunked_body_is_cut_at_100_mib(server: Server) -> None:
    head = (
        b"POST /completion HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
        + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )  # fmt: skip
    mib = b"a" * (1 << 20)
    chunk = b"%x\r\n" % len(mib) + mib + b"\r\n"
    with HealthProbe(server) as probe:
        reply = raw_exchange(server, head, (chunk for _ in range(120)))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert probe.worst < STALL, probe.worst
    assert_serves(server)


# -- slot files -------------------------------------------------------------------------


def saved_slot(server: Server, slot_dir: Path, name: str) -> bytes:
    body = {"prompt": PROMPT * 4, "n_predict": 4, "id_slot": 0, "temperature": 0}
    status, _, out = server.request("POST", "/completion", body)
    assert status == 200, out
    status, _, out = server.request("POST", "/slots/0?action=save", {"filename": name})
    assert status == 200, out
    return (slot_dir / name).read_bytes()


def restore(server: Server, name: str) -> tuple[int, Any]:
    status, _, out = server.request("POST", "/slots/1?action=restore", {"filename": name})
    return status, out


def test_damaged_slot_files_are_refused_and_the_server_goes_on(
    server: Server, slot_dir: Path
) -> None:
    data = saved_slot(server, slot_dir, "good.bin")
    n_tokens = struct.unpack_from("<I", data, 8)[0]
    assert n_tokens > 20
    n_head = 12 + 4 * n_tokens
    damaged = {
        "empty.bin": b"",
        "header.bin": data[:10],
        "tokens.bin": data[: 12 + 2 * n_tokens],
        "state-start.bin": data[: n_head + 3],
        "half.bin": data[: len(data) // 2],  # aborted llama-server and llama-cy serve
        "last-byte.bin": data[:-1],
        "trailing.bin": data + b"\0" * 16,
        "magic.bin": b"ggsn" + data[4:],
        "count.bin": data[:8] + struct.pack("<I", 1 << 30) + data[12:],
    }
    for name, content in damaged.items():
        (slot_dir / name).write_bytes(content)
        status, out = restore(server, name)
        assert status == 400, (name, out)
        message = out["error"]["message"]
        assert message.startswith("Unable to restore slot: "), message
        assert str(slot_dir) not in message  # the slot folder is not the client's business
        assert server.proc.poll() is None, name
        slot = next(s for s in server.slots() if s["id"] == 1)
        assert not slot["is_processing"]
    status, out = restore(server, "good.bin")
    assert status == 200, out
    assert out["n_restored"] == n_tokens
    assert_serves(server)


def test_a_slot_file_with_tokens_outside_the_vocabulary_is_refused(
    server: Server, slot_dir: Path
) -> None:
    data = bytearray(saved_slot(server, slot_dir, "vocab.bin"))
    n_vocab = server.request("GET", "/v1/models")[2]["data"][0]["meta"]["n_vocab"]
    for bad in (n_vocab, n_vocab + 7, -1, -5000):
        struct.pack_into("<i", data, 12 + 4 * 3, bad)
        (slot_dir / "bad-token.bin").write_bytes(data)
        status, out = restore(server, "bad-token.bin")
        assert status == 400, (bad, out)
        assert out["error"]["message"] == "Unable to restore slot: Invalid tokens in slot save file"
    assert_serves(server)


# -- no request holds the event loop ----------------------------------------------------


def _big_ints(n: int) -> bytes:
    return b'{"n_predict": 1, "prompt": [' + b",".join([b"300"] * n) + b"]}"


#: name -> (method, path, body (JSON or raw bytes), the answers it may get)
LOOP_CASES: dict[str, tuple[str, str, Any, tuple[int, ...]]] = {
    "top_logprobs": (
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 6,
            "logprobs": True,
            "top_logprobs": 100000,
            "temperature": 0,
        },
        (200,),
    ),
    "top_logprobs_stream": (
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 6,
            "stream": True,
            "logprobs": True,
            "top_logprobs": 100000,
            "temperature": 0,
        },
        (200,),
    ),
    "n_probs": ("POST", "/completion", {"prompt": "hi", "n_predict": 6, "n_probs": 100000}, (200,)),
    "tokenize_pieces": (
        "POST",
        "/tokenize",
        {"content": "hello world, " * 300_000, "with_pieces": True},
        (200,),
    ),
    "detokenize": ("POST", "/detokenize", {"tokens": [300] * 1_000_000}, (200,)),
    "extras_tokenize": ("POST", "/extras/tokenize", {"input": "hello world, " * 300_000}, (200,)),
    "logit_bias_of_texts": (
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
            "logit_bias": [["hello there", 0.5]] * 200_000,
        },
        (200,),
    ),
    "json_of_many_values": ("POST", "/completion", _big_ints(2_000_000), (400,)),
    "lookup": (
        "POST",
        "/v1/streams/lookup",
        {"conversation_ids": [f"conv-{i}" for i in range(100_000)]},
        (200,),
    ),
}


@pytest.mark.parametrize("case", LOOP_CASES)
def test_no_request_holds_the_event_loop(server: Server, case: str) -> None:
    method, path, body, statuses = LOOP_CASES[case]
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with HealthProbe(server) as probe:
        status, _, _ = server.request(method, path, raw=raw)
    assert status in statuses, status
    assert probe.worst < STALL, f"/health waited {probe.worst:.2f} s"
    assert_serves(server)


# -- resumable streams ------------------------------------------------------------------


def _open(server: Server, head: bytes) -> tuple[socket.socket, int]:
    """A connection that sent ``head`` and read only its status."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=stretched(30))
    sock.sendall(head)
    line = b""
    while not line.endswith(b"\r\n"):
        line += sock.recv(1)
    return sock, int(line.split()[1])


def test_a_stream_takes_at_most_its_readers(server: Server) -> None:
    """Readers of a live stream hold a place each while they wait for more (a finished
    stream's readers get its bytes at once and leave)."""
    conv = "many-readers"
    body = json.dumps(
        {"prompt": "Hi", "n_predict": 2000, "stream": True, "ignore_eos": True, "n_probs": 100}
    ).encode()
    auth = f"Authorization: Bearer {KEY}\r\n"
    post = (
        f"POST /completion HTTP/1.1\r\nHost: x\r\n{auth}X-Conversation-Id: {conv}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    head = f"GET /v1/stream?conv_id={conv} HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode()
    opener, status = _open(server, post)  # generates for seconds; its client reads no more
    assert status == 200
    readers: list[socket.socket] = []
    try:
        for _ in range(16):  # readers that read nothing
            sock, status = _open(server, head)
            readers.append(sock)
            assert status == 200
        extra, status = _open(server, head)  # the 17th is refused
        extra.close()
        assert status == 429
        for sock in readers:
            sock.close()
        readers.clear()
        deadline = time.monotonic() + stretched(10)
        while True:  # the places come back as the server sees the readers gone
            sock, status = _open(server, head)
            sock.close()
            if status == 200:
                break
            assert time.monotonic() < deadline, "the readers' places were not given back"
            time.sleep(0.05)
    finally:
        for sock in readers:
            sock.close()
        opener.close()
        server.request("DELETE", f"/v1/stream?conv_id={conv}")
    assert_serves(server)


# -- the router -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("models")
    shutil.copy(tiny_model_path, folder / "alpha.gguf")
    env = {"MODEL_ENDPOINT": f"http://127.0.0.1:{free_port()}/"}  # no Hub
    with Server(None, "--models-dir", str(folder), "-c", "512", "-t", "2", env=env) as s:
        yield s


def test_the_router_reads_a_form_in_one_pass(router: Server) -> None:
    # repeated name="model" lines: a regex went quadratic (109 KB froze clients 6.7 s)
    hostile = b'Content-Disposition: form-data; name="model"\r\n' * 2400
    headers = {"Content-Type": "multipart/form-data; boundary=b"}
    with HealthProbe(router) as probe:
        t0 = time.monotonic()
        status, _, out = router.request("POST", "/v1/audio/transcriptions", raw=hostile,
                                        headers=headers)  # fmt: skip
        took = time.monotonic() - t0
    assert status == 400, out
    assert out["error"]["message"] == "model name is missing from the request"
    assert took < STALL
    assert probe.worst < STALL
    # a real form still names its model
    form = (
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="model"\r\n\r\nxx\r\n'
        b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nnope\r\n--b--\r\n'
    )
    status, _, out = router.request("POST", "/v1/audio/transcriptions", raw=form, headers=headers)
    assert status == 400
    assert out["error"]["message"] == "model 'nope' not found"


def test_the_router_forwards_any_path(router: Server) -> None:
    status, _, out = router.request("POST", "/tokenize", {"model": "alpha", "content": "x"})
    assert status == 200, out
    # a path beyond Latin-1 reached the child as a 502 with a codec message
    path = "/slots/" + quote("日本") + "?action=erase"
    status, _, out = router.request("POST", path, {"model": "alpha"})
    assert status == 400, out
    assert "codec" not in json.dumps(out)
