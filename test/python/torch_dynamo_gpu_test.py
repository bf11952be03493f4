"""torch.compile(model, backend="tensorc") with real Dynamo (PyTorch >= 2.0)
on a GPU: the GPU bundle runs it (scripts/gpu-test.sh) with the bundle's
compiler as $TENSORC. CI's PyTorch 1.13 has no Dynamo: there the backend is
tested as Dynamo calls it (torch_export_test.py --compile).

Checks, on CUDA tensors: inference equals eager; training (loss.backward()
through tensorc's backward) gives eager's gradients and 5 AdamW steps give
eager's losses, also for a small CNN (conv2d and its gradients on cuDNN);
a second batch size (Dynamo's recompile or dynamic sizes)
still matches; the backend's per-call overhead on a one-op graph (printed).
usage: torch_dynamo_gpu_test.py WORKDIR"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tensorc.torch  # noqa: F401 (registers the backend)

work = sys.argv[1]
os.environ.setdefault("XDG_CACHE_HOME", work)
seed = int.from_bytes(os.urandom(4), "little")
torch.manual_seed(seed)
dev = "cuda"


class Block(nn.Module):
    """A small GPT-2 style block with a head and a loss."""

    def __init__(self, vocab=64, d=32, heads=4, t=16):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids, target):
        x = self.emb(ids)
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = (z.view(B, T, self.heads, C // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        logits = self.head(x)
        return F.cross_entropy(logits.view(B * T, -1), target.view(B * T))


def close(a, b, tol):
    return (a - b).abs().max().item() <= tol * max(b.abs().max().item(), 1e-3)


model, twin = Block().to(dev), Block().to(dev)
twin.load_state_dict(model.state_dict())
fast = torch.compile(model, backend="tensorc", dynamic=False)
ids = torch.randint(0, 64, (4, 16), device=dev)
target = torch.randint(0, 64, (4, 16), device=dev)
with torch.no_grad():
    assert close(fast(ids, target), twin(ids, target), 1e-4), seed
print("dynamo backend: inference equals eager")

opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, twin)]
mine = {}  # the compiled model's first gradients, compared with eager's
for step in range(5):
    losses = []
    for fn, m, opt in ((fast, model, opts[0]), (twin, twin, opts[1])):
        opt.zero_grad()
        loss = fn(ids, target)
        loss.backward()
        if step == 0:
            grads = {n: p.grad.clone() for n, p in m.named_parameters()}
            if m is twin:
                for n, g in grads.items():
                    assert close(mine[n], g, 1e-3), (n, seed)
            else:
                mine.update(grads)
        opt.step()
        losses.append(loss.item())
    assert abs(losses[0] - losses[1]) <= 1e-3 * abs(losses[1]), (step, losses, seed)
print(f"dynamo backend: training equals eager (gradients, 5 AdamW steps, loss {losses[1]:.4f})")

class ConvNet(nn.Module):
    """A small CNN: conv2d and its gradients run on cuDNN's engines."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.c3 = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, target):
        x = F.relu(self.bn(self.c1(x)))
        x = F.relu(self.c3(F.relu(self.c2(x))))
        return F.cross_entropy(self.fc(x.mean((2, 3))), target)


torch.backends.cudnn.allow_tf32 = False  # eager's f32 convolutions in f32, as tensorc's
cnn, cnn_twin = ConvNet().to(dev), ConvNet().to(dev)
cnn_twin.load_state_dict(cnn.state_dict())
fast_cnn = torch.compile(cnn, backend="tensorc", dynamic=False)
images = torch.randn(6, 3, 17, 15, device=dev)
labels = torch.randint(0, 10, (6,), device=dev)
cnn_opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (cnn, cnn_twin)]
for step in range(3):
    losses, grads = [], []
    for fn, m, opt in ((fast_cnn, cnn, cnn_opts[0]), (cnn_twin, cnn_twin, cnn_opts[1])):
        opt.zero_grad()
        loss = fn(images, labels)
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        opt.step()
        losses.append(loss.item())
    for n, g in grads[1].items():
        assert close(grads[0][n], g, 1e-3), (step, n, seed)
    assert abs(losses[0] - losses[1]) <= 1e-3 * abs(losses[1]), (step, losses, seed)
print(f"dynamo backend: a CNN trains as eager (conv2d on cuDNN; gradients, 3 AdamW steps, loss {losses[1]:.4f})")

ids2 = torch.randint(0, 64, (2, 16), device=dev)
target2 = torch.randint(0, 64, (2, 16), device=dev)
with torch.no_grad():
    assert close(fast(ids2, target2), twin(ids2, target2), 1e-4), seed
    dyn = torch.compile(model, backend="tensorc")  # Dynamo's default: dynamic sizes on a second size
    for b in (3, 5):
        i, t = torch.randint(0, 64, (b, 16), device=dev), torch.randint(0, 64, (b, 16), device=dev)
        assert close(dyn(i, t), twin(i, t), 1e-4), (b, seed)
print("dynamo backend: other batch sizes")

one = torch.compile(lambda x: x + 1, backend="tensorc")
x = torch.randn(16, device=dev)
for _ in range(50):
    one(x)
torch.cuda.synchronize()
n = 2000
start = time.perf_counter()
for _ in range(n):
    one(x)
torch.cuda.synchronize()
per_call = (time.perf_counter() - start) / n * 1e6
eager_start = time.perf_counter()
for _ in range(n):
    x + 1
torch.cuda.synchronize()
eager = (time.perf_counter() - eager_start) / n * 1e6
print(f"dynamo backend: {per_call:.1f} us per call of a one-op graph (eager {eager:.1f} us)")
