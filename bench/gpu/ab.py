#!/usr/bin/env python3
"""Two ways of running the same workload, timed in alternating rounds in one
process, so that the GPU's drift (clocks, temperature, a neighbour) falls on
both alike: per round, CUDA events around one step, 3 warm-ups, median of
--iters; the table gives each side's median over the rounds, its spread
(min-max of the rounds) and the ratio of the medians.

    python3 ab.py tuned   [--only a,b] [--rounds 7] [--iters 30]
        tensorc default (heuristics) against tensorc max-autotune (tuned once
        into a fresh tune database first; its tuning time is shown)
    python3 ab.py backend [--only a,b] [--rounds 7] [--iters 30]
        torch.compile default against torch.compile(backend="tensorc")

Run from bench-gpu/ of the GPU bundle like bench.py (TENSORC_RUNTIME_LIB;
for `backend`, $TENSORC or the bundle's bin/tensorc-compiler).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

import bench as B  # noqa: E402 (its paths, inputs and timing)
import tensorc  # noqa: E402
import workloads as W  # noqa: E402

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}


def tensorc_step(art, named, cache_dir, autotune=None, tune_db=None):
    """A prepared step of artifact `art` on PyTorch's stream, and the seconds
    its first call took (tuning, with max-autotune)."""
    opts = dict(kernel_cache_dir=cache_dir)
    if autotune:
        opts.update(autotune=autotune, tune_db=tune_db)
    exe = tensorc.Executable.load(art, tensorc.Runtime(**opts))
    session = exe.session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    shapes = session.output_shapes(**named)
    outs = {o.name: torch.empty(s, device="cuda", dtype=DTYPES[o.dtype]) for o, s in zip(exe.outputs, shapes)}
    step = session.prepare(outputs=outs, **named)
    t0 = time.perf_counter()
    step()
    session.synchronize()
    first_s = time.perf_counter() - t0
    return (exe, session, outs, step), first_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["tuned", "backend"])
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--artifacts", default=os.path.join(B.HERE, "artifacts"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.what == "backend":
        B.use_bundled_compiler()
    gpu = B.setup_torch()
    print(f"# {gpu}, torch {torch.__version__}: {a.what}, {a.rounds} alternating rounds of {a.iters}", flush=True)
    cache_dir = tempfile.mkdtemp(prefix="tensorc-kernels-")
    tune_db = os.path.join(tempfile.mkdtemp(prefix="tensorc-tune-"), "tune.sqlite")
    names = ("default", "tuned") if a.what == "tuned" else ("compile", "backend")
    rows = []
    for name, (mod, mk, train, _, _) in W.workloads().items():
        if a.only and name not in a.only.split(","):
            continue
        mod = mod.to(W.DEV)
        torch.manual_seed(1)
        row = {"workload": name}
        keep = []
        if a.what == "tuned":
            inputs = mk()
            named = B.graph_inputs(name, mod, inputs)
            art = os.path.join(a.artifacts, name + ".tcx")
            d, _ = tensorc_step(art, named, cache_dir)
            t, row["tune_s"] = tensorc_step(art, named, cache_dir, "max-autotune", tune_db)
            keep = [d, t, inputs]
            sides = (d[3], t[3])
        else:
            torch._dynamo.reset()
            inputs = mk()
            import tensorc.torch  # noqa: F401 (registers the backend)
            ref = torch.compile(mod)
            ours = torch.compile(mod, backend="tensorc", dynamic=False)
            sides = (W.step_fn(ref, inputs, train), W.step_fn(ours, inputs, train))
            keep = [inputs]
        times = ([], [])
        for _ in range(a.rounds):
            for k in (0, 1):
                times[k].append(B.events_median(sides[k], a.iters))
        for k in (0, 1):
            row[names[k] + "_ms"] = round(statistics.median(times[k]), 4)
            row[names[k] + "_rounds"] = [round(x, 4) for x in times[k]]
        row["ratio"] = round(row[names[0] + "_ms"] / row[names[1] + "_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del sides, keep
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "what": a.what, "rounds": a.rounds,
                       "iters": a.iters, "rows": rows}, f, indent=1)
    extra = ["tune s"] if a.what == "tuned" else []
    print(f"\n| workload | {names[0]} ms | spread | {names[1]} ms | spread | "
          f"{names[0]} / {names[1]} | " + "".join(e + " | " for e in extra))
    print("|---" * (6 + len(extra)) + "|")
    for r in rows:
        cells = [r["workload"]]
        for n in names:
            cells += [f"{r[n + '_ms']:.3f}", f"{min(r[n + '_rounds']):.3f}-{max(r[n + '_rounds']):.3f}"]
        cells.append(f"{r['ratio']:.3f}x")
        if a.what == "tuned":
            cells.append(f"{r['tune_s']:.1f}")
        print("| " + " | ".join(cells) + " |")
    print(f"\n({gpu}; >1: {names[1]} faster)")


if __name__ == "__main__":
    main()
