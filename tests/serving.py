"""Start ``llama-cy serve`` in a child process on a free loopback port, for the tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offload import timeout as stretched


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """A ``llama-cy serve`` child process; ``close()`` stops it and checks it exited."""

    def __init__(
        self,
        model: Path | None,
        *args: str,
        api_key: str | None = None,
        env: dict[str, str] | None = None,
        port: int | None = None,
        health: str = "/health",
    ) -> None:
        self.port = port or free_port()
        self.health = health
        self.api_key = api_key
        cmd = [
            sys.executable,
            "-m",
            "llama_cy",
            "serve",
            *(["-m", str(model)] if model is not None else []),  # none: router mode
            "--port",
            str(self.port),
        ]
        cmd += list(args)
        if api_key is not None:
            cmd += ["--api-key", api_key]
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_ready(self, timeout: float = stretched(120.0)) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {self.output()}")
            try:
                with urllib.request.urlopen(self.url + self.health, timeout=1) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                time.sleep(0.1)
        raise RuntimeError(f"the server did not start in {timeout} s: {self.output()}")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> tuple[int, dict[str, str], Any]:
        """(status, lower-cased headers, JSON or text); errors are returned, not raised."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json", **(headers or {})}
        if auth and self.api_key is not None:
            h.setdefault("Authorization", f"Bearer {self.api_key}")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=stretched(120)) as r:
                status, hdrs, payload = r.status, _lower(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, payload = e.code, _lower(e.headers), e.read()
        text = payload.decode()
        try:
            return status, hdrs, json.loads(text)
        except ValueError:
            return status, hdrs, text

    def slots(self) -> list[dict[str, Any]]:
        status, _, body = self.request("GET", "/slots")
        assert status == 200, body
        assert isinstance(body, list)
        return body

    def wait_idle(self, timeout: float) -> float:
        """Seconds until every slot is idle; AssertionError after ``timeout``."""
        t0 = time.monotonic()
        while True:
            if not any(s["is_processing"] for s in self.slots()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"slots still busy after {timeout} s: {self.slots()}")
            time.sleep(0.02)

    def close(self) -> None:
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            self.log.close()
        assert code in (0, -15), f"the server exited with {code}"

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_PROBE = """
import json, sys, threading, time, urllib.request
url, stop = sys.argv[1], threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
latencies, failures = [], []
while not stop.is_set():
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            if r.status != 200:
                failures.append(f"status {r.status}")
    except OSError as exc:
        failures.append(repr(exc))
    latencies.append(time.perf_counter() - t0)
    stop.wait(0.02)
print(json.dumps({"latencies": latencies, "failures": failures}))
"""


class HealthProbe:
    """``GET /health`` every 20 ms from a process of its own (the test's own work, such
    as parsing a large answer, would delay a thread) while the block runs: ``worst`` is
    the slowest answer (seconds), which says how long the server's event loop was held.
    Every probe must answer 200."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.latencies: list[float] = []
        self._proc: subprocess.Popen[str] | None = None

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    def __enter__(self) -> HealthProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _PROBE, self.server.url + "/health"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.3)  # it starts, and probes a few times before the request
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        time.sleep(0.1)
        out, _ = self._proc.communicate(timeout=60)
        report = json.loads(out)
        self.latencies = report["latencies"]
        assert len(self.latencies) > 3, report
        assert not report["failures"], report["failures"]


def rss_bytes(pid: int) -> int:
    """The resident set of process ``pid`` (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def sse_events(lines: Sequence[bytes]) -> list[Any]:
    """The JSON payloads of ``data:`` lines (``[DONE]`` as the string)."""
    out = []
    for line in lines:
        if line.startswith(b"data: "):
            payload = line[6:].strip()
            out.append(payload.decode() if payload == b"[DONE]" else json.loads(payload))
    return out


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def start_module(
    *args: str,
    env: dict[str, str] | None = None,
    port: int | None = None,
    module: str = "llama_cpp.server",
    cwd: Path | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """``python -m module --host --port args`` (llama_cpp.server, or uvicorn), once it
    answers /health."""
    port = port or free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (the child's; a pipe could fill and block it)
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(log.read().decode()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start")


def post(port: int, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=30)
