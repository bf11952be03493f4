#!/usr/bin/env python3
"""Writes the public benchmark workloads (../shared/bench/workloads.py) as
tensorc graph files, with the same shapes and dtypes. A "_fb" workload marks
the tensors PyTorch differentiates as trainable and ends in the scalar it
backpropagates (the loss, or sum of the output), so `tensorc grad` /
`tensorc compile --train` derive the same training step.

    python3 bench/make_graphs.py bench/graphs
    python3 bench/make_graphs.py --cpu bench/graphs/cpu   # CPU-sized shapes

With --cpu the same workloads shrink to sizes a CPU runs in milliseconds
(SIZES_CPU), and an f32 MLP is added for the matmul-vs-OpenBLAS comparison.
"""
import json
import os
import sys


class G:
    def __init__(self, name):
        self.g = {"format": "tensorc.graph", "version": 1, "name": name, "inputs": [], "nodes": [], "outputs": []}
        self.n = 0

    def input(self, name, dtype, shape, trainable=False):
        e = {"name": name, "dtype": dtype, "shape": shape}
        if trainable:
            e["trainable"] = True
        self.g["inputs"].append(e)
        return name

    def op(self, op, *args, name=None, **attrs):
        name = name or f"{op}{self.n}"
        self.n += 1
        node = {"name": name, "op": op, "args": list(args)}
        if attrs:
            node["attrs"] = attrs
        self.g["nodes"].append(node)
        return name

    def out(self, *refs):
        self.g["outputs"] += list(refs)
        return self.g


def linear(g, x, w, b):
    return g.op("add", g.op("matmul", x, w), b)


def sum_loss(g, y, dtype):
    # PyTorch: out.float().sum().backward()
    if dtype != "f32":
        y = g.op("cast", y, to="f32")
    return g.op("sum", y, name="loss")


# GPU sizes (the public workloads) and CPU sizes.
SIZES_GPU = dict(pw=8192, ln=(16384, 4096), sm=(16384, 4096), xent=(4096, 50304), mlp=(8192, 1024, 4096),
                 attn=(8, 12, 1024, 64), block=(8, 1024, 768, 12))
SIZES_CPU = dict(pw=4096, ln=(4096, 1024), sm=(4096, 1024), xent=(512, 50304), mlp=(512, 1024, 4096),
                 attn=(2, 12, 256, 64), block=(2, 256, 768, 12))
S = SIZES_GPU


def pointwise():
    g = G("pointwise_f32")
    n = S["pw"]
    x, a, b = g.input("x", "f32", [n, n]), g.input("a", "f32", [n]), g.input("b", "f32", [n])
    y = g.op("mul", g.op("gelu", g.op("add", g.op("mul", x, a), b)), g.op("sigmoid", x), name="y")
    return g.out(y)


def pointwise_light():
    # A memory-bound elementwise chain (CPU benchmark only): y = relu(x * a + b).
    g = G("pointwise_light_f32")
    n = S["pw"]
    x, a, b = g.input("x", "f32", [n, n]), g.input("a", "f32", [n]), g.input("b", "f32", [n])
    return g.out(g.op("relu", g.op("add", g.op("mul", x, a), b), name="y"))


def layernorm():
    g = G("layernorm_f32_fb")
    r, c = S["ln"]
    x = g.input("x", "f32", [r, c], True)
    w, b = g.input("weight", "f32", [c], True), g.input("bias", "f32", [c], True)
    return g.out(sum_loss(g, g.op("layer_norm", x, w, b), "f32"))


def softmax():
    g = G("softmax_f32_fb")
    x = g.input("x", "f32", list(S["sm"]), True)
    return g.out(sum_loss(g, g.op("softmax", x, axis=-1), "f32"))


def xent():
    g = G("xent_f32_fb")
    logits = g.input("logits", "f32", list(S["xent"]), True)
    tgt = g.input("target", "i64", [S["xent"][0]])
    return g.out(g.op("cross_entropy", logits, tgt, name="loss"))


def mlp_layers(g, x, d, h, dtype, prefix=""):
    w1, b1 = g.input(prefix + "fc1_w", dtype, [d, h], True), g.input(prefix + "fc1_b", dtype, [h], True)
    w2, b2 = g.input(prefix + "fc2_w", dtype, [h, d], True), g.input(prefix + "fc2_b", dtype, [d], True)
    return linear(g, g.op("gelu", linear(g, x, w1, b1)), w2, b2)


def mlp(dtype="bf16"):
    g = G(f"mlp_{dtype}_fb")
    n, d, h = S["mlp"]
    x = g.input("x", dtype, [n, d], True)
    return g.out(sum_loss(g, mlp_layers(g, x, d, h, dtype), dtype))


