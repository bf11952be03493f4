#!/usr/bin/env bash
# The multi-GPU checks and benchmark on a machine with 2 GPUs (run in the
# bundle's bench-gpu folder; artifacts from spmd_prepare.sh in spmd/):
#  1. parity: the MLP's ddp, fsdp, tp and vocab-parallel (its head's classes
#     split) training graphs and the transformer block's tp one (its fused
#     QKV projection split by heads) on 2 GPUs (NCCL,
#     collectives overlapped on their own stream) equal the SPMD interpreter,
#     and again with TENSORC_NCCL_OVERLAP=0 (in order on the compute stream);
#  2. the GPT-2 block step: one GPU (tensorc, PyTorch eager and compiled),
#     then two (tensorc ddp/fsdp, PyTorch DDP/FSDP2 eager and compiled), then
#     tensorc's without overlap; a table of the rows at the end;
#  3. a collective one rank never joins (rank 1 runs fewer steps): rank 0
#     fails after TENSORC_NCCL_TIMEOUT naming itself and the collective.
set -uo pipefail
cd "$(dirname "$0")"
export TENSORC_RUNTIME_LIB=$PWD/../lib/libtensorc_runtime.so.0 PYTHONPATH=$PWD/python
tc=$PWD/../bin/tensorc
status=0
# TENSORC_NCCL_WINDOW_MIN=0: every buffer of these small programs in NCCL's
# symmetric windows (large ones are by default; NCCL's symmetric kernels).
for overlap in 1 0; do
  for name in mlp_ddp mlp_fsdp mlp_tp mlp_vocab block_tp; do
    got=$(mktemp -d)
    if TENSORC_NCCL_WINDOW_MIN=$((overlap ? 0 : 1048576)) TENSORC_NCCL_OVERLAP=$overlap "$tc" launch --nproc 2 -- "$tc" run "spmd/checks/$name.tcx" --dim B=3 --dim T=4 --seed 7 \
        --output-dir "$got" > "$got.log" 2>&1; then
      echo "parity $name (overlap=$overlap):"
      python3 spmd/checks/compare_devices.py "$got" "spmd/checks/want-$name" 2 || status=1
    else
      echo "parity $name (overlap=$overlap): FAILED"; tail -5 "$got.log"; status=1
    fi
  done
done
echo "timeout check (rank 1 stops early; rank 0 must fail within seconds, naming the collective):"
start=$(date +%s)
TENSORC_NCCL_TIMEOUT=5 timeout 120 "$tc" launch --nproc 2 -- bash -c \
  'exec "$0" run spmd/checks/mlp_ddp.tcx --dim B=3 --bench $((RANK == 0 ? 50 : 1))' "$tc" > /tmp/hang.log 2>&1
code=$?
grep -i "nccl\|rank" /tmp/hang.log | head -5
if [ $code -ne 0 ] && [ $code -ne 124 ] && grep -q "did not finish in 5 s" /tmp/hang.log; then
  echo "timeout check: ok (exit $code after $(( $(date +%s) - start )) s)"
else
  echo "timeout check: FAILED (exit $code)"; tail -5 /tmp/hang.log; status=1
fi
rows=${SPMD_ROWS:-$(mktemp -d)}
# A benchmark whose collectives hang (an NCCL setting under test: NCCL_P2P_USE_CUDA_MEMCPY=1 hung the DDP
# step on 2 H100s) ends in seconds, not after the default 600 s, and each run within a bound.
export TENSORC_NCCL_TIMEOUT=${TENSORC_NCCL_TIMEOUT:-60}
bound=${SPMD_RUN_TIMEOUT:-300}
CUDA_VISIBLE_DEVICES=0 timeout "$bound" python3 spmd.py --artifacts spmd --rows "$rows" "$@" 2>&1 | grep -v '^row:' | tail -5
timeout "$bound" "$tc" launch --nproc 2 -- python3 spmd.py --artifacts spmd --rows "$rows" "$@" 2>&1 | grep -v '^row:' | tail -5
TENSORC_NCCL_OVERLAP=0 timeout "$bound" "$tc" launch --nproc 2 -- python3 spmd.py --artifacts spmd --rows "$rows" --only tensorc \
  --tag no-overlap "$@" 2>&1 | grep -v '^row:' | tail -5
python3 spmd.py --table "$rows"
exit $status
