"""llama-server's flags as :class:`~llama_cy.server.ServerSettings`
(:func:`settings_from_flags`, what ``llama-cy serve`` serves): its value syntaxes (``-l
TOKEN+BIAS``, ``--override-kv KEY=TYPE:VALUE``, ``--lora-scaled FNAME:SCALE``, ...), how
its flags combine (``--agent``, the speculative types, the draft model's context), and
the flags refused here, each with its reason."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from llama_cy.flags import REFUSED, add_flags, flags_for, from_fields, llama_server_argv
from llama_cy.flags.parser import reverse_prompts, sampling_values
from llama_cy.flags.presets import expand_presets
from llama_cy.flags.values import (
    chat_template,
    cpu_params,
    flash,
    grammar,
    samplers,
    split,
    tensor_overrides,
    threads,
)
from llama_cy.server.settings import ServerSettings, fit_targets

__all__ = ["parse", "refused", "settings_from_args", "settings_from_flags"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """llama-server's flags as ``llama-cy serve`` reads them: its spellings (``--a_b`` is
    ``--a-b``), the preset flags expanded, its ``LLAMA_ARG_*`` variables; ``args.argv``
    is what was given. ValueError for a flag that llama-server does not have."""
    argv = expand_presets(llama_server_argv(argv))
    parser = _Parser(prog="llama-cy serve", add_help=False)
    add_flags(parser, "serve")
    args = parser.parse_args(argv)
    args.argv = argv
    return args


def refused(args: argparse.Namespace, argv: Sequence[str]) -> str | None:
    """Why the first refused flag given (on the command line or through its environment
    variable), or a refused value of a used one, cannot be served; None if none is."""
    given = {a.split("=", 1)[0] for a in llama_server_argv(argv) if a.startswith("-")}
    for flag in flags_for("serve"):
        if flag.status != REFUSED:
            continue
        spelled = [n for n in (*flag.names, *flag.negative) if n in given]
        if spelled:
            return f"{spelled[0]} is not supported: {flag.note}"
        if flag.env and flag.env in os.environ:
            return f"${flag.env} ({flag.name}) is not supported: {flag.note}"
    if not args.cont_batching:
        return "--no-cont-batching is not supported: the engine always batches its slots together"
    return None


def settings_from_flags(argv: Sequence[str], model: str | None = None) -> ServerSettings:
    """The settings ``llama-cy serve ARGV`` serves a model with (before -fit: see
    :func:`~llama_cy.server.settings.fit`): llama-server's flags, and the model file
    (``model``, else ``-m``'s; ``""`` for a router's, which has none). ValueError for a
    flag refused here (with the reason), or unknown, or no model. The process-wide flags
    (the log's, ``--numa``, ``--prio``) and the listening ones (``--host``, ``--port``,
    TLS) are the caller's."""
    args = parse(argv)
    why = refused(args, args.argv)
    if why is not None:
        raise ValueError(why)
    path = model if model is not None else args.model
    if path is None:
        raise ValueError("no model: give -m MODEL.gguf")
    return settings_from_args(args, path)


def _logit_bias(items: Sequence[str] | None) -> dict[int, float]:
    """llama.cpp's ``-l TOKEN(+|-)BIAS`` values (several per flag, comma-separated)."""
    out: dict[int, float] = {}
    for item in (x for v in items or () for x in v.split(",") if x):
        m = re.fullmatch(r"\s*(\d+)\s*([+-])\s*(inf|[0-9.]+(?:e[+-]?\d+)?)\s*", item, re.I)
        if m is None:
            raise SystemExit(
                f"llama-cy serve: --logit-bias: expected TOKEN+BIAS or TOKEN-BIAS, not {item!r}"
            )
        bias = float(m.group(3))
        out[int(m.group(1))] = -bias if m.group(2) == "-" else bias
    return out


