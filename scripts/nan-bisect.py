#!/usr/bin/env python3
"""Where a dumped partition (TENSORC_DUMP_PARTITIONS, docs/pytorch.md) first
makes NaN on a target: the graph is compiled with every node's value as an
output too, run on the dumped inputs, and the first node (in graph order)
whose value holds NaN while its operands hold none is printed with its op,
attributes and operands. Run it where the target is (cuda: a GPU machine).

    scripts/nan-bisect.py TENSORC DUMP/PARTITION [--target cuda|cpu]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy


def run(tensorc, graph, inputs, target, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "graph.json")
        with open(path, "w") as f:
            json.dump(graph, f)
        artifact = os.path.join(tmp, "graph.tcx")
        subprocess.run([tensorc, "compile", path, "--target", target, "-o", artifact], check=True)
        argv = [tensorc, "run", artifact, "--output-dir", out_dir, "--show", "0"]
        for name, npy in inputs.items():
            argv += ["--input", f"{name}={npy}"]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tensorc")
    ap.add_argument("dump")
    ap.add_argument("--target", default="cuda", choices=("cuda", "cpu"))
    args = ap.parse_args()
    graph = json.load(open(os.path.join(args.dump, "graph.json")))
    grad_argv = os.path.join(args.dump, "grad_argv.json")
    if os.path.exists(grad_argv):  # a training call ran the forward partition of the joint graph
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.tensorc, "grad", os.path.join(args.dump, "graph.json"), *json.load(open(grad_argv)),
                            "--partition", "--emit", "json", "-o", os.path.join(tmp, "p")], check=True)
            graph = json.load(open(os.path.join(tmp, "p.forward.json")))
        print("the training forward (tensorc grad --partition)")
    inputs = {i["name"]: os.path.join(args.dump, i["name"] + ".npy") for i in graph["inputs"]
              if os.path.exists(os.path.join(args.dump, i["name"] + ".npy"))}
    has_nan = lambda path: bool(numpy.isnan(numpy.load(path)).any()) if numpy.load(path).dtype.kind == "f" else False
    with tempfile.TemporaryDirectory() as out:
        run(args.tensorc, graph, inputs, args.target, out)
        bad = [o for o in graph["outputs"] if has_nan(os.path.join(out, o.replace(":", "_") + ".npy"))]
        print(f"as compiled: outputs holding NaN: {bad or 'none'}")
    floating = {i["name"] for i in graph["inputs"] if i.get("dtype") in ("f32", "bf16", "f16", "f64")}
    probed = dict(graph)
    probed["outputs"] = list(dict.fromkeys(graph["outputs"] + [n["name"] for n in graph["nodes"]]))
    with tempfile.TemporaryDirectory() as out:
        run(args.tensorc, probed, inputs, args.target, out)
        nan = {i: has_nan(p) for i, p in inputs.items()}
        for n in graph["nodes"]:
            path = os.path.join(out, n["name"] + ".npy")
            if not os.path.exists(path):
                continue
            nan[n["name"]] = has_nan(path)
            operands = [a for a in n.get("args", ()) if isinstance(a, str)]
            if nan[n["name"]] and not any(nan.get(a.partition(":")[0], False) for a in operands):
                print("first NaN:", json.dumps(n))
                for a in operands:
                    v = numpy.load(os.path.join(out, a.partition(":")[0] + ".npy")) if a.partition(":")[0] in nan \
                        and os.path.exists(os.path.join(out, a.partition(":")[0] + ".npy")) else None
                    if v is not None and v.dtype.kind == "f":
                        print(f"  operand {a}: shape {v.shape}, min {v.min():.4g}, max {v.max():.4g}")
                return 1
    print("no node makes NaN from operands without it (with every value an output)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
