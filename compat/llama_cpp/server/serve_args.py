"""llama-cpp-python's server settings (``ModelSettings`` and ``ServerSettings``, by its
names and with its defaults and bounds) and the ``llama-cy serve`` flags that do what
each does there. A setting with no such flag is refused, with the reason. Used by
``python -m llama_cpp.server`` and by :func:`llama_cpp.server.app.create_app`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from .. import llama_cpp as capi
from .._enums import enum_name

__all__ = [
    "CPUS",
    "MODEL_SETTINGS",
    "SERVER_SETTINGS",
    "VISION_FORMATS",
    "adjust",
    "chat_handler",
    "defaults",
    "from_environment",
    "given",
    "llama_cy_settings",
    "read_config",
    "serve_argv",
    "settings_argv",
]


# ---- llama-cpp-python's settings ------------------------------------------------------------


def _bool(text: str | bool) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "on", "t", "true", "y", "yes"):
        return True
    if value in ("0", "off", "f", "false", "n", "no"):
        return False
    raise ValueError(f"Invalid boolean argument: {text}")


def _numa(text: str | bool) -> bool | int:
    """True/False, or a ggml_numa_strategy number (bool | int there)."""
    try:
        return _bool(text)
    except ValueError:
        return int(text)


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"Invalid JSON object argument: {text}")
    return value


CPUS = os.cpu_count() or 1

#: name -> (type, default, list?) of llama-cpp-python's ModelSettings and ServerSettings.
MODEL_SETTINGS: dict[str, tuple[Callable[[str], Any], Any, bool]] = {
    "model": (str, None, False),
    "model_alias": (str, None, False),
    "n_gpu_layers": (int, 0, False),
    "split_mode": (int, capi.LLAMA_SPLIT_MODE_LAYER, False),
    "main_gpu": (int, 0, False),
    "tensor_split": (float, None, True),
    "vocab_only": (_bool, False, False),
    "use_mmap": (_bool, capi.llama_supports_mmap(), False),
    "use_mlock": (_bool, capi.llama_supports_mlock(), False),
    "kv_overrides": (str, None, True),
    "rpc_servers": (str, None, False),
    "seed": (int, capi.LLAMA_DEFAULT_SEED, False),
    "n_ctx": (int, 2048, False),
    "n_batch": (int, 512, False),
    "n_ubatch": (int, 512, False),
    "n_threads": (int, max(CPUS // 2, 1), False),
    "n_threads_batch": (int, CPUS, False),
    "rope_scaling_type": (int, capi.LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED, False),
    "rope_freq_base": (float, 0.0, False),
    "rope_freq_scale": (float, 0.0, False),
    "yarn_ext_factor": (float, -1.0, False),
    "yarn_attn_factor": (float, 1.0, False),
    "yarn_beta_fast": (float, 32.0, False),
    "yarn_beta_slow": (float, 1.0, False),
    "yarn_orig_ctx": (int, 0, False),
    "mul_mat_q": (_bool, True, False),
    "logits_all": (_bool, True, False),
    "embedding": (_bool, False, False),
    "offload_kqv": (_bool, True, False),
    "flash_attn": (_bool, False, False),
    "last_n_tokens_size": (int, 64, False),
    "lora_base": (str, None, False),
    "lora_path": (str, None, False),
    "numa": (_numa, False, False),
    "chat_format": (str, None, False),
    "chat_template_kwargs": (_object, None, False),
    "clip_model_path": (str, None, False),
    "cache": (_bool, False, False),
    "cache_type": (str, "ram", False),
    "cache_size": (int, 2 << 30, False),
    "hf_tokenizer_config_path": (str, None, False),
    "hf_pretrained_model_name_or_path": (str, None, False),
    "hf_model_repo_id": (str, None, False),
    "draft_model": (str, None, False),
    "draft_model_num_pred_tokens": (int, 10, False),
    "type_k": (int, None, False),
    "type_v": (int, None, False),
    "verbose": (_bool, True, False),
}
SERVER_SETTINGS: dict[str, tuple[Callable[[str], Any], Any, bool]] = {
    "host": (str, "localhost", False),
    "port": (int, 8000, False),
    "ssl_keyfile": (str, None, False),
    "ssl_certfile": (str, None, False),
    "api_key": (str, None, False),
    "interrupt_requests": (_bool, True, False),
    "disable_ping_events": (_bool, False, False),
    "root_path": (str, "", False),
}

# Settings with no llama-server flag that does what they do there: refused unless left
# at their default, with the reason.
_REFUSED = {
    "vocab_only": "a vocab_only model cannot serve completions",
    "hf_pretrained_model_name_or_path": "a Python (Hugging Face) tokenizer cannot drive the "
    "llama-cy serve process that serves here (llama_cpp.Llama(tokenizer=...) takes one)",
    "disable_ping_events": "SSE ping events: llama-server sends none to disable",
    "root_path": "an ASGI root path: put a reverse proxy in front instead",
}
# mul_mat_q and logits_all are ignored, as llama-cpp-python's server ignores them
# (llama.cpp dropped the first; the server never returns all logits), and so is
# lora_base (its Llama keeps it and passes it to nothing).


# Bounds of llama-cpp-python's settings (pydantic's ge=), checked after its -1 -> CPU count
# for the two thread settings.
_AT_LEAST = {"n_gpu_layers": -1, "main_gpu": 0, "n_threads": 1, "n_threads_batch": 0,
             "last_n_tokens_size": 0}  # fmt: skip


def _check_bounds(s: dict[str, Any]) -> None:
    for name in ("n_threads", "n_threads_batch"):
        if s[name] == -1:
            s[name] = CPUS
    for name, lowest in _AT_LEAST.items():
        if s[name] < lowest:
            raise ValueError(f"--{name}: Input should be greater than or equal to {lowest}")
    if s["cache_type"] not in ("ram", "disk"):
        raise ValueError("--cache_type: Input should be 'ram' or 'disk'")


def defaults() -> dict[str, Any]:
    return {k: d for k, (_, d, _) in {**MODEL_SETTINGS, **SERVER_SETTINGS}.items()}


def given(*settings: dict[str, Any]) -> dict[str, Any]:
    """Every setting: those of ``settings`` that are not None, the defaults for the rest."""
    out = defaults()
    for part in settings:
        out.update((k, v) for k, v in part.items() if v is not None)
    return out


def from_environment(given: dict[str, Any]) -> dict[str, Any]:
    """Unset settings from the environment, as pydantic-settings reads them."""
    out = dict(given)
    for name, (kind, _, many) in {**MODEL_SETTINGS, **SERVER_SETTINGS}.items():
        if out.get(name) is None and name.upper() in os.environ:
            raw = os.environ[name.upper()]
            out[name] = json.loads(raw) if many else kind(raw)
    return out


def read_config(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if not os.path.exists(path):
        raise ValueError(f"Config file {path} not found!")
    with open(path, "rb") as f:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(f)
        else:
            data = json.load(f)
    models = data.pop("models", [])
    unknown = set(data) - set(SERVER_SETTINGS)
    for m in models:
        unknown |= set(m) - set(MODEL_SETTINGS)
    if unknown:
        raise ValueError(f"unknown settings in {path}: {', '.join(sorted(unknown))}")
    return data, models


# ---- to llama-server's flags ------------------------------------------------------------------


def serve_argv(server: dict[str, Any], model: dict[str, Any]) -> list[str]:
    """The ``llama-cy serve`` arguments for llama-cpp-python's settings."""
    unset = defaults()
    s = given(server, model)
    _check_bounds(s)
    for name, why in _REFUSED.items():
        if s[name] != unset[name]:
            raise ValueError(f"--{name}: {why}")
    if not s["model"]:
        raise ValueError("--model (or MODEL, or a config file's models) is required")
    path = s["model"]
    if s["hf_model_repo_id"]:  # model is a file (a glob) of the repository, as there
        from llama_cpp.llama_hub import download

        path = str(download(s["hf_model_repo_id"], s["model"], None, None, None))
    argv = ["-m", path, "--host", s["host"], "--port", str(s["port"])]
    argv += ["-ngl", str(s["n_gpu_layers"]), "-mg", str(s["main_gpu"])]
    argv += ["-sm", enum_name("LLAMA_SPLIT_MODE_", s["split_mode"])]
    argv += ["-c", str(s["n_ctx"]), "-b", str(s["n_batch"]), "-ub", str(s["n_ubatch"])]
    argv += ["-t", str(s["n_threads"]), "-tb", str(s["n_threads_batch"])]
    # llama-cpp-python's server runs one request at a time in one context of n_ctx, and
    # its Llama keeps llama.cpp's default of a full-size SWA cache (llama-server's is not)
    argv += ["-np", "1", "--swa-full"]
    if s["model_alias"]:
        argv += ["--alias", s["model_alias"]]
    if s["tensor_split"]:
        argv += ["-ts", ",".join(str(x) for x in s["tensor_split"])]
    # use_mmap/use_mlock: llama-server's load mode, as llama_cpp.Llama maps them (and, as
    # there, a LoRA turns mmap off; mlock is on by default wherever llama.cpp has it)
    mmap, mlock = s["use_mmap"] and not s["lora_path"], s["use_mlock"]
    modes = {(True, True): "mmap+mlock", (False, True): "mlock", (True, False): "mmap"}
    argv += ["-lm", modes.get((bool(mmap), bool(mlock)), "none")]
    for kv in s["kv_overrides"] or ():
        argv += ["--override-kv", kv]
    if s["rpc_servers"]:
        argv += ["--rpc", s["rpc_servers"]]
    seed = s["seed"]
    argv += ["-s", str(-1 if seed in (-1, capi.LLAMA_DEFAULT_SEED) else seed)]
    if s["rope_scaling_type"] != capi.LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED:
        argv += ["--rope-scaling", enum_name("LLAMA_ROPE_SCALING_TYPE_", s["rope_scaling_type"])]
    if s["rope_freq_base"]:
        argv += ["--rope-freq-base", str(s["rope_freq_base"])]
    if s["rope_freq_scale"]:
        argv += ["--rope-freq-scale", str(s["rope_freq_scale"])]
    argv += ["--yarn-ext-factor", str(s["yarn_ext_factor"])]
    argv += ["--yarn-attn-factor", str(s["yarn_attn_factor"])]
    argv += ["--yarn-beta-fast", str(s["yarn_beta_fast"])]
    argv += ["--yarn-beta-slow", str(s["yarn_beta_slow"])]
    if s["yarn_orig_ctx"]:
        argv += ["--yarn-orig-ctx", str(s["yarn_orig_ctx"])]
    if s["embedding"]:
        argv.append("--embeddings")
    if not s["offload_kqv"]:
        argv.append("--no-kv-offload")
    argv += ["-fa", "on" if s["flash_attn"] else "off"]
    argv += ["--repeat-last-n", str(s["last_n_tokens_size"])]
    # its requests' default repeat_penalty (llama-server's is 1.0); the other sampling
    # defaults of its request types are llama-server's too
    argv += ["--repeat-penalty", "1.1"]
    if s["lora_path"]:
        argv += ["--lora", s["lora_path"]]
    if s["numa"]:  # True, or a ggml_numa_strategy number (Llama(numa=...) as there)
        strategy = 1 if s["numa"] is True else s["numa"]
        argv += ["--numa", enum_name("GGML_NUMA_STRATEGY_", strategy, "numa")]
    chat_format = s["chat_format"] or _default_chat_format(path)
    if chat_format:
        argv += _chat_format_flags(chat_format, s)
    if s["chat_template_kwargs"]:
        argv += ["--chat-template-kwargs", json.dumps(s["chat_template_kwargs"])]
    if s["clip_model_path"] and chat_format not in VISION_FORMATS:  # else the handler's
        argv += ["--mmproj", s["clip_model_path"]]
    if s["draft_model"]:
        if s["draft_model"] != "prompt-lookup-decoding":
            raise ValueError(
                "--draft_model: llama-cpp-python's server knows only prompt-lookup-decoding"
            )
        # LlamaPromptLookupDecoding(num_pred_tokens=N): n-grams of 2, N tokens drafted,
        # as Llama(draft_model=...) maps it
        argv += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2"]
        argv += ["--spec-ngram-simple-size-m", str(s["draft_model_num_pred_tokens"])]
    for flag, key in (("-ctk", "type_k"), ("-ctv", "type_v")):
        if s[key] is not None:
            argv += [flag, enum_name("GGML_TYPE_", s[key])]
    # llama-cpp-python's prompt cache: in RAM, llama-server's --cache-ram (its size in
    # MiB); on disk it has no counterpart. Off, as llama-cpp-python's default.
    if s["cache"] and s["cache_type"] != "ram":
        raise ValueError("--cache_type disk: llama-server's prompt cache is in RAM only")
    cache_mib = max(1, s["cache_size"] >> 20) if s["cache"] else 0
    argv += ["--cache-ram", str(cache_mib)]
    if s["api_key"]:
        argv += ["--api-key", s["api_key"]]
    if s["ssl_keyfile"]:
        argv += ["--ssl-key-file", s["ssl_keyfile"]]
    if s["ssl_certfile"]:
        argv += ["--ssl-cert-file", s["ssl_certfile"]]
    if s["verbose"]:
        argv.append("--verbose")
    return argv


