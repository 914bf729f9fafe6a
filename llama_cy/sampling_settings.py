"""The one table of sampling settings.

Each :class:`Setting` names a knob once: its Python name (llama-cpp-python's), its type
and range, llama-server's name for it where that differs, its command-line flag
(llama.cpp's tools') and its defaults. Everything else is generated from this table:
:class:`~llama_cy.sampling.SamplingParams`' defaults, ``Llama``'s keyword defaults, the
CLI's sampling flags, the server's request schema and renames, and ``/props``.

Where llama-cpp-python and llama-server disagree on a default, each side keeps its own:
``lcp`` is llama-cpp-python's default for completions, ``lcp_chat`` for chat
completions; both fall back to ``default`` (llama.cpp's ``common_params_sampling``,
which is llama-server's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "SAMPLING_SETTINGS",
    "Profile",
    "Setting",
    "check",
    "defaults",
    "server_names",
]

#: Whose defaults: llama-cpp-python's completion or chat calls, or llama-server's.
Profile = Literal["completion", "chat", "server"]

_SAME = object()


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  #: the Python keyword and SamplingParams field (llama-cpp-python's name)
    type: type  #: int, float or tuple (of str)
    default: Any  #: llama-server's (llama.cpp's common) default
    flag: str  #: llama.cpp's command-line flag ("": none, a request field and keyword only)
    help: str
    lo: float | None = None  #: smallest allowed value (None: unbounded)
    hi: float | None = None  #: largest allowed value
    server: str | None = None  #: llama-server's request field, where it differs from name
    lcp: Any = _SAME  #: llama-cpp-python's default for completions, where it differs
    lcp_chat: Any = _SAME  #: llama-cpp-python's default for chat completions

    @property
    def server_name(self) -> str:
        return self.server or self.name

    def default_for(self, profile: Profile) -> Any:
        if profile == "chat" and self.lcp_chat is not _SAME:
            return self.lcp_chat
        if profile in ("chat", "completion") and self.lcp is not _SAME:
            return self.lcp
        return self.default


_S = Setting
SAMPLING_SETTINGS: tuple[Setting, ...] = (
    _S("temperature", float, 0.8, "--temp", "temperature (<= 0: greedy)", lcp_chat=0.2),
    _S("top_k", int, 40, "--top-k", "top-k sampling (<= 0: off)"),
    _S("top_p", float, 0.95, "--top-p", "top-p sampling (1: off)", 0.0, 1.0),
    _S("min_p", float, 0.05, "--min-p", "min-p sampling (0: off)", 0.0, 1.0),
    _S("typical_p", float, 1.0, "--typical", "locally typical sampling p (1: off)", 0.0),
    _S("repeat_penalty", float, 1.0, "--repeat-penalty", "repetition penalty (1: off)", 0.0),
    _S("frequency_penalty", float, 0.0, "--frequency-penalty", "frequency penalty (0: off)"),
    _S("presence_penalty", float, 0.0, "--presence-penalty", "presence penalty (0: off)"),
    _S(
        "penalty_last_n",
        int,
        64,
        "--repeat-last-n",
        "tokens the penalties look back over (-1: the context, 0: off)",
        -1,
        server="repeat_last_n",
    ),
    _S("dry_multiplier", float, 0.0, "--dry-multiplier", "DRY multiplier (0: off)", 0.0),
    _S("dry_base", float, 1.75, "--dry-base", "DRY base", 0.0),
    _S("dry_allowed_length", int, 2, "--dry-allowed-length", "DRY allowed length", 0),
    _S(
        "dry_penalty_last_n",
        int,
        -1,
        "--dry-penalty-last-n",
        "tokens DRY looks back over (-1: the context)",
        -1,
    ),
    _S(
        "dry_sequence_breakers",
        tuple,
        ("\n", ":", '"', "*"),
        "--dry-sequence-breaker",
        "a DRY sequence breaker (repeatable)",
    ),
    _S("xtc_probability", float, 0.0, "--xtc-probability", "XTC probability (0: off)", 0.0, 1.0),
    _S("xtc_threshold", float, 0.1, "--xtc-threshold", "XTC threshold", 0.0, 1.0),
    _S("top_n_sigma", float, -1.0, "--top-nsigma", "top-n-sigma sampling (<= 0: off)"),
    _S("dynatemp_range", float, 0.0, "--dynatemp-range", "dynamic temperature range", 0.0),
    _S("dynatemp_exponent", float, 1.0, "--dynatemp-exp", "dynamic temperature exponent"),
    _S(
        "mirostat_mode",
        int,
        0,
        "--mirostat",
        "mirostat (0: off, 1: v1, 2: v2)",
        0,
        2,
        server="mirostat",
    ),
    _S("mirostat_tau", float, 5.0, "--mirostat-ent", "mirostat target entropy (tau)"),
    _S("mirostat_eta", float, 0.1, "--mirostat-lr", "mirostat learning rate (eta)"),
    _S(
        "adaptive_target",
        float,
        -1.0,
        "--adaptive-target",
        "adaptive-p (in --samplers): select tokens near this probability (0 to 1; < 0: off)",
    ),
    _S(
        "adaptive_decay",
        float,
        0.9,
        "--adaptive-decay",
        "adaptive-p: decay of the target's adaptation (0 to 0.99; llama.cpp clamps it)",
    ),
    _S(
        "min_keep",
        int,
        0,
        "",  # llama-server's request field; no flag sets it
        "the fewest candidates top-p, min-p, typical-p and XTC leave (0: none)",
        0,
    ),
)

_BY_NAME: dict[str, Setting] = {s.name: s for s in SAMPLING_SETTINGS}
_PROFILES: tuple[Profile, ...] = ("completion", "chat", "server")
_DEFAULTS: dict[Profile, dict[str, Any]] = {
    p: {s.name: s.default_for(p) for s in SAMPLING_SETTINGS} for p in _PROFILES
}


def defaults(profile: Profile) -> dict[str, Any]:
    """Every setting's default for ``profile``, by Python name (a new dict)."""
    return dict(_DEFAULTS[profile])


def server_names() -> dict[str, str]:
    """llama-server's request field -> the Python name, for the fields named differently."""
    return {s.server: s.name for s in SAMPLING_SETTINGS if s.server is not None}


def check(values: Mapping[str, Any]) -> None:
    """ValueError for a value of the wrong type or outside its setting's range."""
    # Every request checks every setting: a plain int or float in range passes at once.
    for name, value in values.items():
        s = _BY_NAME.get(name)
        if s is None or value is None:
            continue
        kind, t = s.type, type(value)
        if (
            ((t is int and kind is not tuple) or (t is float and kind is float))
            and math.isfinite(value)
            and (s.lo is None or value >= s.lo)
            and (s.hi is None or value <= s.hi)
        ):
            continue
        _check_one(s, value)


def _check_one(s: Setting, value: Any) -> None:
    name = s.name
    if s.type is tuple:
        if isinstance(value, str) or not all(isinstance(x, str) for x in value):
            raise ValueError(f"{name} must be a list of strings")
        return
    number = (int,) if s.type is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, number):
        raise ValueError(f"{name} must be {'an integer' if s.type is int else 'a number'}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, not {value}")
    if (s.lo is not None and value < s.lo) or (s.hi is not None and value > s.hi):
        lo = "-inf" if s.lo is None else f"{s.lo:g}"
        hi = "inf" if s.hi is None else f"{s.hi:g}"
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
