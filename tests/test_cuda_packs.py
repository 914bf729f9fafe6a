"""The CUDA plugin packs (``llama_cy._cuda_packs``, ``tools/cuda_pack.py``), without a GPU:
which pack serves which GPU by CUDA's compatibility rules, how installed packs are found,
and the pack wheels the tool makes from a plugin compiled here (it names the driver and
a CUDA runtime by ``DT_NEEDED``, as ``libggml-cuda`` does)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import logging
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_cuda_runtime import shared_object

from llama_cy import _cuda_packs
from llama_cy._cuda_packs import NATIVE, PTX, Pack, choose, find_packs, runs_on

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "cuda_pack.py"
OLDER = ("75-real", "80-real", "86-real", "89-real")
NEWER = ("90-real", "100-real", "120a-real", "100-virtual")


def test_the_wheel_job_builds_these_families() -> None:
    """The families tested here are the wheel job's, as ggml-cuda builds them (12x as
    12xa), and one of them runs natively on every GPU from Turing to Blackwell."""
    spec = importlib.util.spec_from_file_location("cuda_pack", TOOL)
    assert spec is not None
    assert spec.loader is not None
    pack_tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pack_tool)
    workflow = (ROOT / ".github/workflows/wheels.yml").read_text()
    rows = re.findall(r'\{family: (\w+), archs: "([^"]+)"', workflow)
    families = {name: tuple(pack_tool.parse_archs(archs)) for name, archs in rows}
    assert families == {"older": OLDER, "newer": NEWER}
    gpus = [(7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0)]
    for cap in gpus:
        assert NATIVE in (runs_on(OLDER, cap), runs_on(NEWER, cap)), cap


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="builds ELF shared objects")


@pytest.mark.parametrize(
    ("capability", "older", "newer"),
    [
        ((7, 5), NATIVE, 0),  # Turing
        ((8, 0), NATIVE, 0),  # A100
        ((8, 6), NATIVE, 0),  # RTX 30xx
        ((8, 7), NATIVE, 0),  # Jetson Orin: 8.6's code runs on 8.7
        ((8, 9), NATIVE, 0),  # Ada
        ((9, 0), 0, NATIVE),  # Hopper: 8.9's code does not run on another major
        ((10, 0), 0, NATIVE),  # B200
        ((10, 3), 0, NATIVE),  # B300
        ((11, 0), 0, PTX),  # Thor: compute_100's PTX, compiled by the driver
        ((12, 0), 0, NATIVE),  # RTX 50xx: 120a
        ((12, 1), 0, PTX),  # GB10: 120a is 12.0's alone
        ((7, 0), 0, 0),  # Volta: CUDA 13 dropped it
    ],
)
def test_which_code_runs_on_which_gpu(capability: tuple[int, int], older: int, newer: int) -> None:
    assert runs_on(OLDER, capability) == older
    assert runs_on(NEWER, capability) == newer


def test_cmake_spellings() -> None:
    assert runs_on(["86"], (8, 9)) == NATIVE  # neither -real nor -virtual: both
    assert runs_on(["86-virtual"], (8, 9)) == PTX
    assert runs_on(["120a-virtual"], (12, 1)) == 0
    assert runs_on(["120f-real"], (12, 1)) == NATIVE  # family-specific: the family's newer
    assert runs_on(["nonsense", ""], (8, 6)) == 0


def packs(tmp: Path) -> list[Pack]:
    return [Pack(tmp / "a", 13, OLDER), Pack(tmp / "b", 13, NEWER), Pack(tmp / "c", 12, OLDER)]


def test_the_pack_that_runs_on_the_most_gpus_is_chosen(tmp_path: Path) -> None:
    a, b, c = packs(tmp_path)
    assert choose([a, b], [(8, 6)]) == a
    assert choose([a, b], [(9, 0), (9, 0)]) == b
    assert choose([a, b], [(8, 6), (12, 1), (11, 0)]) == b  # two (by PTX) against one
    assert choose([a, b], [(7, 0)]) is None
    assert choose([], [(8, 6)]) is None
    # the same code for CUDA 12 and 13: the major whose runtime is installed, else the newest
    assert choose([c, a], [(8, 6)]) == a
    assert choose([a, c], [(8, 6)], runtimes=[12]) == c


def write_pack(site: Path, name: str, archs: str, plugin: bool = True) -> Path:
    folder = site / name
    folder.mkdir(parents=True)
    (folder / "ARCHS").write_text(archs)
    if plugin:
        (folder / "libggml-cuda.so").write_bytes(b"\x7fELF")
    return folder


def test_installed_packs_are_found(tmp_path: Path) -> None:
    write_pack(tmp_path, "llama_cy_cu13_sm75_89", "\n".join(OLDER) + "\n")
    write_pack(tmp_path, "llama_cy_cu12_sm90_120", "90-real\n120a-real\n")
    write_pack(tmp_path, "llama_cy_cu13_sm90_120", "90-real\n", plugin=False)  # no plugin
    write_pack(tmp_path, "llama_cy_cuda", "86-real\n")  # not a pack's name
    found = find_packs([tmp_path, tmp_path / "missing"])
    assert [(p.path.name, p.cuda_major, p.archs) for p in found] == [
        ("llama_cy_cu12_sm90_120", 12, ("90-real", "120a-real")),
        ("llama_cy_cu13_sm75_89", 13, OLDER),
    ]
    assert found[1].plugin == tmp_path / "llama_cy_cu13_sm75_89" / "libggml-cuda.so"


def test_select(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="llama_cy")
    # select() records its choice in the module: what the import chose is put back after
    # (test_a_wheel_install_on_a_gpu_runs_its_pack reads it).
    monkeypatch.setattr(_cuda_packs, "selected", _cuda_packs.selected)
    own = tmp_path / "llama_cy" / "libggml-cuda.so"
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(_cuda_packs, "capabilities", lambda: [(12, 1)])
    assert _cuda_packs.select(own, [site]) is None  # no plugin here, no pack: said
    assert "no pack is installed" in caplog.text
    write_pack(site, "llama_cy_cu13_sm75_89", "\n".join(OLDER))
    assert _cuda_packs.select(own, [site]) is None  # 12.1 runs none of Turing-to-Ada's
    assert "no installed pack (llama_cy_cu13_sm75_89) runs on these GPUs" in caplog.text
    newer = write_pack(site, "llama_cy_cu13_sm90_120", "\n".join(NEWER))
    assert _cuda_packs.select(own, [site]) == newer / "libggml-cuda.so" == _cuda_packs.selected
    assert "compiles its PTX on first use" in caplog.text  # 12.1 by compute_100's PTX
    monkeypatch.setattr(_cuda_packs, "capabilities", lambda: None)  # no driver
    assert _cuda_packs.select(own, [site]) is None
    assert _cuda_packs.selected is None
    own.parent.mkdir()
    own.write_bytes(b"")  # a build from source carries its plugin: packs are not looked at
    monkeypatch.setattr(_cuda_packs, "capabilities", lambda: [(9, 0)])
    assert _cuda_packs.select(own, [site]) is None


@pytest.fixture(scope="module")
def fake_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugin that names the driver and CUDA 13's runtime, as libggml-cuda does."""
    libs = tmp_path_factory.mktemp("libs")
    shared_object(libs / "libcuda.so.1", "libcuda.so.1")
    shared_object(libs / "libcudart.so.13", "libcudart.so.13")
    return shared_object(
        libs / "libggml-cuda.so",
        "libggml-cuda.so",
        f"-L{libs}",
        "-Wl,--no-as-needed",
        "-l:libcuda.so.1",
        "-l:libcudart.so.13",
    )


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True)


