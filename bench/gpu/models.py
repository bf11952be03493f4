#!/usr/bin/env python3
"""Model blocks beyond the public workloads, through the path a PyTorch user
takes: torch.compile(model, backend="tensorc") beside eager and
torch.compile default, one training step each (forward, backward of the
summed output or the scalar loss), CUDA events, warm-up, median; the
backend's loss and every parameter's gradient against an f64 eager step.
They find what the public workloads do not exercise: RMSNorm, rotary
embeddings, SwiGLU, causal attention, convolutions with batch norm in
training mode, an embedding and a vocabulary-sized LM head.

    TENSORC=.../tensorc PYTHONPATH=.../python TENSORC_RUNTIME_LIB=... \\
        python3 models.py [--iters 20] [--only a,b] [--json out.json]
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pytorch"))
for p in (os.path.join(HERE, "python"), os.path.join(HERE, "..", "..", "python")):
    if os.path.isdir(os.path.join(p, "tensorc")):
        sys.path.insert(0, p)
        break

import workloads as W  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, hidden, seq):
        super().__init__()
        self.h = heads
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        f = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        y = self.norm1(x)
        q, k, v = (w(y).view(b, s, self.h, d // self.h).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        y = self.norm2(x)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1, self.b2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class LmHead(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens, targets):
        logits = self.head(self.ln(self.emb(tokens)))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


class VitMlp(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x)), approximate="tanh"))


class BertBlock(nn.Module):
    """An encoder block (pre-norm, so the summed output's gradients are not
    all ~0) whose attention sees a key padding mask (bool [B, 1, 1, S],
    True = attend): SDPA with attn_mask."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, keep):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in self.qkv(h).split(d, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class AlibiAttention(nn.Module):
    """Causal attention with ALiBi's per-head linear biases: an additive
    mask [H, S, S] (a buffer; -inf above the diagonal)."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.h = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)])
        pos = torch.arange(seq)
        bias = slopes[:, None, None] * (pos[None, None, :] - pos[None, :, None]).float()
        self.register_buffer("bias", bias.masked_fill(pos[None, :] > pos[:, None], float("-inf")))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias.to(x.dtype))
        return x + self.proj(y.transpose(1, 2).reshape(b, s, d))


def padding_mask(b, s, dev):
    """Key padding of a batch: sequence i keeps its first s - (i % 4) * s // 8 keys."""
    lengths = torch.tensor([s - (i % 4) * s // 8 for i in range(b)], device=dev)
    return (torch.arange(s, device=dev)[None, :] < lengths[:, None]).view(b, 1, 1, s)


def models():
    """name -> (module, make_inputs); every one a training step."""
    dev, bf = W.DEV, torch.bfloat16
    M = {}
    b, s, d = 4, 1024, 1024
    M["llama_block_bf16"] = (LlamaBlock(d, 16, 2816, s).to(bf),
                             lambda: (torch.randn(b, s, d, device=dev, dtype=bf, requires_grad=True),))
    M["resnet_block_f32"] = (ResBlock(64), lambda: (torch.randn(32, 64, 56, 56, device=dev, requires_grad=True),))
    M["resnet_block_bf16"] = (ResBlock(64).to(bf),
                              lambda: (torch.randn(32, 64, 56, 56, device=dev, dtype=bf, requires_grad=True),))
    M["lm_head_xent_bf16"] = (LmHead(32000, 768).to(bf),
                              lambda: (torch.randint(0, 32000, (8, 512), device=dev),
                                       torch.randint(0, 32000, (8, 512), device=dev)))
    M["vit_mlp_bf16"] = (VitMlp(768, 3072).to(bf),
                         lambda: (torch.randn(64, 197, 768, device=dev, dtype=bf, requires_grad=True),))
    M["bert_block_padded_bf16"] = (BertBlock(768, 12).to(bf),
                                   lambda: (torch.randn(8, 512, 768, device=dev, dtype=bf, requires_grad=True),
                                            padding_mask(8, 512, dev)))
    M["alibi_attention_bf16"] = (AlibiAttention(768, 12, 1024).to(bf),
                                 lambda: (torch.randn(8, 1024, 768, device=dev, dtype=bf, requires_grad=True),))
    M["alibi_attention_f32"] = (AlibiAttention(768, 12, 1024),
                                lambda: (torch.randn(4, 1024, 768, device=dev, requires_grad=True),))
    return M


def step_results(fn, module, inputs):
    """Loss and every parameter's (and float input's) gradient of one step."""
    for p in module.parameters():
        p.grad = None
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x.grad = None
    out = fn(*inputs)
    wide = out.to(torch.promote_types(out.dtype, torch.float32))
    loss = wide if out.dim() == 0 else wide.sum()
    loss.backward()
    r = {"loss": loss.detach()}
    for n, p in module.named_parameters():
        if p.grad is not None:
            r["grad " + n] = p.grad.detach().clone()
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.grad is not None:
            r[f"grad input{i}"] = x.grad.detach().clone()
    return r


def max_error(got, ref):
    worst, where = 0.0, ""
    for k, want in ref.items():
        if k not in got:
            return float("inf"), k + " missing"
        want = want.double()
        scale = want.abs().max().item() or 1e-30
        e = (got[k].double() - want).abs().max().item() / scale
        if not math.isfinite(e) or e > worst:
            worst, where = e, k
    return worst, where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    import tensorc.torch  # noqa: F401 (registers the backend)
    gpu = torch.cuda.get_device_name()
    print(f"# {gpu}, torch {torch.__version__}", flush=True)
    rows = []
    for name, (mod, mk) in models().items():
        if a.only and name not in a.only.split(","):
            continue
        mod = mod.to(W.DEV)
        row = {"model": name}
        torch.manual_seed(1)
        inputs = mk()
        for mode in ("eager", "default", "backend"):
            torch._dynamo.reset()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            try:
                if mode == "eager":
                    fn = mod
                elif mode == "default":
                    fn = torch.compile(mod)
                else:
                    fn = torch.compile(mod, backend="tensorc", dynamic=False)
                run = W.step_fn(fn, inputs, True)
                t0 = time.perf_counter()
                run()
                torch.cuda.synchronize()
                row[f"{mode}_cold_s"] = round(time.perf_counter() - t0, 2)
                row[f"{mode}_ms"] = round(W.bench(run, iters=a.iters), 4)
                row[f"{mode}_peak_mib"] = round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)
                if mode != "eager":
                    ref_mod = copy.deepcopy(mod).double()
                    ref_in = [x.detach().double().requires_grad_(x.requires_grad) if x.is_floating_point() else x
                              for x in inputs]
                    ref = step_results(ref_mod, ref_mod, ref_in)
                    err, where = max_error(step_results(fn, mod, inputs), ref)
                    row[f"{mode}_max_rel_err"] = float(f"{err:.3g}")
                    row[f"{mode}_worst"] = where
            except Exception as ex:  # recorded, the run goes on
                row[f"{mode}_error"] = (type(ex).__name__ + ": " + str(ex))[:400]
        if row.get("backend_ms") and row.get("default_ms"):
            row["backend_vs_compile"] = round(row["default_ms"] / row["backend_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del inputs
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, f, indent=1)
    print("\n| model | eager | torch.compile | backend=tensorc | vs compile | compile err | tensorc err (worst) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda k: "-" if r.get(k) is None else str(r[k])
        print(f"| {r['model']} | {f('eager_ms')} | {f('default_ms')} | "
              f"{'ERROR' if 'backend_error' in r else f('backend_ms')} | {f('backend_vs_compile')} | "
              f"{f('default_max_rel_err')} | {f('backend_max_rel_err')} ({r.get('backend_worst', '')}) |")
    for r in rows:
        for k in r:
            if k.endswith("_error"):
                print(f"{r['model']}: {k}: {r[k]}")


if __name__ == "__main__":
    main()
