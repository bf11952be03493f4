"""What the exporter's parts share: dtype names, literals, axes, the error."""
import math

import torch

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.bool: "i1",
}


class UnsupportedOp(Exception):
    """An op the exporter cannot map, with where it is in the model."""

    def __init__(self, what, path, line, why=""):
        self.what, self.path, self.line, self.why = what, path, line, why
        where = f" in module '{path}'" if path else ""
        at = f" at {line}" if line else ""
        super().__init__(f"tensorc.torch: unsupported op {what}{where}{at}" + (f": {why}" if why else ""))


def literal(v):
    """A graph file's scalar literal (non-finite floats spelled out)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return {"literal": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    return v


def norm_axis(a, rank):
    """A possibly negative axis as a position in [0, rank)."""
    return a + rank if a < 0 else a


def pair(v):
    """An int or a pair of ints (a kernel size, stride, padding) as a list of two."""
    return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]
