#!/usr/bin/env bash
# The device check: the CUDA build on a lent GPU, in one call of about 8 minutes.
#
#   tools/gpu_check.sh prepare       # on the CPU machine: build and pack build/gpu-check
#   tools/gpu_check.sh run           # on the device (the device tool's `run`, with
#                                    #   carry=["build/gpu-check"], timeout_s=560)
#   tools/gpu_check.sh dry-run DIR   # anywhere the package is installed (CI): the run's
#                                    #   steps on small sizes, its figures meaningless
#
# prepare: the llama-cy-cu13 wheel as the wheel job makes it (tools/wheel_variant.py in a
#   worktree of HEAD at TREE, build/cu13-tree by default; tools/cuda_wheels.sh for
#   CPython 3.12 and sm_90: ARCHS to change it), its plugin split into a pack (tools/cuda_pack.py); llama-bench,
#   llama-batched-bench and llama-server from the same CMake tree; the wheels of the test
#   dependencies the device's Python lacks (it has numpy, pytest, hypothesis), and the
#   few llama.cpp files the tests read. Under 58 MiB, or it fails.
# run: installs the wheels into a fresh virtual environment without a network, then
#   writes to $OUT (build/gpu-check/out): env.txt, install.txt (pip list, pip check),
#   import.txt (the distribution and the pack chosen), tests.txt (the GPU's tests and
#   the hostile-input tests), bench/gpu-server.* (llama-cy serve against llama-server,
#   1 to 64 clients) and bench/gpu-kernels.* (bench/gpu.py: three generated models
#   against the C++ loop, llama-bench and llama-batched-bench), suite.txt and junit.xml
#   (the suite's tests that need no Gemma, every layer offloaded, for what time is
#   left), and <date>-gpu-<card>-<part>.md/.json to commit under bench/results/. Time
#   limits: TESTS_S (150), SERVER_S (220), BENCH_S (200), SUITE_S (40), PROBE_S (150);
#   STEPS ("tests server bench suite"; "probe": bench/serve_probe.py, where the server's
#   time goes, SWITCH: its --switch-interval values, PROBE_ARGS: more of its flags,
#   e.g. "--history --spy-all"); ROUNDS (2); BENCH_ONLY="greedy top-k": only the rows whose
#   names contain one of these words; SERVER_MODELS="tiny": the servers on those models
#   only; TESTS: the tests step's pytest arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PACK=$ROOT/build/gpu-check
MAX_MIB=58  # the tree that travels with it is about 4 MiB of the 64

