"""Row (7b)'s load: N clients at once, each sending requests one after another, every
request generating exactly ``n_predict`` tokens (``ignore_eos``), on ``/completion`` or
``/v1/chat/completions``, streamed or not. Measured: generated tokens per second over
all clients (first send to last reply), each request's time to its first token (a
streamed request: the first event that carries text; a plain one: the whole reply),
and the requests that failed.

The client is raw HTTP/1.1 over asyncio, so that it costs the machine that runs the
servers as little as it can. A streamed reply is cut into lines at ``\\n`` only (never
at U+2028 and the like, which random-weight models emit and some clients split at).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from server_load import PROMPTS

ENDPOINTS = ("/completion", "/v1/chat/completions")


@dataclass(frozen=True)
class Load:
    endpoint: str
    stream: bool
    n_clients: int
    n_requests: int = 2
    n_predict: int = 128
    #: client i's requests go to slot id_slots[i % len] (llama-server's id_slot); ():
    #: the server chooses
    id_slots: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        mode = "stream" if self.stream else "non-stream"
        return f"{self.n_clients} clients, {self.endpoint}, {mode}"


@dataclass
class Outcome:
    tokens_per_s: float
    ttft: list[float] = field(default_factory=list)  #: seconds, one per request that ended well
    failed: list[str] = field(default_factory=list)  #: what went wrong, one per failed request

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the times to first token, in ms (nearest rank)."""
        xs = sorted(self.ttft)
        return 1e3 * xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def body(load: Load, prompt: str, client: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"stream": load.stream, "ignore_eos": True}
    if load.id_slots:
        out["id_slot"] = load.id_slots[client % len(load.id_slots)]
    if load.endpoint == "/completion":
        out |= {"prompt": prompt, "n_predict": load.n_predict}
    else:
        out |= {"messages": [{"role": "user", "content": prompt}], "max_tokens": load.n_predict}
        if load.stream:
            out["stream_options"] = {"include_usage": True}
    return out


def _n_tokens(event: dict[str, Any]) -> int | None:
    """The generated token count a final reply (or a stream's last event) reports."""
    if "tokens_predicted" in event and event.get("stop"):
        return int(event["tokens_predicted"])
    usage = event.get("usage")
    if isinstance(usage, dict) and "completion_tokens" in usage:
        return int(usage["completion_tokens"])
    return None


def _has_text(event: dict[str, Any]) -> bool:
    if event.get("content"):
        return True
    for choice in event.get("choices") or ():
        if (choice.get("delta") or {}).get("content") or choice.get("text"):
            return True
    return False


class _Chunked:
    """Incremental decoding of an HTTP/1.1 chunked body."""

    def __init__(self) -> None:
        self.raw = b""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self.raw += data
        out = bytearray()
        while not self.done:
            head, sep, rest = self.raw.partition(b"\r\n")
            if not sep:
                break
            size = int(head.split(b";")[0], 16)
            if size == 0:
                self.done = True
                break
            if len(rest) < size + 2:
                break
            out += rest[:size]
            self.raw = rest[size + 2 :]
        return bytes(out)


async def _request(port: int, load: Load, prompt: str, client: int) -> tuple[float, int]:
    """One request: (seconds to its first token, tokens generated)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        data = json.dumps(body(load, prompt, client)).encode()
        head = (
            f"POST {load.endpoint} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        )
        t0 = time.perf_counter()
        writer.write(head.encode() + data)
        await writer.drain()
        headers = await reader.readuntil(b"\r\n\r\n")
        status = int(headers.split(b" ", 2)[1])
        chunked = b"transfer-encoding: chunked" in headers.lower()
        dechunk = _Chunked()
        payload = b""
        first = 0.0
        n: int | None = None
        while True:
            piece = await reader.read(65536)
            if not piece:
                break
            payload += dechunk.feed(piece) if chunked else piece
            if status != 200 or not load.stream:
                if chunked and dechunk.done:
                    break
                continue
            *lines, payload = payload.split(b"\n")
            for line in lines:
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if not first and _has_text(event):
                    first = time.perf_counter() - t0
                n = _n_tokens(event) if n is None else n
            if chunked and dechunk.done:
                break
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        if not load.stream:
            first = time.perf_counter() - t0
            n = _n_tokens(json.loads(payload))
        if n is None:
            raise RuntimeError("the reply did not say how many tokens it generated")
        if n != load.n_predict:
            raise RuntimeError(f"{n} tokens generated, not {load.n_predict}")
        if not first:
            raise RuntimeError("no event carried text")
        return first, n
    finally:
        writer.close()


async def _client(port: int, load: Load, i: int, out: Outcome, counts: list[int]) -> None:
    for r in range(load.n_requests):
        prompt = PROMPTS[(i + r) % len(PROMPTS)] + f" (story {i}.{r})"
        try:
            first, n = await _request(port, load, prompt, i)
        except Exception as exc:  # counted: a failure is a result too
            out.failed.append(repr(exc)[:200])
            continue
        out.ttft.append(first)
        counts.append(n)


def run(port: int, load: Load) -> Outcome:
    """Run ``load`` against the server on ``port``."""
    out = Outcome(0.0)
    counts: list[int] = []

    async def main() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(port, load, i, out, counts) for i in range(load.n_clients)))
        return time.perf_counter() - t0

    seconds = asyncio.run(main())
    out.tokens_per_s = sum(counts) / seconds
    return out


def summary(results: list[Outcome]) -> str:
    rates = [r.tokens_per_s for r in results]
    p50 = [r.quantile(0.5) for r in results]
    failed = sum(len(r.failed) for r in results)
    return f"{statistics.median(rates):.0f} tok/s, TTFT p50 {statistics.median(p50):.0f} ms" + (
        f", {failed} failed" if failed else ""
    )
