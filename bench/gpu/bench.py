#!/usr/bin/env python3
"""tensorc against PyTorch on the public workloads (bench/pytorch/workloads.py,
a copy of ../shared/bench/workloads.py), in one process on one GPU.

For each workload: PyTorch eager, torch.compile default (and, with
--max-autotune, max-autotune-no-cudagraphs), and tensorc (the artifacts of
bench/gpu/prepare.sh: the same graphs, a training step as its joint
forward+backward graph), all on device-resident tensors, timed the same way:
CUDA events around one step on the current stream, 3 warm-ups, median of
--iters. tensorc runs through its Python binding with every input and output
a PyTorch tensor (DLPack, no copies) and PyTorch's stream.

Columns: median ms; speed vs torch.compile default (>1: tensorc faster);
tensorc with CUDA graphs (reduce-overhead: the same session replaying);
tensorc's device time of its launch sequence (its own events) and the step's
overhead over it; cold start s (tensorc: compile on the build machine + load
and first run here with an empty kernel cache, NVRTC included; torch: the
first call with empty Inductor caches); warm start s (tensorc: a fresh
process with the kernel cache filled, import to first result); peak GPU MiB
(torch: max_memory_allocated delta; tensorc: cuMemGetInfo delta of the
session, plus its outputs); max relative error of every tensorc output
(loss and gradients) vs PyTorch in f64; and the floor: bytes over the copy
bandwidth and FLOPs over a large bf16 GEMM's rate, both measured here.

    python3 bench.py [--iters 20] [--only a,b] [--max-autotune] [--backend] [--json out.json]

--backend adds torch.compile(model, backend="tensorc") (docs/pytorch.md):
its ms, cold start, peak MiB and max relative error (backend_*).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pytorch"))  # workloads.py (in the repo and the bundle)
for p in (os.path.join(HERE, "python"), os.path.join(HERE, "..", "..", "python")):
    if os.path.isdir(os.path.join(p, "tensorc")):
        sys.path.insert(0, p)
        break

import workloads as W  # noqa: E402
import tensorc  # noqa: E402


def graph_inputs(name, mod, inputs):
    """The tensorc graph's inputs (bench/make_graphs.py's names and layouts)
    as torch tensors: nn.Linear weights are [out, in], the graphs' [in, out]."""
    t = lambda w: w.detach().t().contiguous()
    d = lambda w: w.detach().contiguous()
    if name == "pointwise_f32":
        return dict(zip("xab", (d(x) for x in inputs)))
    if name in ("layernorm_f32_fb",):
        return {"x": d(inputs[0]), "weight": d(mod.ln.weight), "bias": d(mod.ln.bias)}
    if name == "softmax_f32_fb":
        return {"x": d(inputs[0])}
    if name == "xent_f32_fb":
        return {"logits": d(inputs[0]), "target": d(inputs[1])}
    if name == "mlp_bf16_fb":
        return {"x": d(inputs[0]), "fc1_w": t(mod.fc1.weight), "fc1_b": d(mod.fc1.bias),
                "fc2_w": t(mod.fc2.weight), "fc2_b": d(mod.fc2.bias)}
    if name == "attn_bf16_fb":
        return dict(zip("qkv", (d(x) for x in inputs)))
    if name.startswith("gpt2block"):
        return {"x": d(inputs[0]), "ln1_w": d(mod.ln1.weight), "ln1_b": d(mod.ln1.bias),
                "qkv_w": t(mod.qkv.weight), "qkv_b": d(mod.qkv.bias),
                "proj_w": t(mod.proj.weight), "proj_b": d(mod.proj.bias),
                "ln2_w": d(mod.ln2.weight), "ln2_b": d(mod.ln2.bias),
                "mlp_fc1_w": t(mod.mlp.fc1.weight), "mlp_fc1_b": d(mod.mlp.fc1.bias),
                "mlp_fc2_w": t(mod.mlp.fc2.weight), "mlp_fc2_b": d(mod.mlp.fc2.bias)}
    raise KeyError(name)


