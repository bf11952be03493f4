"""tensorc.torch.compile(frontend="aten") on the CPU against eager PyTorch:
outputs, gradients and dtypes (python/tensorc/torch/_aten).

usage: torch_aten_test.py TENSORC WORKDIR [torchvision]"""
import math
import os
import shutil
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorc.torch as tt

tensorc, workdir = sys.argv[1], sys.argv[2]
cache = workdir + "/cache"
seed = 1234
torch.manual_seed(seed)


def compile(model, inputs, **kw):
    return tt.compile(model, inputs, frontend="aten", cache_dir=cache, tensorc_path=tensorc, **kw)


def close(got, want, what, tol=1e-4):
    """Within `tol` of eager, relative to the values' scale."""
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    err = (got.double() - want.double()).abs().max().item() / max(want.double().abs().max().item(), 1e-6)
    assert err <= tol, (what, err, seed)


def grads_of(model, call, *inputs):
    model.zero_grad()
    out = call(*inputs)
    loss = out if out.dim() == 0 else out.float().square().mean()
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def check_training(model, fast, inputs, what, tol=1e-4, eager=None):
    want_loss, want = grads_of(model, eager or model, *inputs)
    got_loss, got = grads_of(model, fast, *inputs)
    close(got_loss, want_loss, what + " loss", tol)
    assert set(got) == set(want), (what, sorted(set(want) ^ set(got)))
    for n in want:
        close(got[n], want[n], f"{what} grad {n}", tol)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.ln, self.fc2 = nn.Linear(20, 32), nn.LayerNorm(32), nn.Linear(32, 7)

    def forward(self, x, t):
        logits = self.fc2(self.ln(F.gelu(self.fc1(x))))
        return logits, F.cross_entropy(logits, t)


class Gpt(nn.Module):
    """GPT-2 style, plain PyTorch: tied input/output embeddings and a tril
    mask buffer (both broke the by-name exporter)."""

    def __init__(self, vocab=50, d=32, heads=4, layers=2, ctx=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({"ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d),
                                              "proj": nn.Linear(d, d), "ln2": nn.LayerNorm(d),
                                              "fc": nn.Linear(d, 4 * d), "out": nn.Linear(4 * d, d)}))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))
        self.heads = heads

    def forward(self, ids):
        B, T = ids.shape
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(ids) + self.wpe(pos)
        for b in self.blocks:
            h = b["ln1"](x)
            q, k, v = b["qkv"](h).split(x.shape[-1], dim=2)
            q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            x = x + b["proj"](y.transpose(1, 2).contiguous().view(B, T, -1))
            x = x + b["out"](F.gelu(b["fc"](b["ln2"](x)), approximate="tanh"))
        return self.lm_head(self.ln_f(x))


# Inference and training of an MLP; the partition count and no fallbacks.
mlp = Mlp()
x, t = torch.randn(6, 20), torch.randint(0, 7, (6,))
with warnings.catch_warnings():
    warnings.simplefilter("error")  # nothing falls back
    fast = compile(mlp, (x, t))
report = fast.explain()
assert len(report["partitions"]) == 1 and not report["fallbacks"], report
with torch.no_grad():
    (got_logits, got_loss), (want_logits, want_loss) = fast(x, t), mlp(x, t)
close(got_logits, want_logits, "mlp logits")
close(got_loss, want_loss, "mlp loss")
check_training(mlp, lambda *a: fast(*a)[1], (x, t), "mlp", eager=lambda *a: mlp(*a)[1])
print("aten mlp: inference and gradients match PyTorch, one partition")

# A GPT with tied embeddings and a mask buffer.
gpt = Gpt().eval()
ids = torch.randint(0, 50, (2, 16))
with warnings.catch_warnings():
    warnings.simplefilter("error")
    fast = compile(gpt, (ids,))
with torch.no_grad():
    close(fast(ids), gpt(ids), "gpt logits")
check_training(gpt, fast, (ids,), "gpt", tol=1e-3)
# A parameter assigned after compiling is the one used (read by name each call).
with torch.no_grad():
    gpt.ln_f.weight = nn.Parameter(torch.rand(32) + 0.5)
    close(fast(ids), gpt(ids), "gpt after assigning a parameter")


# A cache that starts from torch.tensor([]) and grows by cat (transformers'
# KV cache): the empty operand is dropped, nothing falls back.
class GrowingCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Linear(8, 8)

    def forward(self, x):
        keys = torch.cat([torch.tensor([]), self.k(x).flatten()])
        return torch.softmax(keys.view(x.shape) @ x.t(), -1)


with warnings.catch_warnings():
    warnings.simplefilter("error")
    fast = compile(GrowingCache(), (torch.randn(4, 8),))
assert len(fast.explain()["partitions"]) == 1, fast.explain()
xs = torch.randn(4, 8)
close(fast(xs), fast.module(xs), "growing cache")


# The empty operand promotes the result's dtype (cat of an empty f32 and a
# f64 tensor is f64; of an empty f64 and f32, f64): the capture keeps it,
# the lowering skips it and casts, and no partition reads it as an input.
class PromotingCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Linear(8, 8)

    def forward(self, x):
        keys = torch.cat([torch.tensor([], dtype=torch.float64), self.k(x).flatten()])
        return torch.softmax(keys.view(x.shape) @ x.t().double(), -1)


with warnings.catch_warnings():
    warnings.simplefilter("error")
    fast = compile(PromotingCache(), (torch.randn(4, 8),))
assert len(fast.explain()["partitions"]) == 1, fast.explain()
got = fast(xs)
assert got.dtype == torch.float64, got.dtype
close(got, fast.module(xs), "promoting cache")


# Outputs computed from no input that requires grad (an attention mask made
# from token ids) do not require grad, as in eager; the others do.
class MaskToo(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, ids):
        mask = (ids > 2).float() * -1e4
        return self.fc(x) + mask, mask


