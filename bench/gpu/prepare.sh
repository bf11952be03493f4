#!/usr/bin/env bash
# Compiles the public workloads for the GPU benchmark (bench/gpu/bench.py)
# into OUT (default build/gpu-bundle/bench-gpu): each graph of
# bench/make_graphs.py; a training step (`_fb`) is its joint forward+backward
# graph (`tensorc grad`: the loss and the gradient of every trainable input,
# what PyTorch's backward computes). Artifacts are not precompiled: the
# benchmark's cold start includes NVRTC on the GPU machine. Compile times
# (this machine) go to OUT/compile_times.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-bundle/bench-gpu}
tensorc=${TENSORC:-build/bin/tensorc}
mkdir -p "$out"
graphs=$(mktemp -d)
python3 bench/make_graphs.py "$graphs" > /dev/null
echo "{" > "$out/compile_times.json"
first=1
for g in "$graphs"/*.json; do
  name=$(basename "$g" .json)
  start=$(date +%s.%N)
  src=$g
  case "$name" in *_fb)
    "$tensorc" grad "$g" --emit json -o "$graphs/$name.joint.json"
    src=$graphs/$name.joint.json ;;
  esac
  "$tensorc" compile "$src" --target cuda -o "$out/$name.tcx"
  end=$(date +%s.%N)
  secs=$(python3 -c "print(round($end - $start, 2))")
  [ $first -eq 1 ] || echo "," >> "$out/compile_times.json"
  first=0
  printf '  "%s": %s' "$name" "$secs" >> "$out/compile_times.json"
  echo "compiled $name in ${secs}s"
done
echo "" >> "$out/compile_times.json"
echo "}" >> "$out/compile_times.json"
rm -rf "$graphs"
