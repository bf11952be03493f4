"""How each PyTorch function, tensor method and torch.nn module becomes
tensorc ops (the exporter's rules; docs/pytorch.md has the table). A rule
takes the exporter and the fx node (and the module) and returns the
value's reference."""
import builtins
import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from . import _composites
from ._common import DTYPES, literal as _literal, norm_axis as _norm_axis, pair


# Rules --------------------------------------------------------------------

def _binary(op):
    def rule(e, n):
        x, y = e.arg(n, 0, "input"), e.arg(n, 1, "other")
        alpha = n.kwargs.get("alpha", 1)
        if alpha != 1:
            y_ref = e.g.add("mul", [e.ref(y), alpha], None, n.name + "_alpha")
            return e.g.add(op, [e.ref(x), y_ref], None, n.name)
        return e.elementwise(n, op, [x, y])
    return rule


def _inplace(op):
    """x.add_(y) (sub_, mul_, div_) on a graph input or buffer: the new value
    is a state output the caller writes back into x, as PyTorch updates it
    in place (batch norm's num_batches_tracked += 1 in the functional form
    Dynamo captures); later reads of x see it."""
    binary = _binary(op)

    def rule(e, n):
        x = e.arg(n, 0, "input")
        target = e.ref(x) if isinstance(x, fx.Node) else None
        if target not in e.g.sources:
            raise e.unsupported(f"in-place {op} of a tensor that is not a graph input or buffer")
        ref = binary(e, n)
        e.g.state.append((target, ref))
        e.env[x] = ref
        return ref
    return rule


def _reversed(op):
    def rule(e, n):
        return e.elementwise(n, op, [n.args[1], n.args[0]])
    return rule


def _compare(op):
    def rule(e, n):
        x, y = n.args[0], n.args[1]
        tx, ty = e.val(x), e.val(y)
        dtype = torch.result_type(tx, ty) if isinstance(tx, torch.Tensor) or isinstance(ty, torch.Tensor) else None
        return e.elementwise(n, op, [x, y], dtype)
    return rule


def _unary(op, attrs=None):
    def rule(e, n):
        return e.g.add(op, [e.cast_to(n.args[0], e.out(n).dtype)], attrs, n.name)
    return rule


def _gelu(e, n):
    approximate = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    return e.g.add("gelu", [e.ref(n.args[0])], {"approximate": approximate} if approximate != "none" else None,
                   n.name)


def _softmax(op):
    def rule(e, n):
        x = n.args[0]
        dim = e.arg(n, 1, "dim")
        if dim is None:
            raise e.unsupported("softmax without dim")
        src = e.cast_to(x, e.out(n).dtype)
        return e.g.add(op, [src], {"axis": int(dim)}, n.name)
    return rule


def _identity(e, n):
    return e.ref(n.args[0])


def _to(e, n):
    x = n.args[0]
    if e.out(n).dtype == e.val(x).dtype:
        return e.ref(x)
    return e.g.add("cast", [e.ref(x)], {"to": DTYPES[e.out(n).dtype]}, n.name)


def _reshape_to_out(e, n):
    return e.g.add("reshape", [e.ref(n.args[0])], {"shape": list(e.out(n).shape)}, n.name)


def _unsqueeze(e, n):
    dim = e.arg(n, 1, "dim")
    return e.g.add("unsqueeze", [e.ref(n.args[0])], {"axis": _norm_axis(int(dim), e.out(n).dim())}, n.name)


def _broadcast(e, n):
    if tuple(e.val(n.args[0]).shape) == tuple(e.out(n).shape):
        return e.ref(n.args[0])
    return e.g.add("broadcast_to", [e.ref(n.args[0])], {"shape": list(e.out(n).shape)}, n.name)


def _permute(e, n):
    dims = n.args[1:] if len(n.args) > 2 or not isinstance(e.arg(n, 1, "dims"), (list, tuple)) else n.args[1]
    if not dims:
        dims = n.kwargs["dims"]
    rank = e.val(n.args[0]).dim()
    return e.g.add("permute", [e.ref(n.args[0])], {"dims": [_norm_axis(int(d), rank) for d in dims]}, n.name)


