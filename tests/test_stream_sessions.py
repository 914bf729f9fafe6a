"""llama-server's resumable streams (server-stream.cpp): a streamed generation asked with
``X-Conversation-Id`` goes on when its client leaves; ``GET /v1/stream`` replays and
follows it, ``POST /v1/streams/lookup`` reports it, ``DELETE /v1/stream`` stops it; in
a single server and through the router, on the tiny model."""

from __future__ import annotations

import asyncio
import gc
import http.client
import json
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from offload import timeout as stretched
from serving import Server, free_port, sse_events

from llama_cy.server.stream_sessions import MAX_BYTES, READ_CHUNK, StreamSession, StreamSessions

CONV = "conv-1::org/tiny:Q8_0"  # a model name with slashes travels in the query string
QS = "conv_id=" + quote(CONV, safe="")


@pytest.fixture(scope="module")
def server(tiny_model_path: Path) -> Any:
    with Server(tiny_model_path, "-c", "8192", "-np", "2", "-t", "2") as s:
        yield s


def start_stream(s: Server, max_tokens: int, conv: str = CONV, path: str = "/v1/completions",
                 model: str | None = None) -> tuple[http.client.HTTPConnection, Any]:  # fmt: skip
    body: dict[str, Any] = {"prompt": "Once upon a time", "max_tokens": max_tokens,
                            "temperature": 0, "stream": True, "ignore_eos": True}  # fmt: skip
    if model is not None:
        body["model"] = model
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=stretched(60))
    conn.request("POST", path, json.dumps(body), {"X-Conversation-Id": conv,
                                                  "Content-Type": "application/json"})  # fmt: skip
    resp = conn.getresponse()
    assert resp.status == 200
    return conn, resp


def replay(s: Server, query: str = QS) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=stretched(60))
    conn.request("GET", f"/v1/stream?{query}")
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


def lookup(s: Server, *ids: str) -> Any:
    status, _, out = s.request("POST", "/v1/streams/lookup", {"conversation_ids": list(ids)})
    assert status == 200, out
    return out


def texts(data: bytes) -> list[Any]:
    return sse_events(data.splitlines())


def test_a_finished_stream_replays_from_any_offset(server: Server) -> None:
    conn, resp = start_stream(server, 8)
    whole = resp.read()
    conn.close()
    events = texts(whole)
    assert events[-1] == "[DONE]"
    assert len([e for e in events if e != "[DONE]" and e["choices"][0]["text"]]) >= 1
    assert replay(server) == (200, whole)  # byte for byte what the client got
    assert replay(server, QS + "&from=10") == (200, whole[10:])
    assert replay(server, QS + f"&from={len(whole) + 5}") == (200, b"")
    (state,) = lookup(server, "conv-1")  # an id matches its "<id>::<model>" sessions
    assert state["conversation_id"] == CONV
    assert state["is_done"] is True
    assert state["total_bytes"] == len(whole)
    assert state["completed_at"] >= state["started_at"] > 0
    assert lookup(server, "conv", "other") == []  # no enumeration of others' sessions
    assert server.request("DELETE", f"/v1/stream?{QS}")[0] == 204
    assert replay(server)[0] == 404
    assert server.request("DELETE", f"/v1/stream?{QS}")[0] == 204  # idempotent


