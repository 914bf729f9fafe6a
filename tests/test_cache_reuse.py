"""llama-server's ``--cache-reuse`` and the request field ``n_cache_reuse``: cached chunks
that a new prompt repeats past the shared prefix are moved into place by shifting the KV
cache, not decoded again (``llama_cy.cache_reuse``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from serving import Server

from llama_cy import cli
from llama_cy.cache_reuse import reuse_chunks
from llama_cy.flags import FLAGS
from llama_cy.flags.presets import ARG_PRESETS, expand_presets

TOKENS = list(range(100, 400))
EDITED = TOKENS[:50] + TOKENS[60:]  # ten tokens cut out of the middle


class Recorder:
    """A context that records the cell moves asked of it."""

    can_shift = True

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> bool:
        self.calls.append(("rm", seq_id, p0, p1))
        return True

    def seq_add(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        self.calls.append(("add", seq_id, p0, p1, delta))


def test_chunks_move_as_llama_server_moves_them() -> None:
    ctx, cache = Recorder(), list(TOKENS)
    n = reuse_chunks([ctx], 3, cache, EDITED, 50, 16)
    assert n == len(EDITED)
    assert ctx.calls == [("rm", 3, 50, 60), ("add", 3, 60, 300, -10)]
    assert cache[:n] == EDITED
    # chunks shorter than the least size are decoded again
    ctx2, cache2 = Recorder(), list(TOKENS)
    assert reuse_chunks([ctx2], 0, cache2, EDITED, 50, 1000) == 50
    assert ctx2.calls == []


def prompt_n(server: Server, tokens: list[int], **body: Any) -> int:
    status, _, out = server.request(
        "POST", "/completion", {"prompt": tokens, "n_predict": 1, "cache_prompt": True, **body}
    )
    assert status == 200, out
    return int(out["timings"]["prompt_n"])


def test_server_reuses_shifted_chunks(tiny_model_path: Path) -> None:
    with Server(tiny_model_path, "-np", "1", "-c", "1024", "--cache-reuse", "16") as s:
        assert prompt_n(s, TOKENS) == len(TOKENS)
        assert prompt_n(s, EDITED) <= 2  # the 240 tokens after the cut came from the cache
    with Server(tiny_model_path, "-np", "1", "-c", "1024") as s:
        prompt_n(s, TOKENS)
        assert prompt_n(s, EDITED) >= 240  # off by default: decoded again
        # a request asks for it itself
        prompt_n(s, TOKENS)
        assert prompt_n(s, EDITED, n_cache_reuse=16) <= 2
        for bad in (-1, "16", 1.5):
            status, _, out = s.request(
                "POST", "/completion", {"prompt": "x", "n_predict": 1, "n_cache_reuse": bad}
            )
            assert status == 400, out
        assert prompt_n(s, TOKENS) > 0  # still serving


@pytest.mark.parametrize("preset", sorted(ARG_PRESETS))
def test_every_preset_names_a_repository_and_its_port(preset: str) -> None:
    """Each of llama-server's preset flags is a used flag of the table, and stands for a
    download (-hf) on llama-server's port for it; a later -hf or --port wins."""
    flag = next(f for f in FLAGS if preset in f.names)
    assert flag.status == "used"
    args = cli.parser().parse_args(["serve", *expand_presets([preset])])
    assert args.hf_repo.startswith("ggml-org/")
    assert args.port in (8011, 8012, 8013, 8014)
    later = expand_presets([preset, "-hf", "me/mine", "--port", "1"])
    args = cli.parser().parse_args(["serve", *later])
    assert (args.hf_repo, args.port) == ("me/mine", 1)


@pytest.mark.parametrize(
    ("preset", "want"),
    [
        ("--fim-qwen-7b-spec", {"hf_repo_draft": "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF"}),
        ("--gpt-oss-20b-default", {"hf_file": "gpt-oss-20b-mxfp4.gguf", "temperature": 1.0}),
    ],
)
def test_presets_stand_for_their_flags(preset: str, want: dict[str, Any]) -> None:
    args = cli.parser().parse_args(["serve", *expand_presets([preset, "--port", "9"])])
    assert args.port == 9  # a flag after the preset wins, as in llama.cpp
    for key, value in want.items():
        assert getattr(args, key) == value
    if preset.startswith("--fim"):
        assert args.cache_reuse == 256
        assert args.model_draft == "qwen2.5-coder-0.5b-q8_0.gguf"
