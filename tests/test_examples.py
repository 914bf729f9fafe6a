"""The README's commands and examples run as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_greedy_example_continues_the_prompt(gemma_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "greedy.py"),
            "The capital of France is",
            "-m",
            str(gemma_path),
            "-n",
            "8",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert out.startswith("The capital of France is")
    assert len(out.strip()) > len("The capital of France is")


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    assert any(ci == line.strip() for block in blocks for line in block.splitlines())


def test_readme_switch_command_installs_a_working_llama_cpp(tmp_path: Path) -> None:
    """The README's switch from llama-cpp-python: its compat/ install, into a target
    folder (this environment already has llama_cy from `pip install .`), then used."""
    import shutil

    readme = (ROOT / "README.md").read_text()
    command = "pip uninstall -y llama-cpp-python && pip install . ./compat"
    assert command in readme
    source = tmp_path / "compat"
    shutil.copytree(ROOT / "compat", source, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(source)],
        check=True, timeout=300,
    )  # fmt: skip
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp; "
        "assert llama_cpp.__file__.startswith(sys.argv[1]); "
        "print(llama_cpp.llama_cpp.llama_max_devices() >= 1, hasattr(llama_cpp, 'Llama'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", code, str(target)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "True"]


def _blocks(kind: str) -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return re.findall(rf"```{kind}\n(.*?)```", readme, flags=re.S)


def _run_python(code: str, timeout: float = 300) -> str:
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


def test_readme_install_command_runs(gemma_path: Path) -> None:
    """The first command's ``llama-cy run`` (its ``pip install`` is what made this
    environment), on the demo model it installs."""
    line = _blocks("sh")[0].strip()
    install, _, run = line.partition(" && ")
    assert install == 'pip install ".[demo]"'
    argv = shlex.split(run)
    exe = Path(sys.executable).with_name(argv[0])
    out = subprocess.run(
        [str(exe), *argv[1:], "-t", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("The capital of France is")
    assert "generation: 32 tokens" in out.stderr


def test_readme_llama_quick_start(gemma_path: Path) -> None:
    code = next(b for b in _blocks("python") if "from llama_cy import Llama" in b)
    out = _run_python(code)
    assert len(out.strip().splitlines()) >= 2


def test_readme_sampling_loop_quick_start(gemma_path: Path) -> None:
    code = next(b for b in _blocks("python") if "ctx.logits(-1)" in b)
    out = _run_python(code)
    assert len(out.strip()) > 0


def test_readme_server_quick_start(gemma_path: Path) -> None:
    """``llama-cy serve`` as the README starts it (on a free port instead of 8080), and
    its OpenAI client snippet against it."""
    from serving import free_port

    line = next(b for b in _blocks("sh") if "llama-cy serve" in b).strip()
    install, _, command = line.partition(" && ")
    assert install == 'pip install ".[demo,server]"'  # what the test extra has too
    port = free_port()
    argv = shlex.split(command.replace("8080", str(port)))
    exe = Path(sys.executable).with_name(argv[0])
    proc = subprocess.Popen(
        [str(exe), *argv[1:], "-t", "2", "-np", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        import time
        import urllib.request

        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.5)
        client = next(b for b in _blocks("python") if "OpenAI(" in b)
        out = _run_python(client.replace("8080", str(port)))
        assert out.strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_readme_gpu_install_commands_name_real_build_options() -> None:
    """The GPU builds take 25 minutes or a GPU SDK: the README's commands are checked
    against meson.options instead (the CUDA build itself runs in the device check)."""
    options = (ROOT / "meson.options").read_text()
    combo = re.search(
        r"option\('gpu', type: 'combo', value: 'cpu',\s*choices: \[(.*?)\]", options, re.S
    )
    assert combo is not None
    choices = set(re.findall(r"'(\w+)'", combo.group(1)))
    readme = (ROOT / "README.md").read_text()
    given = re.findall(r"pip install \. -Csetup-args=-Dgpu=(\w+)", readme)
    assert set(given) == {"cuda", "vulkan", "metal"}
    assert set(given) <= choices