def step_outputs(name, call, module, inputs, train):
    """One step's results as the tensorc graph names them: the output ("y" or
    "loss") and, for a training step, the gradient of every graph input
    (laid out as the graph lays it out). `module` holds the parameters
    `call` (the module, or torch.compile of it) uses."""
    import copy
    for p in module.parameters():
        p.grad = None
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x.grad = None
    out = call(*inputs)
    if not train:
        return {"y": out.detach()}
    # PyTorch's step: out.float().sum() (an f64 reference stays f64).
    wide = out.to(torch.promote_types(out.dtype, torch.float32))
    loss = wide if out.dim() == 0 else wide.sum()
    loss.backward()
    g = copy.deepcopy(module)
    with torch.no_grad():
        for p, q in zip(module.parameters(), g.parameters()):
            q.copy_(p.grad if p.grad is not None else torch.full_like(p, float("nan")))
    gxs = [x.grad if isinstance(x, torch.Tensor) and x.grad is not None else x for x in inputs]
    result = {"loss": loss.detach()}
    for k, v in graph_inputs(name, g, gxs).items():
        if v.is_floating_point():
            result["grad_" + k] = v
    return result


def reference(name, mod, inputs, train):
    """The step in f64."""
    import copy
    m = copy.deepcopy(mod).double()
    xs = [x.detach().double().requires_grad_(x.requires_grad) if x.is_floating_point() else x
          for x in inputs]
    return step_outputs(name, m, m, xs, train)


def max_error(got, ref):
    """The largest error of any output, relative to that output's largest
    reference value (outputs that are mathematically ~0, such as the
    gradient of sum(softmax(x)), make this large for any f32 computation:
    compare with PyTorch's own error in the same table)."""
    worst = 0.0
    for k, want in ref.items():
        if k in got:
            want = want.double()
            scale = want.abs().max().item() or 1e-30
            worst = max(worst, (got[k].double() - want).abs().max().item() / scale)
    return worst


def events_median(fn, iters, warm=3):
    """CUDA events around one call, median (workloads.py's timing, shared)."""
    return W.bench(fn, iters=iters, warm=warm)


def measure_floor():
    n = 1 << 28  # 1 GiB of f32
    a = torch.empty(n, device="cuda")
    b = torch.empty_like(a)
    ms = events_median(lambda: b.copy_(a), 10)
    bw = 2 * a.numel() * 4 / (ms * 1e-3)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = events_median(lambda: x @ x, 10)
    rate = 2 * 8192 ** 3 / (ms * 1e-3)
    del x
    torch.cuda.empty_cache()
    return bw, rate


def gemms_alone(name, mod, iters):
    """The time of a training step's GEMMs alone, in one timed call (cuBLAS
    through torch.mm, the layouts the step uses): the bar for a GEMM-bound
    step. The MLP's six: x @ W1^T, g @ W2^T forward; dy^T @ g, dy @ W2,
    dh^T @ x, dh @ W1 backward. None for other workloads."""
    if name != "mlp_bf16_fb":
        return None
    w1, w2 = mod.fc1.weight.detach(), mod.fc2.weight.detach()  # [h, d], [d, h]
    t = 8192
    h, d = w1.shape
    x = torch.randn(t, d, device="cuda", dtype=w1.dtype)
    g = torch.randn(t, h, device="cuda", dtype=w1.dtype)
    dy = torch.randn(t, d, device="cuda", dtype=w1.dtype)

    def gemms():
        x @ w1.t(), g @ w2.t(), dy.t() @ g, dy @ w2, g.t() @ x, g @ w1

    return events_median(gemms, iters)


WARM_START = r"""
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import tensorc
exe = tensorc.Executable.load(sys.argv[2], tensorc.Runtime(kernel_cache_dir=sys.argv[3]))
s = exe.session()
ins = [exe.empty(i.dtype, [int(x) for x in sys.argv[4 + k].split(",") if x])
       for k, i in enumerate(exe.inputs)]
s.run(*ins)
print(time.perf_counter() - t0)
"""


def run_tensorc_tuned(art, named, exe_outputs, shapes, iters, cache_dir, tune_db, ref, row):
    """tensorc with max-autotune (docs/autotune.md): the first step measures
    every candidate (its time is the tuning time), later steps run the
    winners; the outputs are checked against f64 like the default's."""
    dtypes = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
              "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}
    exe = tensorc.Executable.load(art, tensorc.Runtime(kernel_cache_dir=cache_dir,
                                                       autotune="max-autotune", tune_db=tune_db))
    session = exe.session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    outs = {o.name: torch.full(s, float("nan"), device="cuda", dtype=dtypes[o.dtype])
            for o, s in zip(exe_outputs, shapes)}
    step = session.prepare(outputs=outs, **named)
    t0 = time.perf_counter()
    step()
    session.synchronize()
    row["tc_tune_s"] = round(time.perf_counter() - t0, 2)
    row["tc_tuned_ms"] = round(events_median(step, iters), 4)
    session.synchronize()
    row["tc_tuned_max_rel_err"] = float(f"{max_error(outs, ref):.3g}")
    del step, session, exe, outs


