#!/usr/bin/env bash
# Builds the self-contained GPU bundle in build/gpu-bundle: the runtime
# library, the runtime-only `tensorc run` (bin/tensorc) and checker
# (tensorc-check), benchmark artifacts (gpu-bench.sh), the parity cases (every
# op in several dtypes and the example models compiled with --target cuda,
# with inputs and the reference interpreter's outputs) and gpu-test.sh. It
# needs only the NVIDIA driver and NVRTC on the GPU machine (no LLVM/MLIR,
# no network):
#   scripts/gpu-bundle.sh && (copy build/gpu-bundle) && gpu-bundle/gpu-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh tensorc tensorc-run tensorc-check tensorc-tune tensorc-gpu-cases tensorc_runtime
out=build/gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp build/bin/tensorc-check build/bin/tensorc-tune "$out/bin/"
cp build/bin/tensorc-run "$out/bin/tensorc"  # the runtime-only `tensorc run`
cp -L build/lib/libtensorc_runtime.so.0 "$out/lib/"  # the soname, as a file (no links)
# The Python binding's per-call fast path (python/tensorc/_fast.c), where built.
if [ -f build/lib/_tensorc_fast.abi3.so ]; then cp build/lib/_tensorc_fast.abi3.so "$out/lib/"; fi
build/bin/tensorc-gpu-cases "$out/cases" --random 80  # + random graphs: differential fuzzing on the GPU
# Packed (half the bytes: the artifacts' CUDA source compresses well) so the
# bundle stays under the GPU machine's 64 MiB transfer; gpu-test.sh unpacks it.
tar czf "$out/cases.tar.gz" -C "$out" cases
rm -rf "$out/cases"
cp scripts/gpu-test.sh scripts/gpu-bench.sh "$out/"
# Run-time index checks (test/hardening/run-checks.test) on the GPU.
mkdir -p "$out/checks"
build/bin/tensorc compile test/hardening/Inputs/index-checks.json --target cuda -o "$out/checks/checks.tcx"
cp test/hardening/Inputs/{target,ids,cols}-*.npy "$out/checks/"
build/bin/tensorc compile examples/mlp.json --target cuda -o "$out/checks/mlp.tcx"
build/bin/tensorc compile examples/mlp.json --train --optimizer adamw --target cuda -o "$out/checks/mlp_step.tcx"
# A layer norm's forward + backward: one chain kernel (autotuned: block
# sizes, the row cache).
build/bin/tensorc grad test/gpu/Inputs/layernorm_step.json --emit json -o "$out/checks/layernorm_step.json"
build/bin/tensorc compile "$out/checks/layernorm_step.json" --target cuda -o "$out/checks/layernorm_step.tcx"
rm "$out/checks/layernorm_step.json"
# Elementwise, row-reduction and chain kernels (one of sibling elementwise
# nests) that read vectors, run by the binding test with tensors at aligned
# and odd offsets.
build/bin/tensorc compile test/gpu/Inputs/vector_rows.json --target cuda -o "$out/checks/vector_rows.tcx"
cp test/gpu/Inputs/sibling_rows.json "$out/checks/"  # compiled from there: gpu-test.sh compiles it again
(cd "$out" && "$OLDPWD/build/bin/tensorc" compile checks/sibling_rows.json --target cuda -o checks/sibling_rows.tcx)
cp test/python/cuda_binding_test.py test/python/torch_dynamo_gpu_test.py "$out/checks/"
# Benchmarks (scripts/gpu-bench.sh): compiled here, precompiled for sm_90 so
# the H100/H200 loads them without JIT; PyTorch's side of the comparison.
mkdir -p "$out/bench"
python3 bench/cuda_graphs.py build/cuda-bench-graphs
for g in build/cuda-bench-graphs/*.json; do
  name=$(basename "$g" .json)
  case "$name" in *_fb) # forward graphs: their joint forward+backward graph
    build/bin/tensorc grad "$g" --emit json -o "build/cuda-bench-graphs/$name.joint"
    g="build/cuda-bench-graphs/$name.joint" ;;
  esac
  build/bin/tensorc compile "$g" --target cuda --arch sm_90 --precompile -o "$out/bench/$name.tcx"
  # The alternatives without --precompile (NVRTC at load; the bundle's
  # size is capped): the device time is the same.
  case "$name" in conv*)
    build/bin/tensorc compile "$g" --target cuda --conv-algo gemm -o "$out/bench/${name}_gemm.tcx" ;;
  esac
  case "$name" in conv*_f32|conv*_bf16)
    build/bin/tensorc compile "$g" --target cuda --conv-algo direct -o "$out/bench/${name}_direct.tcx" ;;
  esac
done
cp bench/pytorch/cuda_compare.py "$out/bench/"
# The side-by-side benchmark (bench/gpu/bench.py) with the Python binding:
#   cd gpu-bundle/bench-gpu && TENSORC_RUNTIME_LIB=../lib/libtensorc_runtime.so.0 python3 bench.py
mkdir -p "$out/bench-gpu/python" "$out/pytorch"
bench/gpu/prepare.sh "$out/bench-gpu/artifacts"
cp bench/gpu/variants.sh bench/gpu/bench.py bench/gpu/ab.py bench/gpu/attention_error.py bench/gpu/warm_tune.py bench/gpu/comm_timeline.py bench/gpu/warm_start.py bench/gpu/trace_steps.py bench/gpu/profile_compile.py bench/gpu/backend_overhead.py bench/gpu/step_host_time.py bench/gpu/enqueue_cost.py \
  bench/gpu/sdpa_reference.py bench/gpu/models.py bench/gpu/forward_error.py "$out/bench-gpu/"
cp -r python/tensorc "$out/bench-gpu/python/"
# The multi-GPU checks and benchmark (bench-gpu/spmd.sh, on two GPUs).
bench/gpu/spmd_prepare.sh "$out/bench-gpu/spmd"
cp bench/gpu/spmd.py bench/gpu/spmd.sh "$out/bench-gpu/"
cp bench/pytorch/workloads.py "$out/pytorch/"
# The compiler itself, self-contained (scripts/portable-compiler.sh; packed:
# 63 MiB, 18 MiB as xz), so PyTorch on the GPU machine can compile
# (tensorc.torch, $TENSORC); gpu-test.sh unpacks it to bin/tensorc-compiler
# and checks that it compiles the same artifact as this machine did.
scripts/portable-compiler.sh build/portable/tensorc
xz -T2 -3 -c build/portable/tensorc > "$out/bin/tensorc-compiler.xz"
du -sh "$out"
