#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job on the
# CPU: installs packages, builds, then compiles and runs the MLP example on the
# reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tensorc
echo "== tensorc verify examples/mlp.json"
build/bin/tensorc verify examples/mlp.json
echo "== tensorc compile examples/mlp.json -o build/mlp.mlir"
build/bin/tensorc compile examples/mlp.json -o build/mlp.mlir
echo "== tensorc run build/mlp.mlir --seed 0 --dim B=8"
build/bin/tensorc run build/mlp.mlir --seed 0 --dim B=8 --output-dir build/mlp-out
echo "outputs written to build/mlp-out/"
