"""CUDA kernels launched per step by PyTorch eager and torch.compile for the
public workloads (workloads.py, copied from shared/bench), counted with
torch.profiler over one warmed-up step. Memcpy/memset are not kernels.

    python3 bench/pytorch/kernel_counts.py
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import workloads as W


def count(run):
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = [n for n in names if not n.startswith(("Memcpy", "Memset", "[memcpy", "[memset"))]
    return len(kernels), kernels


def main():
    print(torch.__version__, torch.cuda.get_device_name())
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for name, (mod, make, train, _, _) in W.workloads().items():
        mod = mod.to(W.DEV)
        inputs = make()
        eager, _ = count(W.step_fn(mod, inputs, train))
        torch._dynamo.reset()
        compiled = torch.compile(mod)
        n, kernels = count(W.step_fn(compiled, inputs, train))
        rows.append((name, eager, n))
        print(name, "compiled kernels:", " | ".join(k[:60] for k in kernels), file=sys.stderr)
        del inputs, mod, compiled
        torch.cuda.empty_cache()
    print(f"{'workload':22s} {'eager':>6s} {'torch.compile':>14s}")
    for name, e, c in rows:
        print(f"{name:22s} {e:6d} {c:14d}")


if __name__ == "__main__":
    main()
