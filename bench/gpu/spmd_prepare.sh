#!/usr/bin/env bash
# Compiles the multi-GPU benchmark and checks (bench/gpu/spmd.py, spmd.sh)
# into OUT (default build/gpu-bundle/bench-gpu/spmd):
#  - gpt2block_bf16 training steps (the joint forward+backward graph of
#    bench/make_graphs.py's block, sum loss): `single.tcx` at batch B per
#    GPU, and from the global graph at batch 2B over mesh data=2 (x split
#    along the batch): `ddp.tcx` (parameters replicated, gradients
#    all-reduced) and `fsdp.tcx` (parameters and their gradients split along
#    dim 0: gathered before use, reduce-scattered), and `fsdp_global.tcx`
#    (FSDP of the batch-B graph: B/2 per GPU). Each with its local
#    graph (.json: input names, shapes, dtypes) and the sharding report.
#  - tensor parallel: make_graphs.py's tp_block (separate q, k, v
#    projections) at d_model SPMD_TP_D (default 4096, 32 heads), batch
#    SPMD_TP_BATCH (default 4) x 1024, bf16: `tp_single.tcx` on one GPU and
#    `tp.tcx` over mesh model=2 (`--preset tp`: heads and the MLP split; x
#    and the batch the same on both GPUs).
#  - the same at d_model SPMD_TP_D with the GPT-2 block's fused QKV
#    projection (make_graphs.py's block): `tp_fused_single.tcx` and
#    `tp_fused.tcx` (`--preset tp-head-blocked` splits the fused weight by heads, in
#    head-blocked column order: docs/sharding.md "Fused projections").
#  - parity checks: examples/mlp.json's joint graph under ddp, fsdp and tp on
#    2 devices and with its head's classes split (vocab-parallel
#    cross-entropy), and examples/transformer_block.json's (mean-square
#    loss) under tp (its fused QKV projection head-blocked: `block_tp`),
#    compiled for CUDA, with every device's expected outputs from the SPMD
#    interpreter (`want-NAME/deviceD/*.npy`, inputs from --seed 7 --dim B=3
#    --dim T=4).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gpu-bundle/bench-gpu/spmd}
tensorc=${TENSORC:-build/bin/tensorc}
batch=${SPMD_BATCH:-8}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
block() { # FILE BATCH
  python3 - "$1" "$2" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import make_graphs as m
m.S = dict(m.SIZES_GPU)
b, s, d, nh = m.S["block"]
m.S["block"] = (int(sys.argv[2]), s, d, nh)
json.dump(m.block("bf16"), open(sys.argv[1], "w"), indent=1)
PY
}
block "$tmp/single.json" "$batch"
block "$tmp/global.json" "$((2 * batch))"
"$tensorc" grad "$tmp/single.json" --emit json -o "$out/single.json"
"$tensorc" grad "$tmp/global.json" --emit json -o "$tmp/global.joint.json"
for preset in ddp fsdp; do
  "$tensorc" shard "$tmp/global.joint.json" --mesh data=2 --preset "$preset" --shard x=data,_,_ --report \
    -o "$out/$preset.json" > "$out/$preset.report.txt"
done
# The single GPU's global batch split over 2 (FSDP's memory goal).
"$tensorc" grad "$tmp/single.json" --emit json -o "$tmp/single.joint.json"
"$tensorc" shard "$tmp/single.joint.json" --mesh data=2 --preset fsdp --shard x=data,_,_ --report \
  -o "$out/fsdp_global.json" > "$out/fsdp_global.report.txt"
python3 - "$tmp/tp_single.json" "${SPMD_TP_BATCH:-4}" "${SPMD_TP_D:-4096}" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import make_graphs as m
d = int(sys.argv[3])
json.dump(m.tp_block(int(sys.argv[2]), 1024, d, d // 128), open(sys.argv[1], "w"), indent=1)
PY
"$tensorc" grad "$tmp/tp_single.json" --emit json -o "$out/tp_single.json"
"$tensorc" shard "$out/tp_single.json" --mesh model=2 --preset tp --report -o "$out/tp.json" > "$out/tp.report.txt"
python3 - "$tmp/tp_fused_single.json" "${SPMD_TP_BATCH:-4}" "${SPMD_TP_D:-4096}" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import make_graphs as m
d = int(sys.argv[3])
m.S = dict(m.SIZES_GPU)
m.S["block"] = (int(sys.argv[2]), 1024, d, d // 128)
json.dump(m.block("bf16"), open(sys.argv[1], "w"), indent=1)
PY
"$tensorc" grad "$tmp/tp_fused_single.json" --emit json -o "$out/tp_fused_single.json"
"$tensorc" shard "$out/tp_fused_single.json" --mesh model=2 --preset tp-head-blocked --report -o "$out/tp_fused.json" \
  > "$out/tp_fused.report.txt" 2>&1
for name in single ddp fsdp fsdp_global tp_single tp tp_fused_single tp_fused; do
  "$tensorc" compile "$out/$name.json" --target cuda -o "$out/$name.tcx"
done
# Parity checks on two GPUs.
"$tensorc" grad examples/mlp.json --emit json -o "$tmp/mlp.joint.json"
"$tensorc" shard "$tmp/mlp.joint.json" --mesh data=2 --preset ddp -o "$tmp/mlp_ddp.json"
"$tensorc" shard "$tmp/mlp.joint.json" --mesh data=2 --preset fsdp -o "$tmp/mlp_fsdp.json"
"$tensorc" shard "$tmp/mlp.joint.json" --mesh model=2 --preset tp -o "$tmp/mlp_tp.json"
# The head's classes split (vocab-parallel cross-entropy: no logits gathered).
"$tensorc" shard "$tmp/mlp.joint.json" --mesh model=2 --shard w2=_,model --shard b2=model -o "$tmp/mlp_vocab.json"
# The transformer block's fused QKV projection split by heads.
python3 -c "import json, sys; g = json.load(open(sys.argv[1])); g['nodes'] += [{'name': 'sq', 'op': 'mul', 'args': ['y', 'y']}, {'name': 'loss', 'op': 'mean', 'args': ['sq']}]; g['outputs'] = ['loss']; json.dump(g, open(sys.argv[2], 'w'))" \
  examples/transformer_block.json "$tmp/block.json"
"$tensorc" grad "$tmp/block.json" --emit json -o "$tmp/block.joint.json"
"$tensorc" shard "$tmp/block.joint.json" --mesh model=2 --preset tp-head-blocked -o "$tmp/block_tp.json" 2> /dev/null
mkdir -p "$out/checks"
cp test/sharding/Inputs/compare_devices.py "$out/checks/"
for name in mlp_ddp mlp_fsdp mlp_tp mlp_vocab block_tp; do
  "$tensorc" compile "$tmp/$name.json" --target cuda -o "$out/checks/$name.tcx"
  "$tensorc" run "$tmp/$name.json" --devices 2 --dim B=3 --dim T=4 --seed 7 --output-dir "$out/checks/want-$name" > /dev/null
done
echo "prepared $out"
