"""tensorc.torch.export on models written the usual PyTorch way: the graph
file runs on the reference interpreter and compiled for the CPU
(`tensorc run`), and every output matches PyTorch's on fresh random
inputs. Unsupported ops: one error naming the op, module path and source
line; explain() lists them all.
usage: torch_export_test.py TENSORC WORKDIR"""
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorc.torch as tt

tensorc, work = sys.argv[1], sys.argv[2]
seed = int.from_bytes(os.urandom(4), "little")
torch.manual_seed(seed)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 33)
        self.act = nn.GELU(approximate="tanh")
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(33, 7)

    def forward(self, x, target):
        logits = self.fc2(self.drop(self.act(self.fc1(x))))
        return logits, F.cross_entropy(logits, target, label_smoothing=0.1)


class Block(nn.Module):
    """A causal self-attention block, written by hand (view, transpose,
    masked_fill with a tril buffer, softmax, chunk, residuals)."""

    def __init__(self, vocab=50, d=16, heads=2, t=5):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d, padding_idx=1)  # row 1 gets no gradient
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        B, T, C = x.size()
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))  # the GPT-2 MLP
        return self.head(x).mean(dim=1).relu().sum(-1, keepdim=True) - x[:, 0, :3].sum(-1, keepdim=True)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 6, 3, stride=2, bias=False)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = F.avg_pool2d(torch.sigmoid(self.conv2(x)), 2, stride=1)
        return self.fc(torch.flatten(self.gap(x), 1)).softmax(-1)


class MaxMin(nn.Module):
    """max/min along a dim: (values, indices), unpacked or as fields."""

    def forward(self, x):
        v, i = torch.max(x, 1)
        w = x.min(dim=-1, keepdim=True).values
        return v + w.squeeze(-1), i, torch.min(x, 0).indices, x.max(0)[0]


