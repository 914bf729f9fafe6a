"""The CUDA build's runtime lookup (``llama_cy._cuda_runtime``), without a GPU.

Fake ``libcudart``/``libcublas`` shared objects, compiled here, stand in NVIDIA's pip
packages in a fake ``site-packages``; a fake plugin links them by name, as
``libggml-cuda`` does. The lookup must find them, read the plugin's CUDA major, and
open them so that the plugin loads, which it cannot without them.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from child import run_python

from llama_cy import _build_config, _cuda_packs, _cuda_runtime
from llama_cy._cuda_runtime import find_libraries, library_dirs, needed_majors

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="builds ELF shared objects")


def cc() -> str:
    found = shutil.which(sysconfig.get_config_var("CC").split()[0]) or shutil.which("cc")
    assert found is not None, "no C compiler (the package's own build needs one)"
    return found


def shared_object(path: Path, soname: str, *link: str, code: str = "") -> Path:
    src = path.with_suffix(".c")
    src.write_text(
        code or f"int {soname.split('.')[0].replace('-', '_')}_probe(void) {{ return 1; }}\n"
    )
    cmd = [cc(), "-shared", "-fPIC", f"-Wl,-soname,{soname}", str(src), "-o", str(path), *link]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return path


@pytest.fixture(scope="module")
def fake_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``site-packages`` with CUDA 12's runtime and cuBLAS laid out as NVIDIA's wheels lay
    them out, and CUDA 13's in its consolidated folder."""
    site = tmp_path_factory.mktemp("site-packages")
    for major in (12, 13):
        dirs = library_dirs(site, major, "linux")
        names = _cuda_runtime.library_names(major, "linux")
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        homes = [dirs[0], dirs[-1], dirs[-1]]  # cudart; cublasLt and cublas
        for home, name in zip(homes, names, strict=True):
            shared_object(home / name, name)
    return site


