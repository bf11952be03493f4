"""Multi-GPU training steps: tensorc's SPMD artifacts beside PyTorch DDP and FSDP2.

The workload is bench/make_graphs.py's GPT-2 block in bf16 (the public
gpt2block_bf16_fb step: forward, backward of the sum, every gradient), at a
fixed batch per GPU (global batch doubled on two GPUs); and for tensor
parallelism (tensorc alone: `tp-single` on one GPU, `tp` on two) its
tp_block at d_model 4096 with separate q, k, v projections, and
(`tp-fused-single`, `tp-fused`) its GPT-2 block with the fused QKV
projection at d_model 4096 (head-blocked under TP), the same batch
on every GPU. Artifacts come from
bench/gpu/spmd_prepare.sh. Every number is one process's own step on its GPU:
CUDA events around one step on PyTorch's current stream, warm-up, median.

    # one GPU: the baselines (tensorc single.tcx, PyTorch eager and compiled)
    CUDA_VISIBLE_DEVICES=0 python3 spmd.py --artifacts spmd
    # two GPUs, one process each (tensorc's launcher sets RANK, WORLD_SIZE,
    # CUDA_VISIBLE_DEVICES and TENSORC_RENDEZVOUS; PyTorch meets through a
    # file in the rendezvous directory)
    ../bin/tensorc launch --nproc 2 -- python3 spmd.py --artifacts spmd

Each process prints `row: {json}` lines: system, strategy, mode, step ms,
memory (tensorc: its arena + the step's inputs and outputs; PyTorch:
max_memory_allocated, parameters, gradients and activations; neither counts
NCCL's own buffers).
"""
import argparse, json, os, sys, time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pytorch"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import workloads as W  # noqa: E402

RANK, WORLD, TAG, ROWS, PROFILE = 0, 1, "", "", ""
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "i64": torch.int64}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def emit(row):
    row["rank"], row["world"] = RANK, WORLD
    if TAG:
        row["mode"] = row.get("mode", "default") + "+" + TAG
    row["gpu"] = torch.cuda.get_device_name()
    line = "row: " + json.dumps(row)
    print(line, flush=True)
    if ROWS:  # one file per rank: processes' stdout lines interleave
        with open(os.path.join(ROWS, f"rows.{WORLD}.{RANK}.jsonl"), "a") as f:
            f.write(line + "\n")


def median_ms(step, iters, warm):
    """(median of single steps between events, each synchronized; per-step
    time of `iters` steps queued back to back, as a training loop runs them:
    the ranks stay in step instead of meeting from a host sync each time)."""
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    if WORLD > 1:
        dist.barrier()
    single = W.bench(step, iters=iters, warm=0)
    torch.cuda.synchronize()
    if WORLD > 1:
        dist.barrier()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        step()
    e.record()
    torch.cuda.synchronize()
    return single, s.elapsed_time(e) / iters


def profile_steps(step, name, steps=4):
    """--profile DIR: the GPU's kernels of `steps` steps, each after a marker
    kernel (torch.cuda._sleep) on the step's stream, from CUPTI through
    torch.profiler (it sees kernels replayed from CUDA graphs and NCCL's,
    which traces of launches do not), to DIR/NAME.RANK.json as a list of
    steps, each a list of [name, stream, start us from the step's first
    kernel, duration us]; bench/gpu/kernel_timeline.py compares them."""
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    if WORLD > 1:
        dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            torch.cuda._sleep(2_000_000)  # about 1 ms: the ranks' steps start together, each step marked
            step()
        torch.cuda.synchronize()
    trace = os.path.join(PROFILE, f"{name}.{RANK}.trace.json")
    prof.export_chrome_trace(trace)
    kernels = sorted((e for e in json.load(open(trace))["traceEvents"] if e.get("cat") == "kernel"),
                     key=lambda e: e["ts"])
    os.remove(trace)
    out, current = [], None
    for e in kernels:
        if "sleep" in e["name"].lower() or "spin" in e["name"].lower():
            current = []
            out.append(current)
            continue
        if current is None:
            continue
        if not current:
            t0 = e["ts"]
        current.append([e["name"][:160], e.get("args", {}).get("stream", -1), round(e["ts"] - t0, 2),
                        round(e["dur"], 2)])
    with open(os.path.join(PROFILE, f"{name}.{RANK}.json"), "w") as f:
        json.dump(out, f)