def test_a_session_outlives_its_client(server: Server) -> None:
    conv = "conv-left"
    conn, resp = start_stream(server, 600, conv=conv)
    first = resp.readline()
    assert first.startswith(b"data: ")
    conn.close()  # the client leaves after the first event
    deadline = time.monotonic() + stretched(60)
    while not lookup(server, conv)[0]["is_done"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status, data = replay(server, f"conv_id={conv}&from=0")
    assert status == 200
    events = texts(data)
    assert events[-1] == "[DONE]"  # generated to the end without a client
    finish = [e["choices"][0]["finish_reason"] for e in events[:-1]]
    assert finish[-1] == "length"
    usage = [e.get("usage") for e in events[:-1] if e.get("usage")]
    assert not usage or usage[-1]["completion_tokens"] == 600


def test_a_stop_ends_the_generation(server: Server) -> None:
    conv = "conv-stopped"
    conn, resp = start_stream(server, 7000, conv=conv)
    assert resp.readline().startswith(b"data: ")
    t0 = time.monotonic()
    assert server.request("DELETE", f"/v1/stream?conv_id={conv}")[0] == 204
    rest = resp.read()  # the client's stream ends with the stop, without [DONE]
    conn.close()
    assert b"[DONE]" not in rest
    assert time.monotonic() - t0 < stretched(30)
    assert server.wait_idle(stretched(10)) >= 0  # the slot is free again
    assert replay(server, f"conv_id={conv}")[0] == 404
    assert lookup(server, conv) == []


def test_a_newer_request_replaces_the_session(server: Server) -> None:
    conv = "conv-twice"
    conn, resp = start_stream(server, 7000, conv=conv)
    assert resp.readline().startswith(b"data: ")
    conn2, resp2 = start_stream(server, 4, conv=conv)  # the first one is cancelled
    second = resp2.read()
    conn2.close()
    assert b"[DONE]" not in resp.read()
    conn.close()
    assert replay(server, f"conv_id={conv}") == (200, second)


def test_a_whole_answer_leaves_no_session(server: Server) -> None:
    body = {"prompt": "Hi", "max_tokens": 2, "temperature": 0}
    status, _, _ = server.request(
        "POST", "/v1/completions", body, headers={"X-Conversation-Id": "conv-whole"}
    )
    assert status == 200
    assert lookup(server, "conv-whole") == []


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/v1/stream", None, 400),  # no conv_id
        ("GET", "/v1/stream?conv_id=nope", None, 404),
        ("GET", f"/v1/stream?{QS}&from=x", None, 400),
        ("DELETE", "/v1/stream", None, 400),
        ("POST", "/v1/streams/lookup", b"{not json", 400),
    ],
)
def test_bad_stream_requests(
    server: Server, method: str, path: str, body: bytes | None, status: int
) -> None:
    if "from=x" in path:  # a session to ask about
        conn, resp = start_stream(server, 2)
        resp.read()
        conn.close()
    got, _, out = server.request(method, path, raw=body)
    assert got == status, out
    assert "error" in out
    assert lookup(server, "") == []  # empty ids are dropped
    status2, _, out2 = server.request("POST", "/v1/streams/lookup", {"conversation_ids": 3})
    assert (status2, out2) == (200, [])


def test_streams_through_the_router(tmp_path: Path, tiny_model_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MODEL_ENDPOINT", f"http://127.0.0.1:{free_port()}/")
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(tiny_model_path, folder / "alpha.gguf")
    conv = "conv-r::alpha"
    with Server(None, "--models-dir", str(folder), "-t", "2", "-c", "2048") as router:
        assert replay(router, f"conv_id={conv}")[0] == 404  # nothing routed yet
        conn, resp = start_stream(router, 6, conv=conv, model="alpha")
        whole = resp.read()
        conn.close()
        assert texts(whole)[-1] == "[DONE]"
        assert replay(router, f"conv_id={quote(conv)}&from=0") == (200, whole)
        (state,) = lookup(router, conv)
        assert state["total_bytes"] == len(whole)
        # The router finds a child by the exact id it routed (llama-server's too), so a
        # bare "<id>" does not reach the child's "<id>::<model>" matching.
        assert lookup(router, "conv-r") == []
        status, _, out = router.request("POST", "/v1/streams/lookup", raw=b"{nope")
        assert (status, out) == (200, [])  # the router answers [] where a child says 400
        assert router.request("DELETE", f"/v1/stream?conv_id={quote(conv)}")[0] == 204
        assert replay(router, f"conv_id={quote(conv)}")[0] == 404
        assert lookup(router, conv) == []


def test_lookup_finds_ids_through_an_index() -> None:
    async def main() -> None:
        sessions = StreamSessions()
        keys = [f"c{i}::org/m:Q8_0" for i in range(340)] + ["c1", "c1::a::b", "c10"]
        for key in keys:
            sessions.create(key)

        def scan(ids: list[str]) -> list[str]:  # llama-server's: every session, every id
            return [k for rid in ids for k in keys if k == rid or k.startswith(rid + "::")]

        for ids in (["c1"], ["c1::a"], ["c1", "c1", "nope", "c10"], ["c1::org/m:Q8_0"]):
            found = [s["conversation_id"] for s in sessions.lookup(ids)]
            assert sorted(found) == sorted(scan(ids)), ids
        sessions.stop("c1::a::b")
        assert sessions.lookup(["c1::a"]) == []
        assert {s["conversation_id"] for s in sessions.lookup(["c1"])} == {"c1", "c1::org/m:Q8_0"}
        # 100k ids against 340 live sessions took 12.4 s on the event loop (a scan)
        many = [f"x{i}" for i in range(100_000)]
        t0 = time.perf_counter()
        assert sessions.lookup(many) == []
        assert time.perf_counter() - t0 < 0.5
        sessions.close()

    asyncio.run(main())


def test_a_reader_is_handed_the_buffer_a_chunk_at_a_time() -> None:
    async def main() -> None:
        session = StreamSession("c")
        session.append(b"x" * MAX_BYTES)
        session.finish()
        reader = session.read(0)
        assert session.readers == 1  # counted from the call, begun or not
        first = await anext(reader)
        assert len(first) == READ_CHUNK  # not a copy of the whole 4 MiB per reader
        rest = b"".join([chunk async for chunk in reader])
        assert len(first) + len(rest) == MAX_BYTES
        del reader
        gc.collect()
        assert session.readers == 0

    asyncio.run(main())