def llama_cy_settings(server: dict[str, Any], model: dict[str, Any]) -> Any:
    """llama-cy's ``ServerSettings`` for these settings: their llama-server flags
    (:func:`serve_argv`) as llama-cy serve reads them, changed by :func:`adjust`, fitted
    to the devices (-fit). As the command does at start, ``numa`` is set for the process,
    and ``verbose`` shows llama.cpp's log on stderr."""
    import llama_cy
    from llama_cy.server import fit, settings_from_flags

    settings = settings_from_flags(serve_argv(server, model))
    s = given(server, model)
    if s["numa"]:
        strategy = 1 if s["numa"] is True else s["numa"]
        llama_cy.numa_init(enum_name("GGML_NUMA_STRATEGY_", strategy, "numa"))
    if s["verbose"]:
        llama_cy.enable_verbose_log()
    return fit(adjust(server, model)(settings))


#: chat_format -> the name of the vision chat handler (llama_cpp.llama_chat_format) that
#: llama-cpp-python's server builds over clip_model_path
VISION_FORMATS = {
    "llava-1-5": "Llava15ChatHandler",
    "obsidian": "ObsidianChatHandler",
    "llava-1-6": "Llava16ChatHandler",
    "mtmd": "MTMDChatHandler",
    "gemma4": "Gemma4ChatHandler",
    "moondream": "MoondreamChatHandler",
    "nanollava": "NanoLlavaChatHandler",
    "llama-3-vision-alpha": "Llama3VisionAlpha",
    "minicpm-v-2.6": "MiniCPMv26ChatHandler",
    "qwen2.5-vl": "Qwen25VLChatHandler",
}


