#!/usr/bin/env python3
"""Warm start of a small model, broken down: a fresh process, the kernel
cache already filled (run the model once before), to its first result.
    python3 warm_start.py MODEL.tcx CACHE_DIR"""
import sys
import time

t0 = time.perf_counter()
import os  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import tensorc  # noqa: E402
t1 = time.perf_counter()
runtime = tensorc.Runtime(kernel_cache_dir=sys.argv[2])
exe = tensorc.Executable.load(sys.argv[1], runtime)  # CUDA init, cache read, module load
t2 = time.perf_counter()
s = exe.session()
# tiny_mlp's inputs: x (1, 512), w (512, 512), b (512)
ins = [exe.empty(i.dtype, [1, 512] if i.name == "x" else [512, 512] if i.rank == 2 else [512])
       for i in exe.inputs]
t3 = time.perf_counter()
s.run(*ins)
t4 = time.perf_counter()
print(f"warm start {1e3 * (t4 - t0):.1f} ms: import tensorc (ctypes, library) {1e3 * (t1 - t0):.1f} ms, "
      f"load (CUDA init, kernel cache, module) {1e3 * (t2 - t1):.1f} ms, session and inputs "
      f"{1e3 * (t3 - t2):.1f} ms, first run {1e3 * (t4 - t3):.1f} ms")
