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
# tiny_mlp: batch-1 latency of three 512-wide linears (forward), compiled
# twice: default, and reduce-overhead (CUDA graphs).
python3 - "$graphs/tiny_mlp.json" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from make_graphs import G, linear
g = G("tiny_mlp")
h = g.input("x", "f32", [1, 512])
for i in range(3):
    h = linear(g, h, g.input(f"w{i}", "f32", [512, 512]), g.input(f"b{i}", "f32", [512]))
    if i < 2:
        h = g.op("relu", h)
g.g["outputs"] = [h]
json.dump(g.g, open(sys.argv[1], "w"), indent=1)
PY
"$tensorc" compile "$graphs/tiny_mlp.json" --target cuda -o "$out/tiny_mlp.tcx"
"$tensorc" compile "$graphs/tiny_mlp.json" --target cuda --mode reduce-overhead -o "$out/tiny_mlp_ro.tcx"
echo "" >> "$out/compile_times.json"
echo "}" >> "$out/compile_times.json"
rm -rf "$graphs"