def run_tensorc(name, art, mod, inputs, train, iters, cache_dir, compile_s, row, tune_db=None):
    named = graph_inputs(name, mod, inputs)
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    t0 = time.perf_counter()
    exe = tensorc.Executable.load(art, tensorc.Runtime(kernel_cache_dir=cache_dir))
    session = exe.session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    shapes = session.output_shapes(**named)
    dtypes = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
              "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}
    outs = {o.name: torch.full(s, float("nan"), device="cuda", dtype=dtypes[o.dtype])
            for o, s in zip(exe.outputs, shapes)}
    out_bytes = sum(t.numel() * t.element_size() for t in outs.values())
    step = session.prepare(outputs=outs, **named)
    step()
    session.synchronize()
    row["tc_cold_s"] = round(compile_s + time.perf_counter() - t0, 2)
    ms = events_median(step, iters)
    session.synchronize()
    row["tc_ms"] = round(ms, 4)
    step()
    session.synchronize()
    row["tc_device_ms"] = round(session.last_device_ms, 4)
    # reduce-overhead: the same session replaying a CUDA graph.
    session.set_cuda_graphs(True)
    row["tc_ro_ms"] = round(events_median(step, iters), 4)
    session.synchronize()
    session.set_cuda_graphs(False)
    torch.cuda.synchronize()
    row["tc_peak_mib"] = round((free0 - torch.cuda.mem_get_info()[0]) / 2**20, 1)
    row["tc_arena_mib"] = round(session.arena_bytes / 2**20, 1)
    # Correctness against f64, beside torch.compile's own error.
    ref = reference(name, mod, inputs, train)
    row["tc_max_rel_err"] = float(f"{max_error(outs, ref):.3g}")
    row["tc_checked"] = sorted(k for k in ref if k in outs)
    if tune_db:
        try:
            run_tensorc_tuned(art, named, exe.outputs, shapes, iters, cache_dir, tune_db, ref, row)
        except Exception as ex:
            row["tc_tuned_error"] = str(ex)[:300]
    try:
        torch._dynamo.reset()
        theirs = step_outputs(name, torch.compile(mod), mod, inputs, train)
        row["compile_max_rel_err"] = float(f"{max_error(theirs, ref):.3g}")
    except Exception as ex:
        row["compile_err_error"] = str(ex)[:200]
    # Warm start: a fresh process, the kernel cache filled.
    shape_args = [",".join(str(d) for d in named[i.name].shape) for i in exe.inputs]
    pkg = os.path.dirname(os.path.dirname(tensorc.__file__))
    r = subprocess.run([sys.executable, "-c", WARM_START, pkg, art, cache_dir, *shape_args],
                       capture_output=True, text=True)
    row["tc_warm_s"] = round(float(r.stdout.strip()), 3) if r.returncode == 0 else None
    del step, session, exe, outs
    return out_bytes


def run_torch(mod, mk, train, mode, iters, row):
    torch._dynamo.reset()
    inputs = mk()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    if mode == "backend":  # what a PyTorch user runs: torch.compile(model, backend="tensorc")
        import tensorc.torch  # noqa: F401 (registers the backend)
        fn = torch.compile(mod, backend="tensorc", dynamic=False)
    else:
        fn = mod if mode == "eager" else torch.compile(mod, mode=None if mode == "default" else mode)
    run = W.step_fn(fn, inputs, train)
    t0 = time.perf_counter()
    run()
    torch.cuda.synchronize()
    cold = time.perf_counter() - t0
    ms = events_median(run, iters)
    row[f"{mode}_ms"] = round(ms, 4)
    if mode != "eager":
        row[f"{mode}_cold_s"] = round(cold, 2)
    row[f"{mode}_peak_mib"] = round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)
    if mode == "backend":  # its results against f64, like tensorc's own
        ref = reference(row["workload"], mod, inputs, train)
        row["backend_max_rel_err"] = float(f"{max_error(step_outputs(row['workload'], fn, mod, inputs, train), ref):.3g}")


