#!/usr/bin/env bash
# Kernel launches per step that tensorc plans for each public workload: fused
# kernels plus library calls (matmul/conv), from the CUDA pipeline (attention
# recognition, folding, simplification, decomposition of ops without CUDA
# kernels, fusion, memory plan) of the forward graph (inference workloads) or
# of the joint forward+backward graph (_fb workloads).
# Usage: bench/kernel_counts.sh [build/bin/tensorc]
set -euo pipefail
cd "$(dirname "$0")/.."
tensorc=${1:-build/bin/tensorc}
tmp=$(mktemp -d)
python3 bench/make_graphs.py "$tmp/graphs" > /dev/null
printf "%-22s %8s %8s %8s %14s %14s %7s\n" workload kernels library total arena_bytes lower_bound ratio
for f in "$tmp"/graphs/*.json; do
  name=$(basename "$f" .json)
  src=$f
  if [[ $name == *_fb ]]; then
    "$tensorc" grad "$f" --emit=json -o "$tmp/$name.joint.json"
    src=$tmp/$name.joint.json
  fi
  report=$("$tensorc" compile "$src" --pipeline cuda --report -o /dev/null)
  line=$(echo "$report" | grep '^fusion of')
  kernels=$(echo "$line" | sed -E 's/.*: ([0-9]+) kernels.*/\1/')
  library=$(echo "$line" | sed -E 's/.* ([0-9]+) library calls.*/\1/')
  memory=$(echo "$report" | grep '^memory plan of')
  arena=$(echo "$memory" | sed -E 's/.*arena ([0-9]+) bytes.*/\1/')
  bound=$(echo "$memory" | sed -E 's/.*lower bound ([0-9]+) bytes.*/\1/')
  ratio=$(echo "$memory" | sed -E 's/.*\(([0-9.]+)x\).*/\1/')
  printf "%-22s %8s %8s %8s %14s %14s %7s\n" "$name" "$kernels" "$library" $((kernels + library)) "$arena" "$bound" "$ratio"
done
rm -rf "$tmp"