def adjust(server: dict[str, Any], model: dict[str, Any]) -> Callable[[Any], Any]:
    """What these settings change in llama-cy serve's ServerSettings beyond its flags:
    the vision format's chat handler, and a /v1/completions request's default max_tokens
    (16 in llama-cpp-python's request types, as in OpenAI's API; none in llama-server)."""
    handler = chat_handler(server, model)

    given = server.get("interrupt_requests")
    interrupt = SERVER_SETTINGS["interrupt_requests"][1] if given is None else given

    def change(settings: Any) -> Any:
        settings = dataclasses.replace(
            settings, completion_max_tokens=16, interrupt_requests=bool(interrupt)
        )
        return settings if handler is None else settings.with_chat_handler(handler)

    return change


def chat_handler(server: dict[str, Any], model: dict[str, Any]) -> Any:
    """The vision chat handler that llama-cpp-python's server builds for these settings
    (its projector ``clip_model_path``, a file of ``hf_model_repo_id`` if given), or None
    for a chat_format that is no vision format."""
    s = given(server, model)
    name = VISION_FORMATS.get(s["chat_format"] or "")
    if name is None:
        return None
    from .. import llama_chat_format

    if not s["clip_model_path"]:
        raise ValueError(
            f"--chat_format {s['chat_format']} needs --clip_model_path (the projector)"
        )
    cls = getattr(llama_chat_format, name)
    if s["hf_model_repo_id"]:
        return cls.from_pretrained(
            repo_id=s["hf_model_repo_id"], filename=s["clip_model_path"], verbose=s["verbose"]
        )
    return cls(clip_model_path=s["clip_model_path"], verbose=s["verbose"])


