#!/usr/bin/env bash
# The device check: the CUDA build on a lent GPU, in one call of at most 8 minutes.
#
#   tools/gpu_check.sh prepare       # on the CPU machine: build and pack build/gpu-check
#   tools/gpu_check.sh run           # on the device (the device tool's `run`, with
#                                    #   carry=["build/gpu-check"], timeout_s=480)
#   tools/gpu_check.sh dry-run DIR   # anywhere the package is installed (CI): the run's
#                                    #   steps on small sizes, its figures meaningless
#
# prepare: tools/cuda_wheels.sh for CPython 3.12 and sm_90 (ARCHS to change it), split as
#   the wheel job splits it (llama_cy, and the plugin in its pack: tools/cuda_pack.py), plus
#   llama-bench, llama-batched-bench and llama-server from the same CMake tree; the wheels
#   of the test dependencies the device's Python lacks (it has numpy, pytest,
#   hypothesis), and the few llama.cpp files the tests read. Under 60 MiB, or it fails.
# run: installs all that without a network, then writes to $OUT (build/gpu-check/out):
#   env.txt, import.txt, tests.txt (dynamic section, backend sampling), bench/gpu.md and
#   .json (bench/gpu.py: three generated models against the C++ loop, llama-bench and
#   llama-batched-bench; the server against llama-server at 1 to 64 clients), suite.txt
#   and junit.xml (the suite's tests that need no Gemma, every layer offloaded, for what
#   time is left), and <date>-gpu-<card>.md to commit under bench/results/. Time limits:
#   TESTS_S (120), BENCH_S (300), SUITE_S (40); BENCH_ONLY="greedy top-k": only the
#   bench rows whose names contain one of these words.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PACK=$ROOT/build/gpu-check
MAX_MIB=60

prepare() {
  set -e
  PYTHONS=3.12 ARCHS=${ARCHS:-90-real} CPU_ALL_VARIANTS=false BENCH=1 tools/cuda_wheels.sh
  rm -rf "$PACK" && mkdir -p "$PACK/whl" "$PACK/bin"
  # As the wheel job ships it: llama_cy without the CUDA plugin, the plugin in its pack.
  cp "$(ls -t dist/cuda/llama_cy-*-cp312-*.whl | head -1)" "$PACK/whl/"
  PATH="build/cuda/venv-3.12/bin:$PATH" python3 tools/cuda_pack.py split "$PACK"/whl/llama_cy-*.whl \
    --archs "${ARCHS:-90-real}" -o "$PACK/whl"
  # What the suite imports beyond the device's numpy, pytest and hypothesis.
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$PACK/whl" \
    "gguf>=0.17" "starlette>=0.37" "uvicorn>=0.30" "uvloop>=0.19" "jsonschema>=4" "openai>=1.40" \
    "anthropic>=0.40" "psutil>=5.9" "jinja2>=3.1" "typing-extensions>=4.12" "httpx>=0.27" \
    "mkdocs>=1.6,<2" "mkdocstrings[python]>=0.26" "mkdocs-gen-files>=0.5"
  rm -f "$PACK"/whl/numpy-*.whl  # the device's own
  # llama.cpp's programs: the libraries they share with the wheel are linked on the device.
  local progs="build/cuda/llama.cpp/bin/llama-bench build/cuda/llama.cpp/bin/llama-batched-bench \
    build/cuda/llama.cpp/bin/llama-server"
  cp $progs "$PACK/bin/"
  # Their own libraries (libllama-bench-impl.so, ...), found beside them in the CMake tree.
  local listed=$(unzip -Z1 "$PACK"/whl/llama_cy-*.whl)
  for lib in $(ldd $progs | awk '/build\/cuda\/llama.cpp/ {print $3}' | sort -u); do
    grep -qx "llama_cy/$(basename "$lib")" <<< "$listed" || cp -L "$lib" "$PACK/bin/"
  done
  strip "$PACK"/bin/* 2>/dev/null || true
  (cd subprojects/llama.cpp && tar cJf "$PACK/llama.cpp-files.tar.xz" include ggml/include \
    common/arg.cpp models/templates tools/mtmd/test-1.jpeg tools/mtmd/test-2.mp3 \
    models/ggml-vocab-llama-spm.gguf models/ggml-vocab-bert-bge.gguf \
    models/ggml-vocab-qwen2.gguf models/ggml-vocab-gemma-4.gguf)
  du -ah "$PACK" | sort -h | tail -8
  local mib=$(($(du -sb "$PACK" | cut -f1) / 1048576))
  echo "build/gpu-check: $mib MiB (limit $MAX_MIB)"
  [ "$mib" -le "$MAX_MIB" ]
}

# On the device: everything in /tmp, the repository's tree as the device tool copied it.
setup_device() {
  OUT=${OUT:-$PACK/out}
  mkdir -p "$OUT"
  { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    lscpu | grep -E "Model name|^CPU\(s\)"; python3 --version; nvcc --version | tail -1
    ldconfig -p | grep -E "libcuda.so|libcudart|libcublas"; } > "$OUT/env.txt" 2>&1
  SITE=/tmp/lcy-site
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$PACK"/whl/*.whl \
    > "$OUT/install.txt" 2>&1 || { cat "$OUT/install.txt"; return 1; }
  mkdir -p subprojects/llama.cpp && tar xJf "$PACK/llama.cpp-files.tar.xz" -C subprojects/llama.cpp
  export PYTHONPATH=$SITE PYTHONUNBUFFERED=1
  PY="python3 -P"  # never the source tree's uncompiled llama_cy
  LIB=$(cd /tmp && $PY -c "import llama_cy; print(llama_cy.get_lib_dir())")
  BIN=/tmp/lcy-bin && mkdir -p $BIN && cp "$PACK"/bin/* $BIN/ && ln -sf "$LIB"/lib*.so* $BIN/
  ln -sf "$SITE"/llama_cy_cu*_sm*/libggml-cuda.so $BIN/  # the pack's plugin, for llama-bench
  export LCY_BIN=$BIN LLAMA_CY_N_GPU_LAYERS=-1 LLAMA_CY_SKIP_GEMMA=1
}