def _override_kv(items: Sequence[str] | None) -> dict[str, Any] | None:
    """``KEY=TYPE:VALUE`` (int, float, bool, str), several comma-separated."""
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in (x for v in items for x in v.split(",") if x):
        key, _, typed = item.partition("=")
        kind, _, value = typed.partition(":")
        try:
            if kind == "int":
                out[key] = int(value)
            elif kind == "float":
                out[key] = float(value)
            elif kind == "bool":
                if value not in ("true", "false"):
                    raise ValueError(value)
                out[key] = value == "true"
            elif kind == "str":
                out[key] = value
            else:
                raise ValueError(kind)
        except ValueError:
            raise SystemExit(
                f"llama-cy serve: --override-kv: expected KEY=TYPE:VALUE with TYPE int, "
                f"float, bool or str, not {item!r}"
            ) from None
    return out


def _loras(
    plain: Sequence[str] | None, scaled: Sequence[str] | None
) -> tuple[tuple[str, float], ...]:
    """--lora FNAME,... (scale 1) and --lora-scaled FNAME:SCALE,..."""
    out = [(p, 1.0) for v in plain or () for p in split(v)]
    for item in (x for v in scaled or () for x in split(v)):
        path, sep, scale = item.rpartition(":")
        try:
            if not sep:
                raise ValueError
            out.append((path, float(scale)))
        except ValueError:
            raise SystemExit(
                f"llama-cy serve: --lora-scaled: expected FNAME:SCALE, not {item!r}"
            ) from None
    return tuple(out)


