"""The README's commands and examples run as written."""

from __future__ import annotations

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
