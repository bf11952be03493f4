"""A graph file of a [80, 80] mask (past what constant folding evaluates) built by N assignments to 2-D slices
(what functionalization makes of `m[h0:h1, w0:w1] = k` in a loop): each
step reads the mask before it twice (its slice and itself). Then the mask
times an input. usage: slice-assignments.py N"""
import json
import sys

steps = int(sys.argv[1])
SIZE, PIECE = 80, 20
nodes = [{"name": "m0", "op": "zeros", "attrs": {"shape": [SIZE, SIZE], "dtype": "f32"}}]


def add(name, op, args, attrs=None):
    node = {"name": name, "op": op, "args": args}
    if attrs:
        node["attrs"] = attrs
    nodes.append(node)
    return name


def scatter(base, src, dim, start, end, tag):
    """base with base[start:end] along dim replaced by src (pad + where)."""
    size = SIZE
    pads = [0, 0, 0, 0]
    pads[2 * (1 - dim)], pads[2 * (1 - dim) + 1] = start, size - end
    placed = add(tag + "_placed", "pad", [src], {"pads": pads})
    at = add(tag + "_at", "iota", [], {"end": size})
    at = add(tag + "_along", "reshape", [at], {"shape": [size, 1] if dim == 0 else [size]})
    inside = add(tag + "_inside", "logical_and", [add(tag + "_from", "ge", [at, start]),
                                                  add(tag + "_to", "lt", [at, end])])
    return add(tag, "where", [inside, placed, base])


mask = "m0"
for k in range(steps):
    h0, w0 = (k * 13) % (SIZE - PIECE), (k * 29) % (SIZE - PIECE)
    rows = add(f"rows{k}", "slice", [mask], {"axes": [0], "starts": [h0], "ends": [h0 + PIECE]})
    fill = add(f"fill{k}", "full", [], {"shape": [PIECE, PIECE], "value": float(k + 1), "dtype": "f32"})
    inner = scatter(rows, fill, 1, w0, w0 + PIECE, f"inner{k}")
    mask = scatter(mask, inner, 0, h0, h0 + PIECE, f"mask{k + 1}")
add("out", "mul", [mask, "x"])
print(json.dumps({"format": "tensorc.graph", "version": 1, "name": "slice_assignments",
                  "inputs": [{"name": "x", "dtype": "f32", "shape": [SIZE, SIZE]}], "nodes": nodes,
                  "outputs": ["out"]}))
