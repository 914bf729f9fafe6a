"""What a parsed flag's value means, as llama.cpp reads it: a thread count, a comma list,
``-fa``, the chat-template flags, the grammar flags, the sampler order, the CPU
placement flags, the tensor placement flags. Shared by the command line and by
``ServerSettings`` built from llama-server's flags."""

from __future__ import annotations

import argparse
import json
from typing import Any

from llama_cy.cpu_params import CpuParams, parse_cpu_mask, parse_cpu_range

__all__ = [
    "chat_template",
    "cpu_params",
    "flash",
    "grammar",
    "samplers",
    "split",
    "tensor_overrides",
    "threads",
]


def chat_template(args: argparse.Namespace) -> dict[str, Any]:
    """The chat-template flags as keywords of ``Llama``/``Preparer``: a built-in name
    given to --chat-template is a ``chat_format``, anything else Jinja source."""
    from llama_cy.chat import chat_format_names

    template = args.chat_template
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            template = f.read()
    builtin = template is not None and template in chat_format_names()
    return {
        "chat_format": template if builtin else None,
        "chat_template": None if builtin else template,
        "use_jinja": args.jinja,
        "reasoning_format": args.reasoning_format,
        "reasoning_budget": args.reasoning_budget,
        "reasoning_budget_message": args.reasoning_budget_message,
        "chat_template_kwargs": args.chat_template_kwargs or {},
    }


def grammar(args: argparse.Namespace) -> str | None:
    """The grammar of --grammar, --grammar-file, -j and -jf: the last one given, as in
    llama.cpp, where each replaces the one before."""
    from llama_cy.grammar import json_schema_to_grammar

    text = None
    for dest, value in args.grammar_sources or ():
        if dest in ("grammar_file", "json_schema_file"):
            try:
                with open(value, encoding="utf-8") as f:
                    value = f.read()
            except OSError as e:
                raise SystemExit(f"llama-cy: cannot read {value!r}: {e.strerror}") from None
        if dest in ("grammar", "grammar_file"):
            text = value
            continue
        try:
            text = json_schema_to_grammar(json.loads(value))
        except ValueError as e:
            raise SystemExit(f"llama-cy: --{dest.replace('_', '-')}: {e}") from None
    return text


def samplers(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The sampler order of --samplers (names separated by ';') or --sampler-seq
    (letters): the last one given."""
    from llama_cy.sampling import sampler_types

    order = None
    for dest, value in args.sampler_order or ():
        order = sampler_types(value.split(";") if dest == "samplers" else value)
    return order


def _cpu(args: argparse.Namespace, suffix: str) -> CpuParams:
    """One pool's -C/-Cr/--cpu-strict/--prio/--poll (``suffix``: "" or "_batch")."""
    mask = None
    try:
        if getattr(args, f"cpu_mask{suffix}") is not None:
            mask = parse_cpu_mask(getattr(args, f"cpu_mask{suffix}"))
        if getattr(args, f"cpu_range{suffix}") is not None:
            mask = (mask or frozenset()) | parse_cpu_range(getattr(args, f"cpu_range{suffix}"))
    except ValueError as e:
        raise SystemExit(f"llama-cy: {e}") from None
    return CpuParams(
        cpumask=mask,
        priority=getattr(args, f"prio{suffix}"),
        strict_cpu=bool(getattr(args, f"cpu_strict{suffix}")),
        poll=getattr(args, f"poll{suffix}"),
    )


def cpu_params(args: argparse.Namespace) -> dict[str, Any]:
    """``LlamaContext``'s ``cpu_params``/``cpu_params_batch`` (None where the flags ask
    for llama.cpp's defaults). As llama.cpp's ``postprocess_cpu_params``: without
    ``-tb`` the batch threads take the generation threads' placement, and the
    ``-batch`` flags go unused."""
    main = _cpu(args, "")
    batch = _cpu(args, "_batch") if args.threads_batch is not None else main
    return {
        "cpu_params": None if main == CpuParams() else main,
        "cpu_params_batch": None if batch == CpuParams() else batch,
    }


def flash(value: str) -> bool | None:
    """``-fa on|off|auto``: True, False, or None (llama.cpp decides)."""
    return {"on": True, "off": False}.get(value)


def threads(n: int | None) -> int | None:
    """A thread-count flag: its value, or None for llama.cpp's default (-1, or 0)."""
    return n if n is not None and n > 0 else None


def split(value: str | None) -> tuple[str, ...]:
    """A comma-separated flag value's items."""
    return tuple(x.strip() for x in (value or "").split(",") if x.strip())


def tensor_overrides(entries: Any) -> list[tuple[str, str]] | None:
    """``LlamaModel.load``'s ``tensor_overrides`` from -ot, --cpu-moe, --n-cpu-moe and
    --n-cpu-ffn (or their draft kin), in the order given: the first pattern that finds
    a weight places it."""
    from llama_cy._placement import FFN_DENSE_REGEX, FFN_EXPS_REGEX, n_cpu_overrides

    out: list[tuple[str, str]] = []
    for dest, value in entries or ():
        kind = dest.removesuffix("_draft")
        if kind == "override_tensor":
            for item in value.split(","):
                pattern, eq, buft = item.partition("=")
                if not eq:
                    raise SystemExit(
                        f"llama-cy: --override-tensor: expected PATTERN=BUFFER_TYPE, not {item!r}"
                    )
                out.append((pattern, buft))
        elif kind == "cpu_moe":
            out.append((FFN_EXPS_REGEX, "CPU"))
        else:
            out += n_cpu_overrides(
                value, FFN_EXPS_REGEX if kind == "n_cpu_moe" else FFN_DENSE_REGEX
            )
    return out or None
