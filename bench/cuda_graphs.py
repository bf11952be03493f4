#!/usr/bin/env python3
"""Writes the CUDA backend's benchmark graphs (issue 6's choices, measured on
the GPU by scripts/gpu-bench.sh from the bundle):

  conv_*: conv2d shapes of a ResNet stage, compiled three ways (cuDNN, the
          default; im2col + cuBLASLt; the direct reduction nest) to choose
          the default by numbers;
  convblock_*_fb: two 3x3 convolutions of a ResNet block, forward and
          backward (the joint graph of `tensorc grad`), on cuDNN and as
          im2col + per-tap GEMMs;
  rowsum_f32: a long-row reduction, run with every kernel variant;
  softmax_f32, layernorm_f32: chains of row passes, run as one kernel per
          row block (the chain kernel) by the heuristic, and per step;
  linear_gelu_bf16: matmul + bias + gelu(tanh), the bias and gelu in the
          cuBLASLt epilogue.

    python3 bench/cuda_graphs.py OUTDIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_graphs import G, sum_loss  # noqa: E402


def conv(name, dtype, n, c, hw, oc, k, stride, pad):
    g = G(name)
    x = g.input("x", dtype, [n, c, hw, hw])
    w = g.input("w", dtype, [oc, c, k, k])
    b = g.input("b", dtype, [oc])
    return g.out(g.op("conv2d", x, w, b, stride=[stride, stride], padding=[pad, pad], name="y"))


def convblock(name, dtype, n, c, hw):
    """A ResNet basic block's convolutions, to be differentiated (`tensorc grad`
    in scripts/gpu-bundle.sh): conv3x3 + bias, relu, conv3x3, the sum as the loss."""
    g = G(name)
    x = g.input("x", dtype, [n, c, hw, hw], trainable=True)
    w1 = g.input("w1", dtype, [c, c, 3, 3], trainable=True)
    b1 = g.input("b1", dtype, [c], trainable=True)
    w2 = g.input("w2", dtype, [c, c, 3, 3], trainable=True)
    h = g.op("relu", g.op("conv2d", x, w1, b1, padding=[1, 1]))
    y = g.op("conv2d", h, w2, padding=[1, 1])
    return g.out(sum_loss(g, y, dtype))


def rowsum():
    g = G("rowsum_f32")
    x = g.input("x", "f32", [16384, 4096])
    return g.out(g.op("sum", x, axes=[1], name="y"))


def softmax():
    g = G("softmax_f32")
    x = g.input("x", "f32", [16384, 4096])
    return g.out(g.op("softmax", x, axis=-1, name="y"))


def layernorm():
    g = G("layernorm_f32")
    x = g.input("x", "f32", [16384, 4096])
    w, b = g.input("w", "f32", [4096]), g.input("b", "f32", [4096])
    return g.out(g.op("layer_norm", x, w, b, name="y"))


def linear_gelu():
    g = G("linear_gelu_bf16")
    x = g.input("x", "bf16", [8192, 1024])
    w = g.input("w", "bf16", [1024, 4096])
    b = g.input("b", "bf16", [4096])
    return g.out(g.op("gelu", g.op("add", g.op("matmul", x, w), b), approximate="tanh", name="y"))


GRAPHS = [
    conv("conv3x3_f32", "f32", 32, 64, 56, 64, 3, 1, 1),
    conv("conv3x3_bf16", "bf16", 32, 64, 56, 64, 3, 1, 1),
    conv("conv3x3s2_f32", "f32", 32, 128, 28, 256, 3, 2, 1),
    conv("conv1x1_f32", "f32", 32, 256, 28, 64, 1, 1, 0),
    convblock("convblock_f32_fb", "f32", 32, 64, 56),
    convblock("convblock_bf16_fb", "bf16", 32, 64, 56),
    rowsum(),
    softmax(),
    layernorm(),
    linear_gelu(),
]

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for g in GRAPHS:
        with open(os.path.join(out, g["name"] + ".json"), "w") as f:
            json.dump(g, f, indent=1)
