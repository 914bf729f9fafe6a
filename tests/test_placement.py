"""Where weights go: llama-server's ``-ot``, ``--cpu-moe``, ``--n-cpu-moe`` and
``--n-cpu-ffn`` (``LlamaModel.load(tensor_overrides=...)``), read back through
``LlamaModel.tensor_buffers``.

This machine has no GPU: an ``llama-cy rpc-server`` on loopback is the offload device.
``n_gpu_layers=-1`` puts the layers on it; an override keeps the weights it finds on the
CPU, as experts stay in host memory beside a GPU. The client runs in a child interpreter
(ggml keeps RPC devices registered for the life of a process).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child import run_python
from tiny_model import write_tiny_llama

import llama_cy as lc
from llama_cy import cli
from llama_cy._placement import FFN_DENSE_REGEX, FFN_EXPS_REGEX
from llama_cy.flags.values import tensor_overrides
from llama_cy.server.flag_settings import settings_from_args

N_LAYER = 3


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("moe") / "tiny-moe.gguf"
    return write_tiny_llama(path, n_layer=N_LAYER, n_expert=4, n_expert_used=2)


def device(buffer_type: str) -> str:
    """The device of a buffer type: ``CPU_Mapped`` (weights read from a mapped file) is
    the CPU's, ``RPC0[127.0.0.1:PORT]`` the first RPC server's."""
    return buffer_type.split("[")[0].removesuffix("_Mapped")


def serve_overrides(*argv: str) -> list[tuple[str, str]] | None:
    args = cli.parser().parse_args(["serve", *argv])
    return settings_from_args(args, "x.gguf").load["tensor_overrides"]  # type: ignore[no-any-return]


CLIENT = """
import json, sys
import llama_cy as lc
from llama_cy import cli
from llama_cy.flags.values import tensor_overrides
path, server = sys.argv[1], sys.argv[2]
out = {}
for name, argv in json.loads(sys.argv[3]).items():
    args = cli.parser().parse_args(["run", *argv])
    with lc.LlamaModel.load(path, n_gpu_layers=-1, rpc_servers=server,
                            tensor_overrides=tensor_overrides(args.tensor_overrides)) as model:
        llm = lc.Llama.from_model(model, n_ctx=256, n_threads=2)
        text = llm.create_completion("Once upon a time", max_tokens=16, temperature=0)
        out[name] = {"text": text["choices"][0]["text"], "buffers": model.tensor_buffers}
        llm.close()
print(json.dumps(out))
"""


def test_moe_weights_are_placed_as_llama_server_places_them(moe: Path, rpc_server: str) -> None:
    runs = {
        "plain": [],
        "n_cpu_moe": ["--n-cpu-moe", "2"],
        "cpu_moe": ["--cpu-moe"],
        # first match wins: the RPC device's own buffer type for layer 2's up experts
        "ot": ["-ot", r"blk\.2\.ffn_up_exps=RPC0[" + rpc_server + "]", "--cpu-moe"],
    }
    result = run_python(CLIENT, str(moe), rpc_server, json.dumps(runs))
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)

    def where(run: str, name: str) -> str:
        return device(got[run]["buffers"][name])

    experts = [f"blk.{i}.ffn_{k}_exps.weight" for i in range(N_LAYER) for k in ("up", "down")]
    experts += [f"blk.{i}.ffn_gate_exps.weight" for i in range(N_LAYER)]
    assert {where("plain", e) for e in experts} == {"RPC0"}
    for e in experts:
        layer = int(e.split(".")[1])
        assert where("n_cpu_moe", e) == ("CPU" if layer < 2 else "RPC0"), e
        assert where("cpu_moe", e) == "CPU", e
        assert where("ot", e) == ("RPC0" if e == "blk.2.ffn_up_exps.weight" else "CPU"), e
    # Attention, norms and the router stay on the device in every run.
    for run in runs:
        for name in ("blk.0.attn_q.weight", "blk.2.ffn_gate_inp.weight"):
            assert where(run, name) == "RPC0", (run, name)
    # Where a weight lies does not change what the model computes.
    assert len(got["plain"]["text"]) > 10
    for run in runs:
        assert got[run]["text"] == got["plain"]["text"], run


def test_n_cpu_ffn_keeps_dense_ffn_weights_on_the_cpu(tmp_path: Path, rpc_server: str) -> None:
    dense = write_tiny_llama(tmp_path / "dense.gguf", n_layer=N_LAYER)
    runs = {"plain": [], "ncffn": ["-ncffn", "1"]}
    result = run_python(CLIENT, str(dense), rpc_server, json.dumps(runs))
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    buffers = got["ncffn"]["buffers"]
    for i in range(N_LAYER):
        for k in ("up", "down", "gate"):
            want = "CPU" if i == 0 else "RPC0"
            assert device(buffers[f"blk.{i}.ffn_{k}.weight"]) == want
    assert got["ncffn"]["text"] == got["plain"]["text"]


SERVE_LOAD = """
import json, sys
from llama_cy import cli
from llama_cy.server.flag_settings import settings_from_args
from llama_cy.server.settings import fit, load_model
path = sys.argv[1]
out = {}
for name, argv in json.loads(sys.argv[2]).items():
    settings = fit(settings_from_args(cli.parser().parse_args(["serve", *argv]), path))
    with load_model(settings) as model:
        out[name] = sorted(set(model.tensor_buffers.values()))
