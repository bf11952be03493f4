#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine and runs the main job on the
# CPU: installs packages, builds, compiles the MLP example's training step
# (forward, backward and SGD update) and its forward pass to CPU artifacts,
# and trains it for 300 steps on a synthetic 10-class dataset drawn from a
# seed, through the embeddable runtime (examples/train_mlp.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tensorc train_mlp
echo "== tensorc compile examples/mlp.json --train --optimizer sgd --lr 0.1 --target cpu -o build/mlp_train.tcx"
build/bin/tensorc compile examples/mlp.json --train --optimizer sgd --lr 0.1 --target cpu -o build/mlp_train.tcx
echo "== tensorc compile examples/mlp.json --target cpu -o build/mlp.tcx"
build/bin/tensorc compile examples/mlp.json --target cpu -o build/mlp.tcx
echo "== train_mlp build/mlp_train.tcx build/mlp.tcx 300"
build/bin/train_mlp build/mlp_train.tcx build/mlp.tcx 300