run() {
  setup_device || exit 1
  local steps=" ${STEPS:-tests bench suite} "
  (cd /tmp && $PY -c "import llama_cy as lc; print(lc.__file__); print(lc.system_info()); print(lc.devices())") \
    > "$OUT/import.txt" 2>&1
  tail -3 "$OUT/import.txt"
  CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
  # The GPU's own checks, and the tests that once assumed the CPU (tests/offload.py).
  [[ $steps == *" tests "* ]] && timeout "${TESTS_S:-120}" $PY -m pytest -q -ra tests/test_cuda_runtime.py tests/test_gpu_backend.py \
    tests/test_backend_sampling.py tests/test_fit.py tests/test_cuda_packs.py "tests/test_hazards.py::test_huge_batch_is_a_memory_error" \
    "tests/test_speculative.py::test_server_mostly_rejected_drafts" \
    "tests/test_context.py::test_sigint_shim_installs_and_restores" \
    "tests/test_server_llama.py::test_every_flag_of_llama_server_is_known" 2>&1 | tail -60 \
    > "$OUT/tests.txt"
  cat "$OUT/tests.txt"
  if [[ $steps == *" bench "* ]]; then
    timeout "${BENCH_S:-300}" $PY bench/gpu.py "$OUT/bench" --work /tmp/lcy-models \
      --rounds "${ROUNDS:-3}" $(for o in ${BENCH_ONLY:-}; do echo --only "$o"; done) 2>&1 | grep -v "^llama\|^load\|^print_info" | tail -60 > "$OUT/bench.log"
    [ -f "$OUT/bench/gpu.md" ] || $PY -c "import sys, json; sys.path.insert(0, 'bench'); import gpu; \
print(gpu.markdown(json.load(open('$OUT/bench/gpu.json'))))" > "$OUT/bench/gpu.md"  # a partial run
    cp "$OUT/bench/gpu.md" "$OUT/$(date +%F)-gpu-$CARD.md"
    cp "$OUT/bench/gpu.json" "$OUT/$(date +%F)-gpu-$CARD.json"
  fi
  # What time is left: a part of the suite that runs in it (FILES=tests: all of it).
  # -v: a run cut by its time limit still names each test's outcome.
  [[ $steps == *" suite "* ]] && timeout "${SUITE_S:-40}" $PY -m pytest -v -ra --junitxml="$OUT/junit.xml" \
    ${FILES:-tests/test_batch.py tests/test_sampler.py tests/test_context.py tests/test_model.py \
    tests/test_embeddings.py tests/test_adapter.py} > "$OUT/suite.txt" 2>&1
  [ -f "$OUT/suite.txt" ] && tail -40 "$OUT/suite.txt"
  return 0
}

dry_run() {
  OUT=${1:?usage: tools/gpu_check.sh dry-run DIR}
  mkdir -p "$OUT"
  PY=${PYTHON:-python3}
  (cd /tmp && $PY -c "import llama_cy as lc; print(lc.system_info()); print(lc.devices())") \
    > "$OUT/import.txt" 2>&1 || { cat "$OUT/import.txt"; exit 1; }
  $PY -P bench/gpu.py "$OUT/bench" --dry-run
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  dry-run) dry_run "${2:-}" ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
