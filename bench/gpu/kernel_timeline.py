"""Where a multi-GPU step's time goes, from the GPU's own kernel records.

spmd.py --profile DIR writes, per tensorc step kind and rank, the kernels of a
few steps (CUPTI through torch.profiler: kernels replayed from CUDA graphs and
NCCL's included). This prints per file (median over the steps after the
first): the step's span (first kernel's start to last kernel's end), the
compute kernels' busy time (their union) and summed durations, NCCL's kernels
(count, busy, how far they run past the last compute kernel), the idle time
on the GPU; and with --against NAME (a one-GPU file, e.g.
tensorc-single-graphs), the compute kernels that are slower than there
(matched by position and name), largest first.

    python3 kernel_timeline.py DIR [--against tensorc-single-graphs] [--top 12]
"""
import argparse, json, os, statistics


def is_nccl(name):
    return "nccl" in name.lower()


def union(intervals):
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def summarize(step):
    compute = [(k[2], k[2] + k[3]) for k in step if not is_nccl(k[0])]
    nccl = [(k[2], k[2] + k[3]) for k in step if is_nccl(k[0])]
    span = max(e for _, e in compute + nccl)
    last_compute = max((e for _, e in compute), default=0.0)
    return {
        "span": span,
        "compute_busy": union(compute),
        "compute_sum": sum(e - s for s, e in compute),
        "kernels": len(compute),
        "nccl": len(nccl),
        "nccl_busy": union(nccl),
        "nccl_after_compute": max(0.0, span - last_compute) if nccl else 0.0,
        "idle": span - union(compute + nccl),
    }


def load(path):
    steps = [s for s in json.load(open(path)) if s]
    return steps[1:] if len(steps) > 1 else steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--against", default="", help="a one-GPU file's name (without .RANK.json) to compare kernels with")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--gaps", type=int, default=0, help="also list this many of each file's longest idle stretches")
    args = ap.parse_args()
    files = sorted(f for f in os.listdir(args.folder) if f.endswith(".json") and not f.endswith(".trace.json"))
    base = None
    if args.against:
        base_steps = load(os.path.join(args.folder, args.against + ".0.json"))
        base = [statistics.median(s[i][3] for s in base_steps) for i in range(min(len(s) for s in base_steps))]
        base_names = [k[0] for k in base_steps[0]]
    keys = ["span", "compute_busy", "compute_sum", "idle", "nccl_busy", "nccl_after_compute"]
    print(f"{'file':44s} {'kernels':>7s} {'nccl':>4s} " + " ".join(f"{k:>18s}" for k in keys) + "  (us, median)")
    for f in files:
        steps = load(os.path.join(args.folder, f))
        sums = [summarize(s) for s in steps]
        med = {k: statistics.median(x[k] for x in sums) for k in sums[0]}
        print(f"{f[:-5]:44s} {int(med['kernels']):7d} {int(med['nccl']):4d} " +
              " ".join(f"{med[k]:18.1f}" for k in keys))
        if args.gaps:
            # The GPU's longest idle stretches (no kernel at all running) in the second step.
            step = sorted(steps[0], key=lambda k: k[2])
            gaps, end, before = [], 0.0, ""
            for k in step:
                if k[2] > end:
                    gaps.append((k[2] - end, end, before, k[0]))
                if k[2] + k[3] >= end:
                    end, before = k[2] + k[3], k[0]
            for g, at, b, a in sorted(gaps, reverse=True)[:args.gaps]:
                print(f"    idle {g:6.1f} us at {at:8.1f}: after {b[:50]} before {a[:50]}")
        if base is None or f.startswith(args.against + "."):
            continue
        compute = [[k for k in s if not is_nccl(k[0])] for s in steps]
        n = min(len(c) for c in compute)
        if n != len(base):
            print(f"    ({n} compute kernels against {len(base)}: not matched)")
            continue
        mine = [statistics.median(c[i][3] for c in compute) for i in range(n)]
        diffs = sorted(((mine[i] - base[i], i) for i in range(n) if compute[0][i][0] == base_names[i]), reverse=True)
        print(f"    compute kernels' durations against {args.against}: +{sum(mine) - sum(base):.1f} us in all; "
              f"slower by most:")
        for d, i in diffs[:args.top]:
            print(f"      k{i:<3d} {base[i]:8.1f} -> {mine[i]:8.1f} us ({d:+6.1f})  at {compute[0][i][2]:8.1f}  "
                  f"{base_names[i][:70]}")


if __name__ == "__main__":
    main()