prepare() {
  set -e
  local archs=${ARCHS:-90-real} tree=${TREE:-$ROOT/build/cu13-tree}
  local version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)
  # As the wheel job ships it (.github/workflows/wheels.yml): llama_cy renamed llama-cy-cu13,
  # NVIDIA's runtime and both packs its dependencies, built from HEAD in a worktree of its
  # own (kept: its files' times, and the CMake tree's source path, make a rebuild short).
  if git -C "$tree" rev-parse --git-dir > /dev/null 2>&1; then
    git -C "$tree" checkout -q -f --detach "$(git rev-parse HEAD)"
  else
    git worktree prune && git worktree add -q --detach "$tree" HEAD
  fi
  [ -e "$tree/subprojects/llama.cpp" ] || { mkdir -p "$tree/subprojects" &&
    ln -s "$ROOT/subprojects/llama.cpp" "$tree/subprojects/llama.cpp"; }
  (cd "$tree" && python3 tools/wheel_variant.py llama-cy-cu13 nvidia-cuda-runtime nvidia-cublas \
    "llama-cy-cu13-sm75-89==$version" "llama-cy-cu13-sm90-120==$version" &&
    PYTHONS=3.12 ARCHS=$archs CPU_ALL_VARIANTS=false BENCH=1 BUILD=$ROOT/build/cuda \
    DIST=$ROOT/build/cuda/dist tools/cuda_wheels.sh)
  rm -rf "$PACK" && mkdir -p "$PACK/whl" "$PACK/bin"
  # The plugin moves into its pack (tools/cuda_pack.py), as the wheel job does.
  cp "$(ls -t build/cuda/dist/llama_cy_cu13-*-cp312-*.whl | head -1)" "$PACK/whl/"
  PATH="build/cuda/venv-3.12/bin:$PATH" python3 tools/cuda_pack.py split "$PACK"/whl/llama_cy_cu13-*.whl \
    --archs "$archs" -o "$PACK/whl"
  # What the suite imports beyond the device's numpy, pytest and hypothesis.
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$PACK/whl" \
    "gguf>=0.17" "starlette>=0.37" "uvicorn>=0.30" "uvloop>=0.19" "httptools>=0.6" \
    "jsonschema>=4" "openai>=1.40" "anthropic>=0.40" "psutil>=5.9" "jinja2>=3.1" \
    "typing-extensions>=4.12" "httpx>=0.27" \
    "py-spy>=0.4"  # bench/serve_probe.py; the docs build (mkdocs) is not run there
  rm -f "$PACK"/whl/numpy-*.whl  # the device's own
  # llama.cpp's programs: the libraries they share with the wheel are linked on the device.
  local progs="build/cuda/llama.cpp/bin/llama-bench build/cuda/llama.cpp/bin/llama-batched-bench \
    build/cuda/llama.cpp/bin/llama-server"
  cp $progs "$PACK/bin/"
  # Their own libraries (libllama-bench-impl.so, ...), found beside them in the CMake tree.
  local listed=$(unzip -Z1 "$PACK"/whl/llama_cy_cu13-*.whl)
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
  # A fresh virtual environment, the wheels installed as a user installs them, from files.
  # The device's numpy, pytest and hypothesis are seen through the system's site.
  # llama-cy-cu13 goes in without its dependencies: NVIDIA's runtime and cuBLAS (the
  # device's CUDA toolkit serves them) and the other family's pack are not carried;
  # `pip check` lists what is missing.
  local venv=/tmp/lcy-venv whl=$PACK/whl
  python3 -m venv --system-site-packages "$venv"
  # The device's numpy is not in the system's site (a folder of its own): named in a .pth.
  python3 -c "import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))" \
    > "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/device.pth"
  # Every wheel without resolving (pip download resolved them; numpy is the device's).
  { "$venv/bin/pip" install --no-index --no-compile --no-deps $(ls "$whl"/*.whl | grep -v "/llama_cy_cu13-") &&
    "$venv/bin/pip" install --no-index --no-compile --no-deps "$whl"/llama_cy_cu13-*.whl; } \
    > "$OUT/install.txt" 2>&1 || { cat "$OUT/install.txt"; return 1; }
  { echo "--- pip list"; "$venv/bin/pip" list 2>/dev/null | grep -i -E "llama|nvidia|numpy"
    echo "--- pip check"; "$venv/bin/pip" check; } >> "$OUT/install.txt" 2>&1
  mkdir -p subprojects/llama.cpp && tar xJf "$PACK/llama.cpp-files.tar.xz" -C subprojects/llama.cpp
  export PYTHONUNBUFFERED=1
  PY_BIN=$venv/bin/python
  PY="$PY_BIN -P"  # never the source tree's uncompiled llama_cy
  SITE=$($PY -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  LIB=$(cd /tmp && $PY -c "import llama_cy; print(llama_cy.get_lib_dir())")
  BIN=/tmp/lcy-bin && mkdir -p $BIN && cp "$PACK"/bin/* $BIN/ && ln -sf "$LIB"/lib*.so* $BIN/
  ln -sf "$SITE"/llama_cy_cu*_sm*/libggml-cuda.so $BIN/  # the pack's plugin, for llama-bench
  export LCY_BIN=$BIN LLAMA_CY_N_GPU_LAYERS=-1 LLAMA_CY_SKIP_GEMMA=1
}

run() {
  setup_device || exit 1
  local steps=" ${STEPS:-tests server bench suite} "
  (cd /tmp && $PY -c "import importlib.metadata as m, llama_cy as lc; print(lc.__file__); \
from llama_cy import _cuda_packs; print('pack:', _cuda_packs.selected); \
print('distribution:', m.packages_distributions().get('llama_cy')); \
print(lc.system_info()); print(lc.devices())") \
    > "$OUT/import.txt" 2>&1
  tail -4 "$OUT/import.txt"
  CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9-')
  # The GPU's own checks, the hostile-input tests, and the tests that once assumed the CPU.
  [[ $steps == *" tests "* ]] && timeout "${TESTS_S:-150}" $PY -m pytest -q -ra ${TESTS:-tests/test_cuda_runtime.py \
    tests/test_gpu_backend.py tests/test_backend_sampling.py tests/test_fit.py tests/test_cuda_packs.py \
    tests/test_hazards.py tests/test_speculative.py::test_server_mostly_rejected_drafts \
    tests/test_context.py::test_sigint_shim_installs_and_restores \
    tests/test_server_llama.py::test_every_flag_of_llama_server_is_known} 2>&1 | tail -60 \
    > "$OUT/tests.txt"
  [ -f "$OUT/tests.txt" ] && cat "$OUT/tests.txt"
  # A part of the suite that runs in SUITE_S (FILES=tests: all of it).
  # -v: a run cut by its time limit still names each test's outcome.
  [[ $steps == *" suite "* ]] && timeout "${SUITE_S:-40}" $PY -m pytest -v -ra --junitxml="$OUT/junit.xml" \
    ${FILES:-tests/test_batch.py tests/test_sampler.py tests/test_context.py tests/test_model.py \
    tests/test_embeddings.py tests/test_adapter.py} > "$OUT/suite.txt" 2>&1
  [ -f "$OUT/suite.txt" ] && tail -40 "$OUT/suite.txt"
  # Where the server's time goes (bench/serve_probe.py): py-spy on the GIL, CPU per token.
  if [[ $steps == *" probe "* ]]; then
    mkdir -p /tmp/lcy-models && $PY -c "import sys; sys.path.insert(0, 'support'); \
from tiny_model import write_tiny_llama; write_tiny_llama('/tmp/lcy-models/probe-tiny.gguf')"
    timeout "${PROBE_S:-150}" $PY bench/serve_probe.py "$OUT/probe" --model /tmp/lcy-models/probe-tiny.gguf \
      --llama-server "$BIN/llama-server" --py-spy "$(dirname "$PY_BIN")/py-spy" --rounds "${ROUNDS:-2}" \
      $(for s in ${SWITCH:-}; do echo --switch-interval "$s"; done) ${PROBE_ARGS:-} > "$OUT/probe.log" 2>&1
    tail -30 "$OUT/probe.log"; cat "$OUT/probe/probe.md" 2>/dev/null
  fi
  # The servers, then the generation loops: each part writes its own table.
  local part limit
  for part in server bench; do
    [[ $steps == *" $part "* ]] || continue
    limit=${SERVER_S:-220}; [ $part = bench ] && limit=${BENCH_S:-200}
    [ $part = bench ] && part=kernels
    timeout "$limit" $PY bench/gpu.py "$OUT/bench" --part $part --work /tmp/lcy-models \
      --rounds "${ROUNDS:-2}" $(for o in ${BENCH_ONLY:-}; do echo --only "$o"; done) \
      $(for m in ${SERVER_MODELS:-}; do echo --server-model "$m"; done) 2>&1 \
      | grep -v "^llama\|^load\|^print_info" | tail -80 > "$OUT/bench-$part.log"
    [ -f "$OUT/bench/gpu-$part.json" ] || continue
    # A part cut by its time limit leaves its JSON: its table is made from that.
    $PY -c "import sys, json; sys.path.insert(0, 'bench'); import gpu; \
print(gpu.markdown(json.load(open('$OUT/bench/gpu-$part.json'))))" > "$OUT/bench/gpu-$part.md"
    cp "$OUT/bench/gpu-$part.md" "$OUT/$(date +%F)-gpu-$CARD-$part.md"
    cp "$OUT/bench/gpu-$part.json" "$OUT/$(date +%F)-gpu-$CARD-$part.json"
  done
  keep_out
  return 0
}

# The device tool brings back at most 8 files from $OUT: everything in one archive, and
# beside it the tables and the test summaries.
keep_out() {
  tar czf /tmp/gpu-check-out.tar.gz -C "$OUT" . && mv /tmp/gpu-check-out.tar.gz "$OUT/"
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name gpu-check-out.tar.gz ! -name "*-gpu-*.md" \
    ! -name tests.txt ! -name import.txt ! -name suite.txt -exec rm -rf {} +
  ls -l "$OUT"
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
  *) sed -n '2,27p' "$0"; exit 2 ;;
esac
