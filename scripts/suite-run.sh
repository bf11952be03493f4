#!/usr/bin/env bash
# On the GPU machine, with .suite/ (and for --parity .suite-cases/) from
# scripts/suite-bundle.sh: the GPU parity cases (--parity) and/or the model
# suite (bench/models/suite.py and its arguments), through the bundle's
# compiler and runtime. Results go to
# $OUT (the device tool's folder that comes back), else ./suite-out:
# parity.log, and whatever --json/--markdown name there.
#   bash scripts/suite-run.sh --parity
#   bash scripts/suite-run.sh --jobs 4 --timeout 400 --cases hf:BertForMaskedLM:train,... --json "$OUT/a.json"
# (suite.py's --json/--markdown paths are taken as given: put $OUT in them.)
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=$PWD/.suite
out=${OUT:-$PWD/suite-out}
mkdir -p "$out"
[ -f "$bundle/bin/tensorc-compiler.xz" ] || { echo "suite-run: no .suite bundle (scripts/suite-bundle.sh, then carry it)" >&2; exit 2; }
echo "suite-run: bundle of $(cat "$bundle/commit" 2>/dev/null || echo '?'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
if [ ! -x "$bundle/bin/tensorc" ]; then
  xz -dc "$bundle/bin/tensorc-compiler.xz" > "$bundle/bin/tensorc.tmp" && chmod +x "$bundle/bin/tensorc.tmp" &&
    mv "$bundle/bin/tensorc.tmp" "$bundle/bin/tensorc"
fi
export TENSORC=$bundle/bin/tensorc TENSORC_RUNTIME_LIB=$bundle/lib/libtensorc_runtime.so.0 PYTHONPATH=$PWD/python
status=0
if [ "${1:-}" = "--parity" ]; then
  shift
  cases=$PWD/.suite-cases
  [ -f "$cases/cases.tar.xz" ] || { echo "suite-run: no .suite-cases (carry it: scripts/suite-bundle.sh)" >&2; exit 2; }
  rm -rf "$cases/cases" && xz -dc "$cases/cases.tar.xz" | tar xf - -C "$cases"
  "$bundle/bin/tensorc-check" "$cases/cases"/* > "$out/parity.log" 2>&1 || status=1
  grep -v '^\(PASS\|SKIP\)' "$out/parity.log" | tail -20
fi
if [ $# -gt 0 ]; then
  python3 bench/models/suite.py "$@" || status=1
fi
exit $status
