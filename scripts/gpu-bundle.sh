#!/usr/bin/env bash
# Builds the self-contained GPU bundle in build/gpu-bundle: the runtime
# library, the runtime-only checker (tensorc-check), the parity cases (every
# op in several dtypes and the example models compiled with --target cuda,
# with inputs and the reference interpreter's outputs) and gpu-test.sh. It
# needs only the NVIDIA driver and NVRTC on the GPU machine (no LLVM/MLIR,
# no network):
#   scripts/gpu-bundle.sh && (copy build/gpu-bundle) && gpu-bundle/gpu-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh tensorc-check tensorc-gpu-cases tensorc_runtime
out=build/gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp build/bin/tensorc-check "$out/bin/"
cp -L build/lib/libtensorc_runtime.so.0 "$out/lib/"  # the soname, as a file (no links)
build/bin/tensorc-gpu-cases "$out/cases"
cp scripts/gpu-test.sh "$out/"
du -sh "$out"