def attention_ops(g, q, k, v, s, d, dtype):
    # scores = q @ k^T / sqrt(d); masked_fill(~tril, -inf); softmax; @ v
    scores = g.op("div", g.op("matmul", q, g.op("transpose", k, dim0=-2, dim1=-1)), {"literal": float(d) ** 0.5, "dtype": dtype})
    rows = g.op("reshape", g.op("iota", end=s), shape=[s, 1])
    cols = g.op("reshape", g.op("iota", end=s), shape=[1, s])
    scores = g.op("where", g.op("ge", rows, cols), scores, float("-inf") if False else {"literal": "-inf", "dtype": dtype})
    return g.op("matmul", g.op("softmax", scores, axis=-1), v)


def attention():
    g = G("attn_bf16_fb")
    B, H, L, D = S["attn"]
    q, k, v = (g.input(n, "bf16", [B, H, L, D], True) for n in "qkv")
    return g.out(sum_loss(g, attention_ops(g, q, k, v, L, D, "bf16"), "bf16"))


def block(dtype):
    name = f"gpt2block_{dtype}_fb"
    g = G(name)
    b, s, d, nh = S["block"]
    x = g.input("x", dtype, [b, s, d], True)
    p = lambda n, shape: g.input(n, dtype, shape, True)
    ln1 = g.op("layer_norm", x, p("ln1_w", [d]), p("ln1_b", [d]))
    qkv = linear(g, ln1, p("qkv_w", [d, 3 * d]), p("qkv_b", [3 * d]))
    parts = g.op("split", qkv, sizes=[d, d, d], axis=-1)
    heads = [g.op("transpose", g.op("reshape", f"{parts}:{i}", shape=[b, s, nh, d // nh]), dim0=1, dim1=2) for i in range(3)]
    y = attention_ops(g, *heads, s, d // nh, dtype)
    y = g.op("reshape", g.op("transpose", y, dim0=1, dim1=2), shape=[b, s, d])
    x1 = g.op("add", x, linear(g, y, p("proj_w", [d, d]), p("proj_b", [d])))
    ln2 = g.op("layer_norm", x1, p("ln2_w", [d]), p("ln2_b", [d]))
    out = g.op("add", x1, mlp_layers(g, ln2, d, 4 * d, dtype, "mlp_"))
    return g.out(sum_loss(g, out, dtype))


def tp_block(b, s, d, nh, dtype="bf16"):
    """block() with separate q, k and v projections (Megatron's layout, which
    `tensorc shard --preset tp` splits by heads): the tensor-parallel
    benchmark's graph (bench/gpu/spmd_prepare.sh); not a public workload."""
    g = G(f"tpblock_{dtype}_fb")
    x = g.input("x", dtype, [b, s, d], True)
    p = lambda n, shape: g.input(n, dtype, shape, True)
    ln1 = g.op("layer_norm", x, p("ln1_w", [d]), p("ln1_b", [d]))
    heads = [g.op("transpose", g.op("reshape", linear(g, ln1, p(f"{n}_w", [d, d]), p(f"{n}_b", [d])),
                                    shape=[b, s, nh, d // nh]), dim0=1, dim1=2) for n in "qkv"]
    y = attention_ops(g, *heads, s, d // nh, dtype)
    y = g.op("reshape", g.op("transpose", y, dim0=1, dim1=2), shape=[b, s, d])
    x1 = g.op("add", x, linear(g, y, p("proj_w", [d, d]), p("proj_b", [d])))
    ln2 = g.op("layer_norm", x1, p("ln2_w", [d]), p("ln2_b", [d]))
    out = g.op("add", x1, mlp_layers(g, ln2, d, 4 * d, dtype, "mlp_"))
    return g.out(sum_loss(g, out, dtype))


def main():
    global S
    args = sys.argv[1:]
    cpu = "--cpu" in args
    args = [a for a in args if a != "--cpu"]
    S = SIZES_CPU if cpu else SIZES_GPU
    out = args[0] if args else os.path.join(os.path.dirname(__file__), "graphs", "cpu" if cpu else "")
    os.makedirs(out, exist_ok=True)
    graphs = [pointwise(), layernorm(), softmax(), xent(), mlp(), attention(), block("bf16"), block("f32")]
    if cpu:
        graphs += [mlp("f32"), pointwise_light()]
    for graph in graphs:
        with open(os.path.join(out, graph["name"] + ".json"), "w") as f:
            json.dump(graph, f, indent=1)
            f.write("\n")
        print(graph["name"])


if __name__ == "__main__":
    main()
