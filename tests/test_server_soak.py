"""A bounded soak of ``llama-cy serve`` on the tiny model: :data:`CLIENTS` clients for
:data:`SECONDS` seconds, streaming and not, on llama-server's and OpenAI's routes, a
tenth of the requests cut off mid-answer (the socket reset). Every request that
completed must be whole, the slots must end idle, and the server's resident memory
must not creep (drift under 20 MB from the end of a warm-up to the end of the run).

``LLAMA_CY_SOAK_SECONDS`` sets the length; the 10-minute run is recorded in
``bench/results/``."""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from offload import timeout as stretched
from serving import HealthProbe, Server, rss_bytes

CLIENTS = 64
SECONDS = float(os.environ.get("LLAMA_CY_SOAK_SECONDS", "60"))
WARMUP_SECONDS = 15.0
ABORT_SHARE = 0.10
MAX_DRIFT = 20 * 1024 * 1024


@dataclass
class Tally:
    completed: int = 0
    aborted: int = 0
    tokens: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def _body(route: str, stream: bool, n: int, rng: random.Random) -> dict[str, object]:
    words = " ".join(rng.choice(["fox", "wood", "river", "stone", "light"]) for _ in range(8))
    common = {"stream": stream, "temperature": rng.choice([0, 0.8]), "seed": rng.randrange(99)}
    if route == "/completion":
        return {"prompt": f"Once upon a time {words}", "n_predict": n, **common}
    return {"messages": [{"role": "user", "content": words}], "max_tokens": n, **common}


def _check(route: str, stream: bool, n: int, status: int, data: bytes) -> tuple[str | None, int]:
    """(what is wrong, or None; tokens generated)."""
    if status != 200:
        return f"{route} stream={stream}: status {status}: {data[:200]!r}", 0
    if not stream:
        out = json.loads(data)
        got = (
            out["tokens_predicted"] if route == "/completion" else out["usage"]["completion_tokens"]
        )
        return (None if 0 < got <= n else f"{route}: {got} tokens of {n}"), got
    events = [line[6:] for line in data.split(b"\n") if line.startswith(b"data: ")]
    if route == "/completion":
        last = json.loads(events[-1]) if events else {}
        ok = last.get("stop") is True and 0 < last.get("tokens_predicted", 0) <= n
        return (None if ok else f"/completion stream ended with {last}"), len(events) - 1
    ok = bool(events) and events[-1] == b"[DONE]"
    return (None if ok else f"{route} stream not ended: {data[-200:]!r}"), len(events) - 2


def _client(server: Server, seed: int, until: float, tally: Tally) -> None:
    rng = random.Random(seed)
    while time.monotonic() < until:
        route = rng.choice(["/completion", "/v1/chat/completions"])
        stream = rng.random() < 0.6
        n = rng.randint(4, 48)
        body = json.dumps(_body(route, stream, n, rng)).encode()
        if rng.random() < ABORT_SHARE:  # leave mid-answer, with a reset
            _abort(server, route, body, rng)
            with tally.lock:
                tally.aborted += 1
            continue
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=stretched(120))
        try:
            conn.request("POST", route, body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            problem, tokens = _check(route, stream, n, resp.status, resp.read())
        except (OSError, ValueError, KeyError, http.client.HTTPException) as exc:
            problem, tokens = f"{route} stream={stream}: {exc!r}", 0
        finally:
            conn.close()
        if problem is not None:
            tally.error(problem)
        else:
            with tally.lock:
                tally.completed += 1
                tally.tokens += tokens


def _abort(server: Server, route: str, body: bytes, rng: random.Random) -> None:
    stream = b'"stream": true' in body
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=stretched(60))
    try:
        head = f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        if stream:
            sock.recv(rng.choice([1, 512, 4096]))  # some of the answer, then gone
        else:
            time.sleep(rng.random() * 0.05)  # gone while it generates
    except OSError:
        pass
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()


def _run(server: Server, seconds: float, seed: int) -> Tally:
    tally = Tally()
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=_client, args=(server, seed * 1000 + i, until, tally))
        for i in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


@pytest.mark.slow
def test_soak(tiny_model_path: Path) -> None:
    # The prompt cache (--cache-ram) keeps slot states by design, up to its size: a
    # small cap keeps it in the run without its growth reading as a leak.
    args = ["-np", "8", "-c", "8192", "-t", "2", "--no-warmup", "--cache-ram", "4"]
    with Server(tiny_model_path, *args) as server:
        warm = _run(server, WARMUP_SECONDS, seed=1)
        assert not warm.errors, warm.errors[:5]
        server.wait_idle(stretched(30))
        rss0 = rss_bytes(server.proc.pid)
        t0 = time.monotonic()
        with HealthProbe(server) as probe:
            tally = _run(server, SECONDS, seed=2)
        took = time.monotonic() - t0
        server.wait_idle(stretched(30))
        rss1 = rss_bytes(server.proc.pid)
        slots = server.slots()
        assert server.proc.poll() is None
    print(
        f"soak: {SECONDS:.0f} s, {CLIENTS} clients: {tally.completed} completed "
        f"({tally.tokens / took:.0f} tokens/s), {tally.aborted} cut off, "
        f"{len(tally.errors)} errors; /health worst {probe.worst * 1e3:.0f} ms; "
        f"RSS {rss0 / 2**20:.1f} -> {rss1 / 2**20:.1f} MiB"
    )
    assert not tally.errors, tally.errors[:5]
    assert tally.completed > CLIENTS
    assert tally.aborted > 0
    assert not any(s["is_processing"] for s in slots)
    assert rss1 - rss0 < MAX_DRIFT, f"RSS grew {(rss1 - rss0) / 2**20:.1f} MiB"
