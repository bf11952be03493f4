"""A device's piece of a global tensor under a sharding, as `tensorc shard`
and `tensorc compile --mesh/--shard` write shardings (docs/sharding.md): a
program compiled for one device of a mesh takes its inputs' blocks and
returns its outputs' blocks; these give them from (and back to) the whole.

    mesh = "data=2,model=2"                   # --mesh: devices numbered row-major
    x_mine = tensorc.shard_of(x, "data,_", mesh)        # this process's block
    w_mine = tensorc.shard_of(w, "_,model", mesh, rank=3)
    w = tensorc.assemble([piece0, piece1, piece2, piece3], "_,model", mesh)

A dim's entry is `_` (whole) or mesh axes joined by `+` (split over them,
the first axis outermost); the report of `tensorc shard --report` lists each
input's and output's. Works on NumPy arrays and PyTorch tensors (anything
with shape, slicing and, for `assemble`, a concatenate)."""
import os

__all__ = ["parse_mesh", "parse_dims", "launched_rank", "shard_of", "assemble"]


def parse_mesh(mesh):
    """`"data=2,model=2"` -> [("data", 2), ("model", 2)]; a list of pairs
    passes through (checked)."""
    if isinstance(mesh, str):
        pairs = []
        for item in mesh.split(","):
            name, eq, size = item.partition("=")
            if not eq or not name or not size.strip().isdigit():
                raise ValueError(f"mesh {mesh!r}: {item!r} is not AXIS=SIZE")
            pairs.append((name.strip(), int(size)))
    else:
        pairs = [(str(n), int(s)) for n, s in mesh]
    names = [n for n, _ in pairs]
    if not pairs or len(set(names)) != len(names) or any(s < 1 for _, s in pairs):
        raise ValueError(f"mesh {mesh!r}: needs distinct axes of size >= 1")
    return pairs


def parse_dims(dims, rank):
    """`"data,_"` (or `[["data"], []]`) -> a list of axis lists, one per dim
    of a rank-`rank` tensor ("" for a scalar)."""
    if isinstance(dims, str):
        dims = [] if dims == "" else [[] if d.strip() == "_" else d.strip().split("+") for d in dims.split(",")]
    dims = [list(d) for d in dims]
    if len(dims) != rank:
        raise ValueError(f"sharding {dims!r} has {len(dims)} dim entries for a rank-{rank} tensor")
    return dims


def launched_rank():
    """This process's device under `tensorc launch` (RANK) or mpirun
    (OMPI_COMM_WORLD_RANK); 0 otherwise."""
    for name in ("RANK", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(name, ""):
            return int(os.environ[name])
    return 0


def _blocks(shape, dims, mesh, rank):
    """Per dim: (this device's block index, the number of blocks)."""
    pairs = parse_mesh(mesh)
    names = [n for n, _ in pairs]
    devices = 1
    for _, size in pairs:
        devices *= size
    if not 0 <= rank < devices:
        raise ValueError(f"rank {rank} is not a device of mesh {mesh!r} ({devices} devices)")
    coords, rest = [0] * len(pairs), rank
    for k in reversed(range(len(pairs))):
        coords[k], rest = rest % pairs[k][1], rest // pairs[k][1]
    out, used = [], set()
    for d, axes in enumerate(parse_dims(dims, len(shape))):
        index, count = 0, 1
        for axis in axes:
            if axis not in names:
                raise ValueError(f"sharding {dims!r}: axis {axis!r} is not in mesh {mesh!r}")
            if axis in used:
                raise ValueError(f"sharding {dims!r}: axis {axis!r} is used twice")
            used.add(axis)
            k = names.index(axis)
            index, count = index * pairs[k][1] + coords[k], count * pairs[k][1]
        out.append((index, count))
    return out


def shard_of(value, dims, mesh, rank=None):
    """Device `rank`'s block of the global `value` (default: launched_rank()),
    contiguous."""
    rank = launched_rank() if rank is None else rank
    shape = tuple(value.shape)
    index = []
    for d, (i, count) in enumerate(_blocks(shape, dims, mesh, rank)):
        if shape[d] % count:
            raise ValueError(f"sharding {dims!r}: dim {d} of size {shape[d]} does not split {count} ways")
        n = shape[d] // count
        index.append(slice(i * n, (i + 1) * n))
    piece = value[tuple(index)]
    if hasattr(piece, "contiguous"):
        return piece.contiguous()
    import numpy as np
    # ascontiguousarray makes a scalar 1-d: keep the block's shape.
    return np.ascontiguousarray(piece).reshape(tuple(piece.shape))


def assemble(pieces, dims, mesh):
    """The global tensor from every device's block (`pieces[r]` = device r's,
    as its run returned it); a replicated dim takes device order's first."""
    pairs = parse_mesh(mesh)
    devices = 1
    for _, size in pairs:
        devices *= size
    if len(pieces) != devices:
        raise ValueError(f"assemble: {len(pieces)} pieces for mesh {mesh!r} ({devices} devices)")
    rank = len(tuple(pieces[0].shape))
    first = {}  # block indices per dim -> the piece
    for r, piece in enumerate(pieces):
        key = tuple(i for i, _ in _blocks(tuple(piece.shape), dims, mesh, r))
        first.setdefault(key, piece)
    counts = [c for _, c in _blocks(tuple(pieces[0].shape), dims, mesh, 0)]
    torch_like = hasattr(pieces[0], "contiguous")
    if torch_like:
        import torch
        cat = lambda xs, axis: torch.cat(xs, dim=axis)  # noqa: E731
    else:
        import numpy as np
        cat = lambda xs, axis: np.concatenate(xs, axis=axis)  # noqa: E731

    def build(prefix, d):
        if d == rank:
            return first[tuple(prefix)]
        return cat([build(prefix + [i], d + 1) for i in range(counts[d])], d) if counts[d] > 1 \
            else build(prefix + [0], d + 1)
    return build([], 0)
