"""PyTorch functions and modules with no tensorc op of their own, composed
of tensorc ops: activations (leaky_relu, elu, softplus, ...), losses (mse,
l1, smooth_l1, binary cross-entropy with logits, nll), normalizations
(group_norm, normalize), one_hot, pad, conv1d (as conv2d), nearest
upsampling by whole factors, and the functional forms of conv2d and
batch_norm (what Dynamo's graphs call once it inlines torch.nn's
modules). Each rule returns the value's reference; the last node carries
the fx node's name.

The compositions avoid what would be infinite on a path `where` does not
take (exp of a large input): the backward multiplies that path's gradient
by zero, and 0 * inf is NaN.
"""
import torch
import torch.nn.functional as F

from ._attention import encoder, encoder_layer, multihead_attention
from ._common import DTYPES, pair


class _Builder:
    """Adds nodes named after the fx node (`name_op<k>`; `last` the node's own name)."""

    def __init__(self, e, n):
        self.e, self.n, self.k = e, n, 0

    def __call__(self, op, *args, **attrs):
        self.k += 1
        return self.e.g.add(op, list(args), attrs or None, f"{self.n.name}_{op}{self.k}")

    def last(self, op, *args, **attrs):
        return self.e.g.add(op, list(args), attrs or None, self.n.name)


def _reduce(b, v, reduction):
    if reduction == "mean":
        return b.last("mean", v)
    if reduction == "sum":
        return b.last("sum", v)
    if reduction == "none":
        return v
    raise b.e.unsupported(f"reduction '{reduction}'")


# Activations of a reference x ----------------------------------------------

def leaky_relu(b, x, slope=0.01):
    return b.last("where", b("ge", x, 0.0), x, b("mul", x, float(slope)))


def hardtanh(b, x, lo=-1.0, hi=1.0):
    return b.last("clamp", x, min=float(lo), max=float(hi))


def elu(b, x, alpha=1.0):
    negative = b("mul", b("sub", b("exp", b("minimum", x, 0.0)), 1.0), float(alpha))
    return b.last("where", b("gt", x, 0.0), x, negative)


def _softplus(b, x, beta, threshold, last):
    bx = b("mul", x, float(beta)) if beta != 1 else x
    soft = b("log", b("add", b("exp", b("minimum", bx, float(threshold))), 1.0))
    if beta != 1:
        soft = b("div", soft, float(beta))
    return (b.last if last else b)("where", b("gt", bx, float(threshold)), x, soft)


def softplus(b, x, beta=1.0, threshold=20.0):
    return _softplus(b, x, beta, threshold, True)


def hardswish(b, x):
    return b.last("mul", x, b("div", b("clamp", b("add", x, 3.0), min=0.0, max=6.0), 6.0))


def hardsigmoid(b, x):
    return b.last("clamp", b("add", b("div", x, 6.0), 0.5), min=0.0, max=1.0)


def mish(b, x):
    return b.last("mul", x, b("tanh", _softplus(b, x, 1.0, 20.0, False)))


def logsigmoid(b, x):
    # min(x, 0) - log(1 + exp(-|x|)): no overflow either way.
    return b.last("sub", b("minimum", x, 0.0), b("log", b("add", b("exp", b("neg", b("abs", x))), 1.0)))


# Losses of references (input, target) -----------------------------------------

def mse_loss(b, x, t, reduction="mean"):
    d = b("sub", x, t)
    return _reduce(b, b("mul", d, d), reduction)


def l1_loss(b, x, t, reduction="mean"):
    return _reduce(b, b("abs", b("sub", x, t)), reduction)


def smooth_l1_loss(b, x, t, reduction="mean", beta=1.0):
    d = b("abs", b("sub", x, t))
    if beta == 0:
        return _reduce(b, d, reduction)
    quadratic = b("mul", b("mul", d, d), 0.5 / beta)
    return _reduce(b, b("where", b("lt", d, float(beta)), quadratic, b("sub", d, 0.5 * beta)), reduction)


def bce_with_logits(b, x, t, reduction="mean"):
    # max(x, 0) - x t + log(1 + exp(-|x|)), as PyTorch computes it.
    loss = b("add", b("sub", b("maximum", x, 0.0), b("mul", x, t)),
             b("log", b("add", b("exp", b("neg", b("abs", x))), 1.0)))
    return _reduce(b, loss, reduction)


