"""llama-server's ``-fit`` (``llama_cy.fit_params``, common/fit.cpp): the arguments left at
their defaults chosen so that the model and its context leave a margin of each device's
memory free. Without a GPU the host's memory is fitted, and an ``llama-cy rpc-server`` on
loopback stands in for a GPU whose memory is short; on a machine with a GPU (the device
check, ``tools/gpu_check.sh``) the GPU's own memory is fitted as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child import run_python
from serving import Server
from tiny_model import write_tiny_llama

import llama_cy as lc

N_LAYER = 3
HUGE = 1 << 60  # bytes: more memory than any machine has
GPUS = [d for d in lc.devices() if d.type in ("gpu", "igpu")]
#: What a margin no device can leave ends in: with no GPU, the host's memory is short and
#: the fit fails; with one, the margin is the GPU's and the layers go to the host.
SHORT = "success" if GPUS else "failure"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fit") / "tiny.gguf"
    return write_tiny_llama(path, n_layer=N_LAYER, n_ctx_train=2048)


def test_host_memory_fit(model: Path) -> None:
    roomy = lc.fit_params(model, n_ctx=0)
    assert roomy["status"] == "success"
    assert roomy["n_ctx"] == 2048  # -c 0: the training context, as it fits
    assert roomy["n_gpu_layers"] == -1
    assert roomy["tensor_overrides"] == []
    # a margin no device can leave: the context shrinks to its floor, and that is not enough
    tight = lc.fit_params(model, n_ctx=0, n_ctx_min=128, margins=[HUGE])
    assert tight["status"] == SHORT
    assert tight["n_ctx"] == 128
    # a context that was set is left alone
    assert lc.fit_params(model, n_ctx=512, margins=[HUGE])["n_ctx"] == 512


def test_draft_model_is_fitted_alongside(model: Path, tmp_path: Path) -> None:
    draft = write_tiny_llama(tmp_path / "draft.gguf", n_layer=1)
    both = lc.fit_params(model, n_ctx=0, draft=draft)
    assert both["status"] == "success"
    assert both["n_ctx"] == 2048
    tight = lc.fit_params(model, n_ctx=0, n_ctx_min=128, margins=[HUGE], draft=draft)
    assert (tight["status"], tight["n_ctx"]) == (SHORT, 128)
    with pytest.raises(FileNotFoundError, match="draft model"):
        lc.fit_params(model, draft=tmp_path / "missing.gguf")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"margins": [-1]}, ValueError), ({"n_ctx": -1}, ValueError), ({"margins": []}, ValueError)],
)
def test_bad_arguments(model: Path, kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        lc.fit_params(model, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        lc.fit_params(model.with_name("missing.gguf"))


def test_corrupt_model_is_an_error_status(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    code = """
        import sys
        import llama_cy as lc
        print(lc.fit_params(sys.argv[1])["status"])
        print(lc.fit_params(sys.argv[2])["status"])  # the process still works
    """
    good = write_tiny_llama(tmp_path / "good.gguf", n_layer=1)
    result = run_python(code, str(bad), str(good))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["error", "success"]


CLIENT = """
import json, sys
import llama_cy as lc
from llama_cy._rpc import with_rpc_devices
path, server = sys.argv[1], sys.argv[2]
devs = with_rpc_devices([], server)  # the RPC device alone, whatever GPUs the host has
rpc = next(d for d in devs if d.name.startswith("RPC"))
out = {
    "roomy": lc.fit_params(path, devices=devs, n_ctx=256),
    # keep all the device's free memory free: the layers must go to the CPU
    "tight": lc.fit_params(path, devices=devs, n_ctx=256, margins=[rpc.memory_free]),
}
with lc.LlamaModel.load(path, devices=devs, n_gpu_layers=out["tight"]["n_gpu_layers"]) as m:
    out["on_rpc"] = sorted({b.split("[")[0] for b in m.tensor_buffers.values()})
print(json.dumps(out))
"""


def test_layers_leave_a_device_that_is_short(model: Path, rpc_server: str) -> None:
    result = run_python(CLIENT, str(model), rpc_server)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["roomy"]["n_gpu_layers"] == -1  # everything fits: nothing changes
    tight = got["tight"]
    assert 0 <= tight["n_gpu_layers"] < N_LAYER + 1
    assert "CPU" in got["on_rpc"] or "CPU_Mapped" in got["on_rpc"]


def test_serve_fit_flags(model: Path) -> None:
    # -fitt beyond any host: -c 0 shrinks to -fitc; -fit off keeps the training context
    with Server(model, "-c", "0", "-np", "1", "-fitt", str(HUGE >> 20), "-fitc", "256") as s:
        assert s.request("GET", "/props")[2]["default_generation_settings"]["n_ctx"] == 256
    with Server(model, "-c", "0", "-np", "1", "-fit", "off", "-fitt", str(HUGE >> 20)) as s:
        assert s.request("GET", "/props")[2]["default_generation_settings"]["n_ctx"] == 2048


@pytest.mark.skipif(not GPUS, reason="needs a GPU (the device check: tools/gpu_check.sh)")
def test_layers_leave_a_gpu_that_is_short(model: Path) -> None:
    roomy = lc.fit_params(model, n_ctx=256)
    assert (roomy["status"], roomy["n_gpu_layers"]) == ("success", -1)
    # keep every GPU's free memory free: no layer can stay on one
    margin = max(d.memory_free for d in GPUS)
    tight = lc.fit_params(model, n_ctx=256, margins=[margin])
    assert 0 <= tight["n_gpu_layers"] < N_LAYER + 1
    assert layers_on(model, -1) == N_LAYER
    assert layers_on(model, tight["n_gpu_layers"]) == min(tight["n_gpu_layers"], N_LAYER)


def layers_on(model: Path, n_gpu_layers: int) -> int:
    """How many of the model's repeating layers a load with ``n_gpu_layers`` puts on a GPU."""
    gpus = {d.name for d in GPUS}
    with lc.LlamaModel.load(model, n_gpu_layers=n_gpu_layers) as m:
        return len(
            {
                name.split(".")[1]
                for name, buf in m.tensor_buffers.items()
                if name.startswith("blk.") and buf.split("[")[0] in gpus
            }
        )