def _transpose(e, n):
    rank = e.val(n.args[0]).dim()
    d0, d1 = _norm_axis(int(e.arg(n, 1, "dim0")), rank), _norm_axis(int(e.arg(n, 2, "dim1")), rank)
    if d0 == d1:
        return e.ref(n.args[0])
    return e.g.add("transpose", [e.ref(n.args[0])], {"dim0": d0, "dim1": d1}, n.name)


def _t(e, n):
    if e.val(n.args[0]).dim() < 2:
        return e.ref(n.args[0])
    return e.g.add("transpose", [e.ref(n.args[0])], {"dim0": 0, "dim1": 1}, n.name)


def _reduction(op):
    def rule(e, n):
        x = n.args[0]
        dim = e.arg(n, 1, "dim")
        keepdim = bool(e.arg(n, 2, "keepdim", False))
        if n.kwargs.get("dtype") is not None:
            raise e.unsupported("reduction with dtype=")
        attrs = {}
        rank = e.val(x).dim()
        if dim is not None:
            dims = [dim] if isinstance(dim, int) else list(dim)
            attrs["axes"] = [_norm_axis(int(d), rank) for d in dims]
            if keepdim:
                attrs["keepdim"] = True
        return e.g.add(op, [e.cast_to(x, e.out(n).dtype)], attrs or None, n.name)
    return rule


def _max_or_min(op):
    def rule(e, n):
        if len(n.args) == 2 and isinstance(n.args[1], fx.Node):  # elementwise torch.max(a, b)
            return e.elementwise(n, "maximum" if op == "max" else "minimum", [n.args[0], n.args[1]])
        dim = e.arg(n, 1, "dim")
        if dim is None:
            return e.g.add(op, [e.ref(n.args[0])], None, n.name)
        # Along a dim: (values, indices), indexed or read as .values/.indices
        # (the first extreme's index on ties, as PyTorch).
        axis = _norm_axis(int(dim), e.val(n.args[0]).dim())
        keep = {"keepdim": True} if e.arg(n, 2, "keepdim", False) else {}
        values = e.g.add(op, [e.ref(n.args[0])], {"axes": [axis], **keep}, n.name + "_values")
        indices = e.g.add("arg" + op, [e.ref(n.args[0])], {"axis": axis, **keep}, n.name + "_indices")
        return [values, indices]
    return rule


def _attribute(e, n):
    obj, name = n.args[0], n.args[1]
    if isinstance(e.env.get(obj), list) and name in ("values", "indices"):  # max/min along a dim
        return e.env[obj][0 if name == "values" else 1]
    raise e.unsupported(f"attribute '{name}'")


def _var(e, n, name=None):
    x = n.args[0]
    dim = e.arg(n, 1, "dim")
    unbiased = n.kwargs.get("unbiased", True)
    correction = n.kwargs.get("correction", 1 if unbiased else 0)
    attrs = {"correction": int(correction)}
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        attrs["axes"] = [_norm_axis(int(d), e.val(x).dim()) for d in dims]
    if n.kwargs.get("keepdim", False):
        attrs["keepdim"] = True
    return e.g.add("var", [e.ref(x)], attrs, name or n.name)


def _arg_reduction(op):
    def rule(e, n):
        dim = e.arg(n, 1, "dim")
        attrs = {}
        if dim is not None:
            attrs["axis"] = _norm_axis(int(dim), e.val(n.args[0]).dim())
        if e.arg(n, 2, "keepdim", False):
            attrs["keepdim"] = True
        return e.g.add(op, [e.ref(n.args[0])], attrs or None, n.name)
    return rule


def _matmul(e, n):
    return e.elementwise(n, "matmul", [n.args[0], n.args[1]])


def _linear_refs(e, n, x, w, b):
    wt = e.g.add("transpose", [w], {"dim0": 0, "dim1": 1}, n.name + "_wt")
    y = e.g.add("matmul", [x, wt], None, n.name if b is None else n.name + "_mm")
    return y if b is None else e.g.add("add", [y, b], None, n.name)


def _linear(e, n):
    b = e.arg(n, 2, "bias")
    return _linear_refs(e, n, e.ref(n.args[0]), e.ref(e.arg(n, 1, "weight")), None if b is None else e.ref(b))


