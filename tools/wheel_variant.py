"""Rename the distribution in pyproject.toml for a GPU wheel and add its runtime packages.

usage: python tools/wheel_variant.py DIST_NAME [RUNTIME_REQUIREMENT ...]

Run by the wheel workflow on a throw-away checkout: ``llama-cy-cu12`` installs the same
``llama_cy`` import package as ``llama-cy``, built with another backend.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def main() -> None:
    name, runtime = sys.argv[1], sys.argv[2:]
    text = PYPROJECT.read_text()
    text, n = re.subn(r'^name = "llama-cy"$', f'name = "{name}"', text, count=1, flags=re.M)
    if n != 1:
        raise SystemExit('pyproject.toml has no name = "llama-cy" line')
    if runtime:
        extra = "".join(f', "{r}"' for r in runtime)
        text = re.sub(r"^(dependencies = \[.*)\]$", rf"\1{extra}]", text, count=1, flags=re.M)
    PYPROJECT.write_text(text)
    print(f"pyproject.toml: {name}" + (f" + {', '.join(runtime)}" if runtime else ""))


if __name__ == "__main__":
    main()
