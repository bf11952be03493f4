#!/usr/bin/env bash
# Times one artifact's launch sequence with each forced kernel variant
# (`tensorc run --variant N`: loop steps take variant N, or their last; a
# chain takes its variant N) beside the runtime's own choice, naming the
# chain kernel each run launched. Run from the GPU bundle:
#   bench-gpu/variants.sh ARTIFACT.tcx [N ...]
set -uo pipefail
bundle=$(cd "$(dirname "$0")/.." && pwd)
artifact=$1; shift
export TENSORC_CACHE_DIR=${TENSORC_CACHE_DIR:-$bundle/kernel-cache}
for v in default "$@"; do
  args=(); [ "$v" = default ] || args=(--variant "$v")
  chain=$(TENSORC_CUDA_TRACE=1 "$bundle/bin/tensorc" run "$artifact" "${args[@]}" --bench 3 --show 0 2>&1 |
          grep -m1 -o "chain kernel [a-z0-9_]*")
  time=$("$bundle/bin/tensorc" run "$artifact" "${args[@]}" --bench 100 --show 0 2>&1 | grep -o "median [0-9.]* ms")
  echo "variant $v: ${chain:-no chain kernel}, $time"
done
