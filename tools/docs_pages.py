"""Pages of the docs site made at build time (mkdocs-gen-files): the flag reference,
from the flag table, and the benchmark results, from bench/results/."""

from __future__ import annotations

import json
from pathlib import Path

import mkdocs_gen_files

# The installed package's table (mkdocs runs with python -P: not the source folder,
# whose compiled modules are not built in place).
from llama_cy.flags import COMMANDS, reference

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

with mkdocs_gen_files.open("flags.md", "w") as f:
    f.write("# Flag reference\n\n")
    f.write(
        "Generated from the flag table (`llama_cy/flags/table.py`), the one place a "
        "flag's default is written. `serve` knows every flag of llama-server b11434: "
        "*used* does what it does there, *inert* is accepted with no effect here (and "
        "says why), *refused* stops the start and says why. The sampling flags "
        "(`--temp`, `--top-k`, ...) are listed by `llama-cy run --help`; their defaults "
        "are llama-server's.\n\n"
    )
    for command in ["serve", *sorted(COMMANDS - {"serve"})]:
        f.write(f"## `llama-cy {command}`\n\n{reference(command)}\n\n")

with mkdocs_gen_files.open("results/index.md", "w") as f:
    f.write(
        "# Benchmark results\n\n"
        "Every run of `bench/run.py` (and the device and peer-suite runs), newest "
        "first, as committed under `bench/results/`. Ratios above 1 mean llama_cy is "
        "faster.\n\n"
    )
    for path in sorted(RESULTS.iterdir(), reverse=True):
        if path.suffix == ".json":
            continue
        name = path.name if path.suffix == ".md" else f"{path.stem}.md"
        f.write(f"- [{path.stem}]({name})\n")
        body = path.read_text()
        if path.suffix != ".md":  # a log: shown as it is
            body = f"# {path.stem}\n\n```text\n{body}\n```\n"
        data = path.with_suffix(".json")
        if data.is_file():
            rows = json.loads(data.read_text()).get("rows", [])
            body += f"\n\nRaw rounds: {len(rows)} rows in `bench/results/{data.name}`.\n"
        with mkdocs_gen_files.open(f"results/{name}", "w") as page:
            page.write(body)
