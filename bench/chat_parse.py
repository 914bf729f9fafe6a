"""What a streamed chat reply's parsing costs a token: ``ChatParser.update`` over the
reply so far, as the chat shaper calls it once a chunk, on a model's own template.

usage: python bench/chat_parse.py MODEL.gguf [--tokens 128] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import llama_cy as lc
from llama_cy.chat import ChatParser, ChatTemplate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = lc.LlamaModel.load(args.model)
    messages = [{"role": "user", "content": "Tell me a story"}]
    prompt = ChatTemplate(model).apply(messages, add_generation_prompt=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(100, min(30000, model.n_vocab), args.tokens)
    pieces = [model.token_to_piece(int(t)).decode("utf-8", "replace") for t in ids]
    print(f"chat format {prompt.format}")
    for _ in range(args.rounds):
        chat = ChatParser(prompt, stream=True)
        text, times = "", []
        for i, piece in enumerate(pieces):
            text += piece
            t0 = time.perf_counter()
            chat.update(text, i < len(pieces) - 1)
            times.append(time.perf_counter() - t0)
        us = np.array(times) * 1e6
        first, last = us[:10].mean(), us[-10:].mean()
        print(f"mean {us.mean():.1f} us a token; first 10 {first:.1f}, last 10 {last:.1f}")


if __name__ == "__main__":
    main()
