"""Each server default is written once, in the flag table (``llama_cy/flags/table.py``):
every consumer's settings (``ServerSettings``, ``EngineSettings``, ``SequenceSettings``,
``Preparer``, ``Llama``, ``Engine``) take the table's default for each setting named after
a flag, and none writes such a default as a literal of its own. The differences are
listed here with their reasons, and the lists only hold what still differs."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from llama_cy.flags import flags_for, from_fields
from llama_cy.llama import Llama
from llama_cy.prepare import Preparer
from llama_cy.sequence_settings import SequenceSettings
from llama_cy.server.engine import Engine
from llama_cy.server.engine_settings import EngineSettings
from llama_cy.server.settings import ServerSettings

TABLE = {f.dest: f.default for f in flags_for("serve") if f.dest}
#: settings named otherwise than their flag's dest
ALIASES = {
    "max_queue": "queue_size",
    "use_jinja": "jinja",
    "slots_endpoint": "slots",
    "props_endpoint": "props",
    "force_pure_content": "skip_chat_parsing",
}
#: "none given", as the table writes it (None) and as a setting's type holds it
EMPTY: tuple[Any, ...] = (None, "", (), {})

#: (consumer, setting) -> why its default is not the table's value
DIFFERENT = {
    # the table writes llama.cpp's value syntax; the settings hold what it means
    ("ServerSettings", "threads"): "-1 (llama.cpp's 'auto') is None",
    ("ServerSettings", "flash_attn"): "'auto' is None",
    ("ServerSettings", "reasoning_effort"): "'default' (the template's) is None",
    ("ServerSettings", "fit"): "'on' is True (the default reads the table: fit == 'on')",
    ("ServerSettings", "fit_target"): "'1024' parsed: (1024,)",
    ("ServerSettings", "cors_origins"): "derived where the table has none: '*', or "
    "'localhost' with tools (cli.serve_settings)",
    ("Preparer", "reasoning_effort"): "'default' is None",
    ("Preparer", "seed"): "-1 (a fresh seed per request) is None",
    # Llama: llama-cpp-python's keywords, where None or 0 leaves the value to llama.cpp
    # or the model, which is what the table's value is
    ("Llama", "n_gpu_layers"): "None: every layer where a GPU is (llama_cy's Llama)",
    ("Llama", "numa"): "llama-cpp-python's bool or ggml_numa_strategy number",
    ("Llama", "seed"): "None: a fresh seed per call",
    ("Llama", "flash_attn"): "None: llama.cpp's auto",
    ("Llama", "op_offload"): "None: llama.cpp's default (on)",
    ("Llama", "swa_full"): "None: llama.cpp's default (off)",
    ("Llama", "rope_freq_base"): "llama-cpp-python's 0.0: the model's",
    ("Llama", "rope_freq_scale"): "llama-cpp-python's 0.0: the model's",
    ("Llama", "mmproj_offload"): "None: the projector goes where the model does",
    ("Llama", "image_min_tokens"): "None: the projector's own",
    ("Llama", "image_max_tokens"): "None: the projector's own",
    ("Llama", "video_fps"): "None: libmtmd's own",
    ("Llama", "video_timestamp_interval"): "None: libmtmd's own",
}

#: (consumer, setting) -> why its default is written as a literal beside the table's
LITERAL = {
    ("Llama", "numa"): DIFFERENT[("Llama", "numa")],
    ("Llama", "rope_freq_base"): DIFFERENT[("Llama", "rope_freq_base")],
    ("Llama", "rope_freq_scale"): DIFFERENT[("Llama", "rope_freq_scale")],
    ("Llama", "verbose"): "llama-cpp-python's verbose (llama.cpp's log on stderr), not -v",
    ("ServerSettings", "cors_origins"): DIFFERENT[("ServerSettings", "cors_origins")],
}


def _dataclass(cls: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _signature(*functions: Callable[..., Any]) -> dict[str, Any]:
    return {
        name: p.default
        for f in functions
        for name, p in inspect.signature(f).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


CONSUMERS: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "ServerSettings": (_dataclass(ServerSettings), [ServerSettings]),
    "EngineSettings": (_dataclass(EngineSettings), [EngineSettings]),
    "SequenceSettings": (_dataclass(SequenceSettings), [SequenceSettings]),
    "Preparer": (_signature(Preparer.__init__), [Preparer.__init__]),
    "Llama": (_signature(Llama.__init__, Llama._setup), [Llama.__init__, Llama._setup]),
    "Engine": (_signature(Engine.__init__), [Engine.__init__]),
}


def _dest(name: str) -> str | None:
    dest = ALIASES.get(name, name)
    return dest if dest in TABLE else None


def _differences(consumer: str) -> set[str]:
    defaults, _ = CONSUMERS[consumer]
    out = set()
    for name, value in defaults.items():
        dest = _dest(name)
        if dest is None:
            continue
        want = TABLE[dest]
        if value != want and not (value in EMPTY and want in EMPTY):
            out.add(name)
    return out


def _literals(consumer: str) -> set[str]:
    """The flag-named settings whose default is written as a literal value (not None nor
    an empty one) in the consumer's source."""
    _, sources = CONSUMERS[consumer]
    out = set()
    for source in sources:
        tree = ast.parse(textwrap.dedent(inspect.getsource(source)))
        node = tree.body[0]
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(node, ast.ClassDef):
            pairs = [
                (item.target.id, item.value)
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.value is not None
            ]
        elif isinstance(node, ast.FunctionDef):
            args = node.args
            keyword = zip(args.kwonlyargs, args.kw_defaults, strict=True)
            pairs = [(a.arg, d) for a, d in keyword if d is not None]
            every = args.posonlyargs + args.args
            positional = every[len(every) - len(args.defaults) :]
            pairs += [(a.arg, d) for a, d in zip(positional, args.defaults, strict=True)]
        for name, value in pairs:
            if _dest(name) is None:
                continue
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                continue  # read from the table (or reckoned from it)
            if literal not in EMPTY:
                out.add(name)
    return out


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_every_default_is_the_flag_tables(consumer: str) -> None:
    listed = {name for c, name in DIFFERENT if c == consumer}
    assert _differences(consumer) == listed


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_no_default_of_a_flag_is_written_outside_the_table(consumer: str) -> None:
    listed = {name for c, name in LITERAL if c == consumer}
    assert _literals(consumer) == listed