def _layer_norm_refs(e, n, x, shape, w, b, eps):
    attrs = {"axis": -len(shape)}
    if eps != 1e-5:
        attrs["eps"] = float(eps)
    args = [x, w, b]
    while args and args[-1] is None:
        args.pop()
    return e.g.add("layer_norm", args, attrs, n.name)


def _layer_norm(e, n):
    shape = e.arg(n, 1, "normalized_shape")
    w, b = e.arg(n, 2, "weight"), e.arg(n, 3, "bias")
    return _layer_norm_refs(e, n, e.ref(n.args[0]), list(shape), None if w is None else e.ref(w),
                            None if b is None else e.ref(b), e.arg(n, 4, "eps", 1e-5))


def _cross_entropy_refs(e, n, x, t, weight, ignore_index, reduction, smoothing):
    if weight is not None:
        raise e.unsupported("cross_entropy with class weights")
    if e.val(t).is_floating_point():
        raise e.unsupported("cross_entropy with class probabilities as targets")
    attrs = {}
    if reduction != "mean":
        attrs["reduction"] = reduction
    if ignore_index != -100:
        attrs["ignore_index"] = int(ignore_index)
    if smoothing:
        attrs["label_smoothing"] = float(smoothing)
    return e.g.add("cross_entropy", [e.ref(x), e.ref(t)], attrs or None, n.name)


def _cross_entropy(e, n):
    return _cross_entropy_refs(e, n, n.args[0], e.arg(n, 1, "target"), e.arg(n, 2, "weight"),
                               e.arg(n, 4, "ignore_index", -100), e.arg(n, 6, "reduction", "mean"),
                               e.arg(n, 7, "label_smoothing", 0.0))


def _embedding_attrs(e, padding_idx, max_norm, scale_grad_by_freq, rows):
    """embedding's attributes: padding_idx (its row gets no gradient, as in PyTorch)."""
    if max_norm is not None:
        raise e.unsupported("embedding with max_norm")
    if scale_grad_by_freq:
        raise e.unsupported("embedding with scale_grad_by_freq")
    if padding_idx is None:
        return None
    return {"padding_idx": int(padding_idx) + rows if padding_idx < 0 else int(padding_idx)}


def _embedding(e, n):
    weight = e.arg(n, 1, "weight")
    attrs = _embedding_attrs(e, e.arg(n, 2, "padding_idx"), e.arg(n, 3, "max_norm"), e.arg(n, 5, "scale_grad_by_freq"),
                             e.out(weight).shape[0])
    return e.g.add("embedding", [e.ref(n.args[0]), e.ref(weight)], attrs, n.name)


def _dropout_fn(e, n):
    p = e.arg(n, 1, "p", 0.5)
    training = e.arg(n, 2, "training", True)
    if e.arg(n, 3, "inplace", False) and training and p != 0:
        raise e.unsupported("in-place dropout in training mode")
    if not training or p == 0:
        return e.ref(n.args[0])
    return e.dropout(n, e.ref(n.args[0]), p)


def _sdpa(e, n):
    q, k, v = n.args[0], e.arg(n, 1, "key"), e.arg(n, 2, "value")
    mask = e.arg(n, 3, "attn_mask")
    if e.arg(n, 4, "dropout_p", 0.0):
        raise e.unsupported("attention dropout")
    attrs = {}
    if e.arg(n, 5, "is_causal", False):
        attrs["is_causal"] = True
    scale = n.kwargs.get("scale")
    if scale is not None:
        attrs["scale"] = float(scale)
    args = [e.ref(q), e.ref(k), e.ref(v)] + ([e.ref(mask)] if mask is not None else [])
    return e.g.add("scaled_dot_product_attention", args, attrs or None, n.name)


def _where(e, n):
    c, x, y = n.args[0], n.args[1], n.args[2]
    return e.g.add("where", [e.ref(c), e.cast_to(x, e.out(n).dtype), e.cast_to(y, e.out(n).dtype)], None, n.name)


