#!/usr/bin/env bash
# Builds tensorc with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-asan/ and runs the unit tests and the lit tests there. Tests that
# cannot run under ASan (an outside project linking the installed library,
# the no-MLIR `ldd` check) are marked UNSUPPORTED by the `asan` lit feature;
# the NVRTC-heavy CUDA codegen tests (NVRTC is not ours and takes minutes)
# are left to the plain run. Leak checking is off: MLIR and LLVM keep
# process-lifetime singletons. Ends with "sanitize: N passed, M failed".
# -O0: instrumented code compiles in about half the time of -O1 (CI's two
# cores: the -O1 build took 17 of its 45 minutes); the tests run slower.
# -gline-tables-only: reports keep file:line, and the build skips full
# debug info (codegen/Program.cpp 4.6 -> 4.0 s at -O0, links smaller).
# clang-19 (as scripts/fuzz.sh): it compiles the instrumented MLIR-heavy
# files in 55-60% of GCC 12's time (Fusion.cpp 8.7 s vs 14.6 s, Program.cpp
# 13.7 s vs 25.0 s on this machine).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-asan/build.ninja ]; then
  CC=clang-19 CXX=clang++-19 cmake -G Ninja -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORC_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only" > build-asan.log 2>&1 ||
    { cat build-asan.log; echo "sanitize: 0 passed, 1 failed"; exit 1; }
fi
if ! ninja -C build-asan tensorc-unittests tensorc tensorc-run tensorc-opt tensorc-fuzz-graphs run_model train_mlp train_resident tensorc-tune; then
  echo "sanitize: 0 passed, 1 failed"; exit 1
fi
# allow_user_poisoning=0: LLVM's headers poison allocator memory in our ASan TUs that the
# prebuilt (uninstrumented) MLIR libraries then use: false "use-after-poison".
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allow_user_poisoning=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Unit and lit tests side by side, their logs printed in turn.
lit_log=$(mktemp)
TENSORC_LIT_ASAN=1 python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v build-asan/test > "$lit_log" 2>&1 &
lit_pid=$!
# The unit tests in two shards (gtest's own sharding): once lit is done,
# one process would leave a core idle (CpuBackend.Reductions alone takes
# two to three minutes under ASan). Left to the plain run besides the NVRTC
# tests: CpuBackend.GpuProgramChoices (96 s under ASan; the CPU runtime's
# paths it takes, the other CpuBackend tests take too) and
# Sharding.TrainingStepsUnderPresets (92 s; the sharding passes run under
# ASan in the lit tests): CI stays under 45 minutes.
asan_unit_filter='-CudaCodegen.*:CpuBackend.GpuProgramChoices:Sharding.TrainingStepsUnderPresets'
unit_log=$(mktemp) unit_log1=$(mktemp)
GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1 build-asan/bin/tensorc-unittests --gtest_brief=1 \
  --gtest_filter="$asan_unit_filter" > "$unit_log1" 2>&1 &
unit_pid=$!
GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0 build-asan/bin/tensorc-unittests --gtest_brief=1 \
  --gtest_filter="$asan_unit_filter" > "$unit_log" 2>&1
unit_status=$?
wait "$unit_pid" || unit_status=1
cat "$unit_log1" >> "$unit_log"
wait "$lit_pid"
lit_status=$?
cat "$unit_log" "$lit_log"
count() { grep -E "$1" "$2" | grep -oE '[0-9]+' | head -1; }
sum() { grep -E "$1" "$2" | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s + 0 }'; }
passed=$(( $(sum '^\[  PASSED  \] [0-9]+ tests?' "$unit_log" || echo 0) + $(count '^ *Passed *:' "$lit_log" || echo 0) ))
failed=$(( $(count '^ *Failed *:' "$lit_log" || echo 0) ))
[ "$unit_status" -ne 0 ] && failed=$((failed + 1))
[ "$lit_status" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
grep -l "ERROR: AddressSanitizer\|runtime error:" "$unit_log" "$lit_log" > /dev/null && [ "$failed" -eq 0 ] && failed=1
rm -f "$unit_log" "$unit_log1" "$lit_log"
echo "sanitize: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
