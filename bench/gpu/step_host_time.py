#!/usr/bin/env python3
"""Where a training step's time goes with torch.compile(backend="tensorc")
beside torch.compile default, per workload of bench/pytorch/workloads.py:

  isolated   CUDA events around one step after a synchronize (bench.py's
             number: host latency shows where the GPU waits for the CPU)
  host       CPU wall time per step, steps queued back to back, no sync
  pipelined  wall time per step of 50 back-to-back steps, synchronized once
             (the device time when the host keeps ahead)

then the tensorc steps' Python profile (cProfile, by own time; each step
synchronized, so a launch blocking on a full queue does not show as its cost).

    TENSORC=... PYTHONPATH=... python3 step_host_time.py [--kernels] layernorm_f32_fb softmax_f32_fb ...

--kernels: instead, each backend's GPU kernels over 10 steps (torch.profiler).
--graphs-off: also tensorc with its repeated CUDA graphs off (cuda_graphs="off").
"""
import cProfile
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "pytorch"), os.path.join(HERE, "..", "..", "pytorch")):
    if os.path.isdir(p):
        sys.path.insert(0, p)

import torch  # noqa: E402
import workloads as W  # noqa: E402

import tensorc.torch  # noqa: E402,F401 (registers the backend)


def timings(run, n=50):
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    isolated = W.bench(run, iters=30)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        run()
    host = (time.perf_counter() - t0) / n * 1e3
    torch.cuda.synchronize()
    pipelined = (time.perf_counter() - t0) / n * 1e3
    return isolated, host, pipelined


def steps(names, graphs_off=False):
    """(workload, backend, training step) for inductor and tensorc per workload."""
    import functools
    from tensorc.torch._dynamo_backend import tensorc_backend
    backends = {"inductor": "inductor", "tensorc": "tensorc"}
    if graphs_off:
        backends["tc-nographs"] = functools.partial(tensorc_backend, cuda_graphs="off")
    for name in names:
        mod, mk, train, _, _ = W.workloads()[name]
        mod = mod.to(W.DEV)
        for label, backend in backends.items():
            torch._dynamo.reset()
            inputs = mk()
            yield name, label, W.step_fn(torch.compile(mod, backend=backend, dynamic=False), inputs, train)


def kernel_tables(names):
    from torch.profiler import ProfilerActivity, profile
    for name, backend, run in steps(names):
        for _ in range(5):
            run()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                run()
            torch.cuda.synchronize()
        print(f"\n== {name}: {backend}, 10 steps")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


def main():
    if sys.argv[1:2] == ["--kernels"]:
        return kernel_tables(sys.argv[2:])
    graphs_off = "--graphs-off" in sys.argv
    names = [a for a in sys.argv[1:] if a != "--graphs-off"] or \
        ["layernorm_f32_fb", "softmax_f32_fb", "xent_f32_fb", "mlp_bf16_fb"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    table = []
    profiles = {}
    for name, backend, run in steps(names, graphs_off):
        table.append((name, backend) + timings(run))
        if backend == "tensorc":
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(200):  # synchronized: host time, not a full launch queue's back-pressure
                run()
                torch.cuda.synchronize()
            prof.disable()
            profiles[name] = prof
    print(f"{'workload':20} {'backend':9} {'isolated':>9} {'host':>7} {'pipelined':>9}  (ms per step)")
    for name, backend, iso, host, pipe in table:
        print(f"{name:20} {backend:9} {iso:9.3f} {host:7.3f} {pipe:9.3f}")
    for name, prof in profiles.items():
        print(f"\n== {name}: tensorc backend, 200 steps, by own time")
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
