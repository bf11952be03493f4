#!/usr/bin/env bash
# The CUDA backend's measurements, from the bundle (scripts/gpu-bundle.sh):
# each bench/*.tcx through the runtime-only `tensorc run --bench` (device
# time of the launch sequence from CUDA events, warm-up, median), the
# row-sum with every kernel variant, then PyTorch eager on the same shapes
# (bench/cuda_compare.py) when torch is importable.
set -uo pipefail
cd "$(dirname "$0")"
export TENSORC_CACHE_DIR="${TENSORC_CACHE_DIR:-$PWD/kernel-cache}"
runs=${1:-50}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
for m in bench/*.tcx; do
  name=$(basename "$m" .tcx)
  ms=$(bin/tensorc run "$m" --bench "$runs" --show 0 | sed -n 's/.*device time.*median \([0-9.]*\) ms.*/\1/p')
  echo "tensorc $name $ms"
done
# Chains: the fused kernel (variants 0-2 force it) vs per-step kernels (3-7).
for m in softmax_f32 layernorm_f32; do
  for v in 0 1 2 5 7; do
    ms=$(bin/tensorc run bench/$m.tcx --variant $v --bench "$runs" --show 0 |
         sed -n 's/.*device time.*median \([0-9.]*\) ms.*/\1/p')
    echo "tensorc $m variant=$v $ms"
  done
done
for v in 0 1 2 3 4 5 6 7; do
  ms=$(bin/tensorc run bench/rowsum_f32.tcx --variant $v --bench "$runs" --show 0 |
       sed -n 's/.*device time.*median \([0-9.]*\) ms.*/\1/p')
  echo "tensorc rowsum_f32 variant=$v $ms"
done
if python3 -c 'import torch' 2>/dev/null; then
  python3 bench/cuda_compare.py "$runs"
fi
