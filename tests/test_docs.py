"""The documentation site builds with warnings as errors (``mkdocs build --strict``), with
the flag reference generated from the flag table and the API reference from the stubs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from llama_cy.flags import flags_for

ROOT = Path(__file__).resolve().parent.parent


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text()))


def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true"}
    result = subprocess.run(
        [sys.executable, "-P", "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    flags = _text(site / "flags" / "index.html")
    for command in ("serve", "run", "chat", "bench"):
        assert f"llama-cy {command}" in flags
    for flag in flags_for("serve"):
        assert flag.names[0] in flags, flag.name
    reference = _text(site / "reference" / "index.html")
    for name in ("LlamaModel", "LlamaContext", "decode", "LlamaBatch", "ServerSettings"):
        assert name in reference, name
    assert ":class:`" not in reference  # the docstrings' roles read as code
    results = _text(site / "results" / "index.html")
    newest = max(p.stem for p in (ROOT / "bench" / "results").glob("*.md"))
    assert newest in results