def check_record(wheel: Path) -> list[str]:
    """The wheel's names, after checking each file against its RECORD line."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        lines = [line.split(",") for line in zf.read(record).decode().splitlines()]
        assert sorted(name for name, *_ in lines) == sorted(names)
        for name, digest, size in lines:
            if name == record:
                continue
            data = zf.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (digest, int(size)) == (f"sha256={want.decode()}", len(data)), name
    return names


def test_pack_wheel(fake_plugin: Path, tmp_path: Path) -> None:
    made = tool(
        "pack", str(fake_plugin), "--archs", "90-real;100-real;120-real;100-virtual",
        "--version", "1.2.3", "-o", str(tmp_path),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    wheel = tmp_path / "llama_cy_cu13_sm90_120-1.2.3-py3-none-manylinux_2_28_x86_64.whl"
    names = check_record(wheel)
    assert "llama_cy_cu13_sm90_120/libggml-cuda.so" in names
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read("llama_cy_cu13_sm90_120-1.2.3.dist-info/METADATA").decode()
        assert "Name: llama-cy-cu13-sm90-120\nVersion: 1.2.3\n" in meta
        assert (
            "Tag: py3-none-manylinux_2_28_x86_64"
            in zf.read("llama_cy_cu13_sm90_120-1.2.3.dist-info/WHEEL").decode()
        )
        mode = zf.getinfo("llama_cy_cu13_sm90_120/libggml-cuda.so").external_attr >> 16
        assert mode & 0o111
        zf.extractall(tmp_path / "site")
    [found] = find_packs([tmp_path / "site"])
    assert found.cuda_major == 13
    assert found.archs == NEWER  # 120 as ggml-cuda builds it: 120a


def test_pack_refuses_a_plugin_without_the_driver(tmp_path: Path) -> None:
    libs = tmp_path
    shared_object(libs / "libcudart.so.13", "libcudart.so.13")
    plugin = shared_object(libs / "p.so", "libggml-cuda.so", f"-L{libs}", "-l:libcudart.so.13")
    made = tool("pack", str(plugin), "--archs", "86-real", "--version", "1", "-o", str(tmp_path))
    assert made.returncode != 0
    assert "does not name libcuda.so.1" in made.stderr
    bad = tool("pack", str(plugin), "--archs", "sm_86", "--version", "1", "-o", str(tmp_path))
    assert bad.returncode != 0
    assert "CMAKE_CUDA_ARCHITECTURES entries expected" in bad.stderr


def fake_wheel(path: Path, plugin: bytes) -> Path:
    """A llama_cy CUDA wheel as far as ``split`` reads it."""
    files = {
        "llama_cy/__init__.py": b"",
        "llama_cy/libggml-base.so": b"base",
        "llama_cy/libggml-cuda.so": plugin,
        "llama_cy-1.2.3.dist-info/METADATA": b"Name: llama-cy-cu13\nVersion: 1.2.3\n",
        "llama_cy-1.2.3.dist-info/RECORD": b"stale\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_split_moves_the_plugin_into_one_pack(fake_plugin: Path, tmp_path: Path) -> None:
    plugin = fake_plugin.read_bytes()
    src = tmp_path / "src"
    src.mkdir()
    wheels = [
        fake_wheel(src / f"llama_cy_cu13-1.2.3-cp3{v}-cp3{v}-manylinux_2_28_x86_64.whl", plugin)
        for v in (11, 12)
    ]
    out = tmp_path / "out"
    made = tool("split", *map(str, wheels), "--archs", ";".join(OLDER), "-o", str(out))
    assert made.returncode == 0, made.stderr
    for wheel in wheels:
        names = check_record(out / wheel.name)
        assert "llama_cy/libggml-cuda.so" not in names
        assert "llama_cy/libggml-base.so" in names
    pack = out / "llama_cy_cu13_sm75_89-1.2.3-py3-none-manylinux_2_28_x86_64.whl"
    assert "llama_cy_cu13_sm75_89/libggml-cuda.so" in check_record(pack)
    # wheels whose plugins differ were not built from one CMake tree: refused
    odd = fake_wheel(src / "llama_cy_cu13-1.2.3-cp313-cp313-manylinux_2_28_x86_64.whl", b"x")
    made = tool("split", str(wheels[0]), str(odd), "--archs", "86-real", "-o", str(out))
    assert made.returncode != 0
    assert "differs" in made.stderr


def test_a_wheel_install_on_a_gpu_runs_its_pack() -> None:
    """The device check installs the CUDA wheel split as the wheel job ships it: the
    plugin that serves the GPU came from the pack chosen at import."""
    from llama_cy import _build_config, devices

    if _build_config.GPU != "cuda" or _build_config.plugin_path("cuda").is_file():
        pytest.skip("a CUDA wheel without its own plugin (tools/gpu_check.sh installs one)")
    if not _cuda_packs.capabilities():
        pytest.skip("no NVIDIA GPU visible")
    assert _cuda_packs.selected is not None
    assert _cuda_packs.selected.parent.name.startswith("llama_cy_cu")
    assert any(d.backend == "CUDA" for d in devices())
