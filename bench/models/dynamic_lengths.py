#!/usr/bin/env python3
"""Dynamic shapes through torch.compile(backend="tensorc") (issue 49,
deliverable 5): a GPT-2-shaped model (plain PyTorch: learned positions
sliced [:T], a causal mask built for T x T, tied embeddings) whose sequence
length Dynamo marks dynamic, called at several lengths. Prints one JSON
object: per length the error against eager (relative to eager's largest
logit) and, in all, the tensorc artifacts compiled, the Dynamo graphs made
and the warnings tensorc gave. The goal: one artifact (a forward, and a
backward with --train) for every length, no recompile.

    python3 bench/models/dynamic_lengths.py [--device cuda] [--train] [--lengths 64 96 128 200 256]

Needs PyTorch >= 2.1 (Dynamo, mark_dynamic); not PyTorch 1.13."""
import argparse
import glob
import json
import math
import os
import sys
import tempfile
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tensorc.torch  # noqa: E402,F401  (registers the backend)


class Gpt(torch.nn.Module):
    def __init__(self, vocab=1024, d=256, heads=4, layers=2, positions=512):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(positions, d)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "ln1": torch.nn.LayerNorm(d), "qkv": torch.nn.Linear(d, 3 * d), "proj": torch.nn.Linear(d, d),
            "ln2": torch.nn.LayerNorm(d), "fc": torch.nn.Linear(d, 4 * d), "out": torch.nn.Linear(4 * d, d)})
            for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos.weight[:t]
        d = x.shape[-1]
        causal = torch.ones(t, t, dtype=torch.bool, device=ids.device).tril()
        for blk in self.blocks:
            q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for y in blk["qkv"](blk["ln1"](x)).split(d, -1))
            scores = (q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)).masked_fill(~causal, float("-inf"))
            x = x + blk["proj"]((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
            x = x + blk["out"](F.gelu(blk["fc"](blk["ln2"](x))))
        return self.ln(x) @ self.tok.weight.t()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--train", action="store_true", help="a backward too (the loss of the logits)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 96, 128, 200, 256])
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    model = Gpt().to(args.device)
    cache = tempfile.mkdtemp(prefix="tensorc-dynamic-")
    compiled = torch.compile(model, backend=lambda gm, ex: tensorc.torch.tensorc_backend(gm, ex, cache_dir=cache))
    rows, messages = [], set()
    for n, t in enumerate(args.lengths):
        ids = torch.randint(0, 1024, (args.batch, t), device=args.device)
        if n == 0:
            torch._dynamo.mark_dynamic(ids, 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.set_grad_enabled(args.train):
                got = compiled(ids)
                if args.train:
                    got.float().square().mean().backward()
        messages |= {str(w.message)[:300] for w in caught if "tensorc" in str(w.message)}
        with torch.no_grad():
            want = model(ids)
        scale = want.abs().max().item() or 1.0
        rows.append({"length": t, "error": (got.detach() - want).abs().max().item() / scale})
    print(json.dumps({"device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                      "torch": torch.__version__, "train": args.train, "lengths": rows,
                      "artifacts": len(glob.glob(os.path.join(cache, "*.tcx"))),
                      "dynamo_graphs": counters["stats"].get("unique_graphs", 0),
                      "tensorc_warnings": sorted(messages)}, indent=1))


if __name__ == "__main__":
    main()