ids4 = torch.randint(0, 5, (4, 8))
fast = compile(MaskToo(), (xs, ids4))
y, mask = fast(xs, ids4)
assert y.requires_grad and not mask.requires_grad, (y.requires_grad, mask.requires_grad)
close(mask, fast.module(xs, ids4)[1], "mask output")
print("aten gpt: tied embeddings, mask buffer, gradients, reassigned parameters, an empty cache's cat")

# dynamic=: one artifact for every batch and sequence length (from 2 up): a
# GPT's T x T causal mask built in the graph, its positions sliced [:T]
# (an index_select of iota(T) in the symbolic graph), training gradients;
# sizes below 2 get a static program. A form tensorc cannot make symbolic
# (a slice [1:T]) says so once and compiles one program per size.
import glob


class DynamicGpt(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, positions=16):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.ln, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, ids, labels):
        b, t = ids.shape
        x = self.tok(ids) + self.pos.weight[:t]
        d = x.shape[-1]
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for y in self.qkv(self.ln(x)).split(d, -1))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)).masked_fill(
            ~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        logits = self.proj(x + y) @ self.tok.weight.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# One tensor given as two example inputs is traced as two inputs: a call
# with two different tensors reads each (it read one of them for both).
gpt = DynamicGpt()
ids = torch.randint(0, 50, (3, 10))
fast = tt.compile(gpt, (ids, ids), frontend="aten", cache_dir=cache, tensorc_path=tensorc)
i, l = torch.randint(0, 50, (3, 10)), torch.randint(0, 50, (3, 10))
with torch.no_grad():
    close(fast(i, l), gpt(i, l), "an example tensor given twice, called with two")

dynamic_cache = os.path.join(workdir, "dynamic-cache")
gpt = DynamicGpt()
ids = torch.randint(0, 50, (3, 10))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fast = tt.compile(gpt, (ids, torch.randint(0, 50, (3, 10))), frontend="aten", cache_dir=dynamic_cache,
                      tensorc_path=tensorc,
                      dynamic={0: {0: "B", 1: "T"}, 1: {0: "B", 1: "T"}})
assert not [w for w in caught if "dynamic" in str(w.message)], [str(w.message) for w in caught]
assert fast.symbolic and not fast.fallbacks, fast.explain()
assert [i["shape"] for i in fast.partitions[0][1].graph["inputs"] if i["dtype"] == "i64"] == [["B", "T"]] * 2
for shape in [(3, 10), (5, 7), (2, 16), (4, 3), (1, 5)]:
    i, l = torch.randint(0, 50, shape), torch.randint(0, 50, shape)
    check_training(gpt, fast, (i, l), f"dynamic gpt {shape}", tol=1e-4)
    if shape == (4, 3):  # every size from 2 up: the first size's forward and backward
        assert len(glob.glob(os.path.join(dynamic_cache, "*.tcx"))) == 2, os.listdir(dynamic_cache)


class ShiftedTokens(nn.Module):
    def forward(self, x):
        return x[:, 1:] * 2


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fast = tt.compile(ShiftedTokens(), (torch.randn(3, 10),), frontend="aten", cache_dir=cache, tensorc_path=tensorc,
                      dynamic={0: {1: "T"}})
assert any("one program per size instead" in str(w.message) and "slice" in str(w.message) for w in caught), \
    [str(w.message) for w in caught]
for t_ in (10, 6):
    probe = torch.randn(3, t_)
    close(fast(probe), probe[:, 1:] * 2, f"per-size program at T={t_}")
print("aten dynamic: one artifact for every batch and length (mask, positions, gradients); a form that cannot "
      "be symbolic compiles per size, said once")

# Through the Dynamo backend: the sizes Dynamo made symbolic (here set by
# hand: PyTorch 1.13 has no Dynamo and no SymInt) become symbolic dims of
# one program, built at the first call on its tensors.
import torch.fx as fx
from tensorc.torch._dynamo_backend import _AtenDynamoCall

mlp_gm = fx.symbolic_trace(nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)))
backend_cache = os.path.join(workdir, "dynamic-backend-cache")
call = _AtenDynamoCall(mlp_gm, [torch.randn(3, 10, 32)], {"cache_dir": backend_cache, "tensorc_path": tensorc},
                       False)
call.program, call.dynamic = None, ({0: {0: "s0", 1: "s1"}}, {})
for shape in [(4, 6), (2, 9), (5, 5)]:
    probe = torch.randn(*shape, 32)
    with torch.no_grad():
        close(call(probe), mlp_gm(probe), f"backend dynamic {shape}")
assert call.program.symbolic and not call.by_signature
assert len(glob.glob(os.path.join(backend_cache, "*.tcx"))) == 1, os.listdir(backend_cache)

# Autocast: the casts autocast makes are the program (bf16 matmuls, f32
# losses), output dtypes equal eager's. (PyTorch 1.13's CPU layer norm
# refuses bf16 activations with f32 weights under autocast, in eager too.)
class AmpMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(20, 64), nn.Linear(64, 7)

    def forward(self, x, t):
        logits = self.fc2(F.gelu(self.fc1(x)))
        return logits, F.cross_entropy(logits, t)


mlp = AmpMlp()
with torch.autocast("cpu", dtype=torch.bfloat16):
    fast = compile(mlp, (x, t))
    (got_logits, got_loss), (want_logits, want_loss) = fast(x, t), mlp(x, t)
assert got_logits.dtype == want_logits.dtype == torch.bfloat16, (got_logits.dtype, want_logits.dtype)
assert got_loss.dtype == want_loss.dtype == torch.float32, (got_loss.dtype, want_loss.dtype)
with torch.no_grad():
    ref_logits, _ = mlp.double()(x.double(), t)
    mlp.float()
eager_err = (want_logits.double() - ref_logits).abs().max().item()
our_err = (got_logits.double() - ref_logits).abs().max().item()
assert our_err <= 2 * eager_err + 1e-3, (our_err, eager_err)


# nll_loss of log_softmax widened by a cast (what CUDA autocast gives for
# cross_entropy of bf16 logits): one cross_entropy, nothing falls back.
class WidenedLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 50)

    def forward(self, x, t):
        logp = F.log_softmax(self.fc(x).to(torch.bfloat16), 1).float()
        return F.nll_loss(logp, t)