def check(name, model, inputs):
    model.eval()
    with torch.no_grad():
        want = model(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    path = os.path.join(work, name + ".json")
    graph, tensors = tt.export_with_weights(model, inputs, path)
    # The parameters and buffers come from the .safetensors file the
    # exporter writes beside the graph; the example inputs from .npy files.
    weights = os.path.join(work, name + ".safetensors")
    saved = tt.load_safetensors(weights)
    state = dict(model.named_parameters(), **dict(model.named_buffers()))
    assert sorted(saved) == sorted(k for k in tensors if k in state), (sorted(saved), list(tensors))
    assert all(torch.equal(saved[k], state[k]) for k in saved)
    args = ["--weights", weights]
    for k, t in tensors.items():
        if k in saved:
            continue
        f = os.path.join(work, f"{name}-{k}.npy")
        np.save(f, t.detach().numpy())
        args += ["--input", f"{k}={f}"]
    for target in ([], ["--target", "cpu"]):
        out = os.path.join(work, name + "-out" + "".join(target))
        subprocess.run([tensorc, "run", path, "--output-dir", out, *target, *args], check=True,
                       stdout=subprocess.DEVNULL)
        for o, w in zip(graph["outputs"], want):
            got = np.load(os.path.join(out, o.replace(":", "_") + ".npy"))  # "bn:0": result 0 of bn
            w = w.numpy()
            assert got.shape == w.shape, (name, o, got.shape, w.shape)
            got, w = got.astype(np.float64), w.astype(np.float64)  # bool outputs too
            err = np.abs(got - w).max() / max(np.abs(w).max(), 1e-6)
            assert err < 1e-4, (name, o, target, err, seed)
    print(f"{name}: {len(graph['nodes'])} nodes, outputs match PyTorch")


class Indexing(nn.Module):
    """Integer tensors as indices: x[idx] (negative ones from the end),
    x[:, ids] with a 2-D index, a list, index_select and gather."""

    def forward(self, x, idx, ids, where):
        return (x[idx], x[:, ids], x[..., [0, 2]], torch.index_select(x, 1, ids[0]), x.gather(1, where),
                x[idx[0]])


check("indexing", Indexing(), (torch.randn(5, 4), torch.tensor([0, -1, 3, -5, 2]), torch.randint(0, 4, (2, 3)),
                               torch.randint(0, 4, (5, 2))))
class Composites(nn.Module):
    """Functions and modules composed of tensorc ops: activations, losses,
    group norm, normalize, one_hot, pad, the functional conv2d and a
    BatchNorm1d."""

    def __init__(self):
        super().__init__()
        self.acts = nn.ModuleList([nn.LeakyReLU(0.2), nn.ReLU6(), nn.Hardtanh(-0.5, 0.7), nn.ELU(0.8),
                                   nn.Softplus(2.0, 5.0), nn.Hardswish(), nn.Hardsigmoid(), nn.Mish(),
                                   nn.LogSigmoid()])
        self.gn = nn.GroupNorm(2, 4)
        self.bn = nn.BatchNorm1d(4)
        self.conv_w = nn.Parameter(torch.randn(4, 2, 3, 3) * 0.3)
        self.l1, self.smooth, self.nll = nn.L1Loss(reduction="sum"), nn.SmoothL1Loss(), nn.NLLLoss(reduction="sum")

    def forward(self, x, img, target, cls):
        h = x * 4  # past softplus's threshold and relu6's bound in places
        outs = [m(h) for m in self.acts]
        outs += [F.leaky_relu(h), F.elu(h), F.softplus(h), F.relu6(h), F.hardtanh(h), F.mish(h), F.logsigmoid(h),
                 F.hardswish(h), F.hardsigmoid(h)]
        conv = F.conv2d(F.pad(img, (1, 2, 0, 1), value=0.5), self.conv_w, None, 1, 1, 1, 2)
        losses = torch.stack([F.mse_loss(x, target), self.l1(x, target),
                              F.smooth_l1_loss(x, target, beta=0.5), self.smooth(x, target),
                              F.binary_cross_entropy_with_logits(x, torch.sigmoid(target)),
                              F.nll_loss(F.log_softmax(x, 1), cls, ignore_index=1),
                              self.nll(F.log_softmax(x, 1), cls)])
        return (*outs, self.gn(img), conv, F.normalize(x, dim=1), self.bn(x), losses, F.one_hot(cls, 4))


class Shapes(nn.Module):
    """conv1d (module and function), adaptive pooling to sizes that divide
    the input's, nearest upsampling by whole factors."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2)
        self.w = nn.Parameter(torch.randn(5, 6, 2) * 0.3)
        self.avg, self.max = nn.AdaptiveAvgPool2d((2, 3)), nn.AdaptiveMaxPool2d((3, None))
        self.up = nn.Upsample(scale_factor=2)

    def forward(self, seq, img):
        c = F.conv1d(F.relu(self.conv(seq)), self.w, None, 1, 0, 2)
        return (c, self.avg(img), self.max(img), F.adaptive_avg_pool2d(img, 1), self.up(img),
                F.interpolate(img, size=(12, 6)), F.interpolate(seq, scale_factor=3))


check("shapes", Shapes(), (torch.randn(2, 4, 11), torch.randn(2, 3, 6, 6)))


class Attention(nn.Module):
    """nn.MultiheadAttention, batch first with a causal bool mask, a key
    padding mask and its averaged weights; sequence first without weights."""

    def __init__(self):
        super().__init__()
        self.first = nn.MultiheadAttention(16, 4, batch_first=True)
        self.second = nn.MultiheadAttention(16, 2, bias=False)
        self.register_buffer("causal", torch.ones(5, 5).triu(1).bool())

    def forward(self, x, pad):
        y, w = self.first(x, x, x, key_padding_mask=pad, attn_mask=self.causal)
        z = self.second(y.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), need_weights=False)[0]
        return y, w, z


attention_inputs = (torch.randn(3, 5, 16), torch.tensor([[False] * 5, [False] * 4 + [True], [False] * 3 + [True] * 2]))
check("attention", Attention(), attention_inputs)


class Encoder(nn.Module):
    """nn.TransformerEncoder of two post-norm layers (GELU) with a final
    norm and a float causal mask, then a pre-norm layer (ReLU) with a key
    padding mask, sequence first."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(16))
        self.pre = nn.TransformerEncoderLayer(16, 4, 24, dropout=0.0, norm_first=True)
        self.register_buffer("causal", torch.ones(5, 5).triu(1) * -1e9)

    def forward(self, x, pad):
        y = self.encoder(x, self.causal)
        return y, self.pre(y.transpose(0, 1), src_key_padding_mask=pad)


check("encoder", Encoder(), attention_inputs)


class Misc(nn.Module):
    """Creation like the input, addmm/baddbmm, std, square, narrow, unbind,
    repeat/tile/repeat_interleave, outer/dot, one-sided clamps, addcmul,
    addcdiv, lerp, tril/triu of computed tensors."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(5))

    def forward(self, x, y, m):
        a, b2 = x.unbind(1)[:2]
        return (torch.zeros_like(x) + x.new_ones(2, 4) * 2 + torch.full_like(x, 0.5),
                torch.addmm(self.bias, y, m, beta=0.5, alpha=2.0), torch.baddbmm(m, m.unsqueeze(0), m.t().unsqueeze(0)),
                x.std(1, keepdim=True), torch.std(x), x.square(), x.narrow(1, 1, 2), a * b2,
                x.repeat(2, 3), torch.tile(a, (3,)), x.repeat_interleave(2, dim=0), torch.outer(a, b2),
                torch.dot(a, b2), x.clamp_min(0.1).clamp_max(0.8), torch.addcmul(x, x, x, value=0.5),
                torch.addcdiv(x, x, x.abs() + 1), torch.lerp(x, x * 2, 0.25), (x @ x.t()).tril(), (x @ x.t()).triu(1),
                (m @ m.t() > 0).tril(-1), torch.einsum("ij,jk->ik", y, m), torch.einsum("bij,bkj->bki", m.expand(2, 5, 5), m.expand(2, 5, 5)),
                torch.einsum("ij->ji", y), torch.einsum("ij,kj->i", y, y), torch.einsum("ij,ij->j", x, x))


check("misc", Misc(), (torch.randn(2, 4), torch.randn(3, 5), torch.randn(5, 5)))

composites = Composites()
with torch.no_grad():
    composites.bn.running_mean.uniform_(-0.5, 0.5)
    composites.gn.weight.uniform_(0.5, 1.5)
    composites.gn.bias.uniform_(-0.5, 0.5)
composite_inputs = (torch.randn(6, 4), torch.randn(6, 4, 5, 5), torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 1, 2]))
check("composites", composites, composite_inputs)
check("mlp", Mlp(), (torch.randn(9, 20), torch.randint(0, 7, (9,))))
check("block", Block(), (torch.randint(0, 50, (3, 5)),))
cnn = Cnn()
with torch.no_grad():  # running statistics that are not the defaults
    cnn.bn.running_mean.uniform_(-0.5, 0.5)
    cnn.bn.running_var.uniform_(0.5, 2.0)
check("cnn", cnn, (torch.randn(2, 3, 13, 13),))
check("maxmin", MaxMin(), (torch.randn(5, 7),))

graph = tt.export(Mlp().eval(), (torch.randn(2, 20), torch.randint(0, 7, (2,))))
names = [(i["name"], i.get("trainable", False)) for i in graph["inputs"]]
assert names == [("x", False), ("target", False), ("fc1.weight", True), ("fc1.bias", True),
                 ("fc2.weight", True), ("fc2.bias", True)], names
assert graph["inputs"][2]["shape"] == [33, 20]  # PyTorch's [out, in] layout, read through a transpose


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return torch.cumsum(self.inner(x), 0) + torch.flip(x, [0])  # CUMSUM_LINE


CUMSUM_LINE = next(i + 1 for i, l in enumerate(open(__file__)) if l.rstrip().endswith("# " + "CUMSUM_LINE"))


try:
    tt.export(Unsupported(), (torch.randn(3, 4),))
    raise AssertionError("exported an unsupported op")
except tt.UnsupportedOp as e:
    msg = str(e)
    assert "torch.cumsum" in msg and "in module ''" not in msg, msg
    assert msg.endswith(f"torch_export_test.py:{CUMSUM_LINE}"), msg
    print("error:", msg.split(" at ")[0])


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(20, 8)

    def forward(self, x):
        return self.rnn(x)[0]


# A causal mask the graph builds from no input (Dynamo's graphs call
# torch.ones(...).tril() and ~ as nodes): index comparisons, not an S x S
# constant, and the hand-written attention becomes one attention op.
import operator  # noqa: E402
import torch.fx as fx  # noqa: E402
import json as json_module  # noqa: E402
fg = fx.Graph()
q, k, v = fg.placeholder("q"), fg.placeholder("k"), fg.placeholder("v")
scores = fg.call_function(operator.truediv, (fg.call_function(operator.matmul, (q, fg.call_method("transpose", (k, -2, -1)))), 4.0))
keep = fg.call_method("tril", (fg.call_function(torch.ones, (9, 9), {"dtype": torch.bool}),))
filled = fg.call_method("masked_fill", (scores, fg.call_function(operator.invert, (keep,)), float("-inf")))
fg.output(fg.call_function(operator.matmul, (fg.call_function(torch.softmax, (filled,), {"dim": -1}), v)))
causal = fx.GraphModule(nn.Module(), fg)
causal_inputs = tuple(torch.randn(2, 3, 9, 16) for _ in range(3))
check("causal", causal, causal_inputs)
graph = tt.export(causal, causal_inputs)
assert "constant" not in [n["op"] for n in graph["nodes"]], graph["nodes"]
with open(os.path.join(work, "causal-graph.json"), "w") as f:
    json_module.dump(graph, f)
subprocess.run([tensorc, "grad", os.path.join(work, "causal-graph.json"), "--wrt", "q", "k", "v", "--of",
                graph["outputs"][0], "--partition", "--emit", "json", "-o", os.path.join(work, "causal-parts")],
               check=True)
with open(os.path.join(work, "causal-parts.forward.json")) as f:
    ops = [n["op"] for n in json_module.load(f)["nodes"]]
# One attention op, which also writes each row's log-sum-exp for the
# backward (saved with its output: the backward does not run it again).
assert ops == ["scaled_dot_product_attention_with_lse"], ops
with open(os.path.join(work, "causal-parts.backward.json")) as f:
    backward = json_module.load(f)
attention_backward = [n for n in backward["nodes"] if n["op"] == "scaled_dot_product_attention_backward"]
assert len(attention_backward) == 1, backward["nodes"]
assert len([a for a in attention_backward[0]["args"] if a is not None]) == 6, attention_backward

problems = tt.explain(Unsupported(), torch.randn(3, 4)) + tt.explain(Recurrent(), torch.randn(2, 3, 20))
assert [(p.what, p.path) for p in problems] == [("torch.cumsum", ""), ("torch.flip", ""), ("module GRU", "rnn")], \
    [(p.what, p.path) for p in problems]
print("torch export: ok")

if "--compile" in sys.argv:
    # tensorc.torch.compile: the artifact on the CPU, cached by content; the
    # module's current weights at each call.
    cache = os.path.join(work, "artifacts")
    block = Block().eval()
    ids = torch.randint(0, 50, (3, 5))
    fast = tt.compile(block, (ids,), cache_dir=cache, tensorc_path=tensorc)
    assert not fast.cache_hit
    for _ in range(2):
        ids = torch.randint(0, 50, (3, 5))
        with torch.no_grad():
            err = (fast(ids) - block(ids)).abs().max().item()
        assert err < 1e-4, (err, seed)
        with torch.no_grad():
            block.head.weight.mul_(1.5)  # seen by the next call, no recompile
    again = tt.compile(block, (ids,), cache_dir=cache, tensorc_path=tensorc)
    assert again.cache_hit and again.artifact == fast.artifact
    mlp = Mlp().eval()
    x, t = torch.randn(4, 20), torch.randint(0, 7, (4,))
    logits, loss = tt.compile(mlp, (x, t), cache_dir=cache, tensorc_path=tensorc)(x, t)
    with torch.no_grad():
        want_logits, want_loss = mlp(x, t)
    assert (logits - want_logits).abs().max() < 1e-4 and abs(loss.item() - want_loss.item()) < 1e-4
    print("torch compile: ok")

    # The per-call fast path (python/tensorc/_fast.c, built beside the
    # runtime library): every call above went through it; here it is
    # checked against the ctypes path on the same session, and what it
    # does not describe falls back to ctypes.
    import tensorc as runtime
    import tensorc._lib as tl
    built = os.path.exists(os.path.join(os.path.dirname(tl.lib._name), "_tensorc_fast.abi3.so"))
    assert built == (tl.fast is not None), (built, tl.fast)
    compiled = tt.compile(mlp, (x, t), cache_dir=cache, tensorc_path=tensorc)
    run = compiled.run_forward
    assert built == (run.enqueue.fast is not None)
    plain = runtime._ReusingEnqueue(run.session)
    plain.fast = None  # the ctypes path
    order = compiled._flat_inputs((x, t))
    shapes = run.session.output_shapes(*order)

    def poisoned():
        return [torch.full(shape, float("nan") if dtype.is_floating_point else -7).to(dtype)
                for shape, (_, dtype) in zip(shapes, run.outputs)]

    def both(inputs):
        """Outputs of the fast path (all described, then the outputs' addresses
        alone) and the ctypes path (poisoned first), equal."""
        results = []
        for enqueue, fresh in ((run.enqueue, False), (run.enqueue, True), (plain, False)):
            outs = poisoned()
            enqueue(inputs, outs, None, fresh)
            run.session.synchronize()
            results.append(outs)
        for other in results[1:]:
            for a, b in zip(results[0], other):
                assert torch.equal(a, b), (a, b)
        return results[0]

    got = both(order)
    assert (got[0] - want_logits).abs().max() < 1e-4, seed
    # A non-contiguous input is refused; a contiguous one at a storage
    # offset is read there.
    try:
        both([torch.randn(4, 40)[:, 20:] if v is x else v for v in order])
        raise AssertionError("a non-contiguous slice was taken")
    except runtime.Error as e:
        assert "not contiguous" in str(e), e
    rows = torch.randn(8, 20)
    got = both([rows[4:] if v is x else v for v in order])
    with torch.no_grad():
        assert (got[0] - mlp(rows[4:].contiguous(), t)[0]).abs().max() < 1e-4, seed
    # Not described by the fast path (NotImplemented, then ctypes): a NumPy
    # input, an output that requires grad (DLPack refuses it: an error).
    if run.enqueue.fast is not None:
        numpy_inputs = [v.detach().numpy() if v is x else v for v in order]
        assert run.enqueue.fast(numpy_inputs, poisoned(), None) is NotImplemented
        outs = poisoned()
        run.enqueue(numpy_inputs, outs)
        run.session.synchronize()
        assert (outs[0] - want_logits).abs().max() < 1e-4, seed
        try:
            run.enqueue(order, [o.requires_grad_() if o.is_floating_point() else o for o in poisoned()])
            raise AssertionError("an output that requires grad was taken")
        except (runtime.Error, BufferError, RuntimeError, TypeError) as e:
            assert "grad" in str(e), e
    # The runtime's errors come through the fast path as tensorc.Error.
    try:
        run.enqueue([torch.randn(5, 20) if v is x else v for v in order], poisoned())
        raise AssertionError("a wrong shape was taken")
    except runtime.Error as e:
        assert "expected shape" in str(e), e
    print("torch fast path:", "on, same outputs as ctypes, fallbacks" if built else "not built")

    # The runtime binds parameters by name from the exporter's .safetensors
    # (memory-mapped, checked) and takes new ones without recompiling.
    import tensorc as runtime
    block = Block().eval()
    ids = torch.randint(0, 50, (3, 5))
    graph = tt.export(block, (ids,), os.path.join(work, "bound.json"))
    art = os.path.join(work, "bound.tcx")
    subprocess.run([tensorc, "compile", os.path.join(work, "bound.json"), "--target", "cpu", "-o", art],
                   check=True)
    session = runtime.Executable.load(art).session()
    assert session.bind_weights(os.path.join(work, "bound.safetensors")) == len(graph["inputs"]) - 1
    for scale in (1.0, -2.0):
        with torch.no_grad():
            block.head.weight.mul_(scale)
        tt.save_safetensors(dict(block.named_parameters()), os.path.join(work, "new.safetensors"))
        if scale != 1.0:
            assert session.bind_weights(os.path.join(work, "new.safetensors")) == len(graph["inputs"]) - 2
        out = torch.empty(3, 1)
        session.step(outputs={graph["outputs"][0]: out}, ids=ids)
        session.synchronize()
        with torch.no_grad():
            err = (out - block(ids)).abs().max().item()
        assert err < 1e-4, (scale, err, seed)
    try:
        session.bind("head.weight", torch.zeros(3, 3))
        raise AssertionError("bound a tensor of the wrong shape")
    except runtime.Error as e:
        assert "bound input 'head.weight': expected shape" in str(e), e
    print("torch weights: bound from .safetensors, swapped without recompiling")

if "--compile" in sys.argv:
    # train=True: tensorc's own backward (autodiff + partition) behind
    # autograd; gradients equal PyTorch's, and an optimizer trains through it.
    def grads(model, fn, *inputs):
        model.zero_grad()
        out = fn(*inputs)
        out = out if isinstance(out, tuple) else (out,)
        # Every output takes part with random weights (a plain sum of a
        # softmax has a zero gradient), the scalar with a factor other than 1.
        g = torch.Generator().manual_seed(seed)
        total = sum((o * torch.rand(o.shape, generator=g)).sum() for o in out if o.is_floating_point())
        total.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    for name, model, inputs in (
            ("mlp", Mlp().eval(), (torch.randn(6, 20), torch.randint(0, 7, (6,)))),
            ("block", Block().eval(), (torch.randint(0, 50, (3, 5)).index_fill_(1, torch.tensor([0, 3]), 1),)),
            ("cnn", Cnn().eval(), (torch.randn(2, 3, 13, 13),))):
        fast = tt.compile(model, inputs, train=True, cache_dir=cache, tensorc_path=tensorc)
        want, got = grads(model, model, *inputs), grads(model, fast, *inputs)
        for n in want:
            err = (got[n] - want[n]).abs().max().item() / max(want[n].abs().max().item(), 1e-6)
            assert err < 1e-4, (name, n, err, seed)
        print(f"{name}: gradients match PyTorch")
    # A loss of sum() sends one value broadcast as an output's
    # gradient, an unused output none: the backward variant reads one value
    # (backward_with_uniform) instead of a materialized tensor, with equal
    # gradients.
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.fc = torch.nn.LayerNorm(24), torch.nn.Linear(24, 24)

        def forward(self, x):
            y = self.ln(x)
            return self.fc(y).tanh(), y * 2

    heads, x = TwoHeads(), torch.randn(7, 24, requires_grad=True)
    fast = tt.compile(heads, (x,), train=True, cache_dir=cache, tensorc_path=tensorc)
    for loss in (lambda a, b: a.sum() * 3, lambda a, b: a.mean() + b.sum(), lambda a, b: (a * b).sum(),
                 lambda a, b: a.sum() + (b * b).sum()):
        got, want = [], []
        for fn, out in ((fast, got), (heads, want)):
            heads.zero_grad()
            x.grad = None
            loss(*fn(x)).backward()
            out.extend([x.grad.clone()] + [p.grad.clone() for p in heads.parameters()])
        for a, b in zip(got, want):
            assert (a - b).abs().max().item() <= 1e-4 * max(b.abs().max().item(), 1), (a, b, seed)
    uniform = {tuple(sorted(k)): v is not None for k, v in fast._uniform_runners.items()}
    # (PyTorch's mean() divides after broadcasting: its gradient is a whole tensor.)
    assert uniform == {("cotangent_mul", "cotangent_tanh"): True, ("cotangent_mul",): True,
                       ("cotangent_tanh",): True}, uniform
    print("torch training: sum() gradients as one value (backward variants), gradients match PyTorch")
    # Attention saves its output and log-sum-exp for the backward; its
    # output is also the model's: one forward output, not a copy ("h" and
    # "h:0" name the same value).
    class HandAttention(torch.nn.Module):
        def forward(self, q, k, v):
            scores = (q @ k.transpose(-2, -1)) / 4.0
            keep = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()
            return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v

    qkv = tuple(torch.randn(2, 3, 9, 16, requires_grad=True) for _ in range(3))
    fast = tt.compile(HandAttention(), qkv, train=True, cache_dir=cache, tensorc_path=tensorc)
    assert len(fast.forward_exe.outputs) == 2 and len(fast.saved_names) == 2, \
        ([o.name for o in fast.forward_exe.outputs], fast.saved_names)
    got, want = [], []
    for fn, out in ((fast, got), (HandAttention(), want)):
        for t in qkv:
            t.grad = None
        y = fn(*qkv)
        (y * y).sum().backward()
        out.extend([y.detach()] + [t.grad.clone() for t in qkv])
    for a, b in zip(got, want):
        assert (a - b).abs().max().item() <= 1e-4 * max(b.abs().max().item(), 1), (a, b, seed)
    print("torch training: attention saves its output and log-sum-exp once, gradients match PyTorch")
    model, twin = Mlp().eval(), Mlp().eval()
    twin.load_state_dict(model.state_dict())
    x, t = torch.randn(8, 20), torch.randint(0, 7, (8,))
    fast = tt.compile(model, (x, t), train=True, cache_dir=cache, tensorc_path=tensorc)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, twin)]
    for step in range(20):
        losses = []
        for m, fn, opt in ((model, fast, opts[0]), (twin, twin, opts[1])):
            opt.zero_grad()
            loss = fn(x, t)[1]
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[1]), (step, losses, seed)
    for (n, a), b in zip(model.named_parameters(), twin.parameters()):
        assert (a - b).abs().max().item() < 1e-3, (n, seed)
    print(f"torch training: 20 AdamW steps, losses match PyTorch ({losses[1]:.4f})")

if "--compile" in sys.argv:
    # The Dynamo backend (torch.compile(model, backend="tensorc") on PyTorch
    # >= 2.0), called as Dynamo calls it: a GraphModule and its flat example
    # inputs, then the returned callable with new inputs. Dynamo passes the
    # parameters as graph inputs (PyTorch >= 2.5): a traced function of
    # (x, target, weights...); before, as graph attributes: a traced module.
    import torch.fx as fx
    from tensorc.torch import tensorc_backend

    def functional_mlp(x, target, w1, b1, w2, b2):
        logits = F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)
        return logits, F.cross_entropy(logits, target)

    ref = Mlp().eval()
    weights = [p.detach().clone().requires_grad_() for p in (ref.fc1.weight, ref.fc1.bias, ref.fc2.weight, ref.fc2.bias)]
    gm = fx.symbolic_trace(functional_mlp)
    x, t = torch.randn(5, 20), torch.randint(0, 7, (5,))
    with torch.no_grad():
        call = tensorc_backend(gm, [x, t, *weights], cache_dir=cache, tensorc_path=tensorc, frontend="fx")
        for _ in range(2):
            x = torch.randn(5, 20)
            got, want = call(x, t, *weights), gm(x, t, *weights)
            assert isinstance(got, tuple) and len(got) == 2, type(got)
            for a, b in zip(got, want):
                assert (a - b).abs().max().item() < 1e-4, seed
    # With grad: tensorc's backward fills the weights' .grad.
    call = tensorc_backend(gm, [x, t, *weights], cache_dir=cache, tensorc_path=tensorc, frontend="fx")
    loss = call(x, t, *weights)[1]
    loss.backward()
    got_grads = [w.grad.clone() for w in weights]
    for w in weights:
        w.grad = None
    gm(x, t, *weights)[1].backward()
    for a, b in zip(got_grads, (w.grad for w in weights)):
        assert (a - b).abs().max().item() <= 1e-4 * max(b.abs().max().item(), 1e-6), seed
    assert abs(loss.item() - gm(x, t, *weights)[1].item()) < 1e-4
    # Other shapes: another artifact (Dynamo would recompile; a direct call works too).
    x2, t2 = torch.randn(3, 20), torch.randint(0, 7, (3,))
    with torch.no_grad():
        assert (call(x2, t2, *weights)[0] - gm(x2, t2, *weights)[0]).abs().max().item() < 1e-4
    assert len(call.compiled) == 2, list(call.compiled)
    # The module form: parameters read from the graph module.
    cnn = Cnn().eval()
    gm = fx.symbolic_trace(cnn)
    images = torch.randn(2, 3, 13, 13)
    with torch.no_grad():
        got = tensorc_backend(gm, [images], cache_dir=cache, tensorc_path=tensorc, frontend="fx")(images)
        assert (got - cnn(images)).abs().max().item() < 1e-4, seed
    # An unsupported op fails at compile time, naming it; a size input is refused.
    try:
        tensorc_backend(fx.symbolic_trace(lambda x: torch.cumsum(x, 0)), [torch.randn(3)], cache_dir=cache, frontend="fx",
                        tensorc_path=tensorc)
        raise AssertionError("compiled torch.cumsum")
    except tt.UnsupportedOp as e:
        assert "unsupported op torch.cumsum" in str(e), e
    # Sizes as graph inputs (Dynamo's automatic dynamic shapes): each call's
    # values key its own specialized artifact.
    def sized(x, rows):
        return x.reshape(rows, -1).sum(1)

    gm = fx.symbolic_trace(sized)
    call = tensorc_backend(gm, [torch.randn(4, 6), 4], cache_dir=cache, tensorc_path=tensorc, frontend="fx")
    for rows, cols in ((4, 6), (3, 10), (4, 6)):
        x = torch.randn(rows, cols)
        with torch.no_grad():
            assert (call(x, rows) - sized(x, rows)).abs().max().item() < 1e-5, (rows, seed)
    assert len(call.compiled) == 2, list(call.compiled)
    try:
        tensorc_backend(gm, [torch.randn(4, 6), "4"], cache_dir=cache, tensorc_path=tensorc, frontend="fx")
        raise AssertionError("took a string graph input")
    except tt.UnsupportedOp as e:
        assert "graph input 1 of type str" in str(e), e
    print("torch dynamo backend: inference, training, shapes, errors")

if "--compile" in sys.argv:
    # dynamic=: the marked dims symbolic in one artifact; sizes below 2 get
    # their own static artifact; a size-dependent graph is one error.
    mlp = Mlp().eval()
    x, t = torch.randn(6, 20), torch.randint(0, 7, (6,))
    fast = tt.compile(mlp, (x, t), cache_dir=cache, tensorc_path=tensorc, dynamic=True)
    with open(fast.artifact, "rb") as f:  # the manifest (docs/artifact-format.md): inputs' declared shapes
        data = f.read()
    import json as json_module, struct
    manifest = json_module.loads(data[48:48 + struct.unpack_from("<Q", data, 16)[0]])
    shapes = [i["shape"] for i in manifest["inputs"]][:2]
    assert shapes == [["B", 20], ["B"]], shapes
    for batch in (3, 11, 1, 6):
        x, t = torch.randn(batch, 20), torch.randint(0, 7, (batch,))
        with torch.no_grad():
            logits, loss = fast(x, t)
            want_logits, want_loss = mlp(x, t)
        assert logits.shape == (batch, 7) and (logits - want_logits).abs().max() < 1e-4, (batch, seed)
        assert abs(loss.item() - want_loss.item()) < 1e-4, (batch, seed)
    assert len(fast.specialized) == 1, list(fast.specialized)  # batch 1
    block = Block().eval()
    fast = tt.compile(block, (torch.randint(0, 50, (3, 5)),), cache_dir=cache, tensorc_path=tensorc,
                      dynamic={0: {0: "B"}})
    for batch in (2, 7):
        ids = torch.randint(0, 50, (batch, 5))
        with torch.no_grad():
            assert (fast(ids) - block(ids)).abs().max().item() < 1e-4, (batch, seed)
    # Training: one forward and one backward artifact for every batch.
    model = Mlp().eval()
    fast = tt.compile(model, (torch.randn(4, 20), torch.randint(0, 7, (4,))), train=True, cache_dir=cache,
                      tensorc_path=tensorc, dynamic=True)
    for batch in (5, 9):
        inputs = (torch.randn(batch, 20), torch.randint(0, 7, (batch,)))
        want, got = grads(model, model, *inputs), grads(model, fast, *inputs)
        for n in want:
            err = (got[n] - want[n]).abs().max().item() / max(want[n].abs().max().item(), 1e-6)
            assert err < 1e-4, ("dynamic", batch, n, err, seed)

    class SizeDependent(nn.Module):
        def forward(self, x):
            return x * float(x.shape[0])  # a float from the size: not a dim

    try:
        tt.compile(SizeDependent(), (torch.randn(3, 2),), cache_dir=cache, tensorc_path=tensorc, dynamic=True)
        raise AssertionError("compiled a size-dependent float")
    except tt.UnsupportedOp as e:
        assert "size-dependent node" in str(e) and "computed from the sizes" in str(e), e
    for bad, want in (({0: {2: "B"}}, "input 0 has no dim 2"), ({0: {0: "2B"}}, "not a symbol name"),
                      (True, "the example inputs' first dims are [2, 3]")):
        try:
            tt.compile(mlp, (torch.randn(2, 20), torch.randint(0, 7, (3,))), cache_dir=cache,
                       tensorc_path=tensorc, dynamic=bad)
            raise AssertionError(f"accepted dynamic={bad}")
        except ValueError as e:
            assert want in str(e), e
    print("torch dynamic dims: one artifact for every batch, gradients too; size-dependent graphs refused")

if "--compile" in sys.argv:
    # Training mode: batch norm's batch statistics and running-statistics
    # update (written back to the buffers, as PyTorch does in place), and
    # dropout with a fresh mask per call from torch's generator.
    model, twin = Cnn().train(), Cnn().train()
    twin.load_state_dict(model.state_dict())
    images = torch.randn(3, 3, 13, 13)
    fast = tt.compile(model, (images,), train=True, cache_dir=cache, tensorc_path=tensorc)
    for step in range(3):
        images = torch.randn(3, 3, 13, 13)
        got, want = grads(model, fast, images), grads(twin, twin, images)
        for n in want:
            # conv1.bias feeds batch statistics that subtract it again: its
            # gradient is 0 up to rounding, so errors are relative to 1e-3 at least.
            err = (got[n] - want[n]).abs().max().item() / max(want[n].abs().max().item(), 1e-3)
            assert err < 1e-4, ("batch norm training", step, n, err, seed)
    for (n, a), b in zip(model.named_buffers(), twin.buffers()):
        assert a.dtype == b.dtype and (a.double() - b.double()).abs().max().item() < 1e-5, (n, a, b, seed)
    assert model.bn.num_batches_tracked.item() == 3

    # Batch norm as Dynamo captures it: F.batch_norm on the buffers and the
    # counter's in-place add_ (a state output written back).
    class FunctionalBn(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            self.bn.num_batches_tracked.add_(1)
            return F.batch_norm(x, self.bn.running_mean, self.bn.running_var, self.bn.weight, self.bn.bias,
                                True, 0.1, 1e-5)

    fbn, fbn_twin = FunctionalBn().train(), FunctionalBn().train()
    fbn_twin.load_state_dict(fbn.state_dict())
    x = torch.randn(6, 4)
    fast = tt.compile(fbn, (x,), train=True, cache_dir=cache, tensorc_path=tensorc)
    for step in range(2):
        x = torch.randn(6, 4)
        got, want = grads(fbn, fast, x), grads(fbn_twin, fbn_twin, x)
        for n in want:
            assert (got[n] - want[n]).abs().max().item() < 1e-4 * max(want[n].abs().max().item(), 1e-3), (n, seed)
    for (n, a), b in zip(fbn.named_buffers(), fbn_twin.buffers()):
        assert (a.double() - b.double()).abs().max().item() < 1e-5, (n, a, b, seed)
    assert fbn.bn.num_batches_tracked.item() == 2

    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.rand(64) + 0.5)
            self.drop = nn.Dropout(0.3)

        def forward(self, x):
            return F.dropout(self.drop(x * self.w), 0.2, training=self.training)

    drop = Drop().train()
    x = torch.rand(200, 64) + 0.5
    fast = tt.compile(drop, (x,), train=True, cache_dir=cache, tensorc_path=tensorc)
    torch.manual_seed(7)
    y = fast(x)
    torch.manual_seed(7)
    assert torch.equal(fast(x), y)  # the seed comes from torch's generator
    assert not torch.equal(fast(x), y)  # and is fresh per call
    kept = y != 0
    assert abs(kept.double().mean().item() - 0.7 * 0.8) < 0.03, kept.double().mean()
    scale = 1 / (0.7 * 0.8)
    assert torch.allclose(y[kept], (x * drop.w.detach() * scale)[kept], rtol=1e-5)
    # The backward's mask is the forward's: d sum(y) / dw = sum(y) / w per column.
    drop.zero_grad()
    y = fast(x)
    y.sum().backward()
    assert torch.allclose(drop.w.grad, y.detach().sum(0) / drop.w.detach(), rtol=1e-4), seed
    print("torch training mode: batch norm statistics and dropout masks")

if "--compile" in sys.argv:
    # The composites' gradients; the functional batch norm in training mode
    # as a Dynamo graph has it (running statistics are graph inputs, updated
    # in place).
    shapes, shape_inputs = Shapes(), (torch.randn(2, 4, 11), torch.randn(2, 3, 6, 6))
    for name, model, inputs in (("composites", composites, composite_inputs), ("shapes", shapes, shape_inputs),
                                ("attention", Attention(), attention_inputs),
                                ("encoder", Encoder(), attention_inputs)):
        fast = tt.compile(model, inputs, train=True, cache_dir=cache, tensorc_path=tensorc)
        want, got = grads(model, model, *inputs), grads(model, fast, *inputs)
        for n in want:
            err = (got[n] - want[n]).abs().max().item() / max(want[n].abs().max().item(), 1e-3)
            assert err < 1e-4, (name, n, err, seed)

    def functional_bn(x, mean, var, w, b):
        return F.relu(F.batch_norm(x, mean, var, w, b, training=True, momentum=0.2))

    gm = fx.symbolic_trace(functional_bn)
    x = torch.randn(5, 3, 4)
    stats = [torch.rand(3) - 0.5, torch.rand(3) + 0.5]
    affine = [(torch.rand(3) + 0.5).requires_grad_(), torch.randn(3).requires_grad_()]
    mine, theirs = [t.clone() for t in stats], [t.clone() for t in stats]
    call = tensorc_backend(gm, [x, *mine, *affine], cache_dir=cache, tensorc_path=tensorc, frontend="fx")
    y = call(x, *mine, *affine)
    y.sum().backward()
    got = [a.grad.clone() for a in affine]
    for a in affine:
        a.grad = None
    want = functional_bn(x, *theirs, *affine)
    want.sum().backward()
    assert (y - want).abs().max().item() < 1e-5, seed
    for a, b in zip(mine + got, theirs + [a.grad for a in affine]):
        assert (a - b).abs().max().item() < 1e-5, (a, b, seed)
    print("torch composites: activations, losses, norms; functional batch norm statistics")
