"""How a streamed answer is written (``llama_cy/server/event_stream.py``): a write per
step, and the last events, ``[DONE]`` and the end of the body in one, on the tiny model."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import Server


@pytest.fixture(scope="module")
def server(tiny_model_path: Path) -> Iterator[Server]:
    with Server(tiny_model_path, "-c", "1024", "-np", "2", "-t", "2") as s:
        yield s


def http_chunks(port: int, path: str, body: dict[str, Any], headers: str = "") -> list[bytes]:
    """The chunks of a chunked answer to a POST, as the server wrote them."""
    data = json.dumps(body)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n{data}".encode()
        )
        raw = b""
        while piece := sock.recv(65536):
            raw += piece
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head.lower()
    chunks: list[bytes] = []
    while True:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return chunks
        chunks.append(rest[:n])
        rest = rest[n + 2 :]


def events(chunk: bytes) -> list[dict[str, Any]]:
    return [json.loads(e[6:]) for e in chunk.decode().split("\n\n") if e.startswith("data: {")]


def test_a_stream_ends_in_one_write(server: Server) -> None:
    """The last token's events, ``[DONE]`` and the end of the body go out together: a
    streamed request costs the event loop no write of its own to close it."""
    body = {"prompt": "Hi", "max_tokens": 3, "stream": True, "ignore_eos": True}
    chunks = http_chunks(server.port, "/v1/completions", body)
    assert all(chunks), "an empty chunk before the end"
    assert chunks[-1].endswith(b"data: [DONE]\n\n")
    assert events(chunks[-1])[-1]["choices"][0]["finish_reason"] == "length"
    # /completion sends no [DONE]: its final event closes the body
    native = http_chunks(server.port, "/completion", {**body, "n_predict": 3})
    assert all(native)
    assert events(native[-1])[-1]["stop"] is True


def test_a_resumable_stream_ends_whole(server: Server) -> None:
    """A stream with ``X-Conversation-Id`` keeps Starlette's response (its generation
    outlives the client): every event arrives, [DONE] last."""
    body = {"prompt": "Hi", "max_tokens": 3, "stream": True, "ignore_eos": True}
    chunks = http_chunks(server.port, "/v1/completions", body, "X-Conversation-Id: c1\r\n")
    text = b"".join(chunks)
    assert text.endswith(b"data: [DONE]\n\n")
    assert events(text)[-1]["choices"][0]["finish_reason"] == "length"


def test_the_head_goes_out_with_the_first_event(server: Server) -> None:
    """The status line and headers wait for the first event and go out in the same
    write (one system call and one wake-up of the client where there were two), as
    llama-server sends its head once its first result is in."""
    data = json.dumps({"prompt": "Hi", "n_predict": 4, "stream": True, "ignore_eos": True})
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            f"POST /completion HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n{data}".encode()
        )
        first = sock.recv(65536)  # what the server's first write carried
        while sock.recv(65536):
            pass
    head, sep, rest = first.partition(b"\r\n\r\n")
    assert sep, first[:200]
    assert head.startswith(b"HTTP/1.1 200"), first[:200]
    assert b"data: {" in rest, "the head came alone"
    assert events(rest.partition(b"\r\n")[2])[0]["tokens_predicted"] == 1