xw, tw = torch.randn(8, 16), torch.randint(0, 50, (8,))
with warnings.catch_warnings():
    warnings.simplefilter("error")
    fast = compile(WidenedLoss(), (xw, tw))
assert len(fast.explain()["partitions"]) == 1, fast.explain()
got, want = fast(xw, tw), fast.module(xw, tw)
assert got.dtype == want.dtype == torch.float32
close(got, want, "widened log_softmax loss", tol=2e-2)
print("aten autocast: bf16 where eager computes bf16, output dtypes equal eager's, error at eager's")


# A 0-d f32 parameter scaling a bf16 activation (timm NFNet's skipinit gain
# under autocast): the product is computed in f32 (the gain is not rounded
# to bf16), so its gradient is a sum in f32 (summed in bf16 it was 13x
# eager's error on the GPU), at least as accurate as eager's against f64.
class SkipinitGain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.gain = nn.Parameter(torch.tensor(0.3))

    def forward(self, x):
        h = self.fc(x)  # bf16 under autocast
        return (h * self.gain + h).float().square().mean()


gain_model = SkipinitGain()
xg = torch.randn(512, 64)
with torch.autocast("cpu", dtype=torch.bfloat16):
    fast = compile(gain_model, (xg,))
    out = fast(xg)
    out.backward()
    got_gain = gain_model.gain.grad.clone()
    gain_model.zero_grad()
    gain_model(xg).backward()
    eager_gain = gain_model.gain.grad.clone()
gain_model.zero_grad()
gain_model.double()(xg.double()).backward()
ref_gain = gain_model.gain.grad.item()
gain_model.float()
assert got_gain.dtype == eager_gain.dtype == torch.float32
graph = fast.partitions[0][1].graph
scalars = {i["name"] for i in graph["inputs"] if i["shape"] == [] and i["dtype"] == "f32"}
assert scalars and not any(n["op"] == "cast" and n["args"][0] in scalars and n["attrs"]["to"] == "bf16"
                           for n in graph["nodes"]), graph["nodes"]
assert abs(got_gain.item() - ref_gain) <= 2 * abs(eager_gain.item() - ref_gain) + 1e-6 * abs(ref_gain), \
    (got_gain.item(), eager_gain.item(), ref_gain)
print("aten autocast: a wider 0-d operand's gradient summed in its own dtype")