def tiny_mlp(artifacts, cache_dir, iters):
    """Batch-1 latency, three 512-wide linears (f32, forward): per call,
    CUDA events around one call, median. PyTorch eager, torch.compile
    default and reduce-overhead; tensorc default and reduce-overhead (CUDA
    graphs), on resident tensors."""
    lin = [torch.nn.Linear(512, 512).cuda() for _ in range(3)]
    mod = torch.nn.Sequential(lin[0], torch.nn.ReLU(), lin[1], torch.nn.ReLU(), lin[2]).eval()
    x = torch.randn(1, 512, device="cuda")
    row = {"workload": "tiny_mlp"}
    with torch.no_grad():
        row["eager_ms"] = round(events_median(lambda: mod(x), iters), 4)
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            f = torch.compile(mod, mode=None if mode == "default" else mode)
            row[f"compile_{mode}_ms"] = round(events_median(lambda: f(x), iters, warm=5), 4)
        want = mod(x).double()
    named = {"x": x}
    for i, l in enumerate(lin):
        named[f"w{i}"] = l.weight.detach().t().contiguous()
        named[f"b{i}"] = l.bias.detach().contiguous()
    for art, key in (("tiny_mlp.tcx", "tensorc_ms"), ("tiny_mlp_ro.tcx", "tensorc_ro_ms")):
        exe = tensorc.Executable.load(os.path.join(artifacts, art),
                                      tensorc.Runtime(kernel_cache_dir=cache_dir))
        s = exe.session()
        s.set_stream(torch.cuda.current_stream().cuda_stream)
        out = torch.empty(1, 512, device="cuda")
        step = s.prepare(outputs=[out], **named)
        row[key] = round(events_median(step, iters, warm=5), 4)
        s.synchronize()
        row[key.replace("_ms", "_device_ms")] = round(s.last_device_ms, 4)
        row[key.replace("_ms", "_err")] = float(f"{(out.double() - want).abs().max().item():.3g}")
    return row


