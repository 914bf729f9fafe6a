"""``llama-cy info``: a GGUF model's metadata, architecture, tensor type counts and size."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from llama_cy.cli.common import verbose

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    from llama_cy._gguf import gguf_tensors
    from llama_cy._model import LlamaModel

    verbose(args.verbose)
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