# An op tensorc does not lower runs in PyTorch between partitions: one
# warning naming it; strict makes it an error.
class WithCummax(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(torch.cummax(self.fc(x), dim=1).values).sum(-1)


model = WithCummax()
xs = torch.randn(4, 8)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fast = compile(model, (xs,))
messages = [str(w.message) for w in caught if "run in PyTorch" in str(w.message)]
assert len(messages) == 1 and "aten.cummax" in messages[0], [str(w.message) for w in caught]
assert len(fast.explain()["partitions"]) == 2, fast.explain()
with torch.no_grad():
    close(fast(xs), model(xs), "cummax model")
check_training(model, fast, (xs,), "cummax model")


# Both operands of an add come from PyTorch ops: one gradient value for two
# partition inputs (the backward artifact names it once; reading gradients
# by name lost one branch's).
class TwoBranches(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(torch.cummax(self.a(x), 1).values + torch.cummax(self.b(x), 1).values).sum(-1)


model = TwoBranches()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fast = compile(model, (xs,))
check_training(model, fast, (xs,), "two branches")
# The first call compiled every partition's form ahead (side by side), each
# one right: predicted from which inputs require grad through PyTorch's ops.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fresh_cache = os.path.join(cache, "two-branches-cold")
    shutil.rmtree(fresh_cache, ignore_errors=True)
    fresh = tt.compile(TwoBranches(), (xs,), frontend="aten", cache_dir=fresh_cache, tensorc_path=tensorc)
fresh(xs).sum().backward()
parts = [p for _, p in fresh.partitions]
assert len(parts) >= 2 and all(not p._pending and len(p.compiled) == 1 and
                               all(m.compiled_ahead for m in p.compiled.values()) for p in parts), \
    [(list(p.compiled), list(p._pending)) for p in parts]
try:
    compile(WithCummax(), (xs,), strict=True)
    raise AssertionError("strict compiled a fallback")
except tt.StrictFallbackError as e:
    assert "aten.cummax" in str(e), e


# A custom op registered with torch.library (with a meta kernel for
# tracing) runs in PyTorch.
lib = torch.library.Library("tensorc_test", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CPU")
lib.impl("twice", lambda x: torch.empty_like(x), "Meta")


class WithCustom(nn.Module):
    def forward(self, x):
        return torch.ops.tensorc_test.twice(torch.sin(x)) + 1


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fast = compile(WithCustom(), (xs,))
assert any("tensorc_test.twice" in str(w.message) for w in caught), [str(w.message) for w in caught]
close(fast(xs), WithCustom()(xs), "custom op")
print("aten fallback: cummax and a torch.library op run in PyTorch, one warning, gradients (one value for two "
      "inputs too); strict refuses")


# Training-mode dropout (native_dropout, what CUDA's dropout is at the ATen
# level) runs in tensorc: its own stream from a seed drawn per call from
# torch's generator (torch.manual_seed reproduces it), the backward through
# the forward's mask.
class Dropping(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        return torch.ops.aten.native_dropout(torch.relu(self.fc(x)) + 1, 0.25, True)[0]


model = Dropping()
xd = torch.randn(32, 64)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    fast = compile(model, (xd,))
assert len(fast.explain()["partitions"]) == 1 and not fast.explain()["fallbacks"], fast.explain()
torch.manual_seed(5)
y = fast(xd)
kept = y != 0
dense = torch.relu(model.fc(xd)) + 1
assert 0.6 < kept.float().mean().item() < 0.9, kept.float().mean()
close(y[kept], (dense / 0.75)[kept], "dropout's kept values")
torch.manual_seed(5)
assert torch.equal(fast(xd) != 0, kept), "torch.manual_seed reproduces the mask"
assert not torch.equal(fast(xd) != 0, kept), "each call draws a fresh mask"
model.fc.weight.grad = None
torch.manual_seed(6)
y = fast(xd)
(y * y).sum().backward()
got = model.fc.weight.grad.clone()
model.fc.weight.grad = None
want = (torch.relu(model.fc(xd)) + 1) * (y != 0).float() / 0.75
(want * want).sum().backward()
close(got, model.fc.weight.grad, "dropout gradient through the forward's mask", tol=1e-3)


# Attention with dropout (PyTorch >= 2.0 hands over its fused SDPA ops with
# dropout_p): lowered as softmax(q k^T * scale) -> tensorc's dropout -> @ v,
# one partition. Torch 1.13 has no such op: a torch.library op of the same
# name and schema stands in, lowered by the ATen rule, against the same
# computation written out (equal masks: one seed, stream 0, one shape).
from tensorc.torch._aten import lowering as aten_lowering

sdpa_lib = torch.library.Library("tensorc_sdpa", "DEF")
sdpa_lib.define("_scaled_dot_product_efficient_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_bias, "
                "bool compute_log_sumexp, float dropout_p=0.0, bool is_causal=False, *, float? scale=None) "
                "-> (Tensor, Tensor, Tensor, Tensor)")


def sdpa_meta(q, k, v, bias, lse, p=0.0, causal=False, scale=None):
    return (q.new_empty(q.shape[:-1] + v.shape[-1:]), q.new_empty(q.shape[:-1]), q.new_empty(()), q.new_empty(()))


sdpa_lib.impl("_scaled_dot_product_efficient_attention", sdpa_meta, "Meta")
sdpa_lib.impl("_scaled_dot_product_efficient_attention", sdpa_meta, "CPU")


class FusedAttention(nn.Module):
    def __init__(self, causal, masked, written_out=False):
        super().__init__()
        torch.manual_seed(3)
        self.qkv = nn.Linear(16, 48)
        self.causal, self.masked, self.written_out = causal, masked, written_out

    def forward(self, x, bias):
        q, k, v = self.qkv(x).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        b = bias if self.masked else None
        if not self.written_out:
            return torch.ops.tensorc_sdpa._scaled_dot_product_efficient_attention(
                q, k, v, b, False, 0.25, self.causal)[0].square().sum()
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1 / math.sqrt(8))
        if self.causal:
            scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
        if self.masked:
            scores = scores + b
        probs = torch.ops.aten.native_dropout(torch.softmax(scores, -1), 0.25, True)[0]
        return torch.matmul(probs, v).square().sum()


real_op_name = aten_lowering.op_name
aten_lowering.op_name = lambda t: real_op_name(t).replace("tensorc_sdpa.", "aten.")
try:
    xa, bias = torch.randn(2, 6, 16), torch.randn(2, 1, 6, 6)
    for causal, masked in ((False, False), (True, False), (False, True)):
        fused, written = FusedAttention(causal, masked), FusedAttention(causal, masked, written_out=True)
        results = []
        for model in (fused, written):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fast = compile(model, (xa, bias))
            assert len(fast.explain()["partitions"]) == 1 and not fast.explain()["fallbacks"], fast.explain()
            torch.manual_seed(11)
            loss = fast(xa, bias)
            loss.backward()
            results.append([loss.detach()] + [p.grad.clone() for p in model.parameters()])
        for got, want in zip(*results):
            close(got, want, f"attention dropout (causal {causal}, mask {masked})", tol=1e-4)
        torch.manual_seed(11)
        with torch.no_grad():
            assert fast(xa, bias).item() > 0
finally:
    aten_lowering.op_name = real_op_name
print("aten attention dropout: one partition, the written-out computation's result and gradients")


# NaN as eager: relu's gradient passes the cotangent at nan (PyTorch's
# threshold_backward masks only x <= 0), sign(nan) is 0.
class NanOps(nn.Module):
    def forward(self, x):
        return torch.relu(x * 1.0) + torch.sign(x.detach())


xn = torch.tensor([float("nan"), -1.0, 0.0, 2.0])
fast = compile(NanOps(), (xn,))
xg = xn.clone().requires_grad_()
got = fast(xg)
got.sum().backward()
grad = xg.grad.clone()
xg.grad = None
want = NanOps()(xg)
want.sum().backward()
assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[1:], want[1:]), (got, want)
assert torch.equal(grad, xg.grad), (grad, xg.grad)
print("aten dropout: tensorc's stream, seeded from torch's generator, the backward through its mask")


# In-place updates of inputs happen as in eager; one tensor passed twice
# (aliasing) runs as eager does.
class Inplace(nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return x + y


a, b = torch.randn(5), torch.randn(5)
fast = compile(Inplace(), (a.clone(), b.clone()))
a1, a2 = a.clone(), a.clone()
got, want = fast(a1, b), Inplace()(a2, b)
close(got, want, "in-place result")
close(a1, a2, "in-place update of the input")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a1, a2 = a.clone(), a.clone()
    close(fast(a1, a1), Inplace()(a2, a2), "aliased inputs")
assert any("one tensor as several inputs" in str(w.message) for w in caught)
print("aten mutation: in-place input updates and aliased inputs as eager")

# The Dynamo backend's default path, called as Dynamo calls it (a
# GraphModule, flat example inputs; parameters as graph inputs since
# PyTorch 2.5): inference, training, the module form, a fallback instead
# of an error, training-mode batch norm updating its running statistics.
import torch.fx as fx
from tensorc.torch import tensorc_backend


def functional_mlp(x, target, w1, b1, w2, b2):
    logits = F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)
    return logits, F.cross_entropy(logits, target)


ref = Mlp()
weights = [p.detach().clone().requires_grad_() for p in (ref.fc1.weight, ref.fc1.bias, ref.fc2.weight, ref.fc2.bias)]

gm = fx.symbolic_trace(functional_mlp)
x, t = torch.randn(5, 20), torch.randint(0, 7, (5,))
call = tensorc_backend(gm, [x, t, *weights], cache_dir=cache, tensorc_path=tensorc)
with torch.no_grad():
    got, want = call(x, t, *weights), gm(x, t, *weights)
assert isinstance(got, tuple) and len(got) == 2, type(got)
for a, b in zip(got, want):
    close(a, b, "backend mlp")
loss = call(x, t, *weights)[1]
loss.backward()
got_grads = [w.grad.clone() for w in weights]
for w in weights:
    w.grad = None
gm(x, t, *weights)[1].backward()
for k, (a, b) in enumerate(zip(got_grads, (w.grad for w in weights))):
    close(a, b, f"backend mlp grad {k}")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    call = tensorc_backend(fx.symbolic_trace(lambda x: torch.cummax(x, 0).values * 2), [torch.randn(3)], cache_dir=cache,
                           tensorc_path=tensorc)
assert any("aten.cummax" in str(w.message) for w in caught), [str(w.message) for w in caught]
v = torch.randn(3)
close(call(v), torch.cummax(v, 0).values * 2, "backend cummax")

# The program's device is where its tensors are, not only its inputs': a
# Dynamo graph without tensor inputs that makes a CUDA mask (transformers'
# decoders after a graph break: torch.arange(..., device="cuda")) targets
# CUDA, so its outputs are where eager's are (a CPU target returned a CPU
# mask and the next graph failed on two devices).
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from tensorc.torch._dynamo_backend import _device_target
from tensorc.torch._aten.compiled import compile_program

mask_gm = fx.symbolic_trace(lambda: torch.ones(4, 4).tril() > 0)
assert _device_target([], mask_gm) == "cpu"
last = [n for n in mask_gm.graph.nodes if n.op != "output"][-1]
last.meta["example_value"] = FakeTensor(FakeTensorMode(), torch.empty(4, 4, dtype=torch.bool, device="meta"),
                                        torch.device("cuda:0"))
assert _device_target([], mask_gm) == "cuda"
assert _device_target([torch.zeros(())], mask_gm) == "cuda"  # a CPU scalar beside CUDA tensors
# Through Dynamo (placed: its tensors are on their devices), ops on tensors
# of another device than the program's stay in PyTorch (one
# warning names them and why), with eager's results on eager's device.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    host_model = nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.Linear(32, 7))
    program = compile_program(host_model, (torch.randn(3, 20),), {"target": "cuda", "cache_dir": cache,
                                                                   "tensorc_path": tensorc}, placed=True)
messages = [str(w.message) for w in caught]
assert any("not the program's cuda" in m for m in messages), messages
assert not program.partitions, program.explain()
probe = torch.randn(3, 20)
close(program(probe), program.module(probe), "a CPU model in a CUDA program runs in PyTorch")
# tensorc.torch.compile for a target compiles every op for it, from CPU
# example tensors too (a CUDA artifact built on a machine without a GPU).
for_cuda = compile_program(host_model, (torch.randn(3, 20),), {"target": "cuda", "cache_dir": cache,
                                                                "tensorc_path": tensorc})
assert for_cuda.partitions and not for_cuda.fallbacks, for_cuda.explain()


def functional_bn(x, mean, var, w, b):
    return F.relu(F.batch_norm(x, mean, var, w, b, training=True, momentum=0.2))


gm = fx.symbolic_trace(functional_bn)
xb = torch.randn(5, 3, 4)
stats = [torch.rand(3) - 0.5, torch.rand(3) + 0.5]
affine = [(torch.rand(3) + 0.5).requires_grad_(), torch.randn(3).requires_grad_()]
mine, theirs = [s.clone() for s in stats], [s.clone() for s in stats]
call = tensorc_backend(gm, [xb, *mine, *affine], cache_dir=cache, tensorc_path=tensorc)
y = call(xb, *mine, *affine)
y.sum().backward()
got = [a.grad.clone() for a in affine]
for a in affine:
    a.grad = None
want = functional_bn(xb, *theirs, *affine)
want.sum().backward()
close(y, want, "backend batch norm")
for k, (a, b) in enumerate(zip(mine + got, theirs + [a.grad for a in affine])):
    close(a, b, f"backend batch norm statistics and gradients {k}", 1e-5)

# The artifact cache is keyed by the compiler binary's digest, not only its
# version: a rebuilt compiler (here: a copy with one byte more) recompiles.
import subprocess
import tempfile
fresh = tempfile.mkdtemp(dir=workdir)
rebuilt = os.path.join(fresh, "tensorc-rebuilt")
shutil.copy(shutil.which(tensorc) or tensorc, rebuilt)
first = tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/cache", tensorc_path=rebuilt)
again = tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/cache", tensorc_path=rebuilt)
with open(rebuilt, "ab") as f:
    f.write(b"\0")
changed = tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/cache", tensorc_path=rebuilt)
assert (first.cache_hit, again.cache_hit, changed.cache_hit) == (False, True, False), \
    (first.cache_hit, again.cache_hit, changed.cache_hit)
# Cached artifacts are code this process loads: a cache folder others can
# write to (or a link) is refused with its name; an entry others can write
# is compiled again, replacing it.
os.chmod(fresh + "/cache", 0o777)
try:
    tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/cache", tensorc_path=rebuilt)
    raise AssertionError("a cache folder writable by others was used")
except RuntimeError as e:
    assert "writable by group or others" in str(e) and fresh in str(e), e
os.chmod(fresh + "/cache", 0o700)
os.symlink(fresh + "/cache", fresh + "/link")
try:
    tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/link", tensorc_path=rebuilt)
    raise AssertionError("a cache folder that is a link was used")
except RuntimeError as e:
    assert "symbolic link" in str(e), e
os.chmod(changed.artifact, 0o666)
replanted = tt.compile(nn.Linear(3, 3), (torch.randn(2, 3),), cache_dir=fresh + "/cache", tensorc_path=rebuilt)
assert not replanted.cache_hit and not os.stat(changed.artifact).st_mode & 0o022
print("aten backend: inference, training, a fallback, batch norm statistics")

# TENSORC_DUMP_PARTITIONS (docs/pytorch.md): a partition whose output holds
# NaN that PyTorch's does not is written out for `tensorc run` (the check
# is handed a NaN result here: tensorc's own is right).
class Sqrt(nn.Module):
    def forward(self, x):
        return (x * 2).sqrt() + 1


positive = torch.rand(4, 5)
sqrt_model = compile(Sqrt(), (positive,))
part = next(m for m in sqrt_model.gm.modules() if type(m).__name__ == "TensorcPartition")
dump = tempfile.mkdtemp(dir=workdir)
os.environ["TENSORC_DUMP_PARTITIONS"] = dump
import logging
logging.getLogger("tensorc.torch").setLevel(logging.ERROR)  # the check's findings are logged as warnings
part._check_against_eager((positive,), (positive,), [torch.full((4, 5), float("nan"))])
part._check_against_eager((positive,), (positive,), [sqrt_model(positive)])  # right: nothing more written
logging.getLogger("tensorc.torch").setLevel(logging.NOTSET)
del os.environ["TENSORC_DUMP_PARTITIONS"]
written = os.path.join(dump, part.graph["name"])
assert sorted(os.listdir(written)) == ["arg0_1.npy", "graph.json"], os.listdir(written)
ran = subprocess.run([tensorc, "run", os.path.join(written, "graph.json"), "--input",
                      "arg0_1=" + os.path.join(written, "arg0_1.npy")], capture_output=True, text=True)
assert ran.returncode == 0 and "nan" not in ran.stdout, ran.stdout + ran.stderr
print("aten debugging: a partition making NaN is dumped and reruns with tensorc run")

# A partition whose compile fails runs in PyTorch with one warning, and is
# not compiled again at every call (it was: a failing tensorc ran per call).
failing = os.path.join(workdir, "failing-tensorc")
calls = os.path.join(workdir, "failing-tensorc.calls")
with open(failing, "w") as f:
    f.write(f"#!/bin/sh\necho x >> {calls}\necho 'tensorc: broken on purpose' >&2\nexit 1\n")
os.chmod(failing, 0o755)
broken = tt.compile(Sqrt(), (positive,), frontend="aten", cache_dir=tempfile.mkdtemp(dir=workdir),
                    tensorc_path=failing)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    outs = [broken(positive) for _ in range(3)]
did_not = [w for w in caught if "did not compile" in str(w.message)]
assert len(did_not) == 1, [str(w.message) for w in caught]
for o in outs:
    close(o, Sqrt()(positive), "a partition that did not compile")
invoked = open(calls).read().count("x") if os.path.exists(calls) else 0
before = invoked
broken(positive)
assert (open(calls).read().count("x") if os.path.exists(calls) else 0) == before, "compiled again"
print("aten fallback: a partition that does not compile runs in PyTorch, warned and tried once")

# fallback_random (Inductor's config of that name): dropout runs in PyTorch
# and draws from its generator, so a seeded call reproduces eager's masks,
# gradients too (without it, where tensorc lowers native_dropout, PyTorch
# >= 2, its own stream differs from eager's). Two dropouts whose masks fill
# tensors tensorc makes: they still draw in eager's order (the fused graph's
# sort moved the second before the first).
class DropMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(12, 32), nn.Dropout(0.3), nn.Linear(32, 5)

    def forward(self, x):
        h = F.relu(self.fc1(self.drop(x)))
        keep = torch.empty([h.shape[0], 1], dtype=h.dtype).bernoulli_(0.8).div_(0.8)  # stochastic depth
        h = torch.ops.aten.native_dropout(h * keep, 0.2, True)[0]  # what PyTorch 2's dropout traces to
        return self.fc2(self.drop(h))


drop_mlp, xd = DropMlp(), torch.randn(16, 12)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    seeded = tt.compile(drop_mlp, (xd,), frontend="aten", cache_dir=cache, tensorc_path=tensorc, fallback_random=True)
assert any("fallback_random" in str(w.message) for w in caught), [str(w.message) for w in caught]
# The draws go first (random_draws.py): the rest is one partition, not one
# per gap between random ops.
assert len(seeded.explain()["partitions"]) == 1, seeded.explain()["partitions"]
torch.manual_seed(7)
want_loss, want = grads_of(drop_mlp, drop_mlp, xd)
torch.manual_seed(7)
got_loss, got = grads_of(drop_mlp, seeded, xd)
close(got_loss, want_loss, "fallback_random loss")
for n in want:
    close(got[n], want[n], f"fallback_random grad {n}")
torch.manual_seed(8)
other_loss, _ = grads_of(drop_mlp, seeded, xd)
assert (other_loss - want_loss).abs().item() > 1e-6, "another seed, other masks"
try:
    tt.compile(drop_mlp, (xd,), frontend="fx", fallback_random=True, cache_dir=cache, tensorc_path=tensorc)
    raise AssertionError("fallback_random with the fx frontend was accepted")
except ValueError as e:
    assert "frontend='aten'" in str(e), e
print("aten fallback_random: seeded dropout equals eager's, gradients too")



# Scans, interpolation, advanced indexing and slice assignments lower to
# tensorc (no op runs in PyTorch): cumsum (RoBERTa's position ids), bilinear
# and nearest interpolation (PyTorch's decompositions into index tensors),
# several index tensors, adjacent or not, negative ones wrapped, fill and
# slice_scatter, a reshaping as_strided; outputs and gradients.
class Gathers(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 3, 6, 5))

    def forward(self, x, ids, rows, cols, channels):
        mask = ids.ne(1).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1
        y = x * self.w
        up = F.interpolate(y, size=(9, 7), mode="bilinear", align_corners=False)
        corner = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=True)
        near = F.interpolate(y, size=(12, 10), mode="nearest")
        picked = y[:, :, rows, cols]          # adjacent index tensors: [2, 3, 4, 4]
        apart = y[:, channels, :, cols[0]]    # indexed dims apart: their dims first, [4, 2, 6]
        running = torch.cumsum(y, dim=-1)
        m = x.new_zeros(6, 5)                 # assignments to slices: fill, slice_scatter (Swin's masks)
        m[2:4, 1:3] = 2.0
        m[-2:, :] = x[0, 0, -2:, :]
        flat = torch.as_strided(y, (2, 90, 1, 1), (90, 1, 90, 90))  # a reshape (ConvNeXt's pooled features)
        last = y[torch.arange(2), ids[:, 0] % 3]  # GPT2ForSequenceClassification's pooled rows: [2, 6, 5]
        return (up.sum() + corner.mean() + near.square().mean() + picked.sum() + apart.sum() * 0.5
                + running.mean() + (m * y).sum() + flat.square().mean() + last.sum()) * positions.float().mean()


