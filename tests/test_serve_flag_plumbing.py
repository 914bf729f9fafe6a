"""Flags of ``llama-cy serve`` that reach a setting, each checked to change it: read as the
server reads them (``settings_from_args``), the flag moves its setting off the default.
What the setting then does is tested where it is used (the context's ``swa_full`` in
test_context.py, the speculators' n-gram sizes in test_speculative.py, ...); here, that
no flag is parsed and then dropped on the way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llama_cy import cli
from llama_cy.cpu_params import CpuParams
from llama_cy.server.flag_settings import settings_from_args
from llama_cy.server.settings import ServerSettings

Get = Callable[[ServerSettings], Any]
SPEC = ["--spec-type", "ngram-simple"]  # speculation on: its settings exist


def spec(key: str, *sub: str) -> Get:
    def get(s: ServerSettings) -> Any:
        value: Any = s.speculative or {}
        for k in (key, *sub):
            value = value.get(k) if isinstance(value, dict) else None
        return value

    return get


CASES: list[tuple[list[str], Get, Any]] = [
    (["--swa-full"], lambda s: s.context.get("swa_full"), True),
    (["--perf"], lambda s: s.context.get("no_perf"), False),
    (["--no-kv-offload"], lambda s: s.context.get("offload_kqv"), False),
    (["--no-op-offload"], lambda s: s.context.get("op_offload"), False),
    (["--no-repack"], lambda s: s.load["use_extra_bufts"], False),
    (["--no-host"], lambda s: s.load["no_host"], True),
    (["--lazy-mode", "off"], lambda s: s.load["lazy_mode"], "off"),
    (["--device", "none"], lambda s: s.load["devices"], []),
    (["--tensor-split", "3,1"], lambda s: s.load["tensor_split"], [3.0, 1.0]),
    (["--main-gpu", "1"], lambda s: s.load["main_gpu"], 1),
    (["--spec-draft-device", "none"], lambda s: s.load_draft["devices"], []),
    (
        ["--control-vector-scaled", "a.gguf:0.5,b.gguf:2"],
        lambda s: s.control_vectors,
        (("a.gguf", 0.5), ("b.gguf", 2.0)),
    ),
    (
        ["-t", "2", "-tb", "2", "--cpu-range-batch", "0-1", "--cpu-strict-batch", "1"],
        lambda s: s.context.get("cpu_params_batch"),
        CpuParams(cpumask=frozenset({0, 1}), strict_cpu=True),
    ),
    ([*SPEC, "--spec-draft-type-v", "q8_0"], spec("draft_context", "type_v"), "q8_0"),
    ([*SPEC, "--spec-draft-threads-batch", "3"], spec("draft_context", "n_threads_batch"), 3),
    ([*SPEC, "--spec-draft-n-min", "2"], spec("n_min"), 2),
    ([*SPEC, "--draft-min", "3"], spec("n_min"), 3),
    ([*SPEC, "--spec-ngram-mod-n-min", "5"], spec("ngram_mod", "n_min"), 5),
    ([*SPEC, "--spec-ngram-mod-n-max", "9"], spec("ngram_mod", "n_max"), 9),
    ([*SPEC, "--spec-ngram-simple-min-hits", "2"], spec("ngram_simple", "min_hits"), 2),
    ([*SPEC, "--spec-ngram-map-k-size-n", "4"], spec("ngram_map_k", "size_n"), 4),
    ([*SPEC, "--spec-ngram-map-k-size-m", "6"], spec("ngram_map_k", "size_m"), 6),
    ([*SPEC, "--spec-ngram-map-k-min-hits", "3"], spec("ngram_map_k", "min_hits"), 3),
    ([*SPEC, "--spec-ngram-map-k4v-size-n", "4"], spec("ngram_map_k4v", "size_n"), 4),
    ([*SPEC, "--spec-ngram-map-k4v-size-m", "6"], spec("ngram_map_k4v", "size_m"), 6),
    ([*SPEC, "--spec-ngram-map-k4v-min-hits", "3"], spec("ngram_map_k4v", "min_hits"), 3),
    ([*SPEC, "--lookup-cache-static", "s.bin"], spec("ngram_cache", "static"), "s.bin"),
    ([*SPEC, "--lookup-cache-dynamic", "d.bin"], spec("ngram_cache", "dynamic"), "d.bin"),
    (["--ctx-checkpoints", "3"], lambda s: s.ctx_checkpoints, 3),
    (["--checkpoint-min-step", "64"], lambda s: s.checkpoint_min_step, 64),
    (["--no-mmproj-offload"], lambda s: s.mmproj_offload, False),
    (["--image-min-tokens", "64"], lambda s: s.image_min_tokens, 64),
    (["--image-max-tokens", "256"], lambda s: s.image_max_tokens, 256),
    (["--mtmd-batch-max-tokens", "64"], lambda s: s.mtmd_batch_max_tokens, 64),
    (["--video-fps", "2.5"], lambda s: s.video_fps, 2.5),
    (["--video-timestamp-interval", "250"], lambda s: s.video_timestamp_interval, 250),
    (["--video-ffmpeg-dir", "/opt/ff"], lambda s: s.video_ffmpeg_dir, "/opt/ff"),
    (["--tools-runtime", "ssh:box"], lambda s: s.tools_runtime, "ssh:box"),
    (["--timeout", "5"], lambda s: s.timeout, 5.0),
    (["--sse-ping-interval", "3"], lambda s: s.sse_ping_interval, 3.0),
    (["--reasoning-effort", "high"], lambda s: s.reasoning_effort, "high"),
    (["--no-reasoning-preserve"], lambda s: s.reasoning_preserve, False),
    (["--slot-prompt-similarity", "0.25"], lambda s: s.slot_prompt_similarity, 0.25),
    ([*SPEC, "--no-spec-draft-backend-sampling"], spec("backend_sampling"), False),
    (["--ui-config", '{"theme": "dark"}'], lambda s: s.ui_settings, {"theme": "dark"}),
    # -e (on by default): llama.cpp processes the escapes of -r and the DRY breakers
    (["-r", "a\\nb"], lambda s: s.reverse_prompt, ("a\nb",)),
    (["--no-escape", "-r", "a\\nb"], lambda s: s.reverse_prompt, ("a\\nb",)),
    (
        [
            "--dry-sequence-breaker",
            "x",
            "--dry-sequence-breaker",
            "none",
            "--dry-sequence-breaker",
            "\\t",
        ],
        lambda s: s.sampling.get("dry_sequence_breakers"),
        ["\t"],
    ),
]


def settings(*argv: str) -> ServerSettings:
    return settings_from_args(cli.parser().parse_args(["serve", *argv]), "x.gguf")


@pytest.mark.parametrize(("argv", "get", "want"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_the_flag_reaches_its_setting(argv: list[str], get: Get, want: Any) -> None:
    base = argv[: len(SPEC)] if argv[: len(SPEC)] == SPEC else []
    assert get(settings(*base)) != want  # the default is something else
    assert get(settings(*argv)) == want


@pytest.mark.parametrize(
    ("types", "n_gpu_layers", "expected"),
    [(("cpu",), -1, 0.005), (("cpu", "gpu"), -1, 0.0005), (("cpu", "gpu"), 0, 0.005)],
)
def test_the_gil_switch_interval_is_shortened_only_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, types: tuple[str, ...], n_gpu_layers: int, expected: float
) -> None:
    """llama-cy serve hands the GIL over every 0.5 ms where the model runs on a GPU (the
    engine's steps take about a millisecond there), and leaves Python's 5 ms on a CPU
    and to a process that chose its own."""
    import sys
    from types import SimpleNamespace

    import llama_cy
    from llama_cy import server

    monkeypatch.setattr(llama_cy, "devices", lambda: [SimpleNamespace(type=t) for t in types])
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        server._hand_over_the_gil_sooner(ServerSettings(model="m", n_gpu_layers=n_gpu_layers))
        assert sys.getswitchinterval() == pytest.approx(expected)
        sys.setswitchinterval(0.002)  # the process's own choice stands
        server._hand_over_the_gil_sooner(ServerSettings(model="m", n_gpu_layers=n_gpu_layers))
        assert sys.getswitchinterval() == pytest.approx(0.002)
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize(("preset", "expected"), [(None, 20_000), (50_000, 50_000), (0, 0)])
def test_a_serving_process_freezes_what_it_loaded_and_collects_the_young_less_often(
    preset: int | None, expected: int
) -> None:
    """What was loaded before serving leaves the GC's collections; the youngest
    generation's threshold is raised to 20,000, not lowered and not switched on; cycles
    made later are still collected. In a child process: the freeze is process-wide."""
    import subprocess
    import sys

    code = f"""
import gc
from llama_cy import server
preset = {preset!r}
if preset is not None:
    gc.set_threshold(preset, 7, 9)
older = gc.get_threshold()[1:]
server._quiet_gc()
assert gc.get_freeze_count() > 1000, gc.get_freeze_count()
assert gc.get_threshold() == ({expected}, *older), gc.get_threshold()
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
del a, b
assert gc.collect() >= 2
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
