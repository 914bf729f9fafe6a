"""Process-wide state: version, capabilities, devices, NUMA, and llama.cpp's log."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import llama_cy
from llama_cy._build_config import CMAKE_ARGS, LIBRARIES


def test_versions_come_from_their_one_place() -> None:
    import importlib.metadata
    import runpy

    root = Path(__file__).resolve().parent.parent
    fetch = runpy.run_path(str(root / "tools" / "fetch_llama_cpp.py"), run_name="fetch")
    assert f"b{fetch['BUILD']}" == llama_cy.LLAMA_CPP_BUILD
    assert f"-DLLAMA_BUILD_NUMBER={fetch['BUILD']}" in CMAKE_ARGS
    # The package version: meson.build's, as installed and as imported.
    assert llama_cy.__version__ == importlib.metadata.version("llama-cy")
    assert f"version: '{llama_cy.__version__}'" in (root / "meson.build").read_text()


def test_system_info_lists_the_cpu_backend() -> None:
    info = llama_cy.system_info()
    assert "CPU" in info


def test_import_works_from_any_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import llama_cy; print(llama_cy.system_info())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.rstrip("\n") == llama_cy.system_info()


def test_devices_include_the_cpu() -> None:
    devices = llama_cy.devices()
    cpus = [d for d in devices if d.type == "cpu"]
    assert cpus, devices
    cpu = cpus[0]
    assert cpu.backend == "CPU"
    assert cpu.name
    assert cpu.description
    assert 0 < cpu.memory_free <= cpu.memory_total
    assert "Device(name=" in repr(cpu)
    with pytest.raises(AttributeError):
        cpu.name = "x"  # type: ignore[misc]


def test_capabilities() -> None:
    assert llama_cy.supports_mmap() is (os.name == "posix")
    # llama.cpp locks memory with mlock (POSIX) or VirtualLock (Windows).
    assert llama_cy.supports_mlock() is True
    # This build has no GPU backend unless one was asked for at build time; llama.cpp
    # counts the RPC backend (remote devices) as offload too.
    gpu = any(d.type in ("gpu", "igpu") for d in llama_cy.devices())
    rpc = "-DGGML_RPC=ON" in CMAKE_ARGS
    assert llama_cy.supports_rpc() is rpc
    assert llama_cy.supports_gpu_offload() is (gpu or rpc)


def test_numa_init() -> None:
    llama_cy.numa_init("disabled")
    with pytest.raises(ValueError, match="unknown NUMA strategy"):
        llama_cy.numa_init("everywhere")  # type: ignore[arg-type]


class _GGUFInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


def _ggml_logs_an_error(path: Path) -> None:
    """Ask ggml (in the same process, same libraries) to parse a broken GGUF file."""
    ggml_base = ctypes.CDLL(os.path.join(llama_cy.get_lib_dir(), LIBRARIES["ggml-base"]))
    ggml_base.gguf_init_from_file.restype = ctypes.c_void_p
    ggml_base.gguf_init_from_file.argtypes = [ctypes.c_char_p, _GGUFInitParams]
    assert ggml_base.gguf_init_from_file(os.fsencode(path), _GGUFInitParams(True, None)) is None


def test_llama_cpp_log_reaches_python_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(64))
    with caplog.at_level(logging.WARNING, logger="llama_cy"):
        _ggml_logs_an_error(bad)
    errors = [r for r in caplog.records if r.name == "llama_cy" and r.levelno == logging.ERROR]
    assert errors, caplog.records
    assert any("gguf_init" in r.getMessage() for r in errors)
    assert all(not r.getMessage().endswith("\n") for r in errors)


def test_log_is_quiet_below_warning_by_default() -> None:
    assert logging.getLogger("llama_cy").getEffectiveLevel() == logging.WARNING


def test_amx_is_compiled_out() -> None:
    """llama.cpp b11434's AMX matmul segfaults on Q4_K models (its issue #20824; Gemma
    here, on a Sapphire Rapids machine, llama.cpp's own loop as well): the CPU plugins
    are built without AMX and the AVX512 kernels serve those CPUs."""
    info = llama_cy.system_info()
    assert "AMX_INT8 = 1" not in info
    assert "AMX_TILE = 1" not in info