def test_the_checks_see_a_default_written_twice() -> None:
    """A settings class that writes a flag's default itself, and a wrong one, is found."""

    @dataclasses.dataclass(frozen=True)
    class Twice:
        ctx_checkpoints: int = 31

    CONSUMERS["Twice"] = (_dataclass(Twice), [Twice])
    try:
        assert _differences("Twice") == {"ctx_checkpoints"}
        assert _literals("Twice") == {"ctx_checkpoints"}
    finally:
        del CONSUMERS["Twice"]


def test_the_consumers_objects_come_from_the_servers_settings() -> None:
    """EngineSettings.of takes each field from ServerSettings by name: a flag's value
    reaches the engine and its sequences without being carried by hand."""
    settings = ServerSettings(
        model="m.gguf", ctx_checkpoints=3, checkpoint_min_step=7, special=True, max_queue=5
    )
    engine = EngineSettings.of(settings)
    assert engine.max_queue == 5
    assert engine.sequence == SequenceSettings(
        ctx_checkpoints=3, checkpoint_min_step=7, special=True
    )
    names = {f.name for f in dataclasses.fields(ServerSettings)}
    for cls in (EngineSettings, SequenceSettings):
        assert {f.name for f in dataclasses.fields(cls)} - {"sequence"} <= names
    assert from_fields(SequenceSettings, {"special": True}) == SequenceSettings(special=True)
