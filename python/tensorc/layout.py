"""Weight layouts the sharding presets take (docs/sharding.md, "Fused
projections"): under `--shard tp-head-blocked` a fused projection's weight (GPT-2's
c_attn: q | k | v along its output features) is split by heads, so its
columns come in head-blocked order, where device r's contiguous block is its
heads of every part. Works on anything with reshape and swapaxes (NumPy
arrays, PyTorch tensors)."""

__all__ = ["head_blocked", "from_head_blocked"]


def _transpose_blocks(w, outer, inner, axis):
    """`w` with its axis `axis` seen as [outer, inner, b] blocks taken as
    [inner, outer, b]."""
    w = w.swapaxes(axis, -1)
    lead, n = tuple(w.shape[:-1]), w.shape[-1]
    if outer < 1 or inner < 1 or n % (outer * inner):
        raise ValueError(f"head_blocked: {n} features do not split into {outer} x {inner} blocks")
    w = w.reshape(lead + (outer, inner, n // (outer * inner))).swapaxes(-3, -2).reshape(lead + (n,))
    return w.swapaxes(axis, -1)


def head_blocked(w, parts, groups=3, axis=-1):
    """`w` with its fused axis (`groups` equal parts, e.g. q, k, v) reordered
    for `parts`-way tensor parallelism: element g*(groups*b) + j*b + e of the
    result is element j*(parts*b) + g*b + e of `w` (b = features per part
    and device). `axis`: the fused axis (-1 for an [in, out] weight and its
    bias; 0 for PyTorch's nn.Linear [out, in])."""
    return _transpose_blocks(w, groups, parts, axis)


def from_head_blocked(w, parts, groups=3, axis=-1):
    """The inverse of head_blocked: back to the parts' order (a checkpoint's,
    PyTorch's)."""
    return _transpose_blocks(w, parts, groups, axis)