def _masked_fill(e, n):
    x, mask, value = n.args[0], n.args[1], n.args[2]
    if isinstance(value, fx.Node):
        value_ref = e.ref(value)
    else:
        v = _literal(float(value) if e.out(n).dtype.is_floating_point else value)
        value_ref = {"literal": v["literal"] if isinstance(v, dict) else v, "dtype": DTYPES[e.out(n).dtype]}
    return e.g.add("where", [e.ref(mask), value_ref, e.ref(x)], None, n.name)


def _clamp(e, n):
    lo, hi = e.arg(n, 1, "min"), e.arg(n, 2, "max")
    if isinstance(lo, fx.Node) or isinstance(hi, fx.Node):
        raise e.unsupported("clamp with tensor bounds")
    attrs = {}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    return e.g.add("clamp", [e.ref(n.args[0])], attrs, n.name)


def _cat(e, n):
    tensors = e.arg(n, 0, "tensors")
    dim = e.arg(n, 1, "dim", 0)
    rank = e.out(n).dim()
    return e.g.add("concat", [e.cast_to(t, e.out(n).dtype) for t in tensors], {"axis": _norm_axis(int(dim), rank)},
                   n.name)


def _stack(e, n):
    tensors = e.arg(n, 0, "tensors")
    dim = _norm_axis(int(e.arg(n, 1, "dim", 0)), e.out(n).dim())
    parts = [e.g.add("unsqueeze", [e.ref(t)], {"axis": dim}, n.name + "_u") for t in tensors]
    return e.g.add("concat", parts, {"axis": dim}, n.name)


def _split(e, n):
    outs = e.out(n)
    x = e.val(n.args[0])
    dim = e.arg(n, 2, "dim", 0)
    axis = _norm_axis(int(dim), x.dim())
    sizes = [int(t.shape[axis]) for t in outs]
    name = e.g.add("split", [e.ref(n.args[0])], {"sizes": sizes, "axis": axis}, n.name)
    return [f"{name}:{i}" for i in range(len(sizes))]


def _getitem(e, n):
    obj, idx = n.args
    if isinstance(e.env.get(obj), list):  # one result of a split/chunk
        return e.env[obj][idx]
    x = e.val(obj)
    if not isinstance(x, torch.Tensor):
        raise e.unsupported("indexing a non-tensor")
    items = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(i, (fx.Node, torch.Tensor, list)) for i in items):
        return _tensor_index(e, n, obj, x, items)
    # Expand Ellipsis, then slices and ints over the leading dims.
    n_dims = sum(1 for i in items if i is not None and i is not Ellipsis)
    expanded = []
    for i in items:
        if i is Ellipsis:
            expanded += [slice(None)] * (x.dim() - n_dims)
        else:
            expanded.append(i)
    axes, starts, ends, steps = [], [], [], []
    d = 0
    for i in expanded:
        if i is None:
            continue
        size = x.shape[d]
        if isinstance(i, int):
            s = _norm_axis(i, size)
            axes.append(d), starts.append(s), ends.append(s + 1), steps.append(1)
        elif isinstance(i, slice):
            s, t, st = i.indices(size)
            if st < 1:
                raise e.unsupported("negative slice steps")
            if (s, t, st) != (0, size, 1):
                axes.append(d), starts.append(s), ends.append(max(s, t)), steps.append(st)
        d += 1
    ref = e.ref(obj)
    if axes:
        attrs = {"axes": axes, "starts": starts, "ends": ends}
        if any(s != 1 for s in steps):
            attrs["steps"] = steps
        ref = e.g.add("slice", [ref], attrs, n.name + "_slice")
    if list(e.out(n).shape) != [
            ends[axes.index(k)] - starts[axes.index(k)] if k in axes else x.shape[k] for k in range(x.dim())] \
            or any(s != 1 for s in steps):
        ref = e.g.add("reshape", [ref], {"shape": list(e.out(n).shape)}, n.name)
    return ref