print(json.dumps(out))
"""


def test_serve_devices_name_rpc_devices(tmp_path: Path, rpc_server: str) -> None:
    """-dev with --rpc, as llama-server reads them: the RPC servers' devices are
    registered first, so -dev names them (RPC0); -dev's list is then the whole list
    (none: nothing offloaded, --rpc or not)."""
    path = write_tiny_llama(tmp_path / "m.gguf", n_layer=N_LAYER)
    rpc = ["--rpc", rpc_server, "-ngl", "99", "-c", "256"]
    # "named" first: no earlier load has registered the RPC device
    runs = {"named": [*rpc, "-dev", "RPC0"], "none": [*rpc, "-dev", "none"], "default": rpc,
            "tensor": [*rpc, "-sm", "tensor"]}  # fmt: skip
    result = run_python(SERVE_LOAD, str(path), json.dumps(runs))
    assert result.returncode == 0, result.stderr
    got = {k: {device(b) for b in v} for k, v in json.loads(result.stdout).items()}
    assert "RPC0" in got["default"]
    assert "RPC0" in got["named"]
    assert got["none"] == {"CPU"}  # it had the RPC device appended after -dev's list
    assert "Meta()" in got["tensor"]  # -sm tensor: llama.cpp's split weights (a meta buffer)
    assert "Meta()" not in got["default"]


def test_flags_keep_their_order_environment_first(monkeypatch: pytest.MonkeyPatch) -> None:
    assert serve_overrides() is None
    assert serve_overrides("-ot", "a=CPU,b=CPU", "--cpu-moe", "-ncmoe", "1", "-ot", "c=CPU") == [
        ("a", "CPU"),
        ("b", "CPU"),
        (FFN_EXPS_REGEX, "CPU"),
        (r"blk\.0" + FFN_EXPS_REGEX, "CPU"),
        ("c", "CPU"),
    ]
    # llama.cpp reads its LLAMA_ARG_* variables before the command line.
    monkeypatch.setenv("LLAMA_ARG_N_CPU_FFN", "2")
    assert serve_overrides("-ot", "c=CPU") == [
        (r"blk\.0" + FFN_DENSE_REGEX, "CPU"),
        (r"blk\.1" + FFN_DENSE_REGEX, "CPU"),
        ("c", "CPU"),
    ]
    assert tensor_overrides([("n_cpu_moe_draft", 1)]) == [(r"blk\.0" + FFN_EXPS_REGEX, "CPU")]
    args = cli.parser().parse_args(["serve", "-otd", "x=CPU", "-cmoed"])
    settings = settings_from_args(args, "x.gguf")
    assert settings.load_draft["tensor_overrides"] == [("x", "CPU"), (FFN_EXPS_REGEX, "CPU")]
    with pytest.raises(SystemExit, match="PATTERN=BUFFER_TYPE"):
        serve_overrides("-ot", "no-equals")


def test_bad_overrides_raise_and_loading_still_works(moe: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown buffer type 'GPU7'; available: .*CPU"):
        lc.LlamaModel.load(moe, tensor_overrides=[("exps", "GPU7")])
    # std::regex (ECMAScript) would throw inside llama.cpp's loader: refused before it.
    with pytest.raises(ValueError, match="ffn_\\(up"):
        lc.LlamaModel.load(moe, tensor_overrides=[("ffn_(up", "CPU")])
    with pytest.raises(TypeError, match="pairs"):
        lc.LlamaModel.load(moe, tensor_overrides=["exps=CPU"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="pairs of str"):
        lc.LlamaModel.load(moe, tensor_overrides=[("exps", 0)])  # type: ignore[list-item]
    assert "CPU" in lc.buffer_types()
    with lc.LlamaModel.load(moe, tensor_overrides=[("exps", "CPU")], use_mmap=False) as model:
        placed = model.tensor_buffers
        assert placed["blk.1.ffn_down_exps.weight"] == "CPU"
        assert len(placed) == 3 + N_LAYER * 10
