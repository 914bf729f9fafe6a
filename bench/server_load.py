"""Aggregate generation speed of an OpenAI-compatible server under N concurrent clients.

Each client sends its requests one after another to ``/v1/completions``, greedy, with
the end-of-generation tokens biased away so that every request generates exactly
``max_tokens`` tokens on every server. The load generator is a few coroutines over
raw HTTP/1.1 (no client library), so it costs the 2-core machine as little as it can.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

PROMPTS = [
    "The history of the printing press begins",
    "In a small village by the sea, there lived",
    "The most important rule of cooking is",
    "Once upon a time, a curious robot",
    "The theory of relativity explains",
    "A good night's sleep matters because",
    "The old lighthouse keeper remembered",
    "To build a wooden boat, you first",
]


async def _post(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    status = int(raw.split(b" ", 2)[1])
    payload = raw.split(b"\r\n\r\n", 1)[1]
    if b"transfer-encoding: chunked" in raw.split(b"\r\n\r\n", 1)[0].lower():
        payload = _unchunk(payload)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {payload[:300]!r}")
    result: dict[str, Any] = json.loads(payload)
    return result


def post(port: int, path: str, body: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """One JSON request to a server on loopback, waited for."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        result: dict[str, Any] = json.loads(r.read())
        return result


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


async def _client(
    port: int, i: int, n_requests: int, body: dict[str, Any], counts: list[int]
) -> None:
    for r in range(n_requests):
        prompt = PROMPTS[(i + r) % len(PROMPTS)] + f" (story {i}.{r})"
        result = await _post(port, "/v1/completions", {**body, "prompt": prompt})
        counts.append(int(result["usage"]["completion_tokens"]))


def aggregate_speed(
    port: int, model: str, n_clients: int, n_requests: int, max_tokens: int, no_eog: list[int]
) -> float:
    """Generated tokens per second over all clients, from the first send to the last reply."""
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "logit_bias": {str(t): -100 for t in no_eog},
    }
    counts: list[int] = []

    async def run() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(
            *(_client(port, i, n_requests, body, counts) for i in range(n_clients))
        )
        return time.perf_counter() - t0

    seconds = asyncio.run(run())
    if any(c != max_tokens for c in counts):
        raise RuntimeError(f"a server generated {counts} tokens, not {max_tokens} each")
    return sum(counts) / seconds


class ServerProcess:
    """A server started from a command line, ready once ``/v1/models`` answers."""

    def __init__(self, cmd: list[str], port: int, log: Path) -> None:
        self.port = port
        self._log = open(log, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited with {self.proc.returncode}; see {log}")
            try:
                url = f"http://127.0.0.1:{port}/v1/models"
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{cmd[0]} did not start; see {log}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
