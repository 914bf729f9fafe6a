"""One flag table for every subcommand (llama_cy/flags/table.py): each subcommand's
parser, ServerSettings, the server's Engine and /props take their defaults from it, and
the defaults that had drifted are llama.cpp's (common/common.h)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from llama_cy import cli
from llama_cy.flags import COMMANDS, FLAGS, USED, default, flags_for, reference
from llama_cy.sampling_settings import SAMPLING_SETTINGS
from llama_cy.sequence_settings import SequenceSettings
from llama_cy.server.engine_settings import EngineSettings
from llama_cy.server.flag_settings import settings_from_args
from llama_cy.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parent.parent
#: positional arguments a subcommand's parser needs
POSITIONALS = {"info": ["m.gguf"], "quantize": ["a.gguf", "b.gguf", "Q8_0"]}


@pytest.fixture(autouse=True)
def _no_llama_arg_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's defaults, not this machine's LLAMA_ARG_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("LLAMA_ARG_"):
            monkeypatch.delenv(name)


def parse(command: str, *argv: str) -> argparse.Namespace:
    return cli.parser().parse_args([command, *POSITIONALS.get(command, []), *argv])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_parser_takes_the_tables_defaults(command: str) -> None:
    args = parse(command)
    flags = flags_for(command)
    assert flags
    for flag in flags:
        assert getattr(args, flag.dest) == flag.default, (command, flag.name)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_spelling_is_taken_twice_in_a_subcommand(command: str) -> None:
    seen: dict[str, str] = {}
    spellings = [(n, f.dest) for f in flags_for(command) for n in (*f.names, *f.negative)]
    if command in ("run", "chat", "serve"):
        spellings += [(s.flag, s.name) for s in SAMPLING_SETTINGS]
    for name, dest in spellings:
        assert name not in seen, f"{command}: {name} is both {seen[name]} and {dest}"
        seen[name] = dest


def test_run_and_chat_share_the_servers_flags() -> None:
    """The drift the table ended: -c was 4096 in run and chat, 0 in serve."""
    for dest in ("ctx_size", "n_gpu_layers", "batch_size", "ubatch_size", "threads", "seed"):
        values = {c: getattr(parse(c), dest) for c in ("run", "chat", "serve")}
        assert len(set(values.values())) == 1, (dest, values)
    assert parse("run").ctx_size == 0  # llama.cpp's: the model's training context


def test_the_environment_sets_a_default_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "321")
    assert parse("run").ctx_size == 321
    assert parse("serve").ctx_size == 321
    assert parse("run", "-c", "64").ctx_size == 64


def test_server_settings_take_the_tables_defaults() -> None:
    """Parsing nothing gives the same settings as ServerSettings' own defaults."""
    flags = settings_from_args(parse("serve"), "x.gguf")
    plain = ServerSettings(model="x.gguf")
    for f in dataclasses.fields(ServerSettings):
        if f.name in ("sampling", "context", "load", "load_draft"):  # what only flags fill in
            continue
        assert getattr(flags, f.name) == getattr(plain, f.name), f.name


def test_the_engines_defaults_are_the_tables() -> None:
    engine, sequence = EngineSettings(), SequenceSettings()
    names = {
        "n_predict": "n_predict",
        "max_queue": "queue_size",
        "queue_timeout": "queue_timeout",
        "slot_prompt_similarity": "slot_prompt_similarity",
        "warmup": "warmup",
    }
    for field, dest in names.items():
        assert getattr(engine, field) == default(dest), field
    for field in ("context_shift", "backend_sampling", "ctx_checkpoints", "special"):
        assert getattr(engine.sequence, field) == getattr(sequence, field) == default(field)


def _common_h(pattern: str) -> str:
    text = (ROOT / "subprojects" / "llama.cpp" / "common" / "common.h").read_text()
    m = re.search(pattern, text)
    assert m is not None, pattern
    return m[1]


def test_the_drifted_defaults_are_llama_servers() -> None:
    ngl = int(_common_h(r"int32_t n_gpu_layers\s*=\s*(-?\d+);\s*// number of layers to store"))
    sps = float(_common_h(r"float slot_prompt_similarity\s*=\s*([\d.]+)f;"))
    n_ctx = int(_common_h(r"int32_t n_ctx\s*=\s*(-?\d+);"))
    for command in ("run", "chat", "serve"):
        assert parse(command).n_gpu_layers == ngl
        assert parse(command).ctx_size == n_ctx
    assert ServerSettings(model="x").n_gpu_layers == ngl
    assert ServerSettings(model="x").slot_prompt_similarity == sps
    assert EngineSettings().slot_prompt_similarity == sps


def test_props_show_the_tables_defaults(tiny_model_path: Path) -> None:
    from starlette.testclient import TestClient

    from llama_cy.server.app import create_app
    from llama_cy.server.settings import load_model

    settings = ServerSettings(model=str(tiny_model_path), ctx_size=256, parallel=1)
    model = load_model(settings)
    try:
        with TestClient(create_app(model, settings)) as client:
            props = client.get("/props").json()
    finally:
        model.close()
    params = props["default_generation_settings"]["params"]
    assert params["n_predict"] == default("n_predict")
    assert params["seed"] == default("seed")
    assert params["backend_sampling"] == default("backend_sampling")
    for s in SAMPLING_SETTINGS:
        value: Any = s.default if s.type is not tuple else list(s.default)
        assert params[s.server_name] == value, s.name
    assert props["endpoint_slots"] == default("slots")
    assert props["endpoint_metrics"] == default("metrics")


def test_every_used_flag_says_what_it_does() -> None:
    for flag in FLAGS:
        text = flag.help if flag.status == USED else flag.note
        assert text, flag.name


def test_the_reference_lists_every_flag_of_serve() -> None:
    table = reference("serve")
    for flag in flags_for("serve"):
        assert f"`{flag.names[0]}`" in table, flag.name
    assert len(table.splitlines()) == len(flags_for("serve")) + 2


def test_every_used_serve_flag_is_exercised_by_a_test() -> None:
    """Each flag that ``serve`` says it uses is given, under one of its spellings or its
    environment variable, by some test; the argument presets are expanded by
    test_cache_reuse.py from their table (``ARG_PRESETS``)."""
    from llama_cy.flags.presets import ARG_PRESETS

    text = "".join(p.read_text() for p in Path(__file__).parent.glob("*.py"))
    untested = [
        f.name
        for f in flags_for("serve")
        if f.status == USED
        and f.name not in ARG_PRESETS
        and not any(
            re.search(r"[\"'\s]" + re.escape(s) + r"[\"'=\s]", text)
            for s in (*f.names, *f.negative, *((f.env,) if f.env else ()))
        )
    ]
    assert untested == []
