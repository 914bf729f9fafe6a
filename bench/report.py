"""The bench's report: a Markdown table and the raw rounds as JSON under bench/results/."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from common import Comparison

import llama_cy as lc


def report(rows: list[Comparison], args: Any, out_dir: Path, suffix: str = "") -> Path:
    date = datetime.date.today().isoformat()
    head = (
        f"# llama_cy bench, {date}, CPU\n\n"
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"threads {args.threads}; {args.rounds} alternating rounds per row\n"
        f"- llama.cpp {lc.LLAMA_CPP_BUILD}; {lc.system_info().strip()}\n"
        f"- command: `python bench/run.py {' '.join(sys.argv[1:])}`\n\n"
    )
    lines = [
        "| comparison | llama_cy median (min-max) | reference | reference median (min-max) "
        "| ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for c in rows:
        r = c.row()
        a, b = r["llama_cy"], r["theirs"]
        lines.append(
            f"| {c.name} | {a['median']:.2f} ({a['min']:.2f}-{a['max']:.2f}) {c.unit} | "
            f"{c.reference} | {b['median']:.2f} ({b['min']:.2f}-{b['max']:.2f}) {c.unit} | "
            + (f"{r['ratio']:+.1f} {c.unit}" if c.difference else f"{r['ratio']:.3f}")
            + f" | {c.target} |"
        )
    table = "\n".join(lines) + "\n"
    print("\n" + table)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = "" if args.threads == os.cpu_count() else f"-t{args.threads}"
    md = out_dir / f"{date}-cpu{tag}{'-quick' if args.quick else ''}{suffix}.md"
    md.write_text(
        head + "Ratios: llama_cy ÷ reference for rates, reference ÷ llama_cy for "
        "times (above 1 means llama_cy is better); differences are llama_cy - reference.\n\n"
        + table
    )
    md.with_suffix(".json").write_text(
        json.dumps(
            {
                "date": date,
                "threads": args.threads,
                "rounds": args.rounds,
                "rows": [c.row() for c in rows],
            },
            indent=1,
            default=float,
        )
    )
    return md