def _api_keys(args: argparse.Namespace) -> tuple[str, ...]:
    keys = list(split(args.api_key))
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as f:
            keys += [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    return tuple(keys)


def _control_vectors(
    plain: Sequence[str] | None, scaled: Sequence[str] | None
) -> tuple[tuple[str, float], ...]:
    """--control-vector FNAME,... (strength 1) and --control-vector-scaled FNAME:SCALE,..."""
    out = [(p, 1.0) for v in plain or () for p in split(v)]
    for item in (x for v in scaled or () for x in split(v)):
        parts = item.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            out.append((parts[0], float(parts[1])))
        except ValueError:
            raise SystemExit(
                f"llama-cy serve: --control-vector-scaled: expected FNAME:SCALE, not {item!r}"
            ) from None
    return tuple(out)


def _speculative(args: argparse.Namespace) -> dict[str, Any] | None:
    """:class:`~llama_cy.Speculator` keywords from the speculative flags (None: off).
    A draft model without ``--spec-type`` means draft-simple (llama-server loads it and
    then drafts nothing)."""
    types = [t for v in args.spec_type or () for t in split(v)]
    if args.spec_default:
        types.append("ngram-mod")
    synth = args.spec_synth_len is not None or args.spec_synth_rates is not None
    if "none" in types or not (types or args.model_draft):
        if synth:
            raise SystemExit(
                "llama-cy serve: --spec-synth-* needs speculative decoding (--spec-type)"
            )
        return None
    out: dict[str, Any] = {"types": list(dict.fromkeys(types or ["draft-simple"]))}
    n_max = args.spec_draft_n_max if args.spec_draft_n_max is not None else args.draft_max
    n_min = args.spec_draft_n_min if args.spec_draft_n_min is not None else args.draft_min
    for key, value in (("n_max", n_max), ("n_min", n_min), ("p_min", args.draft_p_min)):
        if value is not None:
            out[key] = value
    for kind in ("simple", "map_k", "map_k4v"):
        sizes = {
            k: getattr(args, f"spec_ngram_{kind}_{k}") for k in ("size_n", "size_m", "min_hits")
        }
        if any(v is not None for v in sizes.values()):
            out[f"ngram_{kind}"] = {k: v for k, v in sizes.items() if v is not None}
    mod = {k: getattr(args, f"spec_ngram_mod_{k}") for k in ("n_match", "n_min", "n_max")}
    if any(v is not None for v in mod.values()):
        out["ngram_mod"] = {k: v for k, v in mod.items() if v is not None}
    if args.lookup_cache_static or args.lookup_cache_dynamic:
        out["ngram_cache"] = {
            "static": args.lookup_cache_static or "",
            "dynamic": args.lookup_cache_dynamic or "",
        }
    if args.spec_draft_sampling is not None:
        out["probabilistic"] = args.spec_draft_sampling == "probabilistic"
    if args.spec_draft_backend_sampling is not None:
        out["backend_sampling"] = args.spec_draft_backend_sampling
    if args.spec_synth_len is not None:
        out["synth_len"] = args.spec_synth_len
    if args.spec_synth_rates is not None:
        try:
            out["synth_rates"] = [float(x) for x in split(args.spec_synth_rates)]
        except ValueError:
            raise SystemExit(
                "llama-cy serve: --spec-synth-rates: expected numbers, "
                f"not {args.spec_synth_rates!r}"
            ) from None
    draft_context = {
        # As llama-server b11434: the draft's context keeps the target's CPU placement.
        **cpu_params(args),
        "type_k": args.cache_type_k_draft,
        "type_v": args.cache_type_v_draft,
        "n_threads": threads(args.threads_draft),
        "n_threads_batch": threads(args.threads_batch_draft),
    }
    if draft_context["n_threads_batch"] is None:
        draft_context["n_threads_batch"] = draft_context["n_threads"]
    out["draft_context"] = {k: v for k, v in draft_context.items() if v is not None}
    return out


def _ui_settings(args: argparse.Namespace) -> Any:
    """--ui-config (JSON) or --ui-config-file (a JSON file): /props' ``ui_settings``. As
    in arg.cpp, the later flag on the command line wins, and either over an environment
    variable (the file's, if both come from there). Unparsable JSON stops the start, as
    llama-server's load fails."""
    flags = ("--ui-config", "--webui-config", "--ui-config-file", "--webui-config-file")
    given = [a.split("=")[0] for a in getattr(args, "argv", None) or ()]
    given = [a for a in given if a in flags]
    if args.ui_config_file is not None and (
        args.ui_config is None or not given or "file" in given[-1]
    ):
        try:
            text = Path(args.ui_config_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise SystemExit(f"llama-cy serve: --ui-config-file: {exc}") from None
    elif args.ui_config is not None:
        text = args.ui_config
    else:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"llama-cy serve: failed to parse UI config: {exc}") from None


def _mmproj_device(value: str | None) -> str | None:
    """-mmdev: one device's name, or none."""
    if value is not None and len(split(value)) != 1:
        raise SystemExit(
            f"llama-cy serve: --mmproj-device: only one device may be given, not {value!r}"
        )
    return value.strip() if value is not None else None


def _prompts_dir(path: str | None) -> str | None:
    """--log-prompts-dir, made if missing (a failure is a warning, as in llama-server)."""
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            print(f"warning: failed to create prompts-log-dir {path!r}: {exc.strerror}")
    return path


def _fit_target(value: str) -> tuple[int, ...]:
    try:
        return fit_targets(value)
    except ValueError as e:
        raise SystemExit(f"llama-cy serve: {e}") from None


def _ctx_size(args: argparse.Namespace) -> int:
    """-c, or with --kv-unified-per-slot N and no -c (-c 0 counts as given), the KV pool
    of llama-server: slots x N."""
    per_slot = args.kv_unified_per_slot
    given = "LLAMA_ARG_CTX_SIZE" in os.environ or any(
        a in ("-c", "--ctx-size") or a.startswith("--ctx-size=")
        for a in getattr(args, "argv", None) or ()
    )
    if per_slot > 0 and args.ctx_size == 0 and not given:
        return int((4 if args.parallel < 0 else args.parallel) * per_slot)
    return int(args.ctx_size)


def settings_from_args(args: argparse.Namespace, model: str) -> ServerSettings:
    """The :class:`~llama_cy.server.ServerSettings` that the parsed flags ask for."""
    sampling = sampling_values(args)
    bias = _logit_bias(args.logit_bias)
    if bias:
        sampling["logit_bias"] = bias
    for key, value in (("grammar", grammar(args)), ("samplers", samplers(args))):
        if value is not None:
            sampling[key] = value
    context: dict[str, Any] = {
        "swa_full": args.swa_full,  # llama-server's false, not llama.cpp's C default
        "no_perf": not args.perf,
        "rope_scaling_type": args.rope_scaling,
        "rope_freq_base": args.rope_freq_base,
        "rope_freq_scale": (1.0 / args.rope_scale if args.rope_scale else args.rope_freq_scale),
        "yarn_orig_ctx": args.yarn_orig_ctx,
        "yarn_ext_factor": args.yarn_ext_factor,
        "yarn_attn_factor": args.yarn_attn_factor,
        "yarn_beta_slow": args.yarn_beta_slow,
        "yarn_beta_fast": args.yarn_beta_fast,
        "offload_kqv": args.kv_offload,
        "type_k": args.cache_type_k,
        "type_v": args.cache_type_v,
        "op_offload": args.op_offload,
        **cpu_params(args),
    }
    devices = None
    if args.device:
        devices = [] if args.device == "none" else list(split(args.device))
    tensor_split = [float(x) for x in split(args.tensor_split)] or None
    # --agent is --tools all with the CORS proxy; --no-agent turns both off.
    tools = ("all",) if args.agent else () if args.agent is False else split(args.tools)
    agentic = bool(tools or args.mcp_servers_config or args.mcp_servers_json)
    # As llama-server: tools or MCP servers keep CORS to local origins unless told.
    cors_origins = args.cors_origins or ("localhost" if agentic else "*")
    load: dict[str, Any] = {
        "load_mode": args.load_mode,
        "lazy_mode": args.lazy_mode,
        "no_host": args.no_host,
        "tensor_overrides": tensor_overrides(args.tensor_overrides),
        "split_mode": args.split_mode,
        "main_gpu": args.main_gpu,
        "tensor_split": tensor_split,
        "check_tensors": args.check_tensors,
        "kv_overrides": _override_kv(args.override_kv),
        "devices": devices,
        "use_extra_bufts": args.repack,
    }
    # Each setting named as its flag's dest comes from it (from_fields); these are the
    # ones read otherwise.
    return from_fields(
        ServerSettings,
        vars(args),
        model=model,
        aliases=split(args.alias),
        tags=split(args.tags),
        ctx_size=_ctx_size(args),
        fit=args.fit == "on",
        fit_target=_fit_target(args.fit_target),
        threads=threads(args.threads),
        threads_batch=threads(args.threads_batch),
        flash_attn=flash(args.flash_attn),
        api_keys=_api_keys(args),
        **chat_template(args),  # what run and chat take too, read the same way
        reasoning_effort=None if args.reasoning_effort == "default" else args.reasoning_effort,
        slots_endpoint=args.slots,
        props_endpoint=args.props,
        log_prompts_dir=_prompts_dir(args.log_prompts_dir),
        ui_mcp_proxy=bool(args.ui_mcp_proxy) if args.agent is None else args.agent,
        tools=tools,
        tools_runtime=args.tools_runtime or "",
        mcp_servers_config=args.mcp_servers_config or "",
        mcp_servers_json=args.mcp_servers_json or "",
        lora=_loras(args.lora, args.lora_scaled),
        max_queue=args.queue_size,
        ui_settings=_ui_settings(args),
        api_prefix=args.api_prefix.rstrip("/"),
        cors_origins=cors_origins,
        sampling=sampling,
        context={k: v for k, v in context.items() if v is not None},
        load=load,
        speculative=_speculative(args),
        load_draft={
            "tensor_overrides": tensor_overrides(args.tensor_overrides_draft),
            # -devd, else -dev's (common_base_params_to_speculative)
            "devices": devices
            if args.device_draft is None
            else []
            if args.device_draft == "none"
            else list(split(args.device_draft)),
        },
        reverse_prompt=tuple(reverse_prompts(args)),
        control_vectors=_control_vectors(args.control_vector, args.control_vector_scaled),
        control_vector_layer_range=(
            tuple(args.control_vector_layer_range) if args.control_vector_layer_range else None
        ),
        mmproj_device=_mmproj_device(args.mmproj_device),
    )
