"""The README's commands and examples run as written."""

from __future__ import annotations

import os
import re
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