def run_tensorc(path, strategy, iters, warm):
    import tensorc
    graph = json.load(open(path[:-4] + ".json"))
    gen = torch.Generator(device="cuda").manual_seed(1234)
    inputs = {}
    for i in graph["inputs"]:
        shape = [int(d) for d in i["shape"]]
        # x: each rank's own batch, except under tensor parallelism (the same on every rank).
        own = i["name"] == "x" and not strategy.startswith("tp")
        seed = torch.Generator(device="cuda").manual_seed(RANK) if own else gen
        inputs[i["name"]] = torch.randn(shape, device="cuda", dtype=DTYPES[i["dtype"]], generator=seed)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    exe = tensorc.Executable.load(path, tensorc.Runtime())
    # Inputs and outputs in tensorc's memory: an SPMD program's large
    # tensors come from NCCL's symmetric windows there (docs/sharding.md),
    # which PyTorch's caching allocator does not give.
    for name, t in inputs.items():
        inputs[name] = torch.from_dlpack(exe.empty(DTYPE_NAMES[t.dtype], list(t.shape))).copy_(t)
    session = exe.session()
    session.set_stream(torch.cuda.current_stream().cuda_stream)
    shapes = session.output_shapes(**inputs)
    outs = {o.name: torch.from_dlpack(exe.empty(o.dtype, s)) for o, s in zip(exe.outputs, shapes)}
    step = session.prepare(outputs=outs, **inputs)
    step()
    session.synchronize()
    load_s = time.perf_counter() - t0
    ms, loop_ms = median_ms(step, iters, warm)
    step()
    session.synchronize()
    device_ms = session.last_device_ms
    if PROFILE:
        profile_steps(step, f"tensorc-{strategy}-default{'-' + TAG if TAG else ''}")
    resident = sum(t.numel() * t.element_size() for t in list(inputs.values()) + list(outs.values()))
    batch = int(next(i for i in graph["inputs"] if i["name"] == "x")["shape"][0])
    if not strategy.startswith("tp"):
        batch *= WORLD  # x: split over the ranks
    emit({"system": "tensorc", "strategy": strategy, "mode": "default", "global_batch": batch, "ms": round(ms, 4),
          "loop_ms": round(loop_ms, 4), "device_ms": round(device_ms, 4), "load_s": round(load_s, 2),
          "mem_mib": round((session.arena_bytes + resident) / 2**20, 1),
          "arena_mib": round(session.arena_bytes / 2**20, 1), "loss": float(outs["loss"].float())})
    # reduce-overhead: the same step replayed as a CUDA graph (NCCL's
    # collectives captured with it).
    try:
        session.set_cuda_graphs(True)
        ms, loop_ms = median_ms(step, iters, warm)
        session.synchronize()
        if PROFILE:
            profile_steps(step, f"tensorc-{strategy}-graphs{'-' + TAG if TAG else ''}")
        emit({"system": "tensorc", "strategy": strategy, "mode": "graphs", "global_batch": batch, "ms": round(ms, 4),
              "loop_ms": round(loop_ms, 4),
              "mem_mib": round((session.arena_bytes + resident) / 2**20, 1)})
    except Exception as ex:
        emit({"system": "tensorc", "strategy": strategy, "mode": "graphs", "error": str(ex)[:400]})
    del step, session, exe


