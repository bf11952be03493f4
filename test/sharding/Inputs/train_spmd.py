"""Runs a training-step artifact for --steps steps and prints each step's
loss: in one process the global step on the whole batch, or under mpirun the
per-device step (tensorc shard) on this rank's shards of the same data and
initial parameters. The shardings are tensorc shard's: --mesh AXIS=SIZE,...
and --shard NAME=DIMS (per dim `_` or axes joined by +). Parameters and
optimizer state (w, w.momentum, ...) are updated from the step's `.next`
outputs. Rank 0 prints `step I loss L`. Inputs are drawn by name (the MLP
of examples/mlp.json, Inputs/bag_of_words.json; --model block: the
transformer block of examples/transformer_block.json). --head-blocked
NAME=PARTS gives NAME (and its optimizer state) in the head-blocked column
order `--shard tp` takes a fused projection in (tensorc.head_blocked)."""
import argparse

import numpy as np

import tensorc

parser = argparse.ArgumentParser()
parser.add_argument("artifact")
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--mesh", default="")
parser.add_argument("--shard", action="append", default=[])
parser.add_argument("--model", default="mlp", choices=["mlp", "block"])
parser.add_argument("--head-blocked", action="append", default=[])
args = parser.parse_args()
head_blocked = {name: int(parts) for name, parts in (item.split("=") for item in args.head_blocked)}

rank = tensorc.launched_rank()
shardings = dict(item.split("=", 1) for item in args.shard)


def shard_of(value, dims):
    """This rank's piece of a global value (tensorc.shard_of; the whole in one process)."""
    return tensorc.shard_of(value, dims, args.mesh, rank) if args.mesh else value


exe = tensorc.Executable.load(args.artifact)
rng = np.random.default_rng(0)
data = {
    "x": rng.uniform(-1, 1, (args.batch, 784)).astype(np.float32),
    "labels": rng.integers(0, 10, (args.batch,)).astype(np.int64),
    "w1": (rng.uniform(-1, 1, (784, 128)) * 0.05).astype(np.float32),
    "b1": np.zeros(128, np.float32),
    "w2": (rng.uniform(-1, 1, (128, 10)) * 0.1).astype(np.float32),
    "b2": np.zeros(10, np.float32),
    # Inputs/bag_of_words.json: word ids (0 is padding) into a 16-row table.
    "ids": rng.integers(0, 16, (args.batch, 4)).astype(np.int64),
    "table": rng.uniform(-1, 1, (16, 32)).astype(np.float32),
    "head_w": (rng.uniform(-1, 1, (32, 10)) * 0.3).astype(np.float32),
    "head_b": np.zeros(10, np.float32),
}
if args.model == "block":
    f = lambda *shape: (rng.uniform(-1, 1, shape) * 0.2).astype(np.float32)
    data = {"x": f(args.batch, 4, 64), "ln1_w": 1 + f(64), "ln1_b": f(64), "attn_w": f(64, 192), "attn_b": f(192),
            "proj_w": f(64, 64), "proj_b": f(64), "ln2_w": 1 + f(64), "ln2_b": f(64), "fc_w": f(64, 256),
            "fc_b": f(256), "fc_proj_w": f(256, 64), "fc_proj_b": f(64)}
inputs = {}
for name in exe.inputs:
    name = name[0] if isinstance(name, tuple) else getattr(name, "name", name)
    value = data[name] if name in data else np.zeros_like(data[name.split(".")[0]])
    if name.split(".")[0] in head_blocked:
        value = tensorc.head_blocked(value, head_blocked[name.split(".")[0]])
    inputs[name] = shard_of(value, shardings.get(name, [[]] * value.ndim))
session = exe.session()
for step in range(args.steps):
    out = session.run(**inputs)
    loss = float(np.from_dlpack(out["loss"]))
    if rank == 0:
        print("step %d loss %.7g" % (step, loss), flush=True)
    for name in list(inputs):
        if name + ".next" in out:
            inputs[name] = np.array(np.from_dlpack(out[name + ".next"]))
