#!/usr/bin/env python3
"""A second process's start with a filled autotune cache: from creating the
runtime to the first step's result, with the kernel cache already filled,
either without the tune database or with it (strict: every launch must find
its winner there). Alternating fresh processes; the table gives the medians.

    python3 warm_tune.py [WORKLOAD] [--runs 5]   (default gpt2block_bf16_fb)

Run from bench-gpu/ of the GPU bundle (TENSORC_RUNTIME_LIB set).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def one(workload, cache_dir, tune_db, mode):
    """In this process: the seconds from Runtime() to the first result."""
    import torch
    import bench as B
    import tensorc
    import workloads as W
    mod, mk, train, _, _ = W.workloads()[workload]
    mod = mod.to(W.DEV)
    torch.manual_seed(1)
    named = B.graph_inputs(workload, mod, mk())
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    opts = dict(kernel_cache_dir=cache_dir)
    if tune_db != "none":
        opts.update(autotune=mode, tune_db=tune_db)
    exe = tensorc.Executable.load(os.path.join(B.HERE, "artifacts", workload + ".tcx"), tensorc.Runtime(**opts))
    session = exe.session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    session.run(**named)
    session.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", nargs="?", default="gpt2block_bf16_fb")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--child", nargs=3, metavar=("CACHE", "DB", "MODE"))
    a = ap.parse_args()
    if a.child:
        print(one(a.workload, *a.child))
        return
    work = tempfile.mkdtemp(prefix="warm-tune-")
    cache, db = os.path.join(work, "kernels"), os.path.join(work, "tune.sqlite")

    def child(db_path, mode):
        out = subprocess.run([sys.executable, __file__, a.workload, "--child", cache, db_path, mode],
                             check=True, capture_output=True, text=True).stdout
        return float(out.split()[-1])

    tune_s = child(db, "max-autotune")  # fills both caches
    child("none", "default")  # any kernel compiled only by the default variants
    times = {"no tune database": [], "tune database, strict": []}
    for _ in range(a.runs):
        times["no tune database"].append(child("none", "default"))
        times["tune database, strict"].append(child(db, "strict"))
    base = statistics.median(times["no tune database"])
    print(f"{a.workload}: tuning (first process) {tune_s:.1f} s, database {db}")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"{k}: median {1e3 * m:.1f} ms (runs {', '.join(f'{1e3 * x:.0f}' for x in v)}), "
              f"{1e3 * (m - base):+.1f} ms against no database")


if __name__ == "__main__":
    main()
