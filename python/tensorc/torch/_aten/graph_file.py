"""A tensorc graph file (docs/graph-format.md) built node by node."""
import math
import re

import torch

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.bool: "i1",
}


class Unsupported(Exception):
    """What keeps one ATen node out of a tensorc graph (it runs in PyTorch)."""


def dtype_name(dtype):
    name = DTYPES.get(dtype)
    if name is None:
        raise Unsupported(f"dtype {dtype}")
    return name


def literal(value, dtype):
    """A scalar operand of `dtype` (a graph file literal; non-finite floats
    spelled out)."""
    name = dtype_name(dtype)
    if dtype == torch.bool:
        return {"literal": bool(value), "dtype": name}
    if dtype.is_floating_point:
        v = float(value)
        if not math.isfinite(v):
            v = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return {"literal": v, "dtype": name}
    if isinstance(value, float) and not value.is_integer():
        raise Unsupported(f"the fractional scalar {value} as {dtype}")
    return {"literal": int(value), "dtype": name}


class GraphFile:
    def __init__(self, name):
        self.name = name
        self.inputs, self.nodes, self.outputs = [], [], []
        self.names = set()

    def unique(self, base):
        base = re.sub(r"[^A-Za-z0-9_.]", "_", base) or "v"
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def add_input(self, base, dtype, shape):
        name = self.unique(base)
        self.inputs.append({"name": name, "dtype": dtype_name(dtype), "shape": [int(d) for d in shape]})
        return name

    def add(self, op, args, attrs=None, base="v"):
        name = self.unique(base)
        node = {"name": name, "op": op, "args": list(args)}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        return name

    def json(self):
        return {"format": "tensorc.graph", "version": 1, "name": self.name, "inputs": self.inputs,
                "nodes": self.nodes, "outputs": self.outputs}
