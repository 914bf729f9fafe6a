"""The side of a comparison run by another Python binding of llama.cpp, in its own
virtual environment: cyllama (its ``LLM``) or xllamacpp (its in-process ``Server``).

usage: peer_child.py JSON   (keys: peer, case, model, prompt, n, threads, n_ctx;
                             peer: cyllama or xllamacpp; case: completion or greedy)
Prints one JSON object with the timing, measured as bench/cases.py measures ours.
completion: one greedy completion of ``n`` tokens from an empty cache, wall clock, after
an untimed warm-up call. greedy (cyllama: xllamacpp has no token-level API): a Python
loop over the raw logits, argmax in NumPy, ``n`` tokens after the prompt.
"""

import json
import sys
import time
from typing import Any


def cyllama_completion(a: dict[str, Any]) -> dict[str, Any]:
    from cyllama import LLM, GenerationConfig  # type: ignore[import-not-found]

    kw = {"n_ctx": a["n_ctx"], "n_batch": 512, "n_threads": a["threads"], "temperature": 0.0}
    llm = LLM(a["model"], n_threads_batch=a["threads"], **kw)
    llm(a["prompt"], GenerationConfig(max_tokens=4, **kw))  # warm-up
    config = GenerationConfig(max_tokens=a["n"], n_threads_batch=a["threads"], **kw)
    pieces: list[str] = []  # one a token: its stats count the text's tokens again
    t0 = time.perf_counter()
    llm(a["prompt"], config, on_token=pieces.append)
    wall = time.perf_counter() - t0
    n_gen = len(pieces)
    return {"n_gen": n_gen, "gen_ms": wall * 1e3, "tokens_per_s": n_gen / wall}


def cyllama_greedy(a: dict[str, Any]) -> dict[str, Any]:
    import cyllama.llama.llama_cpp as cy  # type: ignore[import-not-found]
    import numpy as np

    cy.disable_logging()
    cy.ggml_backend_load_all()
    model = cy.LlamaModel(a["model"], cy.LlamaModelParams())
    vocab = model.get_vocab()
    params = cy.LlamaContextParams()
    params.n_ctx, params.n_batch = a["n_ctx"], 512
    params.n_threads = params.n_threads_batch = a["threads"]
    ctx = cy.LlamaContext(model, params)
    tokens = vocab.tokenize(a["prompt"], add_special=True, parse_special=False)
    ctx.decode(cy.llama_batch_get_one(tokens))
    pos, count = len(tokens), 0
    t0 = time.perf_counter()
    for i in range(a["n"]):
        token = int(np.argmax(ctx.get_logits_ith(-1)))  # its logits: a list of floats
        if vocab.is_eog(token):
            break
        count += 1
        if i == a["n"] - 1:
            break
        ctx.decode(cy.llama_batch_get_one([token], pos))
        pos += 1
    gen_s = time.perf_counter() - t0
    return {"n_gen": count, "gen_ms": gen_s * 1e3, "tokens_per_s": count / gen_s}


def xllamacpp_completion(a: dict[str, Any]) -> dict[str, Any]:
    import xllamacpp as xlc  # type: ignore[import-not-found]

    params = xlc.CommonParams()
    params.model.path = a["model"]
    params.n_ctx = a["n_ctx"]
    params.n_batch = 512
    params.n_parallel = 1
    params.cpuparams.n_threads = a["threads"]
    params.cpuparams_batch.n_threads = a["threads"]
    server = xlc.Server(params)
    body = {"prompt": a["prompt"], "temperature": 0, "cache_prompt": False}
    server.handle_completions({**body, "max_tokens": 4})  # warm-up
    t0 = time.perf_counter()
    out = server.handle_completions({**body, "max_tokens": a["n"]})
    wall = time.perf_counter() - t0
    n_gen = int(out["usage"]["completion_tokens"])
    return {"n_gen": n_gen, "gen_ms": wall * 1e3, "tokens_per_s": n_gen / wall}


def main() -> None:
    a = json.loads(sys.argv[1])
    run = {
        ("cyllama", "completion"): cyllama_completion,
        ("cyllama", "greedy"): cyllama_greedy,
        ("xllamacpp", "completion"): xllamacpp_completion,
    }[a["peer"], a["case"]]
    print(json.dumps(run(a)))


if __name__ == "__main__":
    main()