gathers = Gathers()
gx = torch.randn(2, 3, 6, 5)
gids = torch.tensor([[5, 7, 1, 1], [3, 1, 4, 9]])
grows = torch.tensor([[0, -1, 2, 5]]).t().expand(4, 4).contiguous()
gcols = torch.tensor([[1, 0, -2, 4]])
gchannels = torch.tensor([2, -1, 0, 1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fast_gathers = compile(gathers, (gx, gids, grows, gcols, gchannels), strict=True)
check_training(gathers, fast_gathers, (gx, gids, grows, gcols, gchannels), "gathers")
print("aten cumsum, interpolation, advanced indexing, slice assignments: outputs and gradients equal eager's")

# Stochastic depth (DropPath: empty + bernoulli_) lowers to tensorc's
# dropout stream: whole rows kept with probability p, scaled as the model
# scales them, the rest exactly 0; torch.manual_seed reproduces a call.
class DropPath(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        keep = x.new_empty(x.shape[0], 1).bernoulli_(0.75)
        return self.fc(x) * keep / 0.75


drop_path, xp = DropPath(), torch.randn(4000, 16)
fast_path = compile(drop_path, (xp,), strict=True)
with torch.no_grad():
    torch.manual_seed(5)
    y1 = fast_path(xp)
    torch.manual_seed(5)
    y2 = fast_path(xp)
    y3 = fast_path(xp)
    full = drop_path.fc(xp) / 0.75
kept = y1.abs().sum(1) != 0
assert torch.equal(y1, y2) and not torch.equal(y1, y3), "a seed reproduces a call; calls differ"
assert 0.72 < kept.float().mean().item() < 0.78, kept.float().mean().item()
close(y1[kept], full[kept], "kept rows")
assert (y1[~kept] == 0).all()
print("aten stochastic depth: bernoulli_ rows kept at p, scaled, reproducible by seed")

# Integer division and remainders lower exactly (int64 beyond 2^53 too),
# floats as PyTorch's formulas: div with rounding modes, //, %, fmod; and
# flip (PyTorch's decomposition goes through prims.rev).
class Modular(nn.Module):
    def forward(self, a, b, f, g):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"), a // b, a % b,
                torch.fmod(a, b), a % 7, torch.remainder(f, g), torch.fmod(f, g), f // g, (a * 3) // 2,
                torch.flip(a, [0]), torch.flip(f.view(2, 3), [0, 1]))


big = 2 ** 60
ma = torch.tensor([7, -7, 7, -7, 0, 5, -5, big + 5, -big - 5, 123456789012345678, 9, -9])
mb = torch.tensor([2, 2, -2, -2, 3, 5, 5, 3, 3, -7, 4, 4])
mf, mg = torch.tensor([5.5, -5.5, 5.5, -5.5, 1.0, 7.25]), torch.tensor([2.0, 2.0, -2.0, -2.0, 0.5, 1.5])
modular = Modular()
fast_modular = compile(modular, (ma, mb, mf, mg), strict=True)
for k, (got, want) in enumerate(zip(fast_modular(ma, mb, mf, mg), modular(ma, mb, mf, mg))):
    assert got.dtype == want.dtype and (torch.equal(got, want) if not want.is_floating_point()
                                        else torch.allclose(got, want)), (k, got, want)
print("aten integer division and remainders: exact, int64 beyond 2^53 too")

# any / all over dims or everything, isnan / isinf / isfinite (PyTorch's
# isfinite multiplies two masks: boolean products are logical_and).
class Masks(nn.Module):
    def forward(self, x, m, i):
        return (torch.any(m), torch.all(m, dim=1), torch.any(x > 0.5, dim=0, keepdim=True), torch.all(i),
                torch.isnan(x), torch.isinf(x), torch.isfinite(x), torch.isnan(i), torch.isfinite(i),
                torch.any(i, dim=-1), m * (x > 0))


qx = torch.tensor([[1.0, float("nan"), float("inf")], [-float("inf"), 0.25, 0.75]])
qm = torch.tensor([[True, False, True], [True, True, True]])
qi = torch.tensor([[1, 0, 3], [2, 2, 2]])
masks = Masks()
fast_masks = compile(masks, (qx, qm, qi), strict=True)
for k, (got, want) in enumerate(zip(fast_masks(qx, qm, qi), masks(qx, qm, qi))):
    assert got.dtype == want.dtype and torch.equal(got, want), (k, got, want)
print("aten any, all, isnan, isinf, isfinite, boolean products: equal eager's")

# Functions PyTorch's decompositions write with prims lower directly:
# expm1 and log1p accurate near 0, log2, trunc, frac, nan_to_num, vector
# norms (F.normalize), linspace; and the activations built on them.
class Elementary(nn.Module):
    def forward(self, x):
        return (torch.expm1(x * 1e-6) * 1e6, torch.expm1(x), torch.log1p(x.abs() * 1e-7) * 1e7, torch.log1p(x.abs()),
                torch.log2(x.abs() + 1), torch.trunc(x * 3), torch.frac(x * 3), torch.nan_to_num(x / (x > 0)),
                F.normalize(x, dim=-1), torch.linalg.vector_norm(x, 3, dim=0), torch.linalg.vector_norm(x, float("inf")),
                x + torch.linspace(-1, 2, x.shape[-1]), F.elu(x), F.selu(x), F.softplus(x), F.mish(x))


elementary, ex = Elementary(), torch.randn(4, 5)
fast_elementary = compile(elementary, (ex,), strict=True)
for k, (got, want) in enumerate(zip(fast_elementary(ex), elementary(ex))):
    close(got, want, f"elementary {k}", tol=1e-5)
print("aten expm1, log1p, log2, trunc, frac, nan_to_num, norms, linspace, elu/selu/softplus/mish: equal eager's")

# Ops whose decompositions fell back (prims, or a name PyTorch does not
# decompose): log-sigmoid, lerp, smooth L1 and Huber losses, var_mean and
# std_mean, select_scatter, addmv, hardshrink, boolean xor.
class Decomposed(nn.Module):
    def forward(self, x):
        row = torch.select_scatter(x, x[0] * 2, 0, 1)
        return (F.logsigmoid(x * 30), torch.lerp(x, x * 2, 0.3), torch.lerp(x, x * 2, 0.8),
                F.smooth_l1_loss(x, x * 0.1, beta=0.5), F.huber_loss(x, x * 0.2, delta=0.7, reduction="sum"),
                torch.var_mean(x, dim=1)[0], torch.std_mean(x, dim=0)[1], row, torch.addmv(x[:, 0], x, x[0], beta=0.5),
                F.hardshrink(x), torch.logical_xor(x > 0, x > 0.5).float())


decomposed, dx = Decomposed(), torch.randn(4, 5)
fast_decomposed = compile(decomposed, (dx,), strict=True)
for k, (got, want) in enumerate(zip(fast_decomposed(dx), decomposed(dx))):
    close(got, want, f"decomposed {k}", tol=1e-5)
print("aten log-sigmoid, lerp, smooth L1/Huber, var_mean/std_mean, select_scatter, addmv, hardshrink, xor: equal eager's")

# Reflection and replication padding (F.pad modes, Conv2d's padding_mode):
# index_select of reflected or clamped source indices; pixel (un)shuffle;
# gradients too.
class EdgePads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=2, padding_mode="reflect")

    def forward(self, x):
        shuffled = F.pixel_unshuffle(F.pixel_shuffle(torch.cat([x, x], 1)[:, :4], 2), 2)  # and back
        return (self.conv(x).sum() + F.pad(x, (2, 1, 3, 0), mode="reflect").square().mean()
                + F.pad(x, (1, 3, 0, 2), mode="replicate").mean() + F.pad(x[:, 0], (3, 2), mode="reflect").sum()
                + (shuffled * shuffled.flip(1)).sum())


edge_pads, px = EdgePads(), torch.randn(2, 3, 5, 6)
fast_edge_pads = compile(edge_pads, (px,), strict=True)
check_training(edge_pads, fast_edge_pads, (px,), "edge pads")
print("aten reflection and replication padding: outputs and gradients equal eager's")

# 1-D convolutions (ConvBERT's separable convolution: depthwise, then
# pointwise; strided and dilated) as conv2d over a height of 1; 1-D pools;
# im2col (nn.Unfold) as strided slices of the padded input.
class Conv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.depthwise = nn.Conv1d(8, 8, 9, padding=4, groups=8, bias=False)
        self.pointwise = nn.Conv1d(8, 16, 1)
        self.strided = nn.Conv1d(16, 4, 3, stride=2, dilation=2, padding=1)

    def forward(self, x):
        y = self.strided(self.pointwise(self.depthwise(x)))
        span = F.unfold(x.unsqueeze(-1), (9, 1), padding=(4, 0))  # ConvBERT's span: im2col
        tiles = F.unfold(x.view(2, 2, 4, 20), (3, 2), dilation=(2, 1), padding=(1, 1), stride=(2, 3))
        return (y.square().mean() + F.max_pool1d(x, 3, 2).sum() + F.adaptive_avg_pool1d(x, 1).mean()
                + (span * span.flip(1)).mean() + tiles.square().sum())


conv1d, cx = Conv1d(), torch.randn(2, 8, 20)
fast_conv1d = compile(conv1d, (cx,), strict=True)
check_training(conv1d, fast_conv1d, (cx,), "conv1d")
print("aten 1-D convolutions, pools and im2col: outputs and gradients equal eager's")

# Batch norm in training mode without running statistics (timm's NF-Nets
# standardize their convolution weights this way; nothing to update): the
# input's own mean and biased variance over every dim but the channels.
class StandardizedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4, 3, 3))
        self.gain = nn.Parameter(torch.rand(8) + 0.5)
        self.shift = nn.Parameter(torch.randn(4, 1, 1))

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, 8, -1), None, None, weight=self.gain, training=True, momentum=0.,
                         eps=1e-5).reshape_as(self.weight)
        z = F.batch_norm((x + self.shift).relu(), None, None, training=True, eps=1e-3)  # no weight, 4-D
        return F.conv2d(x, w, padding=1).relu().square().mean() + z[:, :, :2].square().mean()


standardized, sx = StandardizedConv(), torch.randn(2, 4, 6, 6)
fast_standardized = compile(standardized, (sx,), strict=True)
check_training(standardized, fast_standardized, (sx,), "standardized conv")
print("aten batch norm without running statistics: outputs and gradients equal eager's")

if "torchvision" in sys.argv:
    # The model suite's CPU subset (bench/models/cpu_subset.py): torchvision
    # classifiers against an f64 reference.
    import os
    import subprocess
    subset = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "models", "cpu_subset.py")
    models = "resnet18,mobilenet_v3_small,efficientnet_b0,convnext_tiny,squeezenet1_1,shufflenet_v2_x1_0,googlenet"
    r = subprocess.run([sys.executable, subset, tensorc, cache, "--models", models], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    print("aten torchvision: " + r.stdout.strip().splitlines()[-1] + " of the CPU subset, against f64")
