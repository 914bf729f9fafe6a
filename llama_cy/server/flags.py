"""llama-server's command line, flag by flag: what ``llama-cy serve`` does with each.

Every flag of ``llama-server --help`` (llama.cpp b11434) is in :data:`FLAGS` with one of
three fates:

- ``USED``: it does here what it does in llama-server, defaults and environment
  variable (``LLAMA_ARG_*``) included; the command line wins over the environment.
- ``INERT``: accepted because it cannot change what this server does (``note`` says
  why: downloads that never happen here, llama.cpp's web UI, an HTTP thread pool that
  asyncio does not have).
- ``REFUSED``: given, it stops the start with a message that names it and says why
  (``note``), so that nothing is silently ignored.

The sampling flags come from :data:`~llama_cy.sampling_settings.SAMPLING_SETTINGS` and set the
defaults of requests, as in llama-server.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llama_cy.sampling_settings import SAMPLING_SETTINGS

__all__ = ["FLAGS", "Flag", "add_flags", "check_flags", "flag_table", "llama_server_argv"]

Status = Literal["used", "inert", "refused"]
USED: Status = "used"
INERT: Status = "inert"
REFUSED: Status = "refused"

_DOWNLOAD = "models are not downloaded here: pass a local file with -m"
_SPEC_PLACEMENT = "the draft model's devices and tensor placement are not exposed here"
_MTMD = (
    "video input, the projector's device and its batch size are not chosen here (the "
    "projector runs on the first GPU, or the CPU)"
)
_ROUTER = "llama-cy serve runs one model: llama-server's router mode is not built"
_AFFINITY = "CPU affinity, priority and polling are not exposed by llama_cy's thread pools"
_PRESET = "a preset downloads its models: pass a local file with -m"
_LATER = "not built yet (issue 16 is building it)"


def _on_off(value: str) -> str:
    v = value.lower()
    if v in ("on", "enabled", "true", "1"):
        return "on"
    if v in ("off", "disabled", "false", "0"):
        return "off"
    if v == "auto":
        return "auto"
    raise argparse.ArgumentTypeError(f"expected on, off or auto, not {value!r}")


def _gpu_layers(value: str) -> int:
    """llama-server's -ngl: a number, 'all', or 'auto' (every layer that fits: all, here,
    since llama_cy does not fit layers to free memory)."""
    if value in ("all", "auto"):
        return -1
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, 'all' or 'auto', not {value!r}"
        ) from None


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return n


def _parallel(value: str) -> int:
    n = int(value)
    if n == 0 or n < -1:
        raise argparse.ArgumentTypeError("--parallel must be -1 (auto) or at least 1")
    return n


def _json_object(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _bool_env(value: str) -> bool:
    return value.lower() in ("1", "true", "on", "enabled", "yes")


@dataclass(frozen=True)
class Flag:
    """One of llama-server's flags."""

    names: tuple[str, ...]
    dest: str
    status: Status = USED
    metavar: str | None = None  #: None: a switch
    type: Callable[[str], Any] = str
    default: Any = None
    negative: tuple[str, ...] = ()  #: the ``--no-...`` spellings of a switch
    env: str | None = None
    choices: Sequence[str] | None = None
    optional: bool = False  #: the value may be left out (``-fa`` alone means ``on``)
    const: Any = None  #: the value when it is left out
    repeat: bool = False  #: may be given several times (values collect in a list)
    nargs: int | None = None  #: values after the flag, where more than one
    note: str = ""  #: inert: why it is harmless here; refused: why it is not taken
    help: str = ""

    @property
    def name(self) -> str:
        """The flag's long name, the one messages use."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


def _f(names: str, dest: str, metavar: str | None = None, **kw: Any) -> Flag:
    return Flag(tuple(names.split()), dest, metavar=metavar, **kw)


def _inert(names: str, dest: str, metavar: str | None, note: str, **kw: Any) -> Flag:
    return _f(names, dest, metavar, status=INERT, note=note, **kw)


def _refused(names: str, dest: str, metavar: str | None, note: str, **kw: Any) -> Flag:
    return _f(names, dest, metavar, status=REFUSED, note=note, **kw)


_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")

#: llama-server's flags (its ``--help``, in its order), less the sampling ones.
# A table, one flag per entry: kept as written.
# fmt: off
FLAGS: tuple[Flag, ...] = (
    # ---- common params ----
    _f("--version", "version", None, help="print the version and exit"),
    _refused("-cl --cache-list", "cache_list", None, _DOWNLOAD),
    _refused("--completion-bash", "completion_bash", None, "no bash completion script here"),
    _f("-t --threads", "threads", "N", type=int, default=-1, env="LLAMA_ARG_THREADS",
       help="CPU threads for generation (-1: llama.cpp's default)"),
    _f("-tb --threads-batch", "threads_batch", "N", type=int,
       help="CPU threads for prompt processing (default: --threads)"),
    _refused("-C --cpu-mask", "cpu_mask", "M", _AFFINITY),
    _refused("-Cr --cpu-range", "cpu_range", "lo-hi", _AFFINITY),
    _refused("--cpu-strict", "cpu_strict", "<0|1>", _AFFINITY),
    _refused("--prio", "prio", "N", _AFFINITY),
    _refused("--poll", "poll", "<0...100>", _AFFINITY),
    _refused("-Cb --cpu-mask-batch", "cpu_mask_batch", "M", _AFFINITY),
    _refused("-Crb --cpu-range-batch", "cpu_range_batch", "lo-hi", _AFFINITY),
    _refused("--cpu-strict-batch", "cpu_strict_batch", "<0|1>", _AFFINITY),
    _refused("--prio-batch", "prio_batch", "N", _AFFINITY),
    _refused("--poll-batch", "poll_batch", "<0|1>", _AFFINITY),
    _f("-c --ctx-size", "ctx_size", "N", type=int, default=0, env="LLAMA_ARG_CTX_SIZE",
       help="context size, shared by the slots (0: the model's training context)"),
    _f("-n --predict --n-predict", "n_predict", "N", type=int, default=-1,
       env="LLAMA_ARG_N_PREDICT", help="most tokens per request (-1: no limit)"),
    _f("-b --batch-size", "batch_size", "N", type=int, default=2048, env="LLAMA_ARG_BATCH",
       help="logical batch size"),
    _f("-ub --ubatch-size", "ubatch_size", "N", type=int, default=512, env="LLAMA_ARG_UBATCH",
       help="physical batch size"),
    _f("--keep", "keep", "N", type=int, default=0,
       help="tokens of the prompt a context shift keeps (-1: all)"),
    _f("--swa-full", "swa_full", None, env="LLAMA_ARG_SWA_FULL", help="full-size SWA cache"),
    _f("-fa --flash-attn", "flash_attn", "[on|off|auto]", type=_on_off, default="auto",
       env="LLAMA_ARG_FLASH_ATTN", optional=True, const="on", help="flash attention"),
    _f("--perf", "perf", None, negative=("--no-perf",), env="LLAMA_ARG_PERF",
       help="llama.cpp's internal timings (default: off)"),
    _inert("-e --escape", "escape", None,
           "it applies to prompts given on the command line, which a server has none of",
           negative=("--no-escape",)),
    _f("--rope-scaling", "rope_scaling", "{none,linear,yarn}", env="LLAMA_ARG_ROPE_SCALING_TYPE",
       choices=("none", "linear", "yarn"), help="RoPE scaling method (default: the model's)"),
    _f("--rope-scale", "rope_scale", "N", type=float, env="LLAMA_ARG_ROPE_SCALE",
       help="RoPE context scaling factor"),
    _f("--rope-freq-base", "rope_freq_base", "N", type=float, env="LLAMA_ARG_ROPE_FREQ_BASE",
       help="RoPE base frequency (default: the model's)"),
    _f("--rope-freq-scale", "rope_freq_scale", "N", type=float, env="LLAMA_ARG_ROPE_FREQ_SCALE",
       help="RoPE frequency scaling factor"),
    _f("--yarn-orig-ctx", "yarn_orig_ctx", "N", type=int, env="LLAMA_ARG_YARN_ORIG_CTX",
       help="YaRN: original context size"),
    _f("--yarn-ext-factor", "yarn_ext_factor", "N", type=float, env="LLAMA_ARG_YARN_EXT_FACTOR",
       help="YaRN: extrapolation mix factor"),
    _f("--yarn-attn-factor", "yarn_attn_factor", "N", type=float, env="LLAMA_ARG_YARN_ATTN_FACTOR",
       help="YaRN: attention magnitude scale"),
    _f("--yarn-beta-slow", "yarn_beta_slow", "N", type=float, env="LLAMA_ARG_YARN_BETA_SLOW",
       help="YaRN: high correction dim"),
    _f("--yarn-beta-fast", "yarn_beta_fast", "N", type=float, env="LLAMA_ARG_YARN_BETA_FAST",
       help="YaRN: low correction dim"),
    _f("-kvo --kv-offload", "kv_offload", None, default=True, negative=("-nkvo", "--no-kv-offload"),
       env="LLAMA_ARG_KV_OFFLOAD", help="KV cache on the GPU (default: on)"),
    _f("--repack", "repack", None, default=True, negative=("-nr", "--no-repack"),
       env="LLAMA_ARG_REPACK", help="repack weights for the CPU (default: on)"),
    _refused("--no-host", "no_host", None, "llama_cy does not expose host-buffer bypass"),
    _f("-ctk --cache-type-k", "cache_type_k", "TYPE", default="f16", env="LLAMA_ARG_CACHE_TYPE_K",
       choices=_CACHE_TYPES, help="KV cache type of K"),
    _f("-ctv --cache-type-v", "cache_type_v", "TYPE", default="f16", env="LLAMA_ARG_CACHE_TYPE_V",
       choices=_CACHE_TYPES, help="KV cache type of V"),
    _inert("-dt --defrag-thold", "defrag_thold", "N",
           "deprecated in llama.cpp, where it does nothing either", type=float),
    _f("--rpc", "rpc", "SERVERS", env="LLAMA_ARG_RPC", help="ggml RPC servers: HOST:PORT,..."),
    _f("-lm --load-mode", "load_mode", "MODE", default="auto", env="LLAMA_ARG_LOAD_MODE",
       choices=("auto", "none", "mmap", "mlock", "mmap+mlock"),
       help="how the weights are loaded (dio, llama.cpp's DirectIO, is not exposed)"),
    _refused("-lzm --lazy-mode", "lazy_mode", "MODE", "lazy tensor reads are not exposed"),
    _f("--numa", "numa", "TYPE", env="LLAMA_ARG_NUMA", choices=("distribute", "isolate", "numactl"),
       help="NUMA optimizations"),
    _f("-dev --device", "device", "<dev1,dev2,..>", env="LLAMA_ARG_DEVICE",
       help="devices to offload to, comma-separated (none: no offload)"),
    _f("--list-devices", "list_devices", None, help="print the devices and exit"),
    _refused("-ot --override-tensor", "override_tensor", "PATTERN=TYPE,...",
             "tensor buffer overrides are not exposed by llama_cy's model loader"),
    _refused("-cmoe --cpu-moe", "cpu_moe", None, "needs tensor buffer overrides (not exposed)"),
    _refused("-ncmoe --n-cpu-moe", "n_cpu_moe", "N", "needs tensor buffer overrides"),
    _refused("-ncffn --n-cpu-ffn", "n_cpu_ffn", "N", "needs tensor buffer overrides"),
    _f("-ngl --gpu-layers --n-gpu-layers", "n_gpu_layers", "N", type=_gpu_layers, default=-1,
       env="LLAMA_ARG_N_GPU_LAYERS",
       help="layers on the GPU: a number, 'all' or 'auto' (all: llama_cy does not fit)"),
    _f("-sm --split-mode", "split_mode", "{none,layer,row,tensor}", default="layer",
       env="LLAMA_ARG_SPLIT_MODE", choices=("none", "layer", "row"),
       help="how to split the model over GPUs (tensor, experimental in llama.cpp, is not exposed)"),
    _f("-ts --tensor-split", "tensor_split", "N0,N1,...", env="LLAMA_ARG_TENSOR_SPLIT",
       help="share of the model per GPU"),
    _f("-mg --main-gpu", "main_gpu", "INDEX", type=int, default=0, env="LLAMA_ARG_MAIN_GPU",
       help="the GPU for split-mode none/row"),
    _f("-fit --fit", "fit", "[on|off]", type=_on_off, default="off", env="LLAMA_ARG_FIT",
       help="fit unset arguments to device memory: only 'off' is built here"),
    _refused("-fitt --fit-target", "fit_target", "MiB,...", "--fit is not built here"),
    _refused("-fitc --fit-ctx", "fit_ctx", "N", "--fit is not built here"),
    _f("--check-tensors", "check_tensors", None, help="check the weights for invalid values"),
    _f("--override-kv", "override_kv", "KEY=TYPE:VALUE,...", repeat=True,
       help="override model metadata (types: int, float, bool, str)"),
    _f("--op-offload", "op_offload", None, default=True, negative=("--no-op-offload",),
       help="offload host tensor operations to the device (default: on)"),
    _f("--lora", "lora", "FNAME", repeat=True,
       help="LoRA adapters, comma-separated (scale 1); a request's 'lora' sets its own"),
    _f("--lora-scaled", "lora_scaled", "FNAME:SCALE,...", repeat=True,
       help="LoRA adapters with their scales"),
    _refused("--control-vector", "control_vector", "FNAME", "control vectors are not served yet"),
    _refused("--control-vector-scaled", "control_vector_scaled", "FNAME:SCALE,...",
             "control vectors are not served yet"),
    _refused("--control-vector-layer-range", "control_vector_layer_range", "START END",
             "control vectors are not served yet", nargs=2),
    _f("-m --model", "model", "FNAME", env="LLAMA_ARG_MODEL",
       help="GGUF model file (default: the Gemma 3 270M demo model, if installed)"),
    _refused("-mu --model-url", "model_url", "URL", _DOWNLOAD, env="LLAMA_ARG_MODEL_URL"),
    _refused("-dr --docker-repo", "docker_repo", "REPO", _DOWNLOAD, env="LLAMA_ARG_DOCKER_REPO"),
    _refused("-hf -hfr --hf-repo", "hf_repo", "<user>/<model>[:quant]", _DOWNLOAD,
             env="LLAMA_ARG_HF_REPO"),
    _refused("-hff --hf-file", "hf_file", "FILE", _DOWNLOAD, env="LLAMA_ARG_HF_FILE"),
    _inert("-hft --hf-token", "hf_token", "TOKEN", "nothing is downloaded, so no token is sent"),
    _f("--log-disable", "log_disable", None, help="no log"),
    _f("--log-file", "log_file", "FNAME", env="LLAMA_ARG_LOG_FILE", help="log to a file"),
    _refused("--log-jsonl", "log_jsonl", None, "JSONL logging is not built here",
             negative=("--no-log-jsonl",)),
    _inert("--log-colors", "log_colors", "[on|off|auto]", "the log has no colours here",
           optional=True, const="on"),
    _f("-v --verbose --log-verbose", "verbose", None, help="log everything, llama.cpp's log too"),
    _inert("--offline", "offline", None, "nothing is downloaded here, online or not",
           env="LLAMA_ARG_OFFLINE"),
    _f("-lv --verbosity --log-verbosity", "verbosity", "N", type=int, default=3,
       env="LLAMA_ARG_LOG_VERBOSITY", help="log threshold: 1 error, 2 warning, 3 info, 4+ debug"),
    _inert("--log-prefix", "log_prefix", None, "the log's lines have no llama.cpp prefix here",
           negative=("--no-log-prefix",)),
    _inert("--log-timestamps", "log_timestamps", None, "the log's format is Python logging's here",
           negative=("--no-log-timestamps",)),
    _f("--spec-draft-type-k -ctkd --cache-type-k-draft", "cache_type_k_draft", "TYPE",
       default="f16", choices=_CACHE_TYPES, help="KV cache type of K for the draft model"),
    _f("--spec-draft-type-v -ctvd --cache-type-v-draft", "cache_type_v_draft", "TYPE",
       default="f16", choices=_CACHE_TYPES, help="KV cache type of V for the draft model"),
    # ---- sampling params (the rest come from SAMPLING_SETTINGS) ----
    _refused("--samplers", "samplers", "SAMPLERS", _LATER),
    _refused("--sampler-seq --sampling-seq", "sampler_seq", "SEQUENCE", _LATER),
    _f("-s --seed", "seed", "SEED", type=int, default=-1, help="default seed (-1: random)"),
    _refused("--ignore-eos", "ignore_eos", None, _LATER),
    _f("-l --logit-bias", "logit_bias", "TOKEN_ID(+/-)BIAS", repeat=True,
       help="default logit bias, e.g. 15043+1"),
    _refused("--grammar", "grammar", "GRAMMAR", _LATER),
    _refused("--grammar-file", "grammar_file", "FNAME", _LATER),
    _refused("-j --json-schema", "json_schema", "SCHEMA", _LATER),
    _refused("-jf --json-schema-file", "json_schema_file", "FILE", _LATER),
    _f("-bs --backend-sampling", "backend_sampling", None, env="LLAMA_ARG_BACKEND_SAMPLING",
       help="sample in the graph, on the output layer's device (default: disabled; a request's "
            "backend_sampling overrides it)"),
    # ---- speculative params ----
    _refused("--spec-draft-hf -hfd -hfrd --hf-repo-draft", "hf_repo_draft", "REPO", _DOWNLOAD),
    _f("--spec-draft-threads -td --threads-draft", "threads_draft", "N", type=int,
       help="CPU threads of the draft model (default: --threads)"),
    _f("--spec-draft-threads-batch -tbd --threads-batch-draft", "threads_batch_draft", "N",
       type=int, help="CPU threads of the draft model's batches (default: --threads-draft)"),
    _refused("--spec-draft-cpu-mask -Cd --cpu-mask-draft", "cpu_mask_draft", "M", _AFFINITY),
    _refused("--spec-draft-cpu-range -Crd --cpu-range-draft", "cpu_range_draft", "lo-hi",
             _AFFINITY),
    _refused("--spec-draft-cpu-strict --cpu-strict-draft", "cpu_strict_draft", "<0|1>",
             _AFFINITY),
    _refused("--spec-draft-prio --prio-draft", "prio_draft", "N", _AFFINITY),
    _refused("--spec-draft-poll --poll-draft", "poll_draft", "<0|1>", _AFFINITY),
    _refused("--spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft", "cpu_mask_batch_draft", "M",
             _AFFINITY),
    _refused("--spec-draft-cpu-range-batch -Crbd --cpu-range-batch-draft",
             "cpu_range_batch_draft", "lo-hi", _AFFINITY),
    _refused("--spec-draft-cpu-strict-batch --cpu-strict-batch-draft", "cpu_strict_batch_draft",
             "<0|1>", _AFFINITY),
    _refused("--spec-draft-prio-batch --prio-batch-draft", "prio_batch_draft", "N", _AFFINITY),
    _refused("--spec-draft-poll-batch --poll-batch-draft", "poll_batch_draft", "<0|1>", _AFFINITY),
    _refused("--spec-draft-override-tensor -otd --override-tensor-draft", "override_tensor_draft",
             "PATTERN=TYPE,...", _SPEC_PLACEMENT),
    _refused("--spec-draft-cpu-moe -cmoed --cpu-moe-draft", "cpu_moe_draft", None,
             _SPEC_PLACEMENT),
    _refused("--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft",
             "n_cpu_moe_draft", "N", _SPEC_PLACEMENT),
    _f("--spec-draft-n-max", "spec_draft_n_max", "N", type=_non_negative,
       env="LLAMA_ARG_SPEC_DRAFT_N_MAX", help="most tokens a draft model drafts (default: 3)"),
    _f("--spec-draft-n-min", "spec_draft_n_min", "N", type=int, env="LLAMA_ARG_SPEC_DRAFT_N_MIN",
       help="fewest tokens a draft model's draft keeps (default: 0)"),
    _f("--spec-synth-len", "spec_synth_len", "L", type=float, env="LLAMA_ARG_SPEC_SYNTH_LEN",
       help="target mean synthetic acceptance length (benchmarking only: the text is not valid)"),
    _f("--spec-synth-rates", "spec_synth_rates", "P0,P1,...", env="LLAMA_ARG_SPEC_SYNTH_RATES",
       help="synthetic acceptance rate per draft position (benchmarking only)"),
    _f("--spec-draft-p-split --draft-p-split", "draft_p_split", "P", type=float,
       env="LLAMA_ARG_SPEC_DRAFT_P_SPLIT", help="speculative decoding split probability"),
    _f("--spec-draft-p-min --draft-p-min", "draft_p_min", "P", type=float,
       env="LLAMA_ARG_SPEC_DRAFT_P_MIN",
       help="a draft model stops drafting below this probability (default: 0)"),
    _inert("--spec-draft-backend-sampling", "spec_draft_backend_sampling", None,
           "llama.cpp samples on the backend for the draft-eagle3/-mtp/-dflash types only, "
           "which llama_cy does not run", negative=("--no-spec-draft-backend-sampling",),
           env="LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING"),
    _f("--spec-draft-sampling", "spec_draft_sampling", "{greedy}", choices=("greedy",),
       env="LLAMA_ARG_SPEC_DRAFT_SAMPLING",
       help="greedy: the draft model's argmax, verified by match (probabilistic drafting "
            "with rejection sampling is not built)"),
    _refused("--spec-draft-device -devd --device-draft", "device_draft", "<dev1,..>",
             _SPEC_PLACEMENT),
    _f("--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft", "n_gpu_layers_draft",
       "N", type=_gpu_layers, default=-1, env="LLAMA_ARG_N_GPU_LAYERS_DRAFT",
       help="draft model layers on the GPU: a number, 'auto' or 'all' (default: all)"),
    _f("--spec-draft-model -md --model-draft", "model_draft", "FNAME",
       env="LLAMA_ARG_SPEC_DRAFT_MODEL",
       help="draft model for speculative decoding (draft-simple unless --spec-type says)"),
    _f("--spec-type", "spec_type", "TYPES", repeat=True, env="LLAMA_ARG_SPEC_TYPE",
       help="speculative types, comma-separated: draft-simple, ngram-simple, ngram-map-k, "
            "ngram-map-k4v, ngram-mod, ngram-cache, or none"),
    _f("--spec-ngram-mod-n-min", "spec_ngram_mod_n_min", "N", type=int,
       help="ngram-mod: fewest tokens a draft keeps (default: 48)"),
    _f("--spec-ngram-mod-n-max", "spec_ngram_mod_n_max", "N", type=int,
       help="ngram-mod: most tokens drafted (default: 64)"),
    _f("--spec-ngram-mod-n-match", "spec_ngram_mod_n_match", "N", type=int,
       help="ngram-mod: lookup length (default: 24)"),
    _f("--spec-ngram-simple-size-n", "spec_ngram_simple_size_n", "N", type=int,
       help="ngram-simple: length of the lookup n-gram (default: 12)"),
    _f("--spec-ngram-simple-size-m", "spec_ngram_simple_size_m", "N", type=int,
       help="ngram-simple: length of the drafted m-gram (default: 48)"),
    _f("--spec-ngram-simple-min-hits", "spec_ngram_simple_min_hits", "N", type=int,
       help="ngram-simple: minimum hits (default: 1)"),
    _f("--spec-ngram-map-k-size-n", "spec_ngram_map_k_size_n", "N", type=int,
       help="ngram-map-k: length of the lookup n-gram (default: 12)"),
    _f("--spec-ngram-map-k-size-m", "spec_ngram_map_k_size_m", "N", type=int,
       help="ngram-map-k: length of the drafted m-gram (default: 48)"),
    _f("--spec-ngram-map-k-min-hits", "spec_ngram_map_k_min_hits", "N", type=int,
       help="ngram-map-k: minimum hits (default: 1)"),
    _f("--spec-ngram-map-k4v-size-n", "spec_ngram_map_k4v_size_n", "N", type=int,
       help="ngram-map-k4v: length of the lookup n-gram (default: 12)"),
    _f("--spec-ngram-map-k4v-size-m", "spec_ngram_map_k4v_size_m", "N", type=int,
       help="ngram-map-k4v: length of the drafted m-gram (default: 48)"),
    _f("--spec-ngram-map-k4v-min-hits", "spec_ngram_map_k4v_min_hits", "N", type=int,
       help="ngram-map-k4v: minimum hits (default: 1)"),
    _refused("--spec-ngram-size-n", "spec_ngram_size_n", "N",
             "removed from llama-server: use the respective --spec-ngram-*-size-n"),
    _refused("--spec-ngram-size-m", "spec_ngram_size_m", "N",
             "removed from llama-server: use the respective --spec-ngram-*-size-m"),
    _refused("--spec-ngram-min-hits", "spec_ngram_min_hits", "N",
             "removed from llama-server: use the respective --spec-ngram-*-min-hits"),
    _f("--draft --draft-n --draft-max", "draft_max", "N", type=_non_negative,
       env="LLAMA_ARG_DRAFT_MAX",
       help="older name of --spec-draft-n-max (llama-server b11434 removed it)"),
    _f("--draft-min --draft-n-min", "draft_min", "N", type=int, env="LLAMA_ARG_DRAFT_MIN",
       help="older name of --spec-draft-n-min (llama-server b11434 removed it)"),
    # ---- example-specific params ----
    _f("-lcs --lookup-cache-static", "lookup_cache_static", "FNAME",
       help="ngram-cache: static lookup cache file (read)"),
    _f("-lcd --lookup-cache-dynamic", "lookup_cache_dynamic", "FNAME",
       help="ngram-cache: dynamic lookup cache file (read)"),
    _refused("--kv-unified-per-slot", "kv_unified_per_slot", "N",
             "a per-slot cap on the unified KV pool is not built here"),
    _refused("-ctxcp --ctx-checkpoints --swa-checkpoints", "ctx_checkpoints", "N",
             "context checkpoints are not built here"),
    _refused("-cms --checkpoint-min-step", "checkpoint_min_step", "N",
             "context checkpoints are not built here"),
    _refused("-cram --cache-ram", "cache_ram", "N",
             "the host-memory prompt cache is not built here"),
    _f("-kvu --kv-unified", "kv_unified", None, negative=("-no-kvu", "--no-kv-unified"),
       env="LLAMA_ARG_KV_UNIFIED",
       help="one KV buffer shared by all slots (default: on when --parallel is auto)"),
    _inert("--cache-idle-slots", "cache_idle_slots", None,
           "it needs the host-memory prompt cache (--cache-ram), which is not built here: "
           "idle slots keep their KV as they are",
           negative=("--no-cache-idle-slots",)),
    _f("--context-shift", "context_shift", None, negative=("--no-context-shift",),
       env="LLAMA_ARG_CONTEXT_SHIFT",
       help="when a slot's context fills, drop half of it and go on (default: off)"),
    _inert("-r --reverse-prompt", "reverse_prompt", "PROMPT",
           "it is for interactive mode; requests give their own 'stop'", repeat=True),
    _refused("-sp --special", "special", None, "not applicable to llama-server's output"),
    _f("--warmup", "warmup", None, default=True, negative=("--no-warmup",),
       help="run an empty decode before serving (default: on)"),
    _f("--spm-infill", "spm_infill", None,
       help="/infill puts the suffix before the prefix (some models want this)"),
    _f("--pooling", "pooling", "{none,mean,cls,last,rank}", env="LLAMA_ARG_POOLING",
       choices=("none", "mean", "cls", "last", "rank"),
       help="embedding pooling (default: the model's)"),
    _f("-np --parallel", "parallel", "N", type=_parallel, default=-1, env="LLAMA_ARG_N_PARALLEL",
       help="slots (-1: auto, 4 with a unified KV cache)"),
    _f("-cb --cont-batching", "cont_batching", None, default=True,
       negative=("-nocb", "--no-cont-batching"), env="LLAMA_ARG_CONT_BATCHING",
       help="continuous batching (always on here: --no-cont-batching is refused)"),
    _f("-mm --mmproj", "mmproj", "FILE", env="LLAMA_ARG_MMPROJ",
       help="multimodal projector file: images and audio in requests"),
    _refused("-mmu --mmproj-url", "mmproj_url", "URL", _DOWNLOAD),
    _inert("--mmproj-auto", "mmproj_auto", None,
           "it concerns a projector downloaded with -hf, and nothing is downloaded here",
           negative=("--no-mmproj", "--no-mmproj-auto")),
    _f("--mmproj-offload", "mmproj_offload", None, default=True,
       negative=("--no-mmproj-offload",), env="LLAMA_ARG_MMPROJ_OFFLOAD",
       help="run the projector on the GPU (default: on)"),
    _refused("-mmdev --mmproj-device", "mmproj_device", "DEVICE", _MTMD),
    _f("--image-min-tokens", "image_min_tokens", "N", type=int, default=-1,
       env="LLAMA_ARG_IMAGE_MIN_TOKENS",
       help="fewest tokens an image becomes (dynamic-resolution projectors)"),
    _f("--image-max-tokens", "image_max_tokens", "N", type=int, default=-1,
       env="LLAMA_ARG_IMAGE_MAX_TOKENS",
       help="most tokens an image becomes (dynamic-resolution projectors)"),
    _refused("--mtmd-batch-max-tokens", "mtmd_batch_max_tokens", "N", _MTMD),
    _refused("--video-fps", "video_fps", "N", _MTMD),
    _refused("--video-timestamp-interval", "video_timestamp_interval", "N", _MTMD),
    _refused("--video-ffmpeg-dir", "video_ffmpeg_dir", "DIR", _MTMD),
    _f("-a --alias", "alias", "STRING", env="LLAMA_ARG_ALIAS",
       help="the model's names in the API, comma-separated (default: the file name)"),
    _f("--tags", "tags", "STRING", env="LLAMA_ARG_TAGS",
       help="the model's tags, comma-separated (informational)"),
    _f("--embd-normalize", "embd_normalize", "N", type=int, default=2,
       help="/embedding's normalization: -1 none, 0 max-abs int16, 1 taxicab, 2 euclidean, "
            ">2 p-norm"),
    _f("--host", "host", "HOST", default="127.0.0.1", env="LLAMA_ARG_HOST",
       help="addresses to listen on, comma-separated, or UNIX socket paths ending in .sock"),
    _f("--port", "port", "PORT", type=int, default=8080, env="LLAMA_ARG_PORT",
       help="port to listen on"),
    _f("--reuse-port", "reuse_port", None, env="LLAMA_ARG_REUSE_PORT",
       help="let several sockets bind the same port"),
    _f("--path", "path", "PATH", env="LLAMA_ARG_STATIC_PATH",
       help="serve static files from this folder"),
    _f("--cors-origins", "cors_origins", "ORIGINS", env="LLAMA_ARG_CORS_ORIGINS",
       help="allowed CORS origins, comma-separated ('localhost': local origins only; "
            "default: *, or localhost with tools or MCP servers)"),
    _f("--cors-methods", "cors_methods", "METHODS", default="GET, POST, DELETE, OPTIONS",
       env="LLAMA_ARG_CORS_METHODS", help="allowed CORS methods"),
    _f("--cors-headers", "cors_headers", "HEADERS", default="*", env="LLAMA_ARG_CORS_HEADERS",
       help="allowed CORS headers"),
    _f("--cors-credentials", "cors_credentials", None, default=True,
       negative=("--no-cors-credentials",), env="LLAMA_ARG_CORS_CREDENTIALS",
       help="allow CORS credentials"),
    _f("--api-prefix", "api_prefix", "PREFIX", default="", env="LLAMA_ARG_API_PREFIX",
       help="path prefix of every route, without the trailing slash"),
    _inert("--ui-config --webui-config", "ui_config", "JSON",
           "it configures llama.cpp's web UI, which is not shipped here"),
    _inert("--ui-config-file --webui-config-file", "ui_config_file", "PATH",
           "it configures llama.cpp's web UI, which is not shipped here"),
    _f("--ui-mcp-proxy --webui-mcp-proxy", "ui_mcp_proxy", None,
       negative=("--no-ui-mcp-proxy", "--no-webui-mcp-proxy"), env="LLAMA_ARG_UI_MCP_PROXY",
       help="/cors-proxy?url=... forwards GET and POST (only x-llama-server-proxy-header-* "
            "headers go along); do not enable where untrusted clients reach the server"),
    _f("--tools", "tools", "TOOL1,TOOL2,...", env="LLAMA_ARG_TOOLS",
       help="llama-server's built-in agent tools at /tools ('all', or read_file, "
            "file_glob_search, grep_search, exec_shell_command, write_file, edit_file, "
            "get_info); do not enable where untrusted clients reach the server"),
    _f("--tools-runtime", "tools_runtime", "OPTION", env="LLAMA_ARG_TOOLS_RUNTIME",
       help="run the tools in an isolate: docker:IMAGE, podman:IMAGE, "
            "docker-container:ID, podman-container:ID or ssh:TARGET"),
    _f("--mcp-servers-config", "mcp_servers_config", "PATH",
       env="LLAMA_ARG_MCP_SERVERS_CONFIG",
       help="a JSON file of MCP servers (Cursor's format) whose tools /tools serves"),
    _f("--mcp-servers-json", "mcp_servers_json", "JSON", env="LLAMA_ARG_MCP_SERVERS_JSON",
       help="MCP servers as inline JSON (Cursor's format)"),
    _f("-ag --agent", "agent", None, negative=("-no-ag", "--no-agent"), env="LLAMA_ARG_AGENT",
       help="every built-in tool and the CORS proxy (--tools all --ui-mcp-proxy)"),
    _f("--ui --webui", "ui", None, default=True, negative=("--no-ui", "--no-webui"),
       env="LLAMA_ARG_UI", help="a small chat page at / (default: on)"),
    _f("--embedding --embeddings", "embeddings", None, env="LLAMA_ARG_EMBEDDINGS",
       help="embeddings only"),
    _f("--rerank --reranking", "reranking", None, env="LLAMA_ARG_RERANKING",
       help="/rerank, with a model that has a ranking head"),
    _f("--api-key", "api_key", "KEY", env="LLAMA_API_KEY",
       help="API keys, comma-separated: 'Authorization: Bearer KEY'"),
    _f("--api-key-file", "api_key_file", "FNAME", env="LLAMA_ARG_API_KEY_FILE",
       help="a file of API keys, one per line ('#': a comment)"),
    _f("--ssl-key-file", "ssl_key_file", "FNAME", env="LLAMA_ARG_SSL_KEY_FILE",
       help="PEM private key: serve HTTPS"),
    _f("--ssl-cert-file", "ssl_cert_file", "FNAME", env="LLAMA_ARG_SSL_CERT_FILE",
       help="PEM certificate: serve HTTPS"),
    _f("--chat-template-kwargs", "chat_template_kwargs", "STRING", type=_json_object,
       env="LLAMA_ARG_CHAT_TEMPLATE_KWARGS",
       help="JSON object of template variables, e.g. '{\"enable_thinking\": false}'"),
    _f("-to --timeout", "timeout", "N", type=float, default=3600.0, env="LLAMA_ARG_TIMEOUT",
       help="HTTP read/write timeout in seconds"),
    _f("--sse-ping-interval", "sse_ping_interval", "N", type=float, default=30.0,
       env="LLAMA_ARG_SSE_PING_INTERVAL",
       help="seconds between SSE pings on a quiet stream (-1: none)"),
    _inert("--threads-http", "threads_http", "N",
           "requests are served by one asyncio loop; compute runs on the engine's thread", type=int,
           env="LLAMA_ARG_THREADS_HTTP"),
    _f("--cache-prompt", "cache_prompt", None, default=True, negative=("--no-cache-prompt",),
       env="LLAMA_ARG_CACHE_PROMPT", help="reuse a slot's KV cache for a shared prefix"),
    _f("--cache-reuse", "cache_reuse", "N", type=int, default=0, env="LLAMA_ARG_CACHE_REUSE",
       help="only 0 is built here (KV-shifting reuse of chunks is not)"),
    _f("--metrics", "metrics", None, env="LLAMA_ARG_ENDPOINT_METRICS",
       help="Prometheus metrics at /metrics"),
    _f("--props", "props", None, env="LLAMA_ARG_ENDPOINT_PROPS",
       help="allow POST /props (no property can be changed yet, as in llama-server)"),
    _f("--slots", "slots", None, default=True, negative=("--no-slots",),
       env="LLAMA_ARG_ENDPOINT_SLOTS", help="the /slots endpoint (default: on)"),
    _f("--slot-save-path", "slot_save_path", "PATH",
       help="folder for /slots/ID?action=save|restore"),
    _f("--media-path", "media_path", "PATH",
       help="folder that file:// media URLs are read under (default: none allowed)"),
    _refused("--models-dir", "models_dir", "PATH", _ROUTER, env="LLAMA_ARG_MODELS_DIR"),
    _refused("--models-preset", "models_preset", "PATH", _ROUTER),
    _refused("--models-max", "models_max", "N", _ROUTER),
    _refused("--models-autoload", "models_autoload", None, _ROUTER,
             negative=("--no-models-autoload",)),
    _f("--jinja", "jinja", None, default=True, negative=("--no-jinja",), env="LLAMA_ARG_JINJA",
       help="render with llama.cpp's Jinja engine (--no-jinja: its built-in formatter)"),
    _f("--reasoning-format", "reasoning_format", "FORMAT", default="auto",
       env="LLAMA_ARG_THINK", choices=("none", "auto", "deepseek", "deepseek-legacy"),
       help="where thoughts go: none, auto/deepseek (reasoning_content), deepseek-legacy"),
    _f("-rea --reasoning", "reasoning", "[on|off|auto]", type=_on_off, default="auto",
       env="LLAMA_ARG_REASONING", help="thinking in chats (auto: as the template says)"),
    _f("--reasoning-effort", "reasoning_effort", "LEVEL", default="default",
       env="LLAMA_ARG_REASONING_EFFORT", help="reasoning effort given to the template"),
    _f("--reasoning-budget", "reasoning_budget", "N", type=int, default=-1,
       env="LLAMA_ARG_THINK_BUDGET", help="most tokens of thought (-1: no limit)"),
    _f("--reasoning-budget-message", "reasoning_budget_message", "MESSAGE", default="",
       env="LLAMA_ARG_THINK_BUDGET_MESSAGE", help="text forced when the budget runs out"),
    _f("--reasoning-preserve", "reasoning_preserve", None, default=True,
       negative=("--no-reasoning-preserve",), env="LLAMA_ARG_REASONING_PRESERVE",
       help="keep earlier turns' reasoning in the prompt (default: on)"),
    _f("--chat-template", "chat_template", "JINJA_TEMPLATE", env="LLAMA_ARG_CHAT_TEMPLATE",
       help="a Jinja template, or a built-in template's name"),
    _f("--chat-template-file", "chat_template_file", "FILE", env="LLAMA_ARG_CHAT_TEMPLATE_FILE",
       help="a file with a Jinja chat template"),
    _refused("--skip-chat-parsing", "skip_chat_parsing", None, _LATER,
             negative=("--no-skip-chat-parsing",), env="LLAMA_ARG_SKIP_CHAT_PARSING"),
    _f("--prefill-assistant", "prefill_assistant", None, default=True,
       negative=("--no-prefill-assistant",), env="LLAMA_ARG_PREFILL_ASSISTANT",
       help="a final assistant message is continued, not closed (default: on)"),
    _f("-sps --slot-prompt-similarity", "slot_prompt_similarity", "SIMILARITY", type=float,
       default=0.1, help="how much of a slot's prompt a request must share to be sent there"),
    _f("--lora-init-without-apply", "lora_init_without_apply", None,
       help="load the LoRA adapters at scale 0 (POST /lora-adapters sets them)"),
    _f("--sleep-idle-seconds", "sleep_idle_seconds", "SECONDS", type=float, default=-1.0,
       help="free the model after this many idle seconds; the next request loads it "
            "again (-1: never)"),
    _refused("--log-prompts-dir", "log_prompts_dir", "PATH", "prompt logging is not built here"),
    _refused("--embd-gemma-default", "embd_gemma_default", None, _PRESET),
    _refused("--fim-qwen-1.5b-default", "fim_qwen_15b_default", None, _PRESET),
    _refused("--fim-qwen-3b-default", "fim_qwen_3b_default", None, _PRESET),
    _refused("--fim-qwen-7b-default", "fim_qwen_7b_default", None, _PRESET),
    _refused("--fim-qwen-7b-spec", "fim_qwen_7b_spec", None, _PRESET),
    _refused("--fim-qwen-14b-spec", "fim_qwen_14b_spec", None, _PRESET),
    _refused("--fim-qwen-30b-default", "fim_qwen_30b_default", None, _PRESET),
    _refused("--gpt-oss-20b-default", "gpt_oss_20b_default", None, _PRESET),
    _refused("--gpt-oss-120b-default", "gpt_oss_120b_default", None, _PRESET),
    _refused("--vision-gemma-4b-default", "vision_gemma_4b_default", None, _PRESET),
    _refused("--vision-gemma-12b-default", "vision_gemma_12b_default", None, _PRESET),
    _f("--spec-default", "spec_default", None,
       help="llama-server's default speculative decoding: ngram-mod (24, 48, 64)"),
    # ---- llama-cy's own ----
    _f("--queue-size", "queue_size", "N", type=int, default=256,
       help="requests that may wait for a slot (more get 503) [llama-cy]"),
    _f("--queue-timeout", "queue_timeout", "S", type=float, default=600.0,
       help="seconds a request may wait for a slot before a 503 [llama-cy]"),
)
# fmt: on

#: The sampling flags' other spellings in llama-server.
_SAMPLING_ALIASES = {
    "--temp": ("--temperature",),
    "--top-nsigma": ("--top-n-sigma",),
    "--typical": ("--typical-p",),
}


def _convert(flag: Flag, text: str) -> Any:
    return flag.type(text)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """llama-server's flags on ``parser``, their environment variables as defaults."""
    known = parser.add_argument_group("llama-server's flags")
    inert = parser.add_argument_group(
        "accepted, with no effect here (each says why in `llama-cy serve --flag-table`)"
    )
    refused = parser.add_argument_group("refused: given, they stop the start and say why")
    for flag in FLAGS:
        group = {USED: known, INERT: inert, REFUSED: refused}[flag.status]
        default = flag.default
        if flag.env and flag.status == USED and flag.env in os.environ:
            raw = os.environ[flag.env]
            default = _bool_env(raw) if flag.metavar is None else _convert(flag, raw)
        help_text = flag.help or flag.note
        if flag.metavar is None and flag.negative:
            group.add_argument(
                *flag.names, dest=flag.dest, action="store_true", default=default, help=help_text
            )
            group.add_argument(
                *flag.negative, dest=flag.dest, action="store_false", help=argparse.SUPPRESS
            )
        elif flag.metavar is None:
            group.add_argument(
                *flag.names, dest=flag.dest, action="store_true", default=default, help=help_text
            )
        else:
            kw: dict[str, Any] = {
                "dest": flag.dest,
                "metavar": flag.metavar.strip("<>[]").replace(" ", "_") or "VALUE",
                "type": flag.type,
                "help": help_text,
            }
            if flag.choices is not None:
                kw["choices"] = flag.choices
                kw.pop("metavar")
            if flag.nargs:
                group.add_argument(*flag.names, nargs=flag.nargs, default=default, **kw)
            elif flag.repeat:
                group.add_argument(*flag.names, action="append", default=None, **kw)
            elif flag.optional:
                group.add_argument(*flag.names, nargs="?", const=flag.const, default=default, **kw)
            else:
                group.add_argument(*flag.names, default=default, **kw)
    samp = parser.add_argument_group("default sampling of requests (llama-server's)")
    for s in SAMPLING_SETTINGS:
        names = (s.flag, *_SAMPLING_ALIASES.get(s.flag, ()))
        if s.type is tuple:
            samp.add_argument(*names, dest=s.name, action="append", default=None, help=s.help)
        else:
            samp.add_argument(
                *names, dest=s.name, type=s.type, default=s.default, help=f"{s.help} ({s.default})"
            )


