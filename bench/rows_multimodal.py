"""Row (10): multimodal prompts against llama-mtmd-cli's libmtmd calls."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import multimodal
from common import WORK, Comparison, alternate
from mtmd_reference import build_mtmd_reference, run_mtmd_reference

import llama_cy as lc


def bench_multimodal(
    rows: list[Comparison], tools: dict[str, Path], models: dict[str, Path], args: Any
) -> None:
    """(10) An image question's encode and prefill (bench/multimodal.py).

    ``Llama``'s chat path against llama-mtmd-cli, each in a fresh context after
    llama.cpp's warm-up decode (llama-mtmd-cli is a new process each round); then the
    building blocks against the same libmtmd calls made from C++
    (support/reference/mtmd_ref.cpp), both warm. Image decoding and resizing are outside
    both timings; the projector's encode and every decode are inside.
    """
    path = models["gemma"]
    mmproj = multimodal.projector(WORK / "models")
    cli = tools["llama-mtmd-cli"]
    uri = multimodal.IMAGE.as_uri()  # Llama reads file:// URLs
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": uri}},
                {"type": "text", "text": multimodal.QUESTION},
            ],
        }
    ]
    model = lc.LlamaModel.load(path)
    template = multimodal.CHAT_TEMPLATE.read_text()

    def fresh() -> lc.Llama:
        llm = lc.Llama.from_model(
            model,
            mmproj=str(mmproj),
            chat_template=template,
            n_ctx=2048,
            n_threads=args.threads,
            mmproj_offload=False,
        )
        llm.ctx.warmup()  # as llama.cpp's tools warm a new context up
        return llm

    # The same prompt and the same greedy reply as llama-mtmd-cli, before any timing.
    _, n_cli, text_cli = multimodal.mtmd_cli(cli, path, mmproj, args.threads, n_predict=8)
    with fresh() as llm:
        reply = llm.create_chat_completion(messages, max_tokens=8, temperature=0.0)
    ours_text = reply["choices"][0]["message"]["content"].strip()
    if ours_text != text_cli:
        raise RuntimeError(f"greedy replies differ: {ours_text!r} vs {text_cli!r}")

    def ours() -> float:
        with fresh() as llm:
            # create_chat_completion's own path, with the timings its dict leaves out
            job = llm.preparer.chat(messages, max_tokens=1, temperature=0.0)
            done = lc.completion.join_chunks(llm.generate(job))
        if done.prompt_tokens != n_cli or done.timings is None:
            raise RuntimeError(f"prompt tokens {done.prompt_tokens} != llama-mtmd-cli's {n_cli}")
        return float(done.timings.prompt_ms)

    rows.append(
        alternate(
            Comparison(
                f"(10) image question ({n_cli} prompt tokens, 256 of them the image's): "
                f"encode + prefill, Llama chat (fresh context) against llama-mtmd-cli; "
                f"same greedy reply {text_cli!r}",
                "ms",
                "≥ 0.95",
                "llama-mtmd-cli's own log (mtmd batch encode + prompt eval)",
                higher_is_better=False,
            ),
            args.rounds,
            ours,
            lambda: multimodal.mtmd_cli(cli, path, mmproj, args.threads)[0],
        )
    )

    ref = build_mtmd_reference(WORK / "loop")
    mctx = lc.MtmdContext(model, mmproj, n_threads=args.threads, use_gpu=False)
    prompt = (
        f"<start_of_turn>user\n{mctx.marker}{multimodal.QUESTION}<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
    chunks = mctx.tokenize(prompt, [mctx.bitmap(multimodal.IMAGE)])
    ctx = lc.LlamaContext(
        model, n_ctx=2048, n_batch=512, n_threads=args.threads, n_threads_batch=args.threads
    )

    def blocks() -> float:
        ctx.clear()
        t0 = time.perf_counter()
        mctx.eval_chunks(ctx, chunks)
        return (time.perf_counter() - t0) * 1e3

    def reference() -> float:
        r = run_mtmd_reference(
            ref,
            path,
            mmproj,
            prompt,
            [multimodal.IMAGE],
            WORK / "mtmd-ref",
            n_predict=0,
            threads=args.threads,
            warmup=True,
        )
        return float(r["encode_ms"] + r["prefill_ms"])

    rows.append(
        alternate(
            Comparison(
                "(10) MtmdContext.eval_chunks (encode + prefill, warm) against the same "
                "libmtmd calls from C++",
                "ms",
                "≥ 0.95",
                "mtmd_ref (llama-mtmd-cli's calls in C++, second pass of one process)",
                higher_is_better=False,
            ),
            args.rounds,
            blocks,
            reference,
        )
    )
    ctx.close()
    mctx.close()
    model.close()
