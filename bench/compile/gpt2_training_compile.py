#!/usr/bin/env python3
"""How long tensorc takes to compile a GPT-2 (124M) training step for CUDA
with NVRTC, no GPU needed (issue 57: compile grows with distinct kernels,
not with depth):

    python3 bench/compile/gpt2_training_compile.py --layers 4 12 [--arch sm_90]
        [--max-seconds S] [--max-depth-ratio R] [--seq 1024] [--batch 8]

For each depth: a GPT-2-shaped model (d_model 768, 12 heads, MLP 3072,
vocabulary 50257, learned positions, pre-LN blocks with dropout 0.1, the
causal attention written out as matmul, mask, softmax, dropout, matmul),
its training step captured through `tensorc.torch.compile(frontend="aten")`
and compiled by `tensorc compile --forward-backward --precompile` for
`--arch` with an empty cache: every kernel variant through NVRTC in the
runtime's parallel parts (so the time is what a cold load would take with
every variant, on this machine's cores). Prints per depth the compile's
wall time, its forward and backward kernel entry points and distinct
kernel bodies, and the stage report (`--timing`). On a machine with a GPU
the step then runs once; without one its load fails, which is expected.

`--max-seconds S`: exit 1 if a depth's compile takes longer. `--max-depth-
ratio R`: exit 1 if the deepest model's compile takes more than R times the
shallowest's, or their distinct kernel bodies differ."""
import argparse
import glob
import logging
import math
import os
import re
import struct
import json
import sys
import tempfile
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import tensorc.torch  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = (self.drop(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.out(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT2(torch.nn.Module):
    def __init__(self, layers, d=768, heads=12, vocab=50257, positions=1024, dropout=0.1):
        super().__init__()
        self.tokens, self.positions = torch.nn.Embedding(vocab, d), torch.nn.Embedding(positions, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, ids, labels):
        x = self.drop(self.tokens(ids) + self.positions.weight[: ids.shape[1]])
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tokens.weight.t()  # tied embeddings, as GPT-2
        return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


# The artifact's header (runtime/artifact/Artifact.cpp): magic, version and
# header size (16 bytes), the manifest, code and data sizes, a checksum.
def artifact_code(path):
    with open(path, "rb") as f:
        blob = f.read()
    manifest, code, _ = struct.unpack("<QQQ", blob[16:40])
    return blob[48 + manifest:48 + manifest + code].decode()


def kernels(code):
    """(entry points, distinct kernel bodies): a body is an entry point's
    name without its variant suffix (_b256_i4_v4, _chain_b64_r1c, ...)."""
    names = re.findall(r'extern "C" __global__ void (?:__cluster_dims__\([^)]*\) )?__launch_bounds__\([^)]*\) (\w+)\(',
                       code)
    bodies = {re.sub(r"_b\d+(_[a-z]\d+)*c?$", "", n) for n in names}
    return len(names), len(bodies)


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def compile_once(layers, args):
    torch.manual_seed(0)
    model = GPT2(layers).train()
    ids = torch.randint(0, 50257, (args.batch, args.seq))
    labels = torch.randint(0, 50257, (args.batch, args.seq))
    lines = _Lines()
    logger = logging.getLogger("tensorc")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the debug lines are this script's to read, not stderr's
    with tempfile.TemporaryDirectory() as cache:
        # strict: a load that fails (no GPU) raises instead of running the
        # step in PyTorch (GPT-2's logits alone are 1.6 GB at 8 x 1024).
        fast = tensorc.torch.compile(model, (ids, labels), target="cuda", frontend="aten", cache_dir=cache,
                                     options=("--arch", args.arch, "--precompile"), strict=True)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            try:
                fast(ids, labels).backward()
            except RuntimeError:
                pass  # no GPU: the load fails after the compile
        wall = time.perf_counter() - start
        compiles = [float(m.group(1)) for m in (re.match(r"tensorc\.torch: ([0-9.]+) s: .* compile ", l)
                                                 for l in lines.lines) if m]
        reports = [l for l in lines.lines if l.startswith("tensorc.torch: where that compile's time went")]
        counts = {}
        for part in ("forward", "backward"):
            found = glob.glob(os.path.join(cache, f"*.{part}.tcx"))
            counts[part] = kernels(artifact_code(found[0])) if found else (0, 0)
    logger.removeHandler(lines)
    if not compiles:
        sys.exit(f"{layers} layers: no `tensorc compile` ran (is the tensorc compiler found? set $TENSORC)")
    return {"layers": layers, "compile_s": sum(compiles), "first_call_s": wall, "kernels": counts,
            "report": reports[-1] if reports else ""}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[4, 12])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-seconds", type=float)
    ap.add_argument("--max-depth-ratio", type=float)
    ap.add_argument("--report", action="store_true", help="print each compile's stage report")
    args = ap.parse_args()
    results = [compile_once(n, args) for n in args.layers]
    failed = False
    for r in results:
        (fe, fb), (be, bb) = r["kernels"]["forward"], r["kernels"]["backward"]
        print(f"GPT-2 {r['layers']} layers, training step, {args.arch}: compile {r['compile_s']:.1f} s "
              f"(first call {r['first_call_s']:.1f} s); kernels forward {fe} ({fb} bodies), backward {be} ({bb} bodies)")
        if args.report:
            print(r["report"])
        if args.max_seconds is not None and r["compile_s"] > args.max_seconds:
            print(f"FAIL: {r['layers']} layers took {r['compile_s']:.1f} s > {args.max_seconds} s")
            failed = True
    if args.max_depth_ratio is not None and len(results) > 1:
        shallow, deep = results[0], results[-1]
        ratio = deep["compile_s"] / shallow["compile_s"]
        print(f"depth {deep['layers']} / {shallow['layers']}: {ratio:.2f}x the compile time")
        if ratio > args.max_depth_ratio:
            print(f"FAIL: more than {args.max_depth_ratio}x")
            failed = True
        bodies = lambda r: (r["kernels"]["forward"][1], r["kernels"]["backward"][1])
        if bodies(deep) != bodies(shallow):
            print(f"FAIL: distinct kernel bodies differ with depth: {bodies(shallow)} vs {bodies(deep)}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