def _tensor_index(e, n, obj, x, items):
    """x[..., idx, ...] with one integer tensor (or list of ints) `idx` and
    full slices elsewhere: index_select along idx's dim of the flattened
    index, negative indices counted from the end (as PyTorch does), then
    the shape x.shape[:d] + idx.shape + x.shape[d + 1:]."""
    tensors = [k for k, i in enumerate(items) if isinstance(i, (fx.Node, torch.Tensor, list))]
    if len(tensors) != 1 or any(i is None for i in items):
        raise e.unsupported("indexing with several tensors or with None beside a tensor (advanced indexing)")
    k = tensors[0]
    if Ellipsis in items:
        at = items.index(Ellipsis)
        d = k if k < at else x.dim() - (len(items) - k)
    else:
        d = k
    if any(i != slice(None) for j, i in enumerate(items) if j != k and i is not Ellipsis):
        raise e.unsupported("a tensor index beside slices or integers (index with the tensor alone)")
    index = items[k]
    if isinstance(index, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in index):
            raise e.unsupported("indexing with a list of non-integers")
        value = torch.tensor(index, dtype=torch.int64)
        ref = e.g.constant(value, n.name + "_index")
    else:
        value = e.val(index)
        if value.dtype == torch.bool:
            raise e.unsupported("indexing with a boolean mask (its result's shape depends on the data)")
        if value.dtype not in (torch.int64, torch.int32):
            raise e.unsupported(f"indexing with a {value.dtype} tensor")
        ref = e.ref(index)
    size = x.shape[d]
    if value.dim() != 1:
        ref = e.g.add("reshape", [ref], {"shape": [value.numel()]}, n.name + "_flat")
    dt = DTYPES[value.dtype]
    negative = e.g.add("lt", [ref, {"literal": 0, "dtype": dt}], None, n.name + "_negative")
    wrapped = e.g.add("add", [ref, {"literal": size, "dtype": dt}], None, n.name + "_wrapped")
    ref = e.g.add("where", [negative, wrapped, ref], None, n.name + "_index")
    out = e.g.add("index_select", [e.ref(obj), ref], {"axis": d}, n.name)
    if value.dim() != 1:
        out = e.g.add("reshape", [out], {"shape": list(e.out(n).shape)}, n.name + "_shape")
    return out


def _index_select(e, n):
    x, index = n.args[0], e.arg(n, 2, "index")
    axis = _norm_axis(e.arg(n, 1, "dim"), max(e.val(x).dim(), 1))
    return e.g.add("index_select", [e.ref(x), e.ref(index)], {"axis": axis}, n.name)


def _gather(e, n):
    if e.arg(n, 3, "sparse_grad", False):
        raise e.unsupported("gather with sparse_grad")
    x, index = n.args[0], e.arg(n, 2, "index")
    axis = _norm_axis(e.arg(n, 1, "dim"), max(e.val(x).dim(), 1))
    return e.g.add("gather", [e.ref(x), e.ref(index)], {"axis": axis}, n.name)


def _flatten_module(e, n, m):
    return _reshape_to_out(e, n)


def _linear_module(e, n, m):
    w = e.param_input(f"{n.target}.weight")
    b = e.param_input(f"{n.target}.bias") if m.bias is not None else None
    return _linear_refs(e, n, e.ref(n.args[0]), w, b)


def _layer_norm_module(e, n, m):
    w = e.param_input(f"{n.target}.weight") if m.weight is not None else None
    b = e.param_input(f"{n.target}.bias") if m.bias is not None else None
    return _layer_norm_refs(e, n, e.ref(n.args[0]), list(m.normalized_shape), w, b, m.eps)


def _embedding_module(e, n, m):
    attrs = _embedding_attrs(e, m.padding_idx, m.max_norm, m.scale_grad_by_freq, m.num_embeddings)
    return e.g.add("embedding", [e.ref(n.args[0]), e.param_input(f"{n.target}.weight")], attrs, n.name)


def _dropout_module(e, n, m):
    if not m.training or m.p == 0:
        return e.ref(n.args[0])
    return e.dropout(n, e.ref(n.args[0]), m.p)


def _conv2d_module(e, n, m):
    if m.padding_mode != "zeros":
        raise e.unsupported(f"conv2d padding mode '{m.padding_mode}'")
    bias = e.param_input(f"{n.target}.bias") if m.bias is not None else None
    return _composites.conv2d_refs(e, n, e.ref(n.args[0]), e.param_input(f"{n.target}.weight"), bias, m.stride,
                                   m.padding, m.dilation, m.groups)