@pytest.fixture(scope="module")
def fake_plugin(fake_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugin that needs CUDA 12's libcudart and libcublas by name, as libggml-cuda."""
    out = tmp_path_factory.mktemp("plugin") / "libggml-cuda.so"
    runtime = fake_site / "nvidia" / "cuda_runtime" / "lib"
    cublas = fake_site / "nvidia" / "cublas" / "lib"
    return shared_object(
        out,
        "libggml-cuda.so",
        f"-L{runtime}",
        f"-L{cublas}",
        "-l:libcudart.so.12",
        "-l:libcublas.so.12",
        code="int libcudart_probe(void); int plugin_probe(void) { return libcudart_probe(); }\n",
    )


def test_libraries_are_found_where_nvidia_wheels_put_them(fake_site: Path) -> None:
    twelve = find_libraries([Path("/nonexistent"), fake_site], 12, "linux")
    assert [p.name for p in twelve] == ["libcudart.so.12", "libcublasLt.so.12", "libcublas.so.12"]
    assert twelve[0].parent == fake_site / "nvidia" / "cuda_runtime" / "lib"
    assert twelve[2].parent == fake_site / "nvidia" / "cublas" / "lib"
    thirteen = find_libraries([fake_site], 13, "linux")
    assert {p.parent for p in thirteen} == {fake_site / "nvidia" / "cu13" / "lib"}
    assert find_libraries([fake_site], 11, "linux") == []
    # Windows' names and folders (checked as paths only)
    assert _cuda_runtime.library_names(12, "win32")[0] == "cudart64_12.dll"
    assert library_dirs(fake_site, 13, "win32") == [fake_site / "nvidia/cu13/bin/x86_64"]


def test_the_plugin_cuda_major_is_read_from_its_elf_file(fake_plugin: Path, tmp_path: Path) -> None:
    assert needed_majors(fake_plugin) == [12]
    (tmp_path / "not-elf.so").write_bytes(b"MZ" + b"\0" * 100)
    assert needed_majors(tmp_path / "not-elf.so") == []
    cpu = _build_config.plugin_path("cpu")
    assert cpu.is_file()
    assert needed_majors(cpu) == []  # the CPU plugin links no CUDA


def test_preloading_makes_the_plugin_loadable(fake_site: Path, fake_plugin: Path) -> None:
    """In a fresh process the plugin does not load (its libcudart is nowhere on the
    loader's path); after the libraries found in the fake site-packages are opened, it
    does, and resolves its symbol from them."""
    result = run_python(
        """
        import ctypes, sys
        from pathlib import Path
        from llama_cy import _cuda_runtime as cr
        site, plugin = Path(sys.argv[1]), sys.argv[2]
        try:
            ctypes.CDLL(plugin)
        except OSError as exc:
            print("before", "libcudart.so.12" in str(exc))
        sys.path.insert(0, str(site))
        assert site in cr.site_dirs()
        opened = cr.preload(cr.find_libraries(cr.site_dirs(), cr.needed_majors(Path(plugin))[0]))
        print("opened", [p.name for p in opened])
        print("after", ctypes.CDLL(plugin).plugin_probe())
        maps = open("/proc/self/maps").read()
        print("mapped", all(str(p) in maps for p in opened))
        """,
        str(fake_site),
        str(fake_plugin),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "before True",
        "opened ['libcudart.so.12', 'libcublasLt.so.12', 'libcublas.so.12']",
        "after 1",
        "mapped True",
    ]


def test_a_missing_driver_is_said_and_the_cpu_serves(
    fake_site: Path,
    fake_plugin: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(_cuda_runtime, "DRIVER", "libcuda-that-is-not-here.so.1")
    assert not _cuda_runtime.driver_available()
    monkeypatch.setattr(sys, "path", [str(fake_site), *sys.path])
    with caplog.at_level(logging.WARNING, logger="llama_cy"):
        assert _cuda_runtime.prepare(fake_plugin) == []  # nothing opened without a driver
    assert "NVIDIA driver" in caplog.text
    assert "the CPU serves" in caplog.text
    # a driver library that loads is seen as one
    monkeypatch.setattr(_cuda_runtime, "DRIVER", str(fake_site / "nvidia/cu13/lib/libcudart.so.13"))
    assert _cuda_runtime.driver_available()
    # and the package itself imports and runs on the CPU whatever the CUDA state
    result = run_python("import llama_cy as lc; print(any(d.type == 'cpu' for d in lc.devices()))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


FAKE_CUDA_H = """
typedef int CUresult;
typedef unsigned long long CUdeviceptr_v2;
#define CUDAAPI
#define cuMemGetInfo cuMemGetInfo_v2
CUresult CUDAAPI cuMemCreate(void *handle, unsigned long size, const void *prop, int flags);
CUresult CUDAAPI cuMemGetInfo(unsigned long *free, unsigned long *total);
"""

PLUGIN_CODE = """
int cuMemCreate(void *handle, unsigned long size, const void *prop, int flags);
int plugin_probe(void) { return cuMemCreate(0, 0, 0, 0); }
"""


def test_the_plugin_must_name_the_driver(tmp_path: Path) -> None:
    """A plugin linked with --as-needed against a stand-in without symbols loses
    DT_NEEDED libcuda.so.1 (the first GPU run's failure); one linked against
    tools/cuda_stub.py's stand-in keeps it. ``links_driver`` tells them apart, and the
    build (tools/build_llama_cpp.py) refuses the first."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "empty").mkdir()
    empty = shared_object(tmp_path / "empty" / "libcuda.so", "libcuda.so.1", code="\n")
    include = tmp_path / "include"
    include.mkdir()
    (include / "cuda.h").write_text(FAKE_CUDA_H)
    stub = tmp_path / "stub" / "libcuda.so"
    made = subprocess.run(
        [sys.executable, str(root / "tools" / "cuda_stub.py"), str(stub), str(include)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert "2 driver functions" in made.stdout  # cuMemCreate and cuMemGetInfo_v2
    for lib, linked in ((empty, False), (stub, True)):
        plugin = shared_object(
            lib.parent / "libggml-cuda.so",
            "libggml-cuda.so",
            "-Wl,--as-needed",
            str(lib),
            code=PLUGIN_CODE,
        )
        assert _cuda_runtime.links_driver(plugin) is linked, lib


@pytest.mark.skipif(_build_config.GPU != "cuda", reason="a CUDA build's own plugin")
def test_the_built_cuda_plugin_names_the_driver() -> None:
    plugin = _build_config.plugin_path("cuda")
    if not plugin.is_file():  # a wheel's: in the pack chosen at import, or any installed
        packs = _cuda_packs.find_packs()
        assert _cuda_packs.selected or packs, "a CUDA wheel without its plugin packs"
        plugin = _cuda_packs.selected or packs[0].plugin
    assert _cuda_runtime.links_driver(plugin), _cuda_runtime._dt_needed(plugin)
    assert needed_majors(plugin)  # and the runtime major it needs


def test_the_missing_driver_is_named_with_the_loaders_reason(tmp_path: Path) -> None:
    """``prepare``, which ``import llama_cy`` runs before a CUDA build's plugin loads,
    names the driver library it could not open and the loader's reason; the package
    then runs on the CPU."""
    code = (
        "import logging, sys; logging.basicConfig(stream=sys.stdout)\n"
        "from llama_cy import _cuda_runtime\n"
        "_cuda_runtime.DRIVER = 'libcuda-not-here.so.1'\n"
        "_cuda_runtime.prepare(_cuda_runtime.Path(sys.argv[1]))\n"
        "import llama_cy as lc; print('devices', len(lc.devices()))\n"
    )
    result = run_python(code, str(tmp_path / "libggml-cuda.so"))
    assert result.returncode == 0, result.stderr
    assert "NVIDIA driver (libcuda-not-here.so.1) is not installed" in result.stdout
    assert "cannot open shared object file" in result.stdout  # the loader's reason
    assert "devices" in result.stdout


def test_wheel_size_check(tmp_path: Path) -> None:
    """tools/check_wheel_size.py, which the CUDA wheel jobs run (100 MB, PyPI's limit)."""
    wheel = tmp_path / "llama_cy_cu12-0.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        z.writestr("llama_cy/libggml-cuda.so", os.urandom(1_500_000))
        z.writestr("llama_cy/__init__.py", "")
    script = Path(__file__).resolve().parent.parent / "tools" / "check_wheel_size.py"

    def check(limit: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(script), str(tmp_path), "--max-mb", limit]
        return subprocess.run(cmd, capture_output=True, text=True)

    over, under = check("1"), check("2")
    assert over.returncode == 1
    assert over.stdout.startswith("TOO LARGE: llama_cy_cu12-")
    assert "llama_cy/libggml-cuda.so 1.5 MB" in over.stdout
    assert under.returncode == 0
    assert under.stdout.startswith("ok: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert subprocess.run([sys.executable, str(script), str(empty)]).returncode == 1
