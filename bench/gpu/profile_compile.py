#!/usr/bin/env python3
"""Where torch.compile's step spends device time, kernel by kernel (the
counterpart of trace_steps.py for tensorc), for one public workload or one
model block of models.py (a training step):

    python3 profile_compile.py gpt2block_f32_fb [--mode default]
    python3 profile_compile.py lm_head_xent_bf16 --mode tensorc

--mode tensorc profiles torch.compile(model, backend="tensorc") (the
compiler: $TENSORC). Beside the kernels' device time it prints the step's
time between CUDA events: the difference is the GPU waiting for the host.
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pytorch"))
sys.path.insert(0, HERE)
import workloads as W  # noqa: E402


def main():
    name = sys.argv[1]
    mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else "default"
    if name in W.workloads():
        mod, make, train, _, _ = W.workloads()[name]
    else:  # a model block of models.py: a training step
        import models
        mod, make = models.models()[name]
        train = True
    mod = mod.to(W.DEV)
    inputs = make()
    if mode == "tensorc":
        import tensorc.torch  # noqa: F401 (registers the backend)
        compiled = torch.compile(mod, backend="tensorc", dynamic=False)
    else:
        compiled = torch.compile(mod, mode=mode)
    run = W.step_fn(compiled, inputs, train)
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    print(f"{name} {mode}: {W.bench(run, 20):.3f} ms between CUDA events (median), "
          f"peak {(torch.cuda.max_memory_allocated() - base) / 2**20:.1f} MiB above the inputs")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    events.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in events)
    print(f"{name} torch.compile {mode}: {total / 1000:.3f} ms device time in {sum(e.count for e in events)} launches")
    for e in events[:25]:
        print(f"{e.device_time_total / 1000:8.3f} ms  x{e.count:<3} {e.key[:110]}")


if __name__ == "__main__":
    main()
