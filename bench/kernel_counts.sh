#!/usr/bin/env bash
# Kernel launches per step that tensorc plans for each public workload: fused
# kernels plus library calls (matmul/conv), after simplify + CSE + fusion of
# the forward graph (inference workloads) or of the joint forward+backward
# graph (_fb workloads). Usage: bench/kernel_counts.sh [build/bin/tensorc]
set -euo pipefail
cd "$(dirname "$0")/.."
tensorc=${1:-build/bin/tensorc}
tmp=$(mktemp -d)
python3 bench/make_graphs.py "$tmp/graphs" > /dev/null
printf "%-22s %8s %8s %8s\n" workload kernels library total
for f in "$tmp"/graphs/*.json; do
  name=$(basename "$f" .json)
  src=$f
  if [[ $name == *_fb ]]; then
    "$tensorc" grad "$f" --emit=json -o "$tmp/$name.joint.json"
    src=$tmp/$name.joint.json
  fi
  line=$("$tensorc" compile "$src" --fuse --report -o /dev/null | grep '^fusion of')
  kernels=$(echo "$line" | sed -E 's/.*: ([0-9]+) kernels.*/\1/')
  library=$(echo "$line" | sed -E 's/.* ([0-9]+) library calls.*/\1/')
  printf "%-22s %8s %8s %8s\n" "$name" "$kernels" "$library" $((kernels + library))
done
rm -rf "$tmp"