def use_bundled_compiler():
    """$TENSORC for torch.compile(backend="tensorc"), where unset: the GPU
    bundle's bin/tensorc-compiler, unpacked from its .xz the first time."""
    bundled = os.path.join(HERE, "..", "bin", "tensorc-compiler")
    if "TENSORC" in os.environ:
        return
    if not os.path.exists(bundled) and os.path.exists(bundled + ".xz"):
        import lzma
        import shutil
        with lzma.open(bundled + ".xz") as src, open(bundled + ".tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(bundled + ".tmp", 0o755)
        os.replace(bundled + ".tmp", bundled)
    if os.path.exists(bundled):
        os.environ["TENSORC"] = os.path.abspath(bundled)


def setup_torch():
    """Seeded, TF32 off (tensorc's f32 is exact f32); the GPU's name."""
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch.cuda.get_device_name()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--artifacts", default=os.path.join(HERE, "artifacts"))
    ap.add_argument("--max-autotune", action="store_true")
    ap.add_argument("--tc-autotune", action="store_true",
                    help="also run tensorc with max-autotune (a fresh tune cache): tuning time, tuned ms")
    ap.add_argument("--backend", action="store_true",
                    help="also torch.compile(model, backend=\"tensorc\") (the compiler: $TENSORC, else the "
                         "bundle's bin/tensorc-compiler, unpacked from its .xz)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.backend:
        use_bundled_compiler()
    gpu = setup_torch()
    print(f"# {gpu}, torch {torch.__version__}", flush=True)
    bw, rate = measure_floor()
    print(f"# measured: copy {bw / 1e12:.2f} TB/s, bf16 GEMM {rate / 1e12:.0f} TFLOP/s", flush=True)
    compile_times = json.load(open(os.path.join(a.artifacts, "compile_times.json")))
    cache_dir = tempfile.mkdtemp(prefix="tensorc-kernels-")  # empty: a cold start
    tune_db = os.path.join(tempfile.mkdtemp(prefix="tensorc-tune-"), "tune.sqlite") if a.tc_autotune else None
    modes = ["eager", "default"] + (["max-autotune-no-cudagraphs"] if a.max_autotune else []) + \
        (["backend"] if a.backend else [])
    rows = []
    for name, (mod, mk, train, nbytes, flops) in W.workloads().items():
        if a.only and name not in a.only.split(","):
            continue
        mod = mod.to(W.DEV)
        row = {"workload": name, "floor_ms": round(max(nbytes / bw, flops / rate) * 1e3, 4)}
        for mode in modes:
            try:
                run_torch(mod, mk, train, mode, a.iters, row)
            except Exception as ex:  # recorded, the run goes on
                row[f"{mode}_error"] = str(ex)[:200]
        torch._dynamo.reset()
        torch.manual_seed(1)
        inputs = mk()
        try:
            run_tensorc(name, os.path.join(a.artifacts, name + ".tcx"), mod, inputs, train, a.iters,
                        cache_dir, compile_times.get(name, 0.0), row, tune_db)
        except Exception as ex:
            row["tc_error"] = str(ex)[:300]
        del inputs
        torch.cuda.empty_cache()
        gemm_ms = gemms_alone(name, mod, a.iters)
        if gemm_ms is not None:
            row["gemms_ms"] = round(gemm_ms, 4)
        if "tc_ms" in row and "default_ms" in row:
            row["speedup_vs_compile"] = round(row["default_ms"] / row["tc_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    tiny = tiny_mlp(a.artifacts, cache_dir, max(a.iters, 100))
    print(json.dumps(tiny), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "copy_tb_s": bw / 1e12,
                       "gemm_tflops": rate / 1e12, "rows": rows, "tiny_mlp": tiny}, f, indent=1)
    cols = ["eager", "compile", "tensorc", "vs compile", "tc graphs", "tc device", "overhead",
            "tc cold s", "compile cold s", "tc warm s", "tc MiB", "compile MiB", "tc err",
            "compile err", "floor"] + (["tc tuned", "tuned vs compile", "tune s"] if a.tc_autotune else []) + \
        (["backend", "backend vs compile", "backend cold s", "backend err"] if a.backend else [])
    print("\n| workload | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    f = lambda v, p=3: "-" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))
    ratios = []
    for r in rows:
        if "tc_ms" in r and "default_ms" in r:
            ratios.append(r["default_ms"] / r["tc_ms"])
        over = (r["tc_ms"] / r["tc_device_ms"] - 1) * 100 if r.get("tc_device_ms") else None
        print("| " + " | ".join([
            r["workload"], f(r.get("eager_ms")), f(r.get("default_ms")),
            f(r.get("tc_ms")) if "tc_error" not in r else "ERROR",
            f(r.get("speedup_vs_compile"), 2) + "x" if "speedup_vs_compile" in r else "-",
            f(r.get("tc_ro_ms")), f(r.get("tc_device_ms")), "-" if over is None else f"{over:.1f}%",
            f(r.get("tc_cold_s"), 2), f(r.get("default_cold_s"), 2), f(r.get("tc_warm_s"), 3),
            f(r.get("tc_peak_mib"), 0), f(r.get("default_peak_mib"), 0),
            "-" if r.get("tc_max_rel_err") is None else f"{r['tc_max_rel_err']:.2g}",
            "-" if r.get("compile_max_rel_err") is None else f"{r['compile_max_rel_err']:.2g}",
            f(r.get("floor_ms"))] + ([
            f(r.get("tc_tuned_ms")) if "tc_tuned_error" not in r else "ERROR",
            f(r["default_ms"] / r["tc_tuned_ms"], 2) + "x" if r.get("tc_tuned_ms") and r.get("default_ms") else "-",
            f(r.get("tc_tune_s"), 2)] if a.tc_autotune else []) + ([
            f(r.get("backend_ms")) if "backend_error" not in r else "ERROR",
            f(r["default_ms"] / r["backend_ms"], 2) + "x" if r.get("backend_ms") and r.get("default_ms") else "-",
            f(r.get("backend_cold_s"), 2),
            "-" if r.get("backend_max_rel_err") is None else f"{r['backend_max_rel_err']:.2g}"] if a.backend else [])) +
            " |")
    for r in rows:
        if r.get("gemms_ms") and r.get("tc_device_ms"):
            print(f"{r['workload']}: its GEMMs alone {r['gemms_ms']:.3f} ms; tensorc's device time "
                  f"{r['tc_device_ms'] / r['gemms_ms']:.3f}x of that")
    for r in rows:
        for k in r:
            if k.endswith("_error"):
                print(f"{r['workload']}: {k}: {r[k]}")
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeomean speed of tensorc vs torch.compile default: {g:.3f}x "
              f"({'faster' if g > 1 else 'slower'}; {len(ratios)} workloads, {gpu})")
    tuned = [r["default_ms"] / r["tc_tuned_ms"] for r in rows if r.get("tc_tuned_ms") and r.get("default_ms")]
    if tuned:
        g = math.exp(sum(math.log(x) for x in tuned) / len(tuned))
        print(f"geomean speed of tensorc max-autotune vs torch.compile default: {g:.3f}x ({len(tuned)} workloads)")


if __name__ == "__main__":
    main()
