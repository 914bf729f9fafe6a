"""lm-evaluation-harness scoring a multiple-choice task through its ``gguf`` model
(``lm_eval/models/gguf.py``), which reads the prompt's log-probabilities from
``/v1/completions`` with ``echo=True`` (llama-cpp-python's server gives them; llama-server
gives none, so lm-eval scores at chance against it). The task is local
(``data/lm_eval/facts.jsonl``, 32 four-way questions), so nothing comes from the hub.

``llama-cy serve`` runs with flash attention off and a full-size SWA cache, as
``llama_cpp.Llama`` (and so llama-cpp-python's server) does by default: other kernels
and cache sizes round differently (up to 0.3 in a log-probability on Gemma), and the
reference values below come from ``llama_cpp.Llama`` in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from serving import Server, start_module, stop

lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the [test] extra)")
from lm_eval.models.gguf import get_result  # noqa: E402

TASK = Path(__file__).parent / "data" / "lm_eval" / "facts.jsonl"
N_CTX = "1024"

Scores = dict[tuple[int, int], float]


def evaluate(url: str, tmp: Path) -> tuple[float, Scores, list[tuple[str, str, int, int]]]:
    """lm-eval's accuracy on the task against ``url``, each (question, choice)'s
    log-likelihood, and the (context, continuation, question, choice) it asked for."""
    tasks, out = tmp / "tasks", tmp / "out"
    tasks.mkdir(parents=True)
    (tasks / "facts.yaml").write_text(
        "task: llama_cy_facts\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {TASK}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "Question: {{question}}\\nAnswer:"\n'
        'doc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{answer}}"\n'
        "metric_list:\n  - metric: acc\n"
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(tmp / "hf"),
    }
    cmd = [sys.executable, "-m", "lm_eval", "--model", "gguf", "--model_args",
           f"base_url={url}", "--tasks", "llama_cy_facts", "--include_path", str(tasks),
           "--log_samples", "--output_path", str(out)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    acc = float(results["results"]["llama_cy_facts"]["acc,none"])
    scores: Scores = {}
    asked = []
    for line in next(out.rglob("samples_*.jsonl")).read_text().splitlines():
        sample = json.loads(line)
        for key, arg in sample["arguments"].items():
            i = int(key.rsplit("_", 1)[1])
            scores[sample["doc_id"], i] = float(sample["filtered_resps"][i][0])
            asked.append((arg["arg_0"], arg["arg_1"], sample["doc_id"], i))
    return acc, scores, asked


def test_lm_eval_scores_gemma_the_same_on_both_servers(gemma_path: Path, tmp_path: Path) -> None:
    proc, port = start_module("--model", str(gemma_path), "--n_ctx", N_CTX, "--verbose", "False")
    try:
        acc_lcp, lcp, asked = evaluate(f"http://127.0.0.1:{port}", tmp_path / "llama_cpp")
    finally:
        stop(proc)
    server = Server(gemma_path, "-c", N_CTX, "-fa", "off", "--swa-full")
    try:
        acc_cy, cy, _ = evaluate(server.url, tmp_path / "llama_cy")
    finally:
        server.close()

    n = sum(1 for _ in TASK.open())
    assert len(lcp) == len(cy) == len(asked) == 4 * n
    # Gemma 3 270M knows these: far above the 0.25 of four-way chance
    assert acc_lcp == acc_cy >= 0.6

    import llama_cpp

    llm = llama_cpp.Llama(str(gemma_path), n_ctx=int(N_CTX), verbose=False)
    for context, continuation, doc, i in asked:
        out = llm.create_completion(
            context + continuation, echo=True, logprobs=1, max_tokens=1, temperature=0
        )
        own, _ = get_result(out["choices"][0]["logprobs"], len(context))
        assert own < 0
        assert abs(own - lcp[doc, i]) < 1e-3, (context, continuation)
        assert abs(own - cy[doc, i]) < 1e-3, (context, continuation)
