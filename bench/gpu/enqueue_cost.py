#!/usr/bin/env python3
"""Host cost of queueing one run of a bench artifact (microseconds, median
of 200 calls, each followed by a synchronize that is not timed): through
Session.prepare (fixed tensors: the runtime's own cost), through
reusing_enqueue with the same tensors (the fast-path extension where built,
and the ctypes path), and with fresh outputs each call
(what tensorc.torch does), beside one torch op's launch for scale.

    TENSORC_RUNTIME_LIB=... PYTHONPATH=python python3 enqueue_cost.py [workload ...]
"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import bench as B  # noqa: E402
import tensorc  # noqa: E402

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}


def median_us(call, n=200):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def main():
    names = sys.argv[1:] or ["layernorm_f32_fb", "softmax_f32_fb", "xent_f32_fb", "mlp_bf16_fb",
                             "gpt2block_bf16_fb"]
    x = torch.zeros(16, device="cuda")
    print(f"one torch op (x.add_(1)): {median_us(lambda: x.add_(1)):.1f} us")
    stream = torch.cuda.current_stream().cuda_stream
    for name in names:
        mod, mk, train, _, _ = B.W.workloads()[name]
        mod = mod.to("cuda")
        named = B.graph_inputs(name, mod, mk())
        exe = tensorc.Executable.load(os.path.join(HERE, "artifacts", name + ".tcx"))
        s = exe.session()
        s.set_stream(stream)
        shapes = s.output_shapes(**named)
        outs = [torch.empty(sh, dtype=DTYPES[o.dtype], device="cuda") for o, sh in zip(exe.outputs, shapes)]
        ins = [named[i.name] for i in exe.inputs]
        step = s.prepare(outputs=outs, **named)
        prepared = median_us(step)
        enq = s.reusing_enqueue()
        same = median_us(lambda: enq(ins, outs))
        plain = tensorc._ReusingEnqueue(s)
        plain.fast = None  # the ctypes path, beside the extension's (tensorc/_fast.c)
        same_ctypes = median_us(lambda: plain(ins, outs))
        fresh = median_us(lambda: enq(ins, [torch.empty_like(o) for o in outs]))
        alloc = median_us(lambda: [torch.empty_like(o) for o in outs])
        stream_us = median_us(lambda: s.set_stream(stream))
        print(f"{name:20} prepared {prepared:7.1f}  reusing {same:7.1f} (ctypes {same_ctypes:7.1f})  "
              f"fresh outputs {fresh:7.1f} "
              f"(of which allocating {alloc:5.1f})  set_stream {stream_us:5.1f}  "
              f"[{len(exe.inputs)} inputs, {len(exe.outputs)} outputs]")
        s.set_cuda_graphs("repeated")  # tensorc.torch's setting: same tensors replay one graph
        print(f"{'  CUDA graphs':20} prepared {median_us(step):7.1f}  reusing {median_us(lambda: enq(ins, outs)):7.1f} "
              f"(ctypes {median_us(lambda: plain(ins, outs)):7.1f})")
        del step, enq, s, exe


if __name__ == "__main__":
    main()
