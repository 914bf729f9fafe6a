"""Downstream Cython code can cimport llama_cy's declarations and link the installed
libraries, as a project built on llama_cy would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import llama_cy
from llama_cy._build_config import LIBRARIES

DOWNSTREAM = """
from llama_cy._c cimport llama
from llama_cy cimport Device

def system_info():
    return llama.llama_print_system_info().decode()

def max_devices():
    return llama.llama_max_devices()

def default_n_ctx():
    cdef llama.llama_context_params p = llama.llama_context_default_params()
    return p.n_ctx

def device_names(devices):
    cdef Device d
    return [d.name for d in devices]
"""


def test_downstream_pyx_cimports_and_links(tmp_path: Path) -> None:
    (tmp_path / "downstream.pyx").write_text(DOWNSTREAM)
    package_parent = Path(llama_cy.__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-m", "cython", "-3", "-I", str(package_parent), "downstream.pyx"],
        cwd=tmp_path,
        check=True,
    )
    lib_dir = llama_cy.get_lib_dir()
    ext = tmp_path / ("downstream" + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = os.environ.get("CC", "cc")
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "downstream.c",
            "-o",
            str(ext),
            "-I",
            sysconfig.get_paths()["include"],
            "-I",
            llama_cy.get_include(),
            os.path.join(lib_dir, LIBRARIES["llama"]),
            f"-Wl,-rpath,{lib_dir}",
        ],
        cwd=tmp_path,
        check=True,
    )
    spec = importlib.util.spec_from_file_location("downstream", ext)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    assert mod.system_info() == llama_cy.system_info()
    assert mod.max_devices() >= 1
    assert mod.default_n_ctx() == 512  # llama_context_default_params() in b11434
    devices = llama_cy.devices()
    assert mod.device_names(devices) == [d.name for d in devices]
