"""The llama-cpp-python side of a comparison; runs in bench's own virtual environment.

usage: lcp_child.py JSON   (keys: case, model, prompt, n, threads, n_ctx, seed;
                            case: greedy, sampling or completion)
Prints one JSON object with the timing, measured like bench/cases.py measures ours.
"""

import json
import sys
import time

import numpy as np
from llama_cpp import Llama


def main() -> None:
    a = json.loads(sys.argv[1])
    llm = Llama(
        a["model"],
        n_ctx=a["n_ctx"],
        n_batch=512,
        n_threads=a["threads"],
        n_threads_batch=a["threads"],
        verbose=False,
    )
    if a["case"] == "completion":
        # Greedy create_completion from an empty cache, after one untimed warm-up call.
        llm.create_completion(a["prompt"], max_tokens=4, temperature=0)
        llm.reset()
        t0 = time.perf_counter()
        out = llm.create_completion(a["prompt"], max_tokens=a["n"], temperature=0)
        wall = time.perf_counter() - t0
        n_gen = out["usage"]["completion_tokens"]
        print(json.dumps({"n_gen": n_gen, "gen_ms": wall * 1e3, "tokens_per_s": n_gen / wall}))
        return
    tokens = llm.tokenize(a["prompt"].encode(), add_bos=True)
    llm.eval(tokens)
    rng = np.random.default_rng(a.get("seed", 0))
    count = 0
    t0 = time.perf_counter()
    for i in range(a["n"]):
        logits = llm.scores[llm.n_tokens - 1]  # its copy of the logits, as its API gives them
        if a["case"] == "greedy":
            token = int(np.argmax(logits))
        else:
            top = np.argpartition(logits, -40)[-40:]
            z = logits[top] / 0.8
            p = np.exp(z - z.max())
            token = int(top[rng.choice(40, p=p / p.sum())])
        if llm.token_eos() == token:
            break
        count += 1
        if i == a["n"] - 1:
            break
        llm.eval([token])
    gen_s = time.perf_counter() - t0
    print(json.dumps({"n_gen": count, "gen_ms": gen_s * 1e3, "tokens_per_s": count / gen_s}))


if __name__ == "__main__":
    main()
