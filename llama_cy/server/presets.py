"""llama-server's model presets (common/preset.cpp), the router's list of models: an
INI file's sections (``--models-preset``), the GGUF files of a folder
(``--models-dir``), and the router's own command line. A preset is a model's name and
the flags its server starts with; the INI keys are llama-server's flag names without
dashes (``ctx-size``, ``no-mmap``) or their environment variables (``LLAMA_ARG_CTX_SIZE``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from llama_cy import hf_cache

__all__ = [
    "DEDUP_CACHE_MODELS",
    "LOAD_ON_STARTUP",
    "STOP_TIMEOUT",
    "Option",
    "Preset",
    "PresetError",
    "deduplicated",
    "from_argv",
    "is_truthy",
    "load_from_ini",
    "load_from_models_dir",
    "option",
]

#: The options only a preset takes (common_params_add_preset_options), by dest.
LOAD_ON_STARTUP = "load_on_startup"
STOP_TIMEOUT = "stop_timeout"
_log = logging.getLogger("llama_cy.server.presets")
DEDUP_CACHE_MODELS = "dedup_cache_models"

#: common/arg.cpp's truthy and falsey spellings (common_arg_utils).
_TRUTHY = frozenset({"on", "enabled", "true", "1"})
_FALSEY = frozenset({"off", "disabled", "false", "0"})


def is_truthy(value: str) -> bool:
    return value.lower() in _TRUTHY


class PresetError(ValueError):
    """A preset file or folder that cannot be read, with llama.cpp's reason."""


@dataclass(frozen=True)
class Option:
    """One flag as a preset knows it: its spellings, whether it takes a value, and its
    environment variable."""

    dest: str
    names: tuple[str, ...]
    switch: bool = False
    negative: tuple[str, ...] = ()
    env: str | None = None
    preset_only: bool = False

    def spellings(self) -> Iterable[str]:
        yield from (n.lstrip("-") for n in (*self.names, *self.negative))
        if self.env:
            yield self.env


@cache
def _options() -> dict[str, Option]:
    """Every option by dest: llama-server's flags, the sampling flags, and the three
    a preset alone takes."""
    from llama_cy.flags import flags_for
    from llama_cy.flags.table import SAMPLING_ALIASES
    from llama_cy.sampling_settings import SAMPLING_SETTINGS

    out = {
        f.dest: Option(f.dest, f.names, f.metavar is None, f.negative, f.env)
        for f in flags_for("serve")
    }
    for s in SAMPLING_SETTINGS:
        if s.flag:
            out[s.name] = Option(s.name, (s.flag, *SAMPLING_ALIASES.get(s.flag, ())))
    for dest, name, env in (
        (LOAD_ON_STARTUP, "load-on-startup", "__PRESET_LOAD_ON_STARTUP"),
        (STOP_TIMEOUT, "stop-timeout", "__PRESET_STOP_TIMEOUT"),
        (DEDUP_CACHE_MODELS, "dedup-cache-models", "__PRESET_DEDUP_CACHE_MODELS"),
    ):
        out[dest] = Option(dest, (name,), env=env, preset_only=True)
    return out


@cache
def _by_key() -> dict[str, Option]:
    return {k: o for o in _options().values() for k in o.spellings()}


def option(dest: str) -> Option:
    return _options()[dest]


@dataclass
class Preset:
    """A model's name and its options (dest -> value, as text: ``"1"``/``"0"`` for a
    switch), in the order they were set."""

    name: str
    options: dict[str, str] = field(default_factory=dict)

    def get(self, dest: str) -> str | None:
        return self.options.get(dest)

    def set(self, dest: str, value: str) -> None:
        option(dest)  # a KeyError for a dest no flag has
        self.options[dest] = value

    def unset(self, *dests: str) -> None:
        for d in dests:
            self.options.pop(d, None)

    def merge(self, other: Preset) -> None:
        """``other``'s options over these."""
        self.options.update(other.options)

    def copy(self, name: str | None = None) -> Preset:
        return Preset(self.name if name is None else name, dict(self.options))

    def to_args(self) -> list[str]:
        """The command line: each option by its last spelling (common_preset::to_args); a
        switch set false by its ``--no-`` spelling, or left out where it has none."""
        args: list[str] = []
        for dest, value in self.options.items():
            opt = option(dest)
            if opt.preset_only:
                continue
            if not opt.switch:
                args += [opt.names[-1], value]
            elif value.lower() not in _FALSEY:
                args.append(opt.names[-1])
            elif opt.negative:
                args.append(opt.negative[-1])
        return args

    def to_ini(self) -> str:
        lines = [f"[{self.name}]"]
        for dest, value in self.options.items():
            key = option(dest).names[-1].lstrip("-")
            lines.append(f"{key} = {value}".replace("\n", "\\\n"))
        return "\n".join(lines) + "\n\n"


# One INI line (common/preset.cpp's grammar): a [section], a key = value (the value
# ends before trailing blanks and a ; or # comment), a comment, or a blank.
_SECTION = re.compile(r"[ \t]*\[[ \t]*([^\]]*?)[ \t]*\][ \t]*(?:[;#].*)?")
_KEY_VALUE = re.compile(r"([a-zA-Z_][a-zA-Z0-9_.-]*)[ \t]*=[ \t]*(.*?)[ \t]*(?:[;#].*)?")
_BLANK = re.compile(r"[ \t]*(?:[;#].*)?")
_TAG = re.compile(r"[-.]([A-Z0-9_]+)$", re.IGNORECASE)
DEFAULT_NAME = "default"