def run_torch(strategy, mode, batch, iters, warm):
    torch.manual_seed(1234)
    torch._dynamo.reset()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = W.Block(768, 12).to(device="cuda", dtype=torch.bfloat16)
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    elif strategy.startswith("fsdp"):
        from torch.distributed.fsdp import fully_shard
        for m in (model.ln1, model.qkv, model.proj, model.ln2, model.mlp):
            fully_shard(m)
        fully_shard(model)
    fn = torch.compile(model) if mode == "compile" else model
    gen = torch.Generator(device="cuda").manual_seed(RANK)
    x = torch.randn(batch, 1024, 768, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    params = list(model.parameters())

    def step():
        out = fn(x)
        out.float().sum().backward()
        for p in params + [x]:
            p.grad = None

    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    ms, loop_ms = median_ms(step, iters, warm)
    emit({"system": "torch", "strategy": strategy, "mode": mode, "global_batch": batch * WORLD, "ms": round(ms, 4),
          "loop_ms": round(loop_ms, 4),
          "first_s": round(first_s, 2), "mem_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1)})
    del fn, model, params, x


def table(path):
    """A markdown table of the rows in folder `path` (--rows): per (system,
    strategy, mode) the slowest rank's times and the largest memory, the
    throughput (samples per second over all GPUs, from the back-to-back
    loop) and memory relative to the same system and mode on one GPU."""
    rows = [json.loads(l[5:]) for name in sorted(os.listdir(path)) if name.startswith("rows.")
            for l in open(os.path.join(path, name)) if l.startswith("row: ")]
    groups = {}
    for r in rows:
        groups.setdefault((r["system"], r["strategy"], r.get("mode", "")), []).append(r)
    # The one-GPU row each is compared with: "single", or "tp-single" for
    # tensor parallelism (its own, larger model).
    family = lambda strategy: ("tp-fused" if strategy.startswith("tp-fused") else "tp" if strategy.startswith("tp")
                               else "")
    single = {}
    for (system, strategy, mode), rs in groups.items():
        if strategy in ("single", "tp-single", "tp-fused-single") and "loop_ms" in rs[0]:
            single[(system, mode.split("+")[0], family(strategy))] = rs[0]
    print("| system | strategy | mode | GPUs | global batch | step ms | loop ms/step | throughput vs 1 GPU | "
          "memory MiB | memory vs 1 GPU | GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (system, strategy, mode), rs in groups.items():
        if any("error" in r for r in rs):
            err = next(r["error"] for r in rs if "error" in r)
            print(f"| {system} | {strategy} | {mode} | {len(rs)} | | error: {err[:120]} | | | | | |")
            continue
        ms, loop = max(r["ms"] for r in rs), max(r["loop_ms"] for r in rs)
        mem, batch = max(r["mem_mib"] for r in rs), rs[0].get("global_batch", "")
        base = single.get((system, mode.split("+")[0], family(strategy)))
        speed = (f"{batch / base['global_batch'] * base['loop_ms'] / loop:.2f}x"
                 if base and batch else "")
        mem_ratio = f"{mem / base['mem_mib']:.2f}" if base else ""
        print(f"| {system} | {strategy} | {mode} | {rs[0]['world']} | {batch} | {ms:.3f} | {loop:.3f} | {speed} | "
              f"{mem} | {mem_ratio} | {rs[0]['gpu']} |")


def main():
    global RANK, WORLD, TAG, ROWS, PROFILE
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", default="spmd")
    ap.add_argument("--batch", type=int, default=8, help="per GPU (spmd_prepare.sh's SPMD_BATCH)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--only", default="", help="comma list of tensorc,eager,compile (default all)")
    ap.add_argument("--strategies", default="", help="comma list of strategies to run (default all for the world size)")
    ap.add_argument("--tag", default="", help="appended to the rows' mode (e.g. no-overlap)")
    ap.add_argument("--rows", default="", help="also append each rank's rows to DIR/rows.WORLD.RANK.jsonl")
    ap.add_argument("--table", default="", help="print a table of the rows in this folder's files, run nothing")
    ap.add_argument("--profile", default="", help="also write each tensorc step's GPU kernels to this folder")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return
    TAG, ROWS, PROFILE = args.tag, args.rows, args.profile
    RANK, WORLD = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.cuda.set_device(0)
    if WORLD > 1:
        rendezvous = os.environ["TENSORC_RENDEZVOUS"]
        dist.init_process_group("nccl", init_method="file://" + os.path.join(rendezvous, "torch-store"),
                                rank=RANK, world_size=WORLD, device_id=torch.device("cuda", 0))
    only = set(args.only.split(",")) if args.only else {"tensorc", "eager", "compile"}
    # fsdp-global: the single GPU's global batch split over the ranks (the
    # memory comparison); ddp and fsdp: the batch per GPU of one GPU.
    # tp-single / tp, tp-fused-single / tp-fused: the tensor-parallel blocks (tensorc only).
    strategies = (["single", "tp-single", "tp-fused-single"] if WORLD == 1
                  else ["ddp", "fsdp", "fsdp-global", "tp", "tp-fused"])
    if args.strategies:
        strategies = [s for s in strategies if s in args.strategies.split(",")]
    for strategy in strategies:
        batch = args.batch // WORLD if strategy == "fsdp-global" else args.batch
        if "tensorc" in only:
            try:
                run_tensorc(os.path.join(args.artifacts, strategy.replace("-", "_") + ".tcx"), strategy, args.iters,
                            args.warm)
            except Exception as ex:
                emit({"system": "tensorc", "strategy": strategy, "error": str(ex)[:400]})
        for mode in ("eager", "compile"):
            if mode in only and not strategy.startswith("tp"):  # PyTorch's side: the GPT-2 block
                try:
                    run_torch(strategy, mode, batch, args.iters, args.warm)
                except Exception as ex:
                    emit({"system": "torch", "strategy": strategy, "mode": mode, "error": str(ex)[:400]})
    if WORLD > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