def _default_chat_format(path: str) -> str | None:
    """llama-cpp-python's choice when no chat_format is set: the model's own template,
    else its ``llama-2`` format (llama-server's is ChatML). None: the model's template
    (or a file that does not load, for the server to report)."""
    from llama_cy import LlamaModel
    from llama_cy.errors import LlamaError

    try:
        with LlamaModel.load(path, vocab_only=True) as model:
            return None if model.chat_template() is not None else "llama-2"
    except (LlamaError, OSError, ValueError):
        return None


def _chat_format_flags(name: str, s: dict[str, Any]) -> list[str]:
    """The serve flags that render chats as llama-cpp-python's ``chat_format`` does: a
    Jinja template of its format's prompt (_prompt_formats); for a vision format, none
    (its handler brings them: :func:`chat_handler`); for a name only llama.cpp knows, its
    template of that name. The formatter's stop strings become ``-r`` (the server's
    stops for a request that gives none)."""
    from llama_cy.chat import chat_format_names

    from .._prompt_formats import FORMATS
    from ..llama_chat_format import LlamaChatCompletionHandlerRegistry

    if name == "hf-tokenizer-config":
        return _tokenizer_config_template(s["hf_tokenizer_config_path"])
    if name in VISION_FORMATS:
        if not s["clip_model_path"]:
            raise ValueError(f"--chat_format {name} needs --clip_model_path (the projector)")
        return []  # the handler's (chat_handler()): its template, projector and layout
    if name in FORMATS:
        flags = ["--jinja", "--chat-template", FORMATS[name].template]
    elif name in chat_format_names():
        flags = ["--chat-template", name]
    elif name in (
        "functionary-v1",
        "functionary-v2",
        *LlamaChatCompletionHandlerRegistry().names(),
    ):
        raise ValueError(
            f"--chat_format {name}: llama-cpp-python's {name} handler builds its prompts "
            "and tool grammars in Python, which the server here does not run"
            + ("" if name.startswith("functionary-") else "; llama_cpp.Llama runs it")
        )
    else:
        # llama-cpp-python fails each chat request with "Invalid chat handler"; here, at start
        raise ValueError(f"--chat_format {name}: no such chat format (Invalid chat handler)")
    stop = FORMATS[name].stop if name in FORMATS else None
    return flags if stop is None else [*flags, "-r", stop]