def _pool_refs(e, n, op, x, kernel, stride, padding, ceil_mode, extra):
    attrs = {"kernel_size": pair(kernel)}
    if stride is not None and pair(stride) != attrs["kernel_size"]:
        attrs["stride"] = pair(stride)
    if padding and pair(padding) != [0, 0]:
        attrs["padding"] = pair(padding)
    if ceil_mode:
        attrs["ceil_mode"] = True
    attrs.update(extra)
    return e.g.add(op, [x], attrs, n.name)


def _max_pool_module(e, n, m):
    if m.return_indices:
        raise e.unsupported("max_pool2d with return_indices")
    extra = {"dilation": pair(m.dilation)} if pair(m.dilation) != [1, 1] else {}
    return _pool_refs(e, n, "max_pool2d", e.ref(n.args[0]), m.kernel_size, m.stride or m.kernel_size, m.padding,
                      m.ceil_mode, extra)


def _avg_pool_module(e, n, m):
    if m.divisor_override is not None:
        raise e.unsupported("avg_pool2d with divisor_override")
    extra = {} if m.count_include_pad else {"count_include_pad": False}
    return _pool_refs(e, n, "avg_pool2d", e.ref(n.args[0]), m.kernel_size, m.stride or m.kernel_size, m.padding,
                      m.ceil_mode, extra)


def _max_pool_fn(e, n):
    if e.arg(n, 6, "return_indices", False):
        raise e.unsupported("max_pool2d with return_indices")
    kernel = e.arg(n, 1, "kernel_size")
    dilation = e.arg(n, 4, "dilation", 1)
    extra = {"dilation": pair(dilation)} if pair(dilation) != [1, 1] else {}
    return _pool_refs(e, n, "max_pool2d", e.ref(n.args[0]), kernel, e.arg(n, 2, "stride") or kernel,
                      e.arg(n, 3, "padding", 0), e.arg(n, 5, "ceil_mode", False), extra)


def _avg_pool_fn(e, n):
    if e.arg(n, 6, "divisor_override") is not None:
        raise e.unsupported("avg_pool2d with divisor_override")
    kernel = e.arg(n, 1, "kernel_size")
    extra = {} if e.arg(n, 5, "count_include_pad", True) else {"count_include_pad": False}
    return _pool_refs(e, n, "avg_pool2d", e.ref(n.args[0]), kernel, e.arg(n, 2, "stride") or kernel,
                      e.arg(n, 3, "padding", 0), e.arg(n, 4, "ceil_mode", False), extra)