def nll_loss(b, logp, t, logp_value, t_value, ignore_index=-100, reduction="mean"):
    """[N, C] log-probabilities, [N] class indices."""
    if logp_value.dim() != 2 or t_value.dim() != 1:
        raise b.e.unsupported("nll_loss of other than [N, C] inputs")
    n = t_value.shape[0]
    dt = DTYPES[t_value.dtype]
    valid = b("ne", t, {"literal": int(ignore_index), "dtype": dt})
    safe = b("where", valid, t, {"literal": 0, "dtype": dt})  # an ignored index would be out of range
    picked = b("reshape", b("gather", logp, b("reshape", safe, shape=[n, 1]), axis=1), shape=[n])
    loss = b("where", valid, b("neg", picked), 0.0)
    if reduction == "mean":  # over the targets not ignored (0/0: NaN when all are, as in PyTorch)
        count = b("sum", b("cast", valid, to=DTYPES[logp_value.dtype]))
        return b.last("div", b("sum", loss), count)
    return _reduce(b, loss, reduction)


# Normalizations and shapes ----------------------------------------------------

def group_norm(b, x, x_value, groups, w, bias, eps):
    shape = list(x_value.shape)
    if len(shape) < 2 or shape[1] % groups:
        raise b.e.unsupported(f"group_norm of {shape} in {groups} groups")
    rest = 1
    for d in shape[1:]:
        rest *= d
    grouped = b("reshape", x, shape=[shape[0], groups, rest // groups])
    normed = b("layer_norm", grouped, axis=-1, eps=float(eps))
    if w is None and bias is None:
        return b.last("reshape", normed, shape=shape)
    y = b("reshape", normed, shape=shape)
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    if w is not None:
        y = b("mul", y, b("reshape", w, shape=per_channel)) if bias is not None else \
            b.last("mul", y, b("reshape", w, shape=per_channel))
    if bias is not None:
        y = b.last("add", y, b("reshape", bias, shape=per_channel))
    return y


def normalize(b, x, p=2.0, dim=1, eps=1e-12):
    if p != 2:
        raise b.e.unsupported(f"normalize with p={p} (only 2)")
    norm = b("sqrt", b("sum", b("mul", x, x), axes=[int(dim)], keepdim=True))
    return b.last("div", x, b("maximum", norm, float(eps)))


def one_hot(b, t, classes):
    hot = b("eq", b("unsqueeze", t, axis=-1), b("iota", end=int(classes), dtype="i64"))
    return b.last("cast", hot, to="i64")


# Creation, products and shapes ---------------------------------------------------

def _filled(value):
    """zeros_like/ones_like/full_like and Tensor.new_zeros/new_ones/new_full:
    a `full` of the result's shape and dtype (the operand's values unused)."""
    def rule(e, n):
        out = e.out(n)
        v = value if value is not None else e.arg(n, 1, "fill_value")
        if isinstance(v, torch.fx.Node):
            raise e.unsupported("a fill value that is a tensor")
        return e.g.add("full", [], {"shape": list(out.shape), "value": float(v), "dtype": DTYPES[out.dtype]}, n.name)
    return rule


def _new_full(e, n):
    out = e.out(n)
    v = e.arg(n, 2, "fill_value")
    return e.g.add("full", [], {"shape": list(out.shape), "value": float(v), "dtype": DTYPES[out.dtype]}, n.name)


def _addmm(e, n):
    """addmm/baddbmm: beta * input + alpha * (a @ b)."""
    b = _Builder(e, n)
    beta, alpha = e.arg(n, 3, "beta", 1), e.arg(n, 4, "alpha", 1)
    prod = b("matmul", e.ref(e.arg(n, 1, "mat1", e.arg(n, 1, "batch1"))), e.ref(e.arg(n, 2, "mat2", e.arg(n, 2, "batch2"))))
    if alpha != 1:
        prod = b("mul", prod, float(alpha))
    base = _x(e, n) if beta == 1 else b("mul", _x(e, n), float(beta))
    if beta == 0:
        return b.last("add", prod, 0.0) if alpha == 1 else prod
    return b.last("add", base, prod)


def _std(e, n):
    from ._ops import _var
    b = _Builder(e, n)
    return b.last("sqrt", _var(e, n, n.name + "_var"))


def _square(e, n):
    return e.g.add("mul", [_x(e, n), _x(e, n)], None, n.name)


def _narrow(e, n):
    x = e.val(n.args[0])
    dim, start, length = e.arg(n, 1, "dim"), e.arg(n, 2, "start"), e.arg(n, 3, "length")
    d = dim % x.dim()
    start = start % x.shape[d] if start < 0 else start
    return e.g.add("slice", [_x(e, n)], {"axes": [d], "starts": [int(start)], "ends": [int(start + length)]}, n.name)


def _unbind(e, n):
    x = e.val(n.args[0])
    d = e.arg(n, 1, "dim", 0) % x.dim()
    b = _Builder(e, n)
    shape = [s for k, s in enumerate(x.shape) if k != d]
    return [b("reshape", b("slice", _x(e, n), axes=[d], starts=[i], ends=[i + 1]), shape=shape)
            for i in range(x.shape[d])]


def _repeat(e, n):
    """Tensor.repeat / torch.tile: each dim's copies side by side (a broadcast
    with a unit dim before each dim, then a reshape)."""
    x = e.val(n.args[0])
    reps = list(n.args[1:]) if len(n.args) > 2 or isinstance(n.args[1], int) else list(n.args[1])
    reps = [int(r) for r in reps]
    shape = list(x.shape)
    if len(reps) < len(shape):  # tile: leading dims repeated once
        reps = [1] * (len(shape) - len(reps)) + reps
    shape = [1] * (len(reps) - len(shape)) + shape
    b = _Builder(e, n)
    spaced, wide = [], []
    for r, s_ in zip(reps, shape):
        spaced += [1, s_]
        wide += [r, s_]
    y = b("broadcast_to", b("reshape", _x(e, n), shape=spaced), shape=wide)
    return b.last("reshape", y, shape=list(e.out(n).shape))


def _repeat_interleave(e, n):
    reps, dim = e.arg(n, 1, "repeats"), e.arg(n, 2, "dim")
    if not isinstance(reps, int) or dim is None:
        raise e.unsupported("repeat_interleave with tensor repeats or no dim")
    x = e.val(n.args[0])
    d = dim % x.dim()
    b = _Builder(e, n)
    spaced = list(x.shape[:d + 1]) + [1] + list(x.shape[d + 1:])
    wide = list(x.shape[:d + 1]) + [reps] + list(x.shape[d + 1:])
    y = b("broadcast_to", b("reshape", _x(e, n), shape=spaced), shape=wide)
    return b.last("reshape", y, shape=list(e.out(n).shape))


def _outer(e, n):
    b = _Builder(e, n)
    return b.last("mul", b("unsqueeze", _x(e, n), axis=1), b("unsqueeze", e.ref(n.args[1]), axis=0))


def _dot(e, n):
    b = _Builder(e, n)
    return b.last("sum", b("mul", _x(e, n), e.ref(n.args[1])))


def _clamp_bound(which):
    def rule(e, n):
        v = n.args[1] if len(n.args) > 1 else n.kwargs.get(which)
        if isinstance(v, torch.fx.Node):
            raise e.unsupported(f"clamp_{which} with a tensor bound")
        return e.g.add("clamp", [_x(e, n)], {which: float(v)}, n.name)
    return rule


def _addc(op):
    """addcmul/addcdiv: input + value * (t1 op t2)."""
    def rule(e, n):
        b = _Builder(e, n)
        value = n.kwargs.get("value", 1)
        t = b(op, e.ref(n.args[1]), e.ref(n.args[2]))
        if value != 1:
            t = b("mul", t, float(value))
        return b.last("add", _x(e, n), t)
    return rule


def _lerp(e, n):
    b = _Builder(e, n)
    w = n.args[2]
    w = e.ref(w) if isinstance(w, torch.fx.Node) else float(w)
    return b.last("add", _x(e, n), b("mul", b("sub", e.ref(n.args[1]), _x(e, n)), w))


def _triangle(upper):
    """tril/triu of a computed tensor: where(column - row <=/>= diagonal, x, 0)."""
    def rule(e, n):
        x = e.val(n.args[0])
        k = int(e.arg(n, 1, "diagonal", 0))
        rows, cols = x.shape[-2], x.shape[-1]
        b = _Builder(e, n)
        col = b("reshape", b("iota", end=cols), shape=[1, cols])
        row = b("reshape", b("iota", end=rows), shape=[rows, 1])
        offset = b("sub", col, row)
        keep = b("ge" if upper else "le", offset, {"literal": k, "dtype": "i64"})
        zero = {"literal": False if x.dtype == torch.bool else 0 if not x.is_floating_point() else 0.0,
                "dtype": DTYPES[x.dtype]}
        return b.last("where", keep, _x(e, n), zero)
    return rule


def _einsum(e, n):
    """torch.einsum of one or two operands without repeated labels in an
    operand or `...`: labels summed away first, then one batched matmul
    (batch = labels in both operands and the output, contracted = in both
    but not the output), then the output's order."""
    equation = n.args[0]
    operands = list(n.args[1:]) if len(n.args) > 2 or not isinstance(n.args[1], (list, tuple)) else list(n.args[1])
    spec = equation.replace(" ", "")
    if "->" not in spec or "." in spec:
        raise e.unsupported(f"einsum '{equation}' (give the output labels; no '...')")
    inputs, out = spec.split("->")
    terms = inputs.split(",")
    if len(terms) != len(operands) or len(terms) > 2 or any(len(set(t)) != len(t) for t in terms + [out]):
        raise e.unsupported(f"einsum '{equation}' (one or two operands, no repeated labels)")
    b = _Builder(e, n)
    sizes = {}
    for t, x in zip(terms, operands):
        for label, size in zip(t, e.val(x).shape):
            sizes[label] = size
    refs = []
    for k, (t, x) in enumerate(zip(terms, operands)):
        other = terms[1 - k] if len(terms) == 2 else ""
        alone = [i for i, label in enumerate(t) if label not in out and label not in other]
        ref = e.ref(x)
        if alone:  # summed before the product
            ref = b("sum", ref, axes=alone)
            t = "".join(label for i, label in enumerate(t) if i not in alone)
        refs.append((t, ref))
    if len(refs) == 1:
        t, ref = refs[0]
        perm = [t.index(label) for label in out]
        return b.last("permute", ref, dims=perm) if perm != list(range(len(perm))) else \
            b.last("reshape", ref, shape=[sizes[label] for label in out])
    (ta, ra), (tb, rb) = refs
    batch = [label for label in out if label in ta and label in tb]
    contracted = [label for label in ta if label in tb and label not in out]
    rows = [label for label in ta if label not in tb]
    cols = [label for label in tb if label not in ta]
    prod = lambda labels: int(torch.tensor([sizes[label] for label in labels], dtype=torch.int64).prod().item()) \
        if labels else 1

    def arrange(t, ref, order, shape):
        perm = [t.index(label) for label in order]
        if perm != list(range(len(perm))):
            ref = b("permute", ref, dims=perm)
        return b("reshape", ref, shape=shape)
    nb = prod(batch)
    a3 = arrange(ta, ra, batch + rows + contracted, [nb, prod(rows), prod(contracted)])
    b3 = arrange(tb, rb, batch + contracted + cols, [nb, prod(contracted), prod(cols)])
    c = b("reshape", b("matmul", a3, b3), shape=[sizes[label] for label in batch + rows + cols])
    have = batch + rows + cols
    perm = [have.index(label) for label in out]
    return b.last("permute", c, dims=perm) if perm != list(range(len(perm))) else \
        b.last("reshape", c, shape=[sizes[label] for label in out])


# Rules (function forms, then modules) ------------------------------------------

def _x(e, n):
    return e.ref(n.args[0])


def _function_rules():
    """{function: rule(e, n)} for the functional forms."""
    return {
        F.leaky_relu: lambda e, n: leaky_relu(_Builder(e, n), _x(e, n), e.arg(n, 1, "negative_slope", 0.01)),
        F.relu6: lambda e, n: hardtanh(_Builder(e, n), _x(e, n), 0.0, 6.0),
        F.hardtanh: lambda e, n: hardtanh(_Builder(e, n), _x(e, n), e.arg(n, 1, "min_val", -1.0),
                                          e.arg(n, 2, "max_val", 1.0)),
        F.elu: lambda e, n: elu(_Builder(e, n), _x(e, n), e.arg(n, 1, "alpha", 1.0)),
        F.softplus: lambda e, n: softplus(_Builder(e, n), _x(e, n), e.arg(n, 1, "beta", 1.0), e.arg(n, 2, "threshold", 20.0)),
        F.hardswish: lambda e, n: hardswish(_Builder(e, n), _x(e, n)),
        F.hardsigmoid: lambda e, n: hardsigmoid(_Builder(e, n), _x(e, n)),
        F.mish: lambda e, n: mish(_Builder(e, n), _x(e, n)),
        F.logsigmoid: lambda e, n: logsigmoid(_Builder(e, n), _x(e, n)),
        F.mse_loss: lambda e, n: mse_loss(_Builder(e, n), _x(e, n), e.ref(e.arg(n, 1, "target")),
                                          e.arg(n, 4, "reduction", "mean")),
        F.l1_loss: lambda e, n: l1_loss(_Builder(e, n), _x(e, n), e.ref(e.arg(n, 1, "target")),
                                        e.arg(n, 4, "reduction", "mean")),
        F.smooth_l1_loss: lambda e, n: smooth_l1_loss(_Builder(e, n), _x(e, n), e.ref(e.arg(n, 1, "target")),
                                                      e.arg(n, 4, "reduction", "mean"), e.arg(n, 5, "beta", 1.0)),
        F.binary_cross_entropy_with_logits: _bce_fn,
        F.nll_loss: _nll_fn,
        F.group_norm: lambda e, n: group_norm(_Builder(e, n), _x(e, n), e.val(n.args[0]), e.arg(n, 1, "num_groups"),
                                              _opt(e, e.arg(n, 2, "weight")), _opt(e, e.arg(n, 3, "bias")),
                                              e.arg(n, 4, "eps", 1e-5)),
        F.normalize: lambda e, n: normalize(_Builder(e, n), _x(e, n), e.arg(n, 1, "p", 2.0), e.arg(n, 2, "dim", 1),
                                            e.arg(n, 3, "eps", 1e-12)),
        F.one_hot: lambda e, n: one_hot(_Builder(e, n), _x(e, n), e.out(n).shape[-1]),
        F.pad: _pad_fn,
        F.conv2d: _conv2d_fn,
        F.conv1d: _conv1d_fn,
        F.interpolate: _interpolate_fn,
        F.batch_norm: _batch_norm_fn,
        torch.zeros_like: _filled(0.0), torch.ones_like: _filled(1.0), torch.full_like: _filled(None),
        ("method", "new_zeros"): _filled(0.0), ("method", "new_ones"): _filled(1.0), ("method", "new_full"): _new_full,
        torch.addmm: _addmm, ("method", "addmm"): _addmm, torch.baddbmm: _addmm, ("method", "baddbmm"): _addmm,
        torch.std: _std, ("method", "std"): _std,
        torch.square: _square, ("method", "square"): _square,
        torch.narrow: _narrow, ("method", "narrow"): _narrow,
        torch.unbind: _unbind, ("method", "unbind"): _unbind,
        ("method", "repeat"): _repeat, torch.tile: _repeat, ("method", "tile"): _repeat,
        torch.repeat_interleave: _repeat_interleave, ("method", "repeat_interleave"): _repeat_interleave,
        torch.outer: _outer, ("method", "outer"): _outer, torch.dot: _dot, ("method", "dot"): _dot,
        torch.clamp_min: _clamp_bound("min"), ("method", "clamp_min"): _clamp_bound("min"),
        torch.clamp_max: _clamp_bound("max"), ("method", "clamp_max"): _clamp_bound("max"),
        torch.addcmul: _addc("mul"), ("method", "addcmul"): _addc("mul"),
        torch.addcdiv: _addc("div"), ("method", "addcdiv"): _addc("div"),
        torch.lerp: _lerp, ("method", "lerp"): _lerp,
        torch.tril: _triangle(False), ("method", "tril"): _triangle(False),
        torch.triu: _triangle(True), ("method", "triu"): _triangle(True),
        torch.einsum: _einsum,
    }


def _opt(e, v):
    return None if v is None else e.ref(v)


def _bce_fn(e, n):
    if e.arg(n, 2, "weight") is not None or e.arg(n, 5, "pos_weight") is not None:
        raise e.unsupported("binary_cross_entropy_with_logits with weight or pos_weight")
    return bce_with_logits(_Builder(e, n), _x(e, n), e.cast_to(e.arg(n, 1, "target"), e.out(n).dtype),
                           e.arg(n, 4, "reduction", "mean"))


def _nll_fn(e, n):
    if e.arg(n, 2, "weight") is not None:
        raise e.unsupported("nll_loss with class weights")
    t = e.arg(n, 1, "target")
    return nll_loss(_Builder(e, n), _x(e, n), e.ref(t), e.val(n.args[0]), e.val(t), e.arg(n, 4, "ignore_index", -100),
                    e.arg(n, 6, "reduction", "mean"))


def _pad_fn(e, n):
    mode, value = e.arg(n, 2, "mode", "constant"), e.arg(n, 3, "value", None)
    if mode != "constant":
        raise e.unsupported(f"pad mode '{mode}' (only constant)")
    attrs = {"pads": [int(p) for p in e.arg(n, 1, "pad")]}
    if value:
        attrs["value"] = float(value)
    return e.g.add("pad", [_x(e, n)], attrs, n.name)



def conv2d_refs(e, n, x, w, bias, stride, padding, dilation, groups):
    if isinstance(padding, str):
        raise e.unsupported(f"conv2d padding '{padding}' (give numbers)")
    attrs = {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": int(groups)}
    return e.g.add("conv2d", [x, w] + ([bias] if bias is not None else []), attrs, n.name)


def conv1d_refs(e, n, x, x_value, w, w_shape, bias, stride, padding, dilation, groups):
    """conv1d as conv2d over a height of 1: x [N, C, L] -> [N, C, 1, L], the
    weight [O, I, k] -> [O, I, 1, k] (views, no copies)."""
    if isinstance(padding, str):
        raise e.unsupported(f"conv1d padding '{padding}' (give a number)")
    one = lambda v: int(v[0]) if isinstance(v, (tuple, list)) else int(v)
    if x_value.dim() != 3:
        raise e.unsupported(f"conv1d of a {x_value.dim()}-D input (only N, C, L)")
    b = _Builder(e, n)
    x4 = b("reshape", x, shape=[x_value.shape[0], x_value.shape[1], 1, x_value.shape[2]])
    w4 = b("reshape", w, shape=[w_shape[0], w_shape[1], 1, w_shape[2]])
    attrs = {"stride": [1, one(stride)], "padding": [0, one(padding)], "dilation": [1, one(dilation)],
             "groups": int(groups)}
    y = b("conv2d", *([x4, w4] + ([bias] if bias is not None else [])), **attrs)
    return b.last("reshape", y, shape=list(e.out(n).shape))


def _conv1d_fn(e, n):
    a = e.arg
    w = a(n, 1, "weight")
    return conv1d_refs(e, n, _x(e, n), e.val(n.args[0]), e.ref(w), list(e.val(w).shape), _opt(e, a(n, 2, "bias")),
                       a(n, 3, "stride", 1), a(n, 4, "padding", 0), a(n, 5, "dilation", 1), a(n, 6, "groups", 1))


def upsample_nearest(e, n, x, x_value, mode):
    """Nearest upsampling by whole factors: each element repeated (a
    broadcast of the input with a unit dim after each spatial dim)."""
    if mode != "nearest":
        raise e.unsupported(f"interpolate mode '{mode}' (only nearest)")
    ins, outs = list(x_value.shape), list(e.out(n).shape)
    if len(ins) < 3 or ins[:2] != outs[:2] or any(o % i for i, o in zip(ins[2:], outs[2:])):
        raise e.unsupported(f"interpolate from {ins} to {outs} (only by whole factors)")
    b = _Builder(e, n)
    spaced, wide = ins[:2], ins[:2]
    for i, o in zip(ins[2:], outs[2:]):
        spaced += [i, 1]
        wide += [i, o // i]
    y = b("broadcast_to", b("reshape", x, shape=spaced), shape=wide)
    return b.last("reshape", y, shape=outs)


def _interpolate_fn(e, n):
    if e.arg(n, 4, "align_corners") or e.arg(n, 6, "antialias", False):
        raise e.unsupported("interpolate with align_corners or antialias")
    return upsample_nearest(e, n, _x(e, n), e.val(n.args[0]), e.arg(n, 3, "mode", "nearest"))


def _conv2d_fn(e, n):
    a = e.arg
    return conv2d_refs(e, n, _x(e, n), e.ref(a(n, 1, "weight")), _opt(e, a(n, 2, "bias")), a(n, 3, "stride", 1),
                       a(n, 4, "padding", 0), a(n, 5, "dilation", 1), a(n, 6, "groups", 1))


def batch_norm_refs(e, n, x, mean, var, w, bias, training, momentum, eps):
    """batch_norm of references; in training mode the running statistics'
    new values are state outputs for the graph inputs `mean` and `var`."""
    if training and momentum is None:
        raise e.unsupported("batch norm with a cumulative moving average (momentum=None)")
    if w is None and bias is not None:
        raise e.unsupported("batch norm with a bias but no weight")
    args = [x, mean, var] + [r for r in (w, bias) if r is not None]
    attrs = {"eps": float(eps)} if eps != 1e-5 else {}
    if training:
        if mean not in e.g.sources or var not in e.g.sources:
            raise e.unsupported("training-mode batch norm of running statistics that are not inputs or buffers")
        attrs.update({"training": True, "momentum": float(momentum)})
    name = e.g.add("batch_norm", args, attrs or None, n.name)
    if training:
        e.g.state += [(mean, f"{name}:1"), (var, f"{name}:2")]
    return f"{name}:0"


def _batch_norm_fn(e, n):
    a = e.arg
    mean, var = a(n, 1, "running_mean"), a(n, 2, "running_var")
    if mean is None or var is None:
        raise e.unsupported("batch norm without running statistics")
    return batch_norm_refs(e, n, _x(e, n), e.ref(mean), e.ref(var), _opt(e, a(n, 3, "weight")),
                           _opt(e, a(n, 4, "bias")), a(n, 5, "training", False), a(n, 6, "momentum", 0.1),
                           a(n, 7, "eps", 1e-5))


def _module_rules():
    """{module type: rule(e, n, m)}."""
    nn = torch.nn

    def act(f, *attrs):
        return lambda e, n, m: f(_Builder(e, n), _x(e, n), *[getattr(m, k) for k in attrs])

    def loss(f, *attrs):
        return lambda e, n, m: f(_Builder(e, n), _x(e, n), e.cast_to(n.args[1], e.out(n).dtype), m.reduction,
                                 *[getattr(m, k) for k in attrs])

    def bce(e, n, m):
        if m.weight is not None or m.pos_weight is not None:
            raise e.unsupported("BCEWithLogitsLoss with weight or pos_weight")
        return loss(bce_with_logits)(e, n, m)

    def nll(e, n, m):
        if m.weight is not None:
            raise e.unsupported("NLLLoss with class weights")
        t = n.args[1]
        return nll_loss(_Builder(e, n), _x(e, n), e.ref(t), e.val(n.args[0]), e.val(t), m.ignore_index, m.reduction)

    def gn(e, n, m):
        w = e.param_input(f"{n.target}.weight") if m.affine else None
        bias = e.param_input(f"{n.target}.bias") if m.affine else None
        return group_norm(_Builder(e, n), _x(e, n), e.val(n.args[0]), m.num_groups, w, bias, m.eps)

    def conv1d(e, n, m):
        if m.padding_mode != "zeros":
            raise e.unsupported(f"conv1d padding mode '{m.padding_mode}'")
        bias = e.param_input(f"{n.target}.bias") if m.bias is not None else None
        return conv1d_refs(e, n, _x(e, n), e.val(n.args[0]), e.param_input(f"{n.target}.weight"),
                           list(m.weight.shape), bias, m.stride, m.padding, m.dilation, m.groups)

    def upsample(e, n, m):
        if getattr(m, "align_corners", None):
            raise e.unsupported("Upsample with align_corners")
        return upsample_nearest(e, n, _x(e, n), e.val(n.args[0]), m.mode)

    return {
        nn.MultiheadAttention: multihead_attention,
        nn.TransformerEncoderLayer: encoder_layer,
        nn.TransformerEncoder: encoder,
        nn.Conv1d: conv1d,
        nn.Upsample: upsample,
        nn.LeakyReLU: act(leaky_relu, "negative_slope"),
        nn.ReLU6: lambda e, n, m: hardtanh(_Builder(e, n), _x(e, n), 0.0, 6.0),
        nn.Hardtanh: act(hardtanh, "min_val", "max_val"),
        nn.ELU: act(elu, "alpha"),
        nn.Softplus: act(softplus, "beta", "threshold"),
        nn.Hardswish: act(hardswish),
        nn.Hardsigmoid: act(hardsigmoid),
        nn.Mish: act(mish),
        nn.LogSigmoid: act(logsigmoid),
        nn.MSELoss: loss(mse_loss),
        nn.L1Loss: loss(l1_loss),
        nn.SmoothL1Loss: loss(smooth_l1_loss, "beta"),
        nn.BCEWithLogitsLoss: bce,
        nn.NLLLoss: nll,
        nn.GroupNorm: gn,
    }


FUNCTION_RULES = _function_rules()
MODULE_RULES = _module_rules()
