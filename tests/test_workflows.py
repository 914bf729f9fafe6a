"""The GitHub workflows and the pre-commit hooks, which cannot run here: they are valid
against GitHub's workflow schema (check-jsonschema's copy: actionlint's PyPI package
downloads its binary from GitHub when it is built, which this project's machines cannot
reach), and they run what the README and the suite run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_workflows_match_githubs_schema() -> None:
    assert {p.name for p in WORKFLOWS} >= {"test.yml", "wheels.yml"}
    cli = str(Path(sys.executable).with_name("check-jsonschema"))
    args = [cli, "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)]
    result = subprocess.run(args, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_fails_on_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("on: [push]\njobs:\n  x:\n    steps:\n      - run: true\n")  # no runs-on
    cli = str(Path(sys.executable).with_name("check-jsonschema"))
    args = [cli, "--builtin-schema", "vendor.github-workflows", str(broken)]
    assert subprocess.run(args, capture_output=True).returncode != 0


def test_pull_requests_run_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1]
    command = re.search(r"```sh\n(.+?)\n```", section, re.S)
    assert command is not None
    flow = load(ROOT / ".github" / "workflows" / "test.yml")
    # PyYAML reads the key "on" as True (YAML 1.1)
    assert "pull_request" in flow.get("on", flow.get(True, {}))
    suite = flow["jobs"]["suite"]
    assert [s["run"] for s in suite["steps"] if "run" in s] == [command.group(1)]
    assert command.group(1) in (ROOT / ".ci" / "run").read_text()
    assert suite["timeout-minutes"] <= 90  # CI's budget for the whole suite
    platforms = set(suite["strategy"]["matrix"]["os"])
    wheels = load(ROOT / ".github" / "workflows" / "wheels.yml")
    assert platforms == set(wheels["jobs"]["cpu"]["strategy"]["matrix"]["os"])


@pytest.mark.parametrize(
    "tool", ["ruff check", "ruff format --check", "cython-lint", "mypy", "check-jsonschema"]
)
def test_pre_commit_runs_what_ci_lints_with(tool: str) -> None:
    hooks = load(ROOT / ".pre-commit-config.yaml")["repos"][0]["hooks"]
    assert any(h["entry"].startswith(tool) for h in hooks), tool
    steps = " ".join(
        str(s.get("run", ""))
        for job in load(ROOT / ".github" / "workflows" / "test.yml")["jobs"].values()
        for s in job["steps"]
    )
    name = {"mypy": "mypy or stub"}.get(tool, tool)
    assert name in steps, tool
