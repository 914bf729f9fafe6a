"""Run test code in a fresh interpreter, so that a crash there fails one test here."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from offload import timeout


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) with ``args`` in ``sys.argv[1:]`` (and ``env`` for its
    environment, if given); never raises on failure."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout(120),
        env=env,
    )