def _adaptive_pool(op):
    """Adaptive pooling to an output size that divides the input's (or 1x1,
    a mean/max over H, W): a pool with kernel = stride = input / output,
    the windows PyTorch's adaptive pooling takes then."""
    def rule(e, n, m=None):
        size = m.output_size if m is not None else e.arg(n, 1, "output_size")
        if m is not None and getattr(m, "return_indices", False) or m is None and e.arg(n, 2, "return_indices", False):
            raise e.unsupported(f"adaptive {op} with return_indices")
        x = e.val(n.args[0])
        if x.dim() != 4:
            raise e.unsupported(f"adaptive {op} of a {x.dim()}-D input (only N, C, H, W)")
        hw = list(x.shape[2:])
        out = [hw[i] if v is None else int(v) for i, v in enumerate(size if isinstance(size, (tuple, list))
                                                                   else (size, size))]
        if out == [1, 1]:
            return e.g.add("mean" if op == "avg_pool2d" else "max", [e.ref(n.args[0])],
                           {"axes": [2, 3], "keepdim": True}, n.name)
        if any(o < 1 or h % o for h, o in zip(hw, out)):
            raise e.unsupported(f"adaptive {op} of {hw} to {out} (output sizes must divide the input's)")
        kernel = [h // o for h, o in zip(hw, out)]
        if kernel == [1, 1]:
            return e.ref(n.args[0])
        return _pool_refs(e, n, op, e.ref(n.args[0]), kernel, kernel, 0, False, {})
    return rule


def _batch_norm_module(e, n, m):
    if not m.track_running_stats:
        raise e.unsupported("batch norm without running statistics (track_running_stats=False)")
    w = e.param_input(f"{n.target}.weight") if m.affine else None
    b = e.param_input(f"{n.target}.bias") if m.affine else None
    ref = _composites.batch_norm_refs(e, n, e.ref(n.args[0]), e.param_input(f"{n.target}.running_mean"),
                                      e.param_input(f"{n.target}.running_var"), w, b, m.training, m.momentum, m.eps)
    if m.training and f"{n.target}.num_batches_tracked" in e.buffers:
        e.g.counters.append(f"{n.target}.num_batches_tracked")
    return ref


def _activation_module(op, attrs_of=lambda m: None):
    def rule(e, n, m):
        return e.g.add(op, [e.ref(n.args[0])], attrs_of(m), n.name)
    return rule


def _softmax_module(op):
    def rule(e, n, m):
        if m.dim is None:
            raise e.unsupported("softmax without dim")
        return e.g.add(op, [e.ref(n.args[0])], {"axis": int(m.dim)}, n.name)
    return rule


def _cross_entropy_module(e, n, m):
    return _cross_entropy_refs(e, n, n.args[0], n.args[1], m.weight, m.ignore_index, m.reduction,
                               getattr(m, "label_smoothing", 0.0))


_FUNCTIONS = {}


def _register(rule, *keys):
    for k in keys:
        _FUNCTIONS[k] = rule


def _m(name):
    return ("method", name)


for _op, _fns in {
        "add": (operator.add, operator.iadd, torch.add, _m("add")),
        "sub": (operator.sub, operator.isub, torch.sub, _m("sub")),
        "mul": (operator.mul, operator.imul, torch.mul, _m("mul")),
        "div": (operator.truediv, operator.itruediv, torch.div, _m("div")),
        "pow": (operator.pow, torch.pow, _m("pow")),
        "maximum": (torch.maximum, _m("maximum")),
        "minimum": (torch.minimum, _m("minimum")),
        "logical_and": (torch.logical_and, operator.and_),
        "logical_or": (torch.logical_or, operator.or_)}.items():
    _register(_binary(_op), *_fns)
_register(_reversed("sub"), _m("rsub"))
for _op in ("add", "sub", "mul", "div"):
    _register(_inplace(_op), _m(_op + "_"))
for _op, _fns in {"eq": (operator.eq, torch.eq, _m("eq")), "ne": (operator.ne, torch.ne, _m("ne")),
                  "lt": (operator.lt, torch.lt, _m("lt")), "le": (operator.le, torch.le, _m("le")),
                  "gt": (operator.gt, torch.gt, _m("gt")), "ge": (operator.ge, torch.ge, _m("ge"))}.items():
    _register(_compare(_op), *_fns)
for _op, _names in {"neg": ("neg",), "abs": ("abs",), "exp": ("exp",), "log": ("log",), "sqrt": ("sqrt",),
                    "rsqrt": ("rsqrt",), "reciprocal": ("reciprocal",), "tanh": ("tanh",),
                    "sigmoid": ("sigmoid",), "relu": ("relu",), "sin": ("sin",), "cos": ("cos",),
                    "erf": ("erf",), "floor": ("floor",), "ceil": ("ceil",), "sign": ("sign",),
                    "logical_not": ("logical_not",)}.items():
    for _name in _names:
        _register(_unary(_op), getattr(torch, _name), _m(_name))
_register(_unary("neg"), operator.neg)
_register(_unary("logical_not"), operator.invert)
_register(_unary("relu"), F.relu)
_register(_unary("silu"), F.silu)
_register(_unary("sigmoid"), F.sigmoid)
_register(_unary("tanh"), F.tanh)
_register(_gelu, F.gelu)
_register(_softmax("softmax"), F.softmax, torch.softmax, _m("softmax"))
_register(_softmax("log_softmax"), F.log_softmax, torch.log_softmax, _m("log_softmax"))
_register(_identity, _m("contiguous"), _m("clone"), _m("detach"), torch.clone)
_register(_to, _m("to"), _m("float"), _m("half"), _m("bfloat16"), _m("double"), _m("long"), _m("int"),
          _m("bool"), _m("type_as"))
_register(_reshape_to_out, _m("view"), _m("reshape"), torch.reshape, _m("flatten"), torch.flatten,
          _m("squeeze"), torch.squeeze, _m("view_as"), _m("reshape_as"))
_register(_unsqueeze, _m("unsqueeze"), torch.unsqueeze)
_register(_index_select, _m("index_select"), torch.index_select)
_register(_gather, _m("gather"), torch.gather)
_register(_broadcast, _m("expand"), _m("expand_as"), torch.broadcast_to)
_register(_permute, _m("permute"), torch.permute)
_register(_transpose, _m("transpose"), torch.transpose)
_register(_t, _m("t"), torch.t)
_register(_reduction("sum"), torch.sum, _m("sum"))
_register(_reduction("mean"), torch.mean, _m("mean"))
_register(_reduction("max"), torch.amax, _m("amax"))
_register(_reduction("min"), torch.amin, _m("amin"))
_register(_reduction("prod"), torch.prod, _m("prod"))
_register(_reduction("logsumexp"), torch.logsumexp, _m("logsumexp"))
_register(_max_or_min("max"), torch.max, _m("max"))
_register(_max_or_min("min"), torch.min, _m("min"))
_register(_var, torch.var, _m("var"))
_register(_arg_reduction("argmax"), torch.argmax, _m("argmax"))
_register(_arg_reduction("argmin"), torch.argmin, _m("argmin"))
_register(_matmul, torch.matmul, operator.matmul, _m("matmul"), torch.bmm, torch.mm, _m("bmm"), _m("mm"))
_register(_linear, F.linear)
_register(_layer_norm, F.layer_norm)
_register(_cross_entropy, F.cross_entropy)
_register(_embedding, F.embedding)
_register(_dropout_fn, F.dropout)
if hasattr(F, "scaled_dot_product_attention"):
    _register(_sdpa, F.scaled_dot_product_attention)
_register(_where, torch.where)
_register(_masked_fill, _m("masked_fill"))
_register(_clamp, torch.clamp, _m("clamp"), torch.clip, _m("clip"))
_register(_cat, torch.cat, getattr(torch, "concat", torch.cat))
_register(_stack, torch.stack)
_register(_split, torch.split, _m("split"), torch.chunk, _m("chunk"))
_register(_getitem, operator.getitem)
_register(_attribute, builtins.getattr)
_register(_max_pool_fn, F.max_pool2d)
_register(_avg_pool_fn, F.avg_pool2d)
_register(_adaptive_pool("avg_pool2d"), F.adaptive_avg_pool2d)
_register(_adaptive_pool("max_pool2d"), F.adaptive_max_pool2d)

_MODULES = {
    torch.nn.Linear: _linear_module,
    torch.nn.LayerNorm: _layer_norm_module,
    torch.nn.Embedding: _embedding_module,
    torch.nn.Dropout: _dropout_module,
    torch.nn.Conv2d: _conv2d_module,
    torch.nn.Identity: lambda e, n, m: e.ref(n.args[0]),
    torch.nn.Flatten: _flatten_module,
    torch.nn.ReLU: _activation_module("relu"),
    torch.nn.Tanh: _activation_module("tanh"),
    torch.nn.Sigmoid: _activation_module("sigmoid"),
    torch.nn.SiLU: _activation_module("silu"),
    torch.nn.GELU: _activation_module(
        "gelu", lambda m: {"approximate": m.approximate} if getattr(m, "approximate", "none") != "none" else None),
    torch.nn.MaxPool2d: _max_pool_module,
    torch.nn.AvgPool2d: _avg_pool_module,
    torch.nn.AdaptiveAvgPool2d: _adaptive_pool("avg_pool2d"),
    torch.nn.AdaptiveMaxPool2d: _adaptive_pool("max_pool2d"),
    torch.nn.BatchNorm1d: _batch_norm_module,
    torch.nn.BatchNorm2d: _batch_norm_module,
    torch.nn.BatchNorm3d: _batch_norm_module,
    torch.nn.Softmax: _softmax_module("softmax"),
    torch.nn.LogSoftmax: _softmax_module("log_softmax"),
    torch.nn.CrossEntropyLoss: _cross_entropy_module,
}
_FUNCTIONS.update(_composites.FUNCTION_RULES)
_MODULES.update(_composites.MODULE_RULES)