def llama_server_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` as llama-server reads it: in a ``--`` flag, ``_`` means ``-``
    (``--backend_sampling`` is ``--backend-sampling``; common/arg.cpp)."""
    out = []
    for a in argv:
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            a = name.replace("_", "-") + eq + value
        out.append(a)
    return out


def check_flags(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Stop with a message naming the first refused flag given (on the command line or
    through its environment variable), or a refused value of a used one."""
    given = {a.split("=", 1)[0] for a in llama_server_argv(argv) if a.startswith("-")}
    for flag in FLAGS:
        if flag.status != REFUSED:
            continue
        spelled = [n for n in (*flag.names, *flag.negative) if n in given]
        if spelled:
            raise SystemExit(f"llama-cy serve: {spelled[0]} is not supported: {flag.note}")
        if flag.env and flag.env in os.environ:
            raise SystemExit(
                f"llama-cy serve: ${flag.env} ({flag.name}) is not supported: {flag.note}"
            )
    if not args.cont_batching:
        raise SystemExit(
            "llama-cy serve: --no-cont-batching is not supported: the engine always "
            "batches its slots together"
        )
    if args.cache_reuse:
        raise SystemExit(
            "llama-cy serve: --cache-reuse is not supported: KV-shifting reuse of prompt "
            "chunks is not built here (prefix reuse is, with --cache-prompt)"
        )
    if args.fit == "on":
        raise SystemExit(
            "llama-cy serve: --fit on is not supported: llama_cy does not fit arguments to "
            "free memory (set -ngl and -c)"
        )


def flag_table() -> str:
    """Every llama-server flag and its fate here, as a Markdown table (for the README)."""
    rows = ["| flag | here | why |", "|---|---|---|"]
    for flag in FLAGS:
        spell = ", ".join(f"`{n}`" for n in (*flag.names, *flag.negative))
        rows.append(f"| {spell} | {flag.status} | {flag.note} |")
    return "\n".join(rows)


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in (value or "").split(",") if x.strip())


def _logit_bias(items: Sequence[str] | None) -> dict[int, float]:
    """llama.cpp's ``-l TOKEN(+|-)BIAS`` values (several per flag, comma-separated)."""
    import re

    out: dict[int, float] = {}
    for item in (x for v in items or () for x in v.split(",") if x):
        m = re.fullmatch(r"\s*(\d+)\s*([+-])\s*(inf|[0-9.]+(?:e[+-]?\d+)?)\s*", item, re.I)
        if m is None:
            raise SystemExit(
                f"llama-cy serve: --logit-bias: expected TOKEN+BIAS or TOKEN-BIAS, not {item!r}"
            )
        bias = float(m.group(3))
        out[int(m.group(1))] = -bias if m.group(2) == "-" else bias
    return out


def _override_kv(items: Sequence[str] | None) -> dict[str, Any] | None:
    """``KEY=TYPE:VALUE`` (int, float, bool, str), several comma-separated."""
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in (x for v in items for x in v.split(",") if x):
        key, _, typed = item.partition("=")
        kind, _, value = typed.partition(":")
        try:
            if kind == "int":
                out[key] = int(value)
            elif kind == "float":
                out[key] = float(value)
            elif kind == "bool":
                if value not in ("true", "false"):
                    raise ValueError(value)
                out[key] = value == "true"
            elif kind == "str":
                out[key] = value
            else:
                raise ValueError(kind)
        except ValueError:
            raise SystemExit(
                f"llama-cy serve: --override-kv: expected KEY=TYPE:VALUE with TYPE int, "
                f"float, bool or str, not {item!r}"
            ) from None
    return out


def _loras(
    plain: Sequence[str] | None, scaled: Sequence[str] | None
) -> tuple[tuple[str, float], ...]:
    """--lora FNAME,... (scale 1) and --lora-scaled FNAME:SCALE,..."""
    out = [(p, 1.0) for v in plain or () for p in _split(v)]
    for item in (x for v in scaled or () for x in _split(v)):
        path, sep, scale = item.rpartition(":")
        try:
            if not sep:
                raise ValueError
            out.append((path, float(scale)))
        except ValueError:
            raise SystemExit(
                f"llama-cy serve: --lora-scaled: expected FNAME:SCALE, not {item!r}"
            ) from None
    return tuple(out)


def _api_keys(args: argparse.Namespace) -> tuple[str, ...]:
    keys = list(_split(args.api_key))
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as f:
            keys += [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    return tuple(keys)


def _load_mode(mode: str) -> dict[str, bool]:
    return {
        "auto": {"use_mmap": True, "use_mlock": False},
        "none": {"use_mmap": False, "use_mlock": False},
        "mmap": {"use_mmap": True, "use_mlock": False},
        "mlock": {"use_mmap": False, "use_mlock": True},
        "mmap+mlock": {"use_mmap": True, "use_mlock": True},
    }[mode]


def _speculative(args: argparse.Namespace) -> dict[str, Any] | None:
    """:class:`~llama_cy.Speculator` keywords from the speculative flags (None: off).
    A draft model without ``--spec-type`` means draft-simple (llama-server loads it and
    then drafts nothing)."""
    types = [t for v in args.spec_type or () for t in _split(v)]
    if args.spec_default:
        types.append("ngram-mod")
    synth = args.spec_synth_len is not None or args.spec_synth_rates is not None
    if "none" in types or not (types or args.model_draft):
        if synth:
            raise SystemExit(
                "llama-cy serve: --spec-synth-* needs speculative decoding (--spec-type)"
            )
        return None
    out: dict[str, Any] = {"types": list(dict.fromkeys(types or ["draft-simple"]))}
    n_max = args.spec_draft_n_max if args.spec_draft_n_max is not None else args.draft_max
    n_min = args.spec_draft_n_min if args.spec_draft_n_min is not None else args.draft_min
    for key, value in (("n_max", n_max), ("n_min", n_min), ("p_min", args.draft_p_min)):
        if value is not None:
            out[key] = value
    for kind in ("simple", "map_k", "map_k4v"):
        sizes = {
            k: getattr(args, f"spec_ngram_{kind}_{k}") for k in ("size_n", "size_m", "min_hits")
        }
        if any(v is not None for v in sizes.values()):
            out[f"ngram_{kind}"] = {k: v for k, v in sizes.items() if v is not None}
    mod = {k: getattr(args, f"spec_ngram_mod_{k}") for k in ("n_match", "n_min", "n_max")}
    if any(v is not None for v in mod.values()):
        out["ngram_mod"] = {k: v for k, v in mod.items() if v is not None}
    if args.lookup_cache_static or args.lookup_cache_dynamic:
        out["ngram_cache"] = {
            "static": args.lookup_cache_static or "",
            "dynamic": args.lookup_cache_dynamic or "",
        }
    if args.spec_synth_len is not None:
        out["synth_len"] = args.spec_synth_len
    if args.spec_synth_rates is not None:
        try:
            out["synth_rates"] = [float(x) for x in _split(args.spec_synth_rates)]
        except ValueError:
            raise SystemExit(
                "llama-cy serve: --spec-synth-rates: expected numbers, "
                f"not {args.spec_synth_rates!r}"
            ) from None
    draft_context = {
        "type_k": args.cache_type_k_draft,
        "type_v": args.cache_type_v_draft,
        "n_threads": args.threads_draft if args.threads_draft and args.threads_draft > 0 else None,
        "n_threads_batch": (
            args.threads_batch_draft
            if args.threads_batch_draft and args.threads_batch_draft > 0
            else None
        ),
    }
    if draft_context["n_threads_batch"] is None:
        draft_context["n_threads_batch"] = draft_context["n_threads"]
    out["draft_context"] = {k: v for k, v in draft_context.items() if v is not None}
    return out


def settings_from_args(args: argparse.Namespace, model: str) -> Any:
    """The :class:`~llama_cy.server.ServerSettings` that the parsed flags ask for."""
    from llama_cy.chat import chat_format_names
    from llama_cy.server.settings import ServerSettings

    template = args.chat_template
    if args.chat_template_file:
        with open(args.chat_template_file, encoding="utf-8") as f:
            template = f.read()
    builtin = template is not None and template in chat_format_names()
    sampling = {s.name: getattr(args, s.name) for s in SAMPLING_SETTINGS}
    sampling = {k: v for k, v in sampling.items() if v is not None}
    bias = _logit_bias(args.logit_bias)
    if bias:
        sampling["logit_bias"] = bias
    context: dict[str, Any] = {
        "swa_full": args.swa_full or None,
        "no_perf": not args.perf,
        "rope_scaling_type": args.rope_scaling,
        "rope_freq_base": args.rope_freq_base,
        "rope_freq_scale": (1.0 / args.rope_scale if args.rope_scale else args.rope_freq_scale),
        "yarn_orig_ctx": args.yarn_orig_ctx,
        "yarn_ext_factor": args.yarn_ext_factor,
        "yarn_attn_factor": args.yarn_attn_factor,
        "yarn_beta_slow": args.yarn_beta_slow,
        "yarn_beta_fast": args.yarn_beta_fast,
        "offload_kqv": args.kv_offload,
        "type_k": args.cache_type_k,
        "type_v": args.cache_type_v,
        "op_offload": args.op_offload,
    }
    devices = None
    if args.device:
        devices = [] if args.device == "none" else list(_split(args.device))
    tensor_split = [float(x) for x in _split(args.tensor_split)] or None
    # --agent is --tools all with the CORS proxy; --no-agent turns both off.
    tools = ("all",) if args.agent else () if args.agent is False else _split(args.tools)
    agentic = bool(tools or args.mcp_servers_config or args.mcp_servers_json)
    # As llama-server: tools or MCP servers keep CORS to local origins unless told.
    cors_origins = args.cors_origins or ("localhost" if agentic else "*")
    load: dict[str, Any] = {
        **_load_mode(args.load_mode),
        "split_mode": args.split_mode,
        "main_gpu": args.main_gpu,
        "tensor_split": tensor_split,
        "check_tensors": args.check_tensors,
        "kv_overrides": _override_kv(args.override_kv),
        "devices": devices,
        "use_extra_bufts": args.repack,
    }
    return ServerSettings(
        model=model,
        aliases=_split(args.alias),
        tags=_split(args.tags),
        ctx_size=args.ctx_size,
        parallel=args.parallel,
        kv_unified=args.kv_unified,
        n_predict=args.n_predict,
        threads=args.threads if args.threads > 0 else None,
        threads_batch=args.threads_batch if args.threads_batch and args.threads_batch > 0 else None,
        n_gpu_layers=args.n_gpu_layers,
        batch_size=args.batch_size,
        ubatch_size=args.ubatch_size,
        flash_attn={"on": True, "off": False}.get(args.flash_attn),
        api_keys=_api_keys(args),
        embeddings=args.embeddings,
        reranking=args.reranking,
        embd_normalize=args.embd_normalize,
        pooling=args.pooling,
        seed=args.seed,
        chat_format=template if builtin else None,
        chat_template=None if builtin else template,
        use_jinja=args.jinja,
        reasoning_format=args.reasoning_format,
        reasoning=args.reasoning,
        reasoning_effort=None if args.reasoning_effort == "default" else args.reasoning_effort,
        reasoning_budget=args.reasoning_budget,
        reasoning_budget_message=args.reasoning_budget_message,
        reasoning_preserve=args.reasoning_preserve,
        chat_template_kwargs=args.chat_template_kwargs or {},
        metrics=args.metrics,
        slots_endpoint=args.slots,
        slot_save_path=args.slot_save_path,
        props_endpoint=args.props,
        spm_infill=args.spm_infill,
        prefill_assistant=args.prefill_assistant,
        ui_mcp_proxy=bool(args.ui_mcp_proxy) if args.agent is None else args.agent,
        tools=tools,
        tools_runtime=args.tools_runtime or "",
        mcp_servers_config=args.mcp_servers_config or "",
        mcp_servers_json=args.mcp_servers_json or "",
        sleep_idle_seconds=args.sleep_idle_seconds,
        lora=_loras(args.lora, args.lora_scaled),
        lora_init_without_apply=args.lora_init_without_apply,
        cache_prompt=args.cache_prompt,
        timeout=args.timeout,
        queue_timeout=args.queue_timeout,
        max_queue=args.queue_size,
        rpc=args.rpc,
        context_shift=args.context_shift,
        backend_sampling=args.backend_sampling,
        keep=args.keep,
        warmup=args.warmup,
        verbose=args.verbose,
        ui=args.ui,
        api_prefix=args.api_prefix.rstrip("/"),
        cors_origins=cors_origins,
        cors_methods=args.cors_methods,
        cors_headers=args.cors_headers,
        cors_credentials=args.cors_credentials,
        sse_ping_interval=args.sse_ping_interval,
        slot_prompt_similarity=args.slot_prompt_similarity,
        sampling=sampling,
        context={k: v for k, v in context.items() if v is not None},
        load=load,
        speculative=_speculative(args),
        model_draft=args.model_draft,
        n_gpu_layers_draft=args.n_gpu_layers_draft,
        mmproj=args.mmproj,
        mmproj_offload=args.mmproj_offload,
        image_min_tokens=args.image_min_tokens,
        image_max_tokens=args.image_max_tokens,
        media_path=args.media_path,
    )
