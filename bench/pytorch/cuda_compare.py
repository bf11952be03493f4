#!/usr/bin/env python3
"""PyTorch eager on the same shapes as bench/cuda_graphs.py, timed the same
way as `tensorc run --bench` reports device time (CUDA events around the
work, warm-up, median of N). Prints one line per workload:
    torch NAME median_ms
"""
import sys

import torch
import torch.nn.functional as F

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def timed(fn):
    for _ in range(max(3, N // 10)):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(N):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def conv(dtype, n, c, hw, oc, k, stride, pad):
    x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype)
    w = torch.randn(oc, c, k, k, device="cuda", dtype=dtype)
    b = torch.randn(oc, device="cuda", dtype=dtype)
    return lambda: F.conv2d(x, w, b, stride=stride, padding=pad)


def convblock(dtype, n, c, hw):
    """conv3x3 + bias, relu, conv3x3, sum: forward and backward (bench/cuda_graphs.py)."""
    x = torch.randn(n, c, hw, hw, device="cuda", dtype=dtype, requires_grad=True)
    w1 = (torch.randn(c, c, 3, 3, device="cuda", dtype=dtype) * 0.05).requires_grad_()
    b1 = torch.randn(c, device="cuda", dtype=dtype, requires_grad=True)
    w2 = (torch.randn(c, c, 3, 3, device="cuda", dtype=dtype) * 0.05).requires_grad_()

    def step():
        y = F.conv2d(F.relu(F.conv2d(x, w1, b1, padding=1)), w2, padding=1)
        y.float().sum().backward()
    return step


x = torch.randn(16384, 4096, device="cuda")
lw32 = torch.randn(4096, device="cuda")
lb32 = torch.randn(4096, device="cuda")
lx = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
lw = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16)
lb = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
work = {
    "conv3x3_f32": conv(torch.float32, 32, 64, 56, 64, 3, 1, 1),
    "conv3x3_bf16": conv(torch.bfloat16, 32, 64, 56, 64, 3, 1, 1),
    "conv3x3s2_f32": conv(torch.float32, 32, 128, 28, 256, 3, 2, 1),
    "conv1x1_f32": conv(torch.float32, 32, 256, 28, 64, 1, 1, 0),
    "convblock_f32_fb": convblock(torch.float32, 32, 64, 56),
    "convblock_bf16_fb": convblock(torch.bfloat16, 32, 64, 56),
    "rowsum_f32": lambda: x.sum(dim=1),
    "softmax_f32": lambda: torch.softmax(x, dim=-1),
    "layernorm_f32": lambda: F.layer_norm(x, (4096,), lw32, lb32),
    "linear_gelu_bf16": lambda: F.gelu(lx @ lw + lb, approximate="tanh"),
}
print("torch", torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
for name, fn in work.items():
    print(f"torch {name} {timed(fn):.4f}")
