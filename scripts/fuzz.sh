#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-19, AddressSanitizer and
# UndefinedBehaviorSanitizer into build-fuzz/ (only the MLIR-free readers they
# need) and runs each for SECONDS (default 30) over a seed corpus made from
# the examples, the graph test inputs, fresh artifacts and .npy files. A
# crash or sanitizer report fails the script; its reproducer is left in
# build-fuzz/artifacts/. Ends with one line: "fuzz: N targets, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-19 CXX=clang++-19 cmake -G Ninja -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTENSORC_FUZZERS=ON -DTENSORC_SANITIZE=ON > build-fuzz.log 2>&1 || { cat build-fuzz.log; echo "fuzz: 0 targets, 1 failed"; exit 1; }
fi
targets=(FuzzGraphFile FuzzArtifact FuzzNpy FuzzKernelCacheEntry FuzzSafetensors)
if ! ninja -C build-fuzz "${targets[@]}"; then
  echo "fuzz: 0 targets, 1 failed"; exit 1
fi

# Seed corpora.
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus"/{graph,artifact,npy,cache,safetensors} build-fuzz/artifacts
cp examples/*.json test/graph/Inputs/*.json test/hardening/Inputs/*.json "$corpus/graph/" 2>/dev/null
cp test/hardening/Inputs/*.npy "$corpus/npy/" 2>/dev/null
if [ -x build/bin/tensorc ]; then
  build/bin/tensorc compile examples/mlp.json --target cpu -o "$corpus/artifact/mlp.tcx" 2>/dev/null
  build/bin/tensorc compile examples/mlp.json --target cuda -o "$corpus/artifact/mlp-cuda.tcx" 2>/dev/null
  build/bin/tensorc run examples/mlp.json --output-dir "$corpus/npy" > /dev/null 2>&1
fi
printf 'TCKC' > "$corpus/cache/minimal"
cp test/runtime/Inputs/*.safetensors "$corpus/safetensors/" 2>/dev/null

failed=0
run() { # target corpus
  echo "== $1 ($seconds s)"
  local log=build-fuzz/$1.log
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    build-fuzz/bin/"$1" "$corpus/$2" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix=build-fuzz/artifacts/"$1"- -print_final_stats=1 > "$log" 2>&1
  local rc=$?
  grep -E "^(stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY|runtime error" "$log" | head -20
  if [ "$rc" -ne 0 ]; then echo "FAIL $1 (exit $rc; log $log)"; failed=$((failed + 1)); fi
}
run FuzzGraphFile graph
run FuzzArtifact artifact
run FuzzNpy npy
run FuzzKernelCacheEntry cache
run FuzzSafetensors safetensors
echo "fuzz: ${#targets[@]} targets, $failed failed"
[ "$failed" -eq 0 ]
