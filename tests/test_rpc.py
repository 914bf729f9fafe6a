"""ggml's RPC backend: Gemma 3 270M spread over two ``llama-cy rpc-server`` processes on
loopback gives the same greedy text as a local run.

The client runs in a child interpreter: ggml registers RPC devices for the life of a
process, and the rest of the suite must not see them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from child import run_python
from serving import free_port

import llama_cy as lc

pytestmark = pytest.mark.skipif(
    not lc.supports_rpc(), reason="built with -Drpc=false (the default build has RPC)"
)

# A forced continuation: a free one ("The capital of France is") meets a near tie within 24
# tokens, and a model split over three devices rounds otherwise than one whole (lavapipe,
# offloaded: the texts parted at the 11th token). Counting still needs every layer right.
PROMPT = "Count: 1, 2, 3, 4, 5, 6,"

CLIENT = """
import json, logging, sys
import llama_cy as lc
lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
log = logging.getLogger("llama_cy")
log.setLevel(logging.INFO)
log.addHandler(Keep())
path, servers, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
def greedy(llm):
    return llm.create_completion(prompt, max_tokens=24, temperature=0)["choices"][0]["text"]
# The local reference keeps its weights in plain buffers, as an RPC server does (the CPU
# backend's repacked layouts compute in another order, which can change greedy text).
with lc.LlamaModel.load(path, use_extra_bufts=False) as model:
    local = greedy(lc.Llama.from_model(model, n_ctx=512, n_threads=2))
llm = lc.Llama(path, n_gpu_layers=-1, rpc_servers=servers, n_ctx=512, n_threads=2)
print(json.dumps({"local": local, "rpc": greedy(llm), "log": lines}))
"""


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"rpc-server exited: {err}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"rpc-server did not listen on {port}")


@pytest.fixture
def rpc_servers() -> Iterator[list[str]]:
    procs, endpoints = [], []
    try:
        for _ in range(2):
            port = free_port()
            cmd = [sys.executable, "-m", "llama_cy", "rpc-server", "-p", str(port), "-t", "1"]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs.append(proc)
            _wait_port(port, proc)
            endpoints.append(f"127.0.0.1:{port}")
        yield endpoints
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_model_across_two_rpc_servers_matches_local(
    rpc_servers: list[str], gemma_path: Path
) -> None:
    result = run_python(CLIENT, str(gemma_path), ",".join(rpc_servers), PROMPT)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["rpc"] == got["local"]
    assert len(got["rpc"]) > 20
    # The weights went to both servers, not to the local CPU.
    for endpoint in rpc_servers:
        assert any(endpoint in line and "buffer size" in line for line in got["log"]), endpoint


def test_bad_rpc_endpoints(gemma_path: Path) -> None:
    code = (
        "import llama_cy as lc, sys\n"
        "from llama_cy._rpc import rpc_devices\n"
        "for bad in ['nohost', 'host:port']:\n"
        "    try:\n"
        "        rpc_devices([bad])\n"
        "    except ValueError as e:\n"
        "        print('ValueError', e)\n"
        "try:\n"
        "    lc.LlamaModel.load(sys.argv[1], n_gpu_layers=-1, rpc_servers=sys.argv[2])\n"
        "except lc.LlamaError as e:\n"
        "    print('LlamaError', e)\n"
    )
    result = run_python(code, str(gemma_path), f"127.0.0.1:{free_port()}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ValueError") == 2
    assert "LlamaError no RPC server answered" in result.stdout
