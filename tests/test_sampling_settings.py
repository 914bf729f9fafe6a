"""The one table of sampling settings, and everything generated from it: SamplingParams'
defaults, each side's defaults, the CLI's flags, the server's schema and renames; and the
llama-cpp-python arguments that are refused rather than ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import llama_cy as lc
from llama_cy import cli
from llama_cy.flags.parser import sampling_values
from llama_cy.prepare import Preparer
from llama_cy.sampling import SamplingParams
from llama_cy.sampling_settings import SAMPLING_SETTINGS, check, defaults, server_names
from llama_cy.server import schema
from llama_cy.server.requests import SAMPLING_FIELDS

CHAT = [{"role": "user", "content": "hi"}]


def test_sampling_params_defaults_are_the_tables() -> None:
    p = SamplingParams()
    for s in SAMPLING_SETTINGS:
        assert getattr(p, s.name) == s.default_for("completion"), s.name


def test_each_side_keeps_its_own_defaults(gemma_model: lc.LlamaModel) -> None:
    lcp = Preparer(gemma_model)
    server = Preparer(gemma_model, profile="server")
    assert lcp.completion("hi").params.temperature == 0.8
    assert lcp.chat(CHAT).params.temperature == 0.2  # llama-cpp-python's chat default
    assert server.chat(CHAT).params.temperature == 0.8  # llama-server's
    assert defaults("chat")["temperature"] == 0.2
    # Overrides (the server's flags, Llama's last_n_tokens_size) replace the defaults.
    tuned = Preparer(gemma_model, profile="server", overrides={"temperature": 0.1, "top_k": 7})
    params = tuned.chat(CHAT)
    assert (params.params.temperature, params.params.top_k) == (0.1, 7)
    assert tuned.chat(CHAT, temperature=0.5).params.temperature == 0.5
    with pytest.raises(ValueError, match="unknown sampling"):
        Preparer(gemma_model, overrides={"temprature": 0.1})


def test_ranges_and_types_are_checked(gemma_llm: lc.Llama) -> None:
    for bad in ({"top_p": 1.5}, {"min_p": -0.1}, {"mirostat_mode": 3}, {"top_k": 2.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            gemma_llm.complete("hi", max_tokens=1, **bad)
    with pytest.raises(ValueError, match="finite"):
        check({"temperature": float("nan")})
    with pytest.raises(TypeError, match="no_such"):
        gemma_llm.complete("hi", no_such=1)
    with pytest.raises(ValueError, match="tfs_z"):
        gemma_llm.complete("hi", tfs_z=0.5)
    assert gemma_llm.complete("hi", max_tokens=1, tfs_z=1.0).tokens  # "off" is accepted


def test_cli_flags_come_from_the_table() -> None:
    parser = cli.parser()
    for command in (["run", "-p", "x"], ["serve"]):
        args = parser.parse_args(command)
        for s in SAMPLING_SETTINGS:
            if not s.flag:  # a request field and keyword only (min_keep, as llama-server)
                assert not hasattr(args, s.name), s.name
                continue
            want = None if s.type is tuple else s.default
            assert getattr(args, s.name) == want, (command, s.name)
    args = parser.parse_args(
        ["serve", "--temp", "0.3", "--repeat-last-n", "5", "--dry-sequence-breaker", "x",
         "--adaptive-target", "0.4", "--adaptive-decay", "0.5"]
    )  # fmt: skip
    assert (sampling_values(args)["adaptive_target"], sampling_values(args)["adaptive_decay"]) == (
        0.4,
        0.5,
    )
    assert sampling_values(args)["temperature"] == 0.3
    assert sampling_values(args)["penalty_last_n"] == 5
    assert sampling_values(args)["dry_sequence_breakers"] == ["x"]


def test_server_fields_and_renames_come_from_the_table() -> None:
    for s in SAMPLING_SETTINGS:
        assert s.name in schema.SAMPLING
        assert SAMPLING_FIELDS[s.name] == s.name
        if s.server is not None:
            assert s.server in schema.SAMPLING
            assert SAMPLING_FIELDS[s.server] == s.name
    assert server_names() == {"repeat_last_n": "penalty_last_n", "mirostat": "mirostat_mode"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("logits_all", True),
        ("spm_infill", True),
        ("tokenizer", object()),
        ("lora_base", "base.gguf"),
    ],
)
def test_llama_cpp_python_arguments_that_cannot_work_raise(
    gemma_model: lc.LlamaModel, gemma_path: Path, name: str, value: object
) -> None:
    kwargs: dict[str, Any] = {name: value}
    with pytest.raises(NotImplementedError, match=name):
        lc.Llama.from_model(gemma_model, **kwargs)
    with pytest.raises(NotImplementedError, match=name):
        lc.Llama(gemma_path, **kwargs)


def test_their_off_values_are_accepted(gemma_model: lc.LlamaModel) -> None:
    off = {"chat_handler": None, "draft_model": None, "logits_all": False, "spm_infill": False}
    with lc.Llama.from_model(gemma_model, n_ctx=64, no_perf=True, **off) as llm:
        assert llm.complete("hi", max_tokens=2, temperature=0).tokens
        perf = llm.ctx.perf()
        assert perf.n_eval > 0  # counted, but not timed: no_perf turns the timers off
        assert perf.t_eval_ms == 0.0
        assert perf.t_p_eval_ms == 0.0


def test_detokenize_with_prev_tokens(gemma_llm: lc.Llama) -> None:
    prev = gemma_llm.tokenize(b"Hello", add_bos=False)
    more = gemma_llm.tokenize(b" world, again", add_bos=False)
    whole = gemma_llm.detokenize(prev + more)
    assert gemma_llm.detokenize(more, prev_tokens=prev) == whole[len(gemma_llm.detokenize(prev)) :]
    assert gemma_llm.detokenize(prev) + gemma_llm.detokenize(more, prev_tokens=prev) == whole


def test_min_keep_and_adaptive_p_reach_the_chain(tiny_model_path: Path) -> None:
    """llama-server's min_keep (top-p, min-p, typical-p and XTC keep that many) and
    adaptive-p's target and decay (--adaptive-target/--adaptive-decay) are the chain's,
    as common_sampler_init passes them (they were fixed at 0, -1 and 0.9)."""
    with lc.Llama(tiny_model_path, n_ctx=256, verbose=False) as llm:

        def texts(seeds: range, **kw: Any) -> set[str]:
            return {
                llm.create_completion("Hello", max_tokens=8, seed=s, **kw)["choices"][0]["text"]
                for s in seeds
            }

        # one candidate past top-p: the same text whatever the seed; 50 kept: not
        flat = {"samplers": ["top_p", "temperature"], "top_p": 1e-6, "temperature": 5.0}
        assert len(texts(range(4), **flat)) == 1
        assert len(texts(range(4), **flat, min_keep=50)) > 1
        adaptive = {"samplers": ["top_k", "adaptive_p"], "adaptive_decay": 0.0}
        assert texts(range(1), **adaptive, adaptive_target=0.9) != texts(
            range(1), **adaptive, adaptive_target=0.001
        )
        with pytest.raises(ValueError, match="min_keep"):
            llm.create_completion("Hello", max_tokens=1, min_keep=-1)
