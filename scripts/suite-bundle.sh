#!/usr/bin/env bash
# Builds .suite/ and .suite-cases/ (ignored by git): what the model suite
# (bench/models/suite.py) and the GPU parity cases need on the GPU machine
# beside the repository's tracked files. The machine has PyTorch but no
# LLVM/MLIR, so .suite/ gets the self-contained compiler
# (scripts/portable-compiler.sh, xz-packed), the runtime library and the
# Python binding's fast path and tensorc-check (~21 MB); .suite-cases/ the
# parity cases, xz-packed (~45 MB: their inputs are random numbers). Run
# there with scripts/suite-run.sh. With the device tool the two go in
# separate calls (together they pass its 64 MiB): carry [".suite-cases",
# ".suite"] does not fit, so carry [".suite"] for the suite and
# [".suite-cases"] for the parity cases (a warm machine keeps the other).
#   scripts/suite-bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh tensorc tensorc-check tensorc-gpu-cases tensorc_runtime > /dev/null
scripts/portable-compiler.sh build/portable/tensorc
rm -rf .suite
mkdir -p .suite/bin .suite/lib
xz -T2 -3 -c build/portable/tensorc > .suite/bin/tensorc-compiler.xz
cp -L build/lib/libtensorc_runtime.so.0 .suite/lib/
if [ -f build/lib/_tensorc_fast.abi3.so ]; then cp build/lib/_tensorc_fast.abi3.so .suite/lib/; fi
cp build/bin/tensorc-check .suite/bin/
git rev-parse --short HEAD > .suite/commit
rm -rf .suite-cases
mkdir -p .suite-cases
build/bin/tensorc-gpu-cases .suite-cases/cases > /dev/null
tar cf - -C .suite-cases cases | xz -T2 -6 > .suite-cases/cases.tar.xz
rm -rf .suite-cases/cases
cp .suite/commit .suite-cases/commit
du -sh .suite .suite-cases