def _canonical_tag(tag: str) -> str:
    """``Q4_K_M`` for ``q4_k_m`` or ``model-q4_k_m``: a quant tag as the cache names it."""
    m = _TAG.search(tag)
    return (m.group(1) if m else tag).upper()


def _parse_ini(path: str) -> dict[str, dict[str, str]]:
    if not os.path.exists(path):
        raise PresetError(f"preset file does not exist: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        raise PresetError(f"failed to open server preset file: {path}") from None
    parsed: dict[str, dict[str, str]] = {}
    section = DEFAULT_NAME
    for line in re.split(r"\r\n|\n|\r", text):
        if m := _SECTION.fullmatch(line):
            section = m.group(1)
            parsed[section] = {}
        elif m := _KEY_VALUE.fullmatch(line):
            parsed.setdefault(section, {})[m.group(1)] = m.group(2)
        elif not _BLANK.fullmatch(line):
            raise PresetError(f"failed to parse server config file: {path}")
    return parsed


def load_from_ini(path: str) -> tuple[Preset, dict[str, Preset]]:
    """The ``[*]`` section (applied to every model) and the models of a preset file."""
    glob = Preset("*")
    out: dict[str, Preset] = {}
    for section, values in _parse_ini(path).items():
        name = section or DEFAULT_NAME
        if name not in ("*", DEFAULT_NAME) and ":" in name:
            head, _, tag = name.rpartition(":")
            name = f"{head}:{_canonical_tag(tag)}"
        preset = Preset(name)
        for key, value in values.items():
            if key == "version":  # reserved by llama.cpp
                continue
            opt = _by_key().get(key)
            if opt is None:
                raise PresetError(f"option '{key}' not recognized in preset '{name}'")
            negated = any(n.lstrip("-") == key for n in opt.negative)
            if negated:
                value = "false" if is_truthy(value) else "true"
            preset.options[opt.dest] = value
        if name == DEFAULT_NAME and not preset.options:
            continue
        if name == "*":
            glob = preset
        else:
            out[name] = preset
    return glob, out


_DRAFT_PREFIXES = ("mtp-", "dspark-", "dflash-")


def load_from_models_dir(folder: str) -> dict[str, Preset]:
    """A model per GGUF file of ``folder`` (named after the file) and per subfolder
    (named after it: its model, or the first shard of a split one, with the projector
    and draft files beside it)."""
    if not os.path.isdir(folder):
        raise PresetError(f"error: '{folder}' does not exist or is not a directory")
    out: dict[str, Preset] = {}

    def add(name: str, model: str, mmproj: str = "", draft: str = "") -> None:
        p = Preset(name, {"model": model})
        if mmproj:
            p.options["mmproj"] = mmproj
        if draft:
            p.options["model_draft"] = draft
        out[name] = p

    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir():
            model = shard = mmproj = draft = ""
            for f in sorted(os.scandir(entry.path), key=lambda e: e.name):
                if not f.is_file() or not f.name.endswith(".gguf"):
                    continue
                if "mmproj" in f.name:
                    mmproj = f.path
                elif f.name.startswith(_DRAFT_PREFIXES):
                    draft = draft or f.path
                elif "-00001-of-" in f.name:
                    shard = f.path
                else:
                    model = f.path
            if shard or model:
                add(entry.name, shard or model, mmproj, draft)
        elif entry.is_file() and entry.name.endswith(".gguf"):
            if "mmproj" in entry.name or entry.name.startswith(_DRAFT_PREFIXES):
                continue  # a companion file is no model of its own
            add(entry.name.replace(".gguf", ""), entry.path)
    return out


def from_argv(argv: Sequence[str]) -> Preset:
    """The router's own command line as a preset (common_params_to_map): the last value
    of each flag; a switch ``"1"``, its ``--no-`` spelling ``"0"``."""
    spellings: dict[str, tuple[Option, bool]] = {}
    for opt in _options().values():
        if opt.preset_only:
            continue
        for n in opt.names:
            spellings[n] = (opt, False)
        for n in opt.negative:
            spellings[n] = (opt, True)
    preset = Preset(DEFAULT_NAME)
    i = 0
    while i < len(argv):
        arg, eq, value = argv[i].partition("=")
        if not arg.startswith("--"):
            arg, eq, value = argv[i], "", ""
        found = spellings.get(arg)
        if found is None:
            raise PresetError(f"error: invalid argument: {argv[i]}")
        opt, negated = found
        if opt.switch:
            value = value if eq else ("0" if negated else "1")
        elif not eq:
            i += 1
            if i >= len(argv):
                raise PresetError(f"expected value for argument {arg}")
            value = argv[i]
        preset.options.pop(opt.dest, None)  # the last one given, last in order
        preset.options[opt.dest] = value
        i += 1
    return preset


def deduplicated(
    custom: dict[str, Preset], cached: dict[str, Preset], source: dict[str, str]
) -> set[str]:
    """The cache's models that a preset with ``dedup-cache-models`` loads (the same
    file, its model or draft model): hidden from /models."""
    used: set[str] = set()
    for p in custom.values():
        if not is_truthy(p.get(DEDUP_CACHE_MODELS) or ""):
            continue
        for repo, file in (("hf_repo", "hf_file"), ("hf_repo_draft", "model_draft")):
            with contextlib.suppress(ValueError):
                if p.get(repo) and (
                    path := hf_cache.resolve_cached_path(p.get(repo) or "", p.get(file) or "")
                ):
                    used.add(path)
    hidden = set()
    for name in cached:
        if source.get(name) == "cache" and hf_cache.resolve_cached_path(name) in used:
            _log.info("hiding cache model name=%s (deduplicated by a preset)", name)
            hidden.add(name)
    return hidden
