#!/usr/bin/env bash
# Builds tensorc and runs the whole test suite: the lit/FileCheck regression
# tests, the GoogleTest unit tests and the GPU parity cases (run on a GPU,
# skipped and counted without one). Ends with one line:
#   "N passed, M failed, K skipped"
set -uo pipefail
cd "$(dirname "$0")/.."

if ! scripts/build.sh; then
  echo "0 passed, 1 failed"
  exit 1
fi

# The lit tests and the unit tests run side by side (most unit tests use one
# core; lit the rest), their logs printed in turn.
lit_log=$(mktemp)
python3 /usr/lib/llvm-19/build/utils/lit/lit.py -v build/test > "$lit_log" 2>&1 &
lit_pid=$!
unit_log=$(mktemp)
build/bin/tensorc-unittests --gtest_brief=1 > "$unit_log" 2>&1
unit_status=$?
wait "$lit_pid"
lit_status=$?
echo "== lit (FileCheck) tests"
cat "$lit_log"
echo "== unit tests"
cat "$unit_log"

echo "== GPU parity cases (skipped, with a count, where no GPU driver is present)"
gpu_log=$(mktemp)
rm -rf build/gpu-cases
if build/bin/tensorc-gpu-cases build/gpu-cases > /dev/null 2>&1; then
  build/bin/tensorc-check build/gpu-cases/* > "$gpu_log" 2>&1
  gpu_status=$?
else
  echo "0 passed, 1 failed, 0 skipped" > "$gpu_log"
  gpu_status=1
fi
grep -v '^\(PASS\|SKIP\)' "$gpu_log" | tail -5

count() { grep -E "$1" "$2" | grep -oE '[0-9]+' | head -1; }
lit_passed=$(count '^ *Passed *:' "$lit_log"); lit_failed=$(count '^ *Failed *:' "$lit_log")
lit_skipped=$(count '^ *(Unsupported|Skipped) *:' "$lit_log")
unit_total=$(grep -oE '^\[==========\] [0-9]+ tests? ' "$unit_log" | grep -oE '[0-9]+' | head -1)
# gtest --gtest_brief prints no failure count: failed = total - passed - skipped.
unit_passed=$(count '^\[  PASSED  \] [0-9]+ tests?' "$unit_log")
unit_skipped=$(count '^\[  SKIPPED \] [0-9]+ tests?' "$unit_log")
lit_passed=${lit_passed:-0}; lit_failed=${lit_failed:-0}; lit_skipped=${lit_skipped:-0}
unit_total=${unit_total:-0}; unit_passed=${unit_passed:-0}; unit_skipped=${unit_skipped:-0}
unit_failed=$((unit_total - unit_passed - unit_skipped))
if [ "$unit_status" -ne 0 ] && [ "$unit_failed" -eq 0 ]; then unit_failed=1; fi
gpu_line=$(tail -1 "$gpu_log")
gpu_passed=$(echo "$gpu_line" | grep -oE '^[0-9]+' || echo 0)
gpu_failed=$(echo "$gpu_line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
gpu_skipped=$(echo "$gpu_line" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || echo 0)
rm -f "$lit_log" "$unit_log" "$gpu_log"

echo "lit: $lit_passed passed, $lit_failed failed; unit: $unit_passed passed, $unit_failed failed; gpu: $gpu_passed passed, $gpu_failed failed, $gpu_skipped skipped"
failed=$((lit_failed + unit_failed + gpu_failed))
if [ "$lit_status" -ne 0 ] || [ "$unit_status" -ne 0 ] || [ "$gpu_status" -ne 0 ]; then
  [ "$failed" -eq 0 ] && failed=1
fi
echo "$((lit_passed + unit_passed + gpu_passed)) passed, $failed failed, $((lit_skipped + unit_skipped + gpu_skipped)) skipped"
[ "$failed" -eq 0 ]
