#!/usr/bin/env python3
"""Each output's error against an f64 step (bench.py's max_error: relative to
the output's largest value), for tensorc's attention implementations and
PyTorch eager in the same dtype: run it with and without
TENSORC_CUDNN_ATTENTION=0 (the generated kernels instead of cuDNN's).

    python3 attention_error.py [WORKLOAD ...]   (default attn_bf16_fb gpt2block_bf16_fb)
"""
import os
import sys

import torch

import bench as B  # noqa: E402
import tensorc  # noqa: E402
import workloads as W  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i64": torch.int64}


def main():
    names = sys.argv[1:] or ["attn_bf16_fb", "gpt2block_bf16_fb"]
    B.setup_torch()
    impl = "generated" if os.environ.get("TENSORC_CUDNN_ATTENTION") == "0" else "cudnn"
    for name, (mod, mk, train, _, _) in W.workloads().items():
        if name not in names:
            continue
        mod = mod.to(W.DEV)
        torch.manual_seed(1)
        inputs = mk()
        ref = B.reference(name, mod, inputs, train)
        exe = tensorc.Executable.load(os.path.join(B.HERE, "artifacts", name + ".tcx"), tensorc.Runtime())
        session = exe.session()
        session.set_stream(torch.cuda.current_stream().cuda_stream)
        named = B.graph_inputs(name, mod, inputs)
        shapes = session.output_shapes(**named)
        outs = {o.name: torch.full(s, float("nan"), device="cuda", dtype=DTYPES[o.dtype])
                for o, s in zip(exe.outputs, shapes)}
        session.prepare(outputs=outs, **named)()
        session.synchronize()
        eager = B.step_outputs(name, mod, mod, [x.detach().requires_grad_(x.requires_grad) for x in inputs], train)
        for k in ref:
            if k in outs:
                print(f"{name} {k}: tensorc ({impl}) {B.max_error({k: outs[k]}, {k: ref[k]}):.3g}, "
                      f"eager {B.max_error({k: eager[k]}, {k: ref[k]}):.3g}", flush=True)


if __name__ == "__main__":
    main()