def _tokenizer_config_template(path: str | None) -> list[str]:
    """chat_format="hf-tokenizer-config": the ``chat_template`` of the tokenizer_config.json
    at ``hf_tokenizer_config_path``, rendered by llama-server's Jinja engine (with the
    model's BOS and EOS, and its generation prompt; llama-cpp-python's own renderer
    appends an empty assistant message instead)."""
    if not path:
        raise ValueError("--chat_format hf-tokenizer-config needs --hf_tokenizer_config_path")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--hf_tokenizer_config_path {path}: {exc}") from None
    template = config.get("chat_template") if isinstance(config, dict) else None
    if not isinstance(template, str):
        raise ValueError(f"--hf_tokenizer_config_path {path}: no chat_template string in it")
    return ["--jinja", "--chat-template", template]


def settings_argv(server: dict[str, Any], model: dict[str, Any]) -> list[str]:
    """``python -m llama_cpp.server``'s flags for these settings (those given; not the
    address and TLS files, which are a front's)."""
    argv: list[str] = []
    for name, value in {**server, **model}.items():
        if value is None or name in ("host", "port", "ssl_keyfile", "ssl_certfile"):
            continue
        if isinstance(value, dict):
            argv += [f"--{name}", json.dumps(value)]
        elif isinstance(value, (list, tuple)):
            argv += [f"--{name}", *(str(v) for v in value)]
        else:
            argv += [f"--{name}", str(value)]
    return argv
