#!/usr/bin/env bash
# Runs the GPU parity suite from the bundle (scripts/gpu-bundle.sh): every
# case through the runtime on the GPU, outputs poisoned first, compared with
# the reference interpreter; then a sampled subset under compute-sanitizer
# memcheck and racecheck. Ends with the checker's summary line.
set -uo pipefail
cd "$(dirname "$0")"
export TENSORC_CACHE_DIR="${TENSORC_CACHE_DIR:-$PWD/kernel-cache}"
# The bundle carries the cases packed (scripts/gpu-bundle.sh).
if [ -f cases.tar.gz ]; then rm -rf cases && tar xzf cases.tar.gz; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
status=0
echo "== parity: every case, every kernel variant"
bin/tensorc-check --all-variants cases/* > parity.log 2>&1 || status=1
grep -v '^PASS' parity.log
echo "== parity with CUDA graphs (reduce-overhead): captured, then replayed"
bin/tensorc-check --all-variants --graphs cases/* > parity-graphs.log 2>&1 || status=1
grep -v '^PASS' parity-graphs.log
echo "== cuDNN attention: 16-bit attention runs on cuDNN where it is installed (parity above checked its results)"
# A silent fallback to the generated kernels would pass parity and lose the
# speed: every bf16/f16 attention case with a head dim cuDNN takes must
# report a cuDNN launch, forward and backward.
if TENSORC_CUDA_TRACE=1 bin/tensorc-check cases/*_scaled_dot_product_attention* > cudnn.log 2>&1 &&
   grep -q "cuDNN attention forward" cudnn.log && grep -q "cuDNN attention backward" cudnn.log &&
   ! grep -q "cuDNN declined" cudnn.log; then
  echo "cuDNN attention: $(grep -c 'cuDNN attention' cudnn.log) launches, none declined"
else
  echo "cuDNN attention: FAILED"; grep -m5 "declined\|FAIL\|cuDNN" cudnn.log; status=1
fi
echo "== cuDNN convolution: conv2d and its gradients run on cuDNN (forced variants >= 1 checked the direct kernels)"
if TENSORC_CUDA_TRACE=1 bin/tensorc-check cases/*_conv2d* > cudnn-conv.log 2>&1 &&
   grep -q "cuDNN convolution forward" cudnn-conv.log && grep -q "cuDNN convolution backward_input" cudnn-conv.log &&
   grep -q "cuDNN convolution backward_weight" cudnn-conv.log && ! grep -q "cuDNN declined" cudnn-conv.log; then
  echo "cuDNN convolution: $(grep -c 'cuDNN convolution' cudnn-conv.log) launches, none declined"
else
  echo "cuDNN convolution: FAILED"; grep -m5 "declined\|FAIL\|cuDNN" cudnn-conv.log; status=1
fi
echo "== the compiler on this machine (bin/tensorc-compiler: no LLVM/MLIR installed here)"
if [ -f bin/tensorc-compiler.xz ]; then
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    bin/tensorc-compiler.xz bin/tensorc-compiler && chmod +x bin/tensorc-compiler
  if bin/tensorc-compiler --version > compiler.log 2>&1 &&
     bin/tensorc-compiler compile checks/sibling_rows.json --target cuda -o checks/sibling_rows_here.tcx >> compiler.log 2>&1 &&
     cmp checks/sibling_rows.tcx checks/sibling_rows_here.tcx >> compiler.log 2>&1; then
    echo "compiler: $(head -1 compiler.log), the same artifact as the bundle's"
  else
    echo "compiler: FAILED"; cat compiler.log; status=1
  fi
fi
echo "== run-time checks: an out-of-range index fails the run, naming the node"
ok="--input ids=checks/ids-ok.npy --input cols=checks/cols-ok.npy"
if bin/tensorc run checks/checks.tcx --input target=checks/target-ok.npy $ok > checks.log 2>&1 &&
   ! bin/tensorc run checks/checks.tcx --input target=checks/target-bad.npy $ok >> checks.log 2>&1 &&
   grep -q 'node "loss" (cross_entropy): a target is outside the classes' checks.log &&
   ! bin/tensorc run checks/checks.tcx --input target=checks/target-ok.npy --input ids=checks/ids-bad.npy \
     --input cols=checks/cols-ok.npy >> checks.log 2>&1 &&
   grep -q 'node "emb" (embedding): an index is outside' checks.log; then
  echo "run-time checks: passed"
else
  echo "run-time checks: FAILED"; cat checks.log; status=1
fi
echo "== autotuning: max-autotune (variants checked against the default), then strict from the cache"
rm -f autotune-test.sqlite*
tune_ok=1
for model in checks/mlp.tcx checks/mlp_step.tcx checks/layernorm_step.tcx; do
  out=autotune-out/$(basename "$model" .tcx)
  rm -rf "$out" && mkdir -p "$out"/heuristic "$out"/tuned "$out"/strict
  bin/tensorc run "$model" --dim B=4096 --output-dir "$out"/heuristic > /dev/null 2>> autotune.log &&
    bin/tensorc run "$model" --dim B=4096 --autotune max-autotune --tune-db autotune-test.sqlite --output-dir "$out"/tuned \
      > /dev/null 2>> autotune.log &&
    bin/tensorc run "$model" --dim B=4096 --autotune strict --tune-db autotune-test.sqlite --output-dir "$out"/strict \
      > /dev/null 2>> autotune.log &&
    cmp -s <(cat "$out"/tuned/*.npy) <(cat "$out"/strict/*.npy) || tune_ok=0
  # A tuned variant may sum in another order: the tuner accepts it within
  # tolerance of the default variant, and so does this check (numpy where
  # present, else bit for bit). Updated parameters are left out: AdamW's
  # first step moves each by lr * sign(gradient), which flips for a gradient
  # that rounds around zero (a bias gradient summed in another order); the
  # moments next to them carry the gradients themselves.
  if python3 -c 'import numpy' 2>/dev/null; then
    python3 - "$out" >> autotune.log 2>&1 <<'PY' || tune_ok=0
import glob, os, sys
import numpy as np
out = sys.argv[1]
for h in sorted(glob.glob(os.path.join(out, "heuristic", "*.npy"))):
    name = os.path.basename(h)
    if name.endswith(".next.npy") and not name.endswith(("exp_avg.next.npy", "exp_avg_sq.next.npy")):
        continue
    a, b = np.load(h), np.load(os.path.join(out, "tuned", os.path.basename(h)))
    if a.shape != b.shape or not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-4, atol=1e-5):
        sys.exit(f"{h}: the tuned run differs from the default variants beyond tolerance")
PY
  else
    cmp -s <(cat "$out"/heuristic/*.npy) <(cat "$out"/tuned/*.npy) || tune_ok=0
  fi
done
bin/tensorc-tune --db autotune-test.sqlite list >> autotune.log 2>&1
# The layer norm's chain kernel was a site (its variants: block sizes, row cache).
grep -q "(chain)" autotune.log || { echo "no chain kernel was tuned" >> autotune.log; tune_ok=0; }
if [ "$tune_ok" = 1 ] && bin/tensorc-tune --db autotune-test.sqlite --json stats | grep -q '"entries": [1-9]'; then
  echo "autotuning: passed"; tail -5 autotune.log
else
  echo "autotuning: FAILED"; cat autotune.log; status=1
fi
echo "== autotuning cuDNN convolutions: engines timed and checked against cuDNN's first choice, then strict"
rm -f autotune-conv.sqlite*
if bin/tensorc run bench/convblock_bf16_fb.tcx --autotune max-autotune --tune-db autotune-conv.sqlite --show 0 \
     > /dev/null 2> autotune-conv.log &&
   TENSORC_CUDA_TRACE=1 bin/tensorc run bench/convblock_bf16_fb.tcx --autotune strict --tune-db autotune-conv.sqlite \
     --show 0 > /dev/null 2>> autotune-conv.log &&
   [ "$(grep -c 'cuDNN convolution' autotune-conv.log)" -eq 6 ]; then
  echo "conv autotuning: passed ($(grep -o 'cuDNN convolution.*' autotune-conv.log | sort | uniq -c | tr -s ' ' | paste -sd ';'))"
else
  echo "conv autotuning: FAILED"; tail -5 autotune-conv.log; status=1
fi
if python3 -c 'import torch' 2>/dev/null; then
  echo "== python binding with PyTorch CUDA tensors"
  PYTHONPATH=bench-gpu/python TENSORC_RUNTIME_LIB=$PWD/lib/libtensorc_runtime.so.0 \
    python3 checks/cuda_binding_test.py checks/mlp.tcx checks/mlp_step.tcx checks/vector_rows.tcx checks/sibling_rows.tcx || status=1
  if [ -x bin/tensorc-compiler ] && python3 -c 'import torch._dynamo' 2>/dev/null; then
    echo "== torch.compile(model, backend=\"tensorc\") (Dynamo; the compiler on this machine)"
    rm -rf dynamo-work && mkdir -p dynamo-work
    TENSORC=$PWD/bin/tensorc-compiler PYTHONPATH=bench-gpu/python TENSORC_RUNTIME_LIB=$PWD/lib/libtensorc_runtime.so.0 \
      python3 checks/torch_dynamo_gpu_test.py dynamo-work || status=1
  fi
fi
if command -v compute-sanitizer > /dev/null; then
  # Kernels are cached by now: the sanitizer runs only the kernels.
  sample=$(ls -d cases/* | awk 'NR % 10 == 1')
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (every 10th case)"
    # racecheck checks our kernels: cuDNN's attention kernels (wgmma, TMA,
    # mbarrier waits racecheck does not model) report shared-memory hazards
    # inside cudnn_generated_fort_native_sdpa_sm90_* on an H100 (cuDNN 9.19)
    # while their results match the interpreter; memcheck runs with them.
    # Likewise cuDNN's convolution kernels.
    cudnn=1; [ "$tool" = racecheck ] && cudnn=0
    TENSORC_CUDNN_ATTENTION=$cudnn TENSORC_CUDNN_CONVOLUTION=$cudnn timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool "$tool" \
      --error-exitcode 99 bin/tensorc-check --all-variants $sample > "sanitizer-$tool.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && { echo "compute-sanitizer $tool: timed out (not a pass)"; status=1; }
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed' "sanitizer-$tool.log" | tail -2
    [ "$rc" -eq 99 ] && status=1
  done
fi
tail -1 parity.log
exit $status
