"""ATen ops -> tensorc ops: the one table (docs/pytorch.md, "What is
lowered"). A rule takes the Lowering and the fx node (an ATen op with
fake-tensor values in node.meta["val"]) and returns the value's reference,
or a list of references for an op of several results; it raises
Unsupported for a form it cannot lower exactly (the node then runs in
PyTorch). Dtypes follow PyTorch's type promotion, made explicit with
casts: tensorc ops take operands of one dtype."""
import math
import operator

import torch
import torch.fx as fx

from .graph_file import GraphFile, Unsupported, dtype_name, literal

INT64_MAX = 2**63 - 1


def packet_name(target):
    """'add' for aten.add.Tensor; None for what is not an ATen op."""
    packet = getattr(target, "overloadpacket", None)
    return getattr(packet, "__name__", None) if packet is not None else None


def op_name(target):
    """'aten.add' for aten.add.Tensor, 'mylib.op' for a torch.library op."""
    schema = getattr(target, "_schema", None)
    return schema.name.replace("::", ".") if schema is not None else str(target)


def bind(node):
    """The node's arguments by the op schema's names, defaults filled in."""
    schema = node.target._schema
    out, positional = {}, list(node.args)
    for i, arg in enumerate(schema.arguments):
        if i < len(positional) and not arg.kwarg_only:
            out[arg.name] = positional[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        else:
            out[arg.name] = arg.default_value if hasattr(arg, "default_value") else None
    return out


def value(a):
    """A node's fake value (a tensor, or a tuple of them); numbers as they are.
    A tensor constant of the graph (get_attr) without one (PyTorch 1.13
    records none) is the constant itself."""
    if not isinstance(a, fx.Node):
        return a
    v = a.meta.get("val")
    if v is None and a.op == "get_attr" and a.graph.owning_module is not None:
        v = getattr(a.graph.owning_module, a.target, None)
    return v


def _norm(axis, rank):
    return axis + rank if axis < 0 else axis


def _stand_in(v):
    """A real object with v's promotion category (rank-0 or not) and dtype."""
    if isinstance(v, torch.Tensor):
        return torch.empty([1] * min(v.dim(), 1), dtype=v.dtype)
    return v


def result_type(*operands):
    vals = [_stand_in(value(a)) for a in operands if value(a) is not None]
    return torch.result_type(*vals) if len(vals) > 1 else (vals[0].dtype if isinstance(vals[0], torch.Tensor)
                                                           else torch.tensor(vals[0]).dtype)


class _Empty:
    """An input with no elements (a KV cache's `torch.tensor([])`)."""

    def __init__(self, shape):
        self.shape = shape


# The graph input training-mode dropouts draw their masks from (an i64
# scalar; the caller passes a fresh one per call from torch's generator):
# reserved, no other value takes the name.
SEED_INPUT = "tc_dropout_seed"


class Lowering:
    """One tensorc graph file built from ATen nodes."""

    def __init__(self, name):
        self.g = GraphFile(name)
        self.g.names.add(SEED_INPUT)
        self.env = {}
        self.dropouts = 0  # each dropout's own stream of the seed

    def seed(self):
        """The dropout seed input, added after the graph's other inputs."""
        if not any(i["name"] == SEED_INPUT for i in self.g.inputs):
            self.g.inputs.append({"name": SEED_INPUT, "dtype": "i64", "shape": []})
        return SEED_INPUT

    # values -----------------------------------------------------------------

    def add_input(self, node):
        v = value(node)
        if not isinstance(v, torch.Tensor):
            raise Unsupported(f"input '{node.name}' is a {type(v).__name__}, not a tensor")
        if any(int(d) < 1 for d in v.shape):
            # tensorc's tensors are not empty: not an input of the graph
            # file; an op that reads it fails to lower (cat skips it).
            self.env[node] = _Empty(list(v.shape))
            return None
        self.env[node] = self.g.add_input(node.name, v.dtype, v.shape)
        return self.env[node]

    def ref(self, a):
        r = self.env.get(a)
        if isinstance(r, _Empty):
            raise Unsupported(f"operand '{a.name}' is empty (shape {r.shape})")
        if not isinstance(r, str):
            raise Unsupported(f"operand '{getattr(a, 'name', a)}' is not a tensor of this graph")
        return r

    def has(self, a):
        """Whether the tensor node `a` is a value of this graph."""
        return isinstance(self.env.get(a), str)

    def operand(self, a, dtype):
        """A tensor node or a number as an operand of `dtype`."""
        if isinstance(a, fx.Node):
            r = self.ref(a)
            return self.cast(r, value(a).dtype, dtype)
        if isinstance(a, (bool, int, float)):
            return literal(a, dtype)
        raise Unsupported(f"operand {a!r}")

    def cast(self, ref, from_dtype, to_dtype, base="cast"):
        if from_dtype == to_dtype:
            return ref
        return self.g.add("cast", [ref], {"to": dtype_name(to_dtype)}, base)

    def out(self, node):
        v = value(node)
        if not isinstance(v, torch.Tensor):
            raise Unsupported("a result that is not one tensor")
        if v.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                           torch.bool):
            raise Unsupported(f"a result of dtype {v.dtype}")
        return v

    def add(self, node, op, args, attrs=None):
        return self.g.add(op, args, attrs, node.name)

    def elementwise(self, node, op, operands, dtype=None):
        dtype = dtype or self.out(node).dtype
        return self.add(node, op, [self.operand(a, dtype) for a in operands])

    def reshape(self, node, ref, shape):
        return self.g.add("reshape", [ref], {"shape": [int(d) for d in shape]}, node.name)

    # lowering ---------------------------------------------------------------

    def lower(self, node):
        if node.target is operator.getitem:
            results = self.env.get(node.args[0])
            if not isinstance(results, (list, tuple)):
                raise Unsupported(f"result {node.args[1]} of '{node.args[0].name}'")
            # A result tensorc does not compute (batch norm's saved
            # statistics, pooling indices) may be read by nothing.
            if results[node.args[1]] is None and node.users:
                raise Unsupported(f"result {node.args[1]} of '{node.args[0].name}' (only PyTorch computes it)")
            self.env[node] = results[node.args[1]]
            return
        name = packet_name(node.target)
        rule = RULES.get(name) if op_name(node.target).startswith("aten.") else None
        if rule is None:
            raise Unsupported(f"no lowering of {op_name(node.target)}" if name else f"not an ATen op: {node.target}")
        ref = rule(self, node)
        if isinstance(ref, str) and isinstance(value(node), torch.Tensor):
            self.out(node)
        self.env[node] = ref


def _binary(op):
    def rule(lw, n):
        a = bind(n)
        x, y = a["self"], a["other"]
        alpha = a.get("alpha", 1)
        dtype = lw.out(n).dtype
        if dtype == torch.bool and op in ("mul", "add", "maximum", "minimum") and alpha in (None, 1):
            # Booleans (PyTorch's isfinite is a product of two masks):
            # tensorc's arithmetic takes numbers; and / or are the same.
            logical = "logical_and" if op in ("mul", "minimum") else "logical_or"
            return lw.elementwise(n, logical, [x, y])
        wide = _wider_broadcast_operand(x, y, dtype) if op in ("add", "sub", "mul") else None
        if wide is not None:
            # A 16-bit tensor with a wider operand that broadcasts (timm
            # NFNet's f32 skipinit gain times a bf16 activation under
            # autocast): computed in the wider dtype, then rounded once. The
            # operand's gradient is then a sum in its own dtype, as eager's
            # autograd sums it (in the 16-bit dtype its 0-d value's gradient
            # was rounded to bf16 once summed: 13x eager's error).
            scaled = y if alpha in (None, 1) else \
                lw.g.add("mul", [lw.operand(y, wide), literal(alpha, wide)], None, n.name + "_alpha")
            y = lw.operand(y, wide) if scaled is y else scaled
            computed = lw.g.add(op, [lw.operand(x, wide), y], None, n.name + "_wide")
            return lw.add(n, "cast", [computed], {"to": dtype_name(dtype)})
        if alpha not in (None, 1):
            y = lw.g.add("mul", [lw.operand(y, dtype), literal(alpha, dtype)], None, n.name + "_alpha")
            return lw.add(n, op, [lw.operand(x, dtype), y])
        return lw.elementwise(n, op, [x, y])
    return rule


def _wider_broadcast_operand(x, y, dtype):
    """The dtype to compute a 16-bit floating result in where an operand is
    a floating tensor of a wider dtype with fewer elements than the result
    (it broadcasts: a 0-d parameter): f32 (an f64 one too: f64 arithmetic
    over a whole activation would be slow on a GPU, and f32 already sums its
    gradient unrounded), else None."""
    if dtype not in (torch.float16, torch.bfloat16):
        return None
    for a in (x, y):
        v = value(a) if isinstance(a, fx.Node) else None
        if isinstance(v, torch.Tensor) and v.dtype in (torch.float32, torch.float64):
            other = value(y if a is x else x)
            if isinstance(other, torch.Tensor) and v.numel() < other.numel():
                return torch.float32
    return None


def _rsub(lw, n):
    a = bind(n)
    dtype = lw.out(n).dtype
    y = lw.operand(a["self"], dtype)
    if a.get("alpha", 1) not in (None, 1):
        y = lw.g.add("mul", [y, literal(a["alpha"], dtype)], None, n.name + "_alpha")
    return lw.add(n, "sub", [lw.operand(a["other"], dtype), y])


def _integer_quotient(lw, n, x, y, dtype, floor):
    """x // y (floor) or trunc(x / y) of integer tensors x, y (refs of
    `dtype`), exactly: the floor of the f64 quotient, refined by the floor of
    the remainder's quotient, then corrected by one where the remainder
    x - q y leaves [0, y) (y > 0) or (y, 0] (y < 0); trunc adds one back
    where the exact quotient is negative and not whole. A zero divisor gives an unspecified value
    (PyTorch raises on the CPU)."""
    g = lw.g

    def op(name, args, tag):
        return g.add(name, args, None, n.name + tag)

    y64 = lw.cast(y, dtype, torch.float64, n.name + "_y64")
    wide = op("div", [lw.cast(x, dtype, torch.float64, n.name + "_x64"), y64], "_q64")
    q = lw.cast(op("floor", [wide], "_floor64"), torch.float64, dtype, n.name + "_q")
    # Beyond 2^53 the f64 quotient is off by up to |q| 2^-52: once more on
    # the (small) remainder, then by one either way.
    r = op("sub", [x, op("mul", [q, y], "_r_qy")], "_r")
    fix = op("div", [lw.cast(r, dtype, torch.float64, n.name + "_r64"), y64], "_fix64")
    q = op("add", [q, lw.cast(op("floor", [fix], "_fixfloor"), torch.float64, dtype, n.name + "_fix")], "_q2")
    zero, one = literal(0, dtype), literal(1, dtype)
    positive, negative = op("gt", [y, zero], "_ypos"), op("lt", [y, zero], "_yneg")
    for step in ("_lo", "_hi"):
        r = op("sub", [x, op("mul", [q, y], step + "_qy")], step + "_r")
        if step == "_lo":  # q one too big: r against y's sign
            off = op("logical_or", [op("logical_and", [positive, op("lt", [r, zero], step + "_rneg")], step + "_a"),
                                    op("logical_and", [negative, op("gt", [r, zero], step + "_rpos")], step + "_b")],
                     step + "_off")
            q = op("where", [off, op("sub", [q, one], step + "_dec"), q], step + "_q")
        else:  # q one too small: |r| >= |y|
            off = op("logical_or", [op("logical_and", [positive, op("ge", [r, y], step + "_big")], step + "_a"),
                                    op("logical_and", [negative, op("le", [r, y], step + "_small")], step + "_b")],
                     step + "_off")
            q = op("where", [off, op("add", [q, one], step + "_inc"), q], step + "_q")
    if floor:
        return q
    r = op("sub", [x, op("mul", [q, y], "_t_qy")], "_t_r")
    inexact_negative = op("logical_and", [op("ne", [r, zero], "_t_rnz"),
                                          op("ne", [op("lt", [x, zero], "_t_xneg"), negative], "_t_signs")],
                          "_t_up")
    return op("where", [inexact_negative, op("add", [q, one], "_t_inc"), q], "_trunc")


def _div(lw, n):
    a = bind(n)
    mode = a.get("rounding_mode")
    dtype = lw.out(n).dtype
    if mode is None:
        return lw.elementwise(n, "div", [a["self"], a["other"]])
    if not dtype.is_floating_point:
        return _integer_quotient(lw, n, lw.operand(a["self"], dtype), lw.operand(a["other"], dtype), dtype,
                                 mode == "floor")
    q = lw.g.add("div", [lw.operand(a["self"], dtype), lw.operand(a["other"], dtype)], None, n.name + "_q")
    if mode == "floor":
        return lw.add(n, "floor", [q])
    # trunc: toward zero
    neg = lw.g.add("lt", [q, literal(0, dtype)], None, n.name + "_neg")
    return lw.add(n, "where", [neg, lw.g.add("ceil", [q]), lw.g.add("floor", [q])])


def _modular(kind):
    """floor_divide (x // y), remainder (Python's x % y: y's sign) and fmod
    (C's: x's sign). Integers exactly (_integer_quotient); floats as
    floor(x / y) and x - floor(x / y) * y (fmod: trunc)."""
    def rule(lw, n):
        a = bind(n)
        dtype = lw.out(n).dtype
        x, y = lw.operand(a["self"], dtype), lw.operand(a["other"], dtype)
        floor = kind != "fmod"
        if dtype.is_floating_point:
            q = lw.g.add("div", [x, y], None, n.name + "_q")
            if floor:
                q = lw.g.add("floor", [q], None, n.name + "_floor")
            else:
                neg = lw.g.add("lt", [q, literal(0, dtype)], None, n.name + "_neg")
                q = lw.g.add("where", [neg, lw.g.add("ceil", [q], None, n.name + "_ceil"),
                                       lw.g.add("floor", [q], None, n.name + "_floor")], None, n.name + "_trunc")
        elif dtype in (torch.int64, torch.int32):
            q = _integer_quotient(lw, n, x, y, dtype, floor)
        else:
            raise Unsupported(f"{kind} of {dtype}")
        if kind == "floor_divide":
            return q
        return lw.add(n, "sub", [x, lw.g.add("mul", [q, y], None, n.name + "_qy")])
    return rule


def _compare(op):
    def rule(lw, n):
        a = bind(n)
        return lw.elementwise(n, op, [a["self"], a["other"]], result_type(a["self"], a["other"]))
    return rule


def _unary(op, attrs=None):
    def rule(lw, n):
        x = bind(n)["self"]
        dtype = lw.out(n).dtype
        if op in ("logical_not",):
            dtype = value(x).dtype
            r = lw.add(n, op, [lw.cast(lw.ref(x), dtype, torch.bool) if dtype != torch.bool else lw.ref(x)])
            return r
        return lw.add(n, op, [lw.operand(x, dtype)], attrs)
    return rule


def _logical(op):
    def rule(lw, n):
        a = bind(n)
        return lw.add(n, op, [lw.operand(a["self"], torch.bool), lw.operand(a["other"], torch.bool)])
    return rule


def _bitwise_not(lw, n):
    x = bind(n)["self"]
    if value(x).dtype != torch.bool:
        raise Unsupported("bitwise_not of integers")
    return lw.add(n, "logical_not", [lw.ref(x)])


def _bitwise(op):
    def rule(lw, n):
        a = bind(n)
        if result_type(a["self"], a["other"]) != torch.bool:
            raise Unsupported(f"bitwise {op} of integers")
        if op == "xor":
            return lw.add(n, "ne", [lw.operand(a["self"], torch.bool), lw.operand(a["other"], torch.bool)])
        return lw.add(n, "logical_" + op, [lw.operand(a["self"], torch.bool), lw.operand(a["other"], torch.bool)])
    return rule


def _gelu(lw, n):
    a = bind(n)
    approximate = a.get("approximate") or "none"
    return lw.add(n, "gelu", [lw.ref(a["self"])], {"approximate": approximate} if approximate != "none" else None)


def _pow(lw, n):
    a = bind(n)
    x, e = a["self"], a["exponent"]
    dtype = lw.out(n).dtype
    if not isinstance(e, fx.Node):
        if e == 2:
            xr = lw.operand(x, dtype)
            return lw.add(n, "mul", [xr, xr])
        if e == 0.5 and dtype.is_floating_point:
            return lw.add(n, "sqrt", [lw.operand(x, dtype)])
        if e == 1:
            return lw.operand(x, dtype)
    return lw.elementwise(n, "pow", [x, e])


def _clamp(lw, n):
    a = bind(n)
    lo, hi = a.get("min"), a.get("max")
    if isinstance(lo, fx.Node) or isinstance(hi, fx.Node):
        dtype = lw.out(n).dtype
        r = lw.operand(a["self"], dtype)
        if lo is not None:
            r = lw.g.add("maximum", [r, lw.operand(lo, dtype)], None, n.name + "_lo")
        if hi is not None:
            r = lw.g.add("minimum", [r, lw.operand(hi, dtype)], None, n.name)
        return r
    if not lw.out(n).dtype.is_floating_point:
        raise Unsupported("clamp of integers")
    attrs = {}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    return lw.add(n, "clamp", [lw.operand(a["self"], lw.out(n).dtype)], attrs)


def _where(lw, n):
    a = bind(n)
    dtype = lw.out(n).dtype
    return lw.add(n, "where", [lw.operand(a["condition"], torch.bool), lw.operand(a["self"], dtype),
                               lw.operand(a["other"], dtype)])


def _masked_fill(lw, n):
    a = bind(n)
    dtype = lw.out(n).dtype
    return lw.add(n, "where", [lw.operand(a["mask"], torch.bool), lw.operand(a["value"], dtype),
                               lw.operand(a["self"], dtype)])


def _to_copy(lw, n):
    a = bind(n)
    x = a["self"]
    src, out = value(x), lw.out(n)
    if out.device != src.device:
        raise Unsupported(f"a copy from {src.device} to {out.device}")
    if tuple(out.shape) != tuple(src.shape):
        raise Unsupported("a copy that changes the shape")
    return lw.cast(lw.ref(x), src.dtype, out.dtype, n.name)


def _identity(lw, n):
    x = n.args[0]
    if value(x).dtype != lw.out(n).dtype or tuple(value(x).shape) != tuple(lw.out(n).shape):
        raise Unsupported("an alias of another shape or dtype")
    return lw.ref(x)


def _copy(lw, n):
    """aten.copy(self, src): src broadcast to self's shape, in self's dtype."""
    a = bind(n)
    out = lw.out(n)
    src = lw.operand(a["src"], out.dtype)
    if tuple(value(a["src"]).shape) != tuple(out.shape):
        src = lw.g.add("broadcast_to", [src], {"shape": list(out.shape)}, n.name)
    return src


def _view(lw, n):
    x = n.args[0]
    if tuple(value(x).shape) == tuple(lw.out(n).shape):
        return lw.ref(x)
    return lw.reshape(n, lw.ref(x), lw.out(n).shape)


def _expand(lw, n):
    x = n.args[0]
    if tuple(value(x).shape) == tuple(lw.out(n).shape):
        return lw.ref(x)
    return lw.add(n, "broadcast_to", [lw.ref(x)], {"shape": [int(d) for d in lw.out(n).shape]})


def _permute(lw, n):
    a = bind(n)
    rank = value(a["self"]).dim()
    dims = [_norm(int(d), rank) for d in a["dims"]]
    if dims == list(range(rank)):
        return lw.ref(a["self"])
    return lw.add(n, "permute", [lw.ref(a["self"])], {"dims": dims})


def _transpose(lw, n):
    a = bind(n)
    rank = value(a["self"]).dim()
    d0, d1 = _norm(int(a["dim0"]), rank), _norm(int(a["dim1"]), rank)
    if d0 == d1:
        return lw.ref(a["self"])
    return lw.add(n, "transpose", [lw.ref(a["self"])], {"dim0": d0, "dim1": d1})


def _t(lw, n):
    x = n.args[0]
    if value(x).dim() < 2:
        return lw.ref(x)
    return lw.add(n, "transpose", [lw.ref(x)], {"dim0": 0, "dim1": 1})


def _slice(lw, n):
    a = bind(n)
    x = value(a["self"])
    axis = _norm(int(a.get("dim") or 0), x.dim())
    size = int(x.shape[axis])
    start, end, step = a.get("start"), a.get("end"), a.get("step") or 1
    start, end, step = slice(start, end, step).indices(size)
    if (start, end, step) == (0, size, 1):
        return lw.ref(a["self"])
    if end <= start:
        raise Unsupported("an empty slice")
    attrs = {"axes": [axis], "starts": [start], "ends": [end]}
    if step != 1:
        attrs["steps"] = [step]
    return lw.add(n, "slice", [lw.ref(a["self"])], attrs)


def _select(lw, n):
    a = bind(n)
    x = value(a["self"])
    axis = _norm(int(a["dim"]), x.dim())
    index = _norm(int(a["index"]), int(x.shape[axis]))
    s = lw.g.add("slice", [lw.ref(a["self"])], {"axes": [axis], "starts": [index], "ends": [index + 1]},
                 n.name + "_slice")
    return lw.reshape(n, s, lw.out(n).shape)


def _cat(lw, n):
    a = bind(n)
    out = lw.out(n)
    tensors = [t for t in a["tensors"] if value(t).numel() > 0 or value(t).dim() > 1]
    if len(tensors) == 1:
        return lw.operand(tensors[0], out.dtype)
    return lw.add(n, "concat", [lw.operand(t, out.dtype) for t in tensors],
                  {"axis": _norm(int(a.get("dim") or 0), out.dim())})


def _split(lw, n):
    a = bind(n)
    x = value(a["self"])
    axis = _norm(int(a.get("dim") or 0), x.dim())
    total = int(x.shape[axis])
    if a.get("split_sizes") is not None:
        sizes = [int(s) for s in a["split_sizes"]]
    else:
        step = int(a["split_size"])
        sizes = [min(step, total - k) for k in range(0, total, step)] if step > 0 else [total]
    sizes = [s for s in sizes]
    if sum(sizes) != total or any(s < 1 for s in sizes):
        raise Unsupported(f"split into sizes {sizes} of a dim of {total}")
    if len(sizes) == 1:
        return [lw.ref(a["self"])]
    name = lw.add(n, "split", [lw.ref(a["self"])], {"sizes": sizes, "axis": axis})
    return [f"{name}:{i}" for i in range(len(sizes))]


def _reduction(op):
    def rule(lw, n):
        a = bind(n)
        x = a["self"]
        out = lw.out(n)
        rank = value(x).dim()
        dims = a.get("dim")
        attrs = {}
        if dims is not None and dims != [] and rank > 0:
            dims = [dims] if isinstance(dims, int) else list(dims)
            attrs["axes"] = sorted({_norm(int(d), rank) for d in dims})
            if a.get("keepdim"):
                attrs["keepdim"] = True
        src = lw.operand(x, out.dtype)
        if rank == 0:
            return src
        return lw.add(n, op, [src], attrs or None)
    return rule


def _any_all(kind):
    """any / all (over dims or everything): the count of nonzero (any) or
    zero (all) elements, compared with 0."""
    def rule(lw, n):
        a = bind(n)
        x = a["self"]
        v = value(x)
        rank = v.dim()
        ref = lw.ref(x)
        zero = literal(0, v.dtype)
        hit = lw.g.add("ne" if kind == "any" else "eq", [ref, zero], None, n.name + "_hit")
        count = lw.g.add("cast", [hit], {"to": "i32"}, n.name + "_count1")
        dims = a.get("dim")
        attrs = {}
        if rank > 0:
            if dims is not None and dims != []:
                dims = [dims] if isinstance(dims, int) else list(dims)
                attrs["axes"] = sorted({_norm(int(d), rank) for d in dims})
                if a.get("keepdim"):
                    attrs["keepdim"] = True
            count = lw.g.add("sum", [count], attrs or None, n.name + "_count")
        found = lw.g.add("gt" if kind == "any" else "eq", [count, literal(0, torch.int32)], None,
                         n.name + ("_found" if lw.out(n).dtype != torch.bool else ""))
        return lw.cast(found, torch.bool, lw.out(n).dtype, n.name)
    return rule


def _special_values(kind):
    """isnan (x != x), isinf (|x| == inf), isfinite (neither); integers are
    never nan or inf."""
    def rule(lw, n):
        a = bind(n)
        v = value(a["self"])
        x = lw.ref(a["self"])
        shape = [int(d) for d in v.shape]
        if not v.is_floating_point():
            filled = "ones" if kind == "isfinite" else "zeros"
            return lw.add(n, filled, [], {"shape": shape, "dtype": "i1"})
        nan = lw.g.add("ne", [x, x], None, n.name + ("" if kind == "isnan" else "_nan"))
        if kind == "isnan":
            return nan
        inf = lw.g.add("eq", [lw.g.add("abs", [x], None, n.name + "_abs"), literal(float("inf"), v.dtype)], None,
                       n.name + ("" if kind == "isinf" else "_inf"))
        if kind == "isinf":
            return inf
        return lw.add(n, "logical_not", [lw.g.add("logical_or", [nan, inf], None, n.name + "_special")])
    return rule


def _extreme(op):
    """amax/amin; max/min without a dim; max.dim/min.dim (values, indices)."""
    def rule(lw, n):
        a = bind(n)
        x = a["self"]
        rank = value(x).dim()
        if n.target._overloadname == "dim":
            axis = _norm(int(a["dim"]), rank)
            keep = {"keepdim": True} if a.get("keepdim") else {}
            values = lw.g.add(op, [lw.ref(x)], {"axes": [axis], **keep}, n.name + "_values")
            indices = lw.g.add("arg" + op, [lw.ref(x)], {"axis": axis, **keep}, n.name + "_indices")
            return [values, indices]
        if n.target._overloadname not in ("default",) and packet_name(n.target) in ("max", "min"):
            raise Unsupported(f"{op} of two tensors (use maximum/minimum)")
        dims = a.get("dim")
        attrs = {}
        if dims:
            attrs["axes"] = sorted({_norm(int(d), rank) for d in dims})
            if a.get("keepdim"):
                attrs["keepdim"] = True
        return lw.add(n, op, [lw.ref(x)], attrs or None)
    return rule


def _arg_extreme(op):
    def rule(lw, n):
        a = bind(n)
        attrs = {}
        if a.get("dim") is not None:
            attrs["axis"] = _norm(int(a["dim"]), value(a["self"]).dim())
            if a.get("keepdim"):
                attrs["keepdim"] = True
        return lw.add(n, op, [lw.ref(a["self"])], attrs or None)
    return rule


def _var(lw, n):
    a = bind(n)
    x = a["self"]
    rank = value(x).dim()
    correction = a.get("correction")
    if "unbiased" in a and a.get("unbiased") is not None:
        correction = 1 if a["unbiased"] else 0
    correction = 1 if correction is None else correction
    if float(correction) != int(correction):
        raise Unsupported("a fractional correction")
    attrs = {"correction": int(correction)}
    if a.get("dim"):
        attrs["axes"] = sorted({_norm(int(d), rank) for d in a["dim"]})
    if a.get("keepdim"):
        attrs["keepdim"] = True
    return lw.add(n, "var", [lw.operand(x, lw.out(n).dtype)], attrs)


def _matmul(lw, n):
    a = bind(n)
    out = lw.out(n)
    return lw.add(n, "matmul", [lw.operand(a["self"], out.dtype), lw.operand(a["mat2"], out.dtype)])


def _addmm(lw, n):
    """beta * input + alpha * (mat1 @ mat2)."""
    a = bind(n)
    out = lw.out(n)
    mm = lw.g.add("matmul", [lw.operand(a["mat1"], out.dtype), lw.operand(a["mat2"], out.dtype)], None,
                  n.name + "_mm")
    if a.get("alpha", 1) != 1:
        mm = lw.g.add("mul", [mm, literal(a["alpha"], out.dtype)], None, n.name + "_alpha")
    bias = lw.operand(a["self"], out.dtype)
    if a.get("beta", 1) == 0:
        return mm
    if a.get("beta", 1) != 1:
        bias = lw.g.add("mul", [bias, literal(a["beta"], out.dtype)], None, n.name + "_beta")
    return lw.add(n, "add", [mm, bias])


def _softmax(op):
    def rule(lw, n):
        a = bind(n)
        out = lw.out(n)
        x = lw.operand(a["self"], out.dtype)
        if value(a["self"]).dim() == 0:
            raise Unsupported(f"{op} of a scalar")
        return lw.add(n, op, [x], {"axis": _norm(int(a["dim"]), out.dim())})
    return rule


def _layer_norm(lw, n):
    a = bind(n)
    x = value(a["input"])
    shape = list(a["normalized_shape"])
    if list(x.shape[x.dim() - len(shape):]) != shape:
        raise Unsupported("layer norm over a shape that is not the input's last dims")
    if len(shape) != 1:
        # tensorc normalizes from `axis` to the end: the same when the
        # weight and bias are flat views of the trailing dims.
        pass
    w, b = a.get("weight"), a.get("bias")
    if len(shape) != 1 and (w is not None or b is not None):
        raise Unsupported("layer norm over several dims with weights")
    # Weights of a wider dtype than the input (bf16 activations, f32
    # weights under autocast): PyTorch normalizes in the weights' dtype
    # and returns the input's.
    compute = x.dtype
    for t in (w, b):
        if t is not None and value(t).dtype != x.dtype:
            compute = torch.promote_types(compute, value(t).dtype)
    args = [lw.operand(a["input"], compute)]
    args += [lw.operand(w, compute) if w is not None else None, lw.operand(b, compute) if b is not None else None]
    while args[-1] is None:
        args.pop()
    attrs = {"axis": x.dim() - len(shape)}
    if float(a["eps"]) != 1e-5:
        attrs["eps"] = float(a["eps"])
    if compute == x.dtype:
        return [lw.add(n, "layer_norm", args, attrs), None, None]
    normed = lw.g.add("layer_norm", args, attrs, n.name + "_wide")
    return [lw.cast(normed, compute, x.dtype, n.name), None, None]


def _batch_norm(lw, n):
    """native_batch_norm / _native_batch_norm_legit* -> tc.batch_norm.
    Results: (out, save_mean, save_invstd[, new running mean, new running
    var]); the saved statistics are the backward's (PyTorch's), not lowered."""
    a = bind(n)
    name = packet_name(n.target)
    x = a["input"]
    training = bool(a.get("training", False))
    if name == "_native_batch_norm_legit_no_training":
        training = False
    mean, var = a.get("running_mean"), a.get("running_var")
    w, b = a.get("weight"), a.get("bias")
    if mean is None and var is None and training:
        return _batch_statistics_norm(lw, n, x, w, b, float(a["eps"]))
    if mean is None or var is None:
        raise Unsupported("batch norm with one running statistic")
    if w is None and b is not None:
        raise Unsupported("batch norm with a bias but no weight")
    if name in ("native_batch_norm", "_native_batch_norm_legit") and training:
        raise Unsupported("training-mode batch norm updating its statistics in place")
    # Statistics and weights of a wider dtype than the input (bf16
    # activations, f32 parameters under autocast): PyTorch normalizes in
    # the wider dtype and returns the input's; the new running statistics
    # keep theirs.
    x_dtype = value(x).dtype
    compute = x_dtype
    for t in (mean, var, w, b):
        if t is not None:
            compute = torch.promote_types(compute, value(t).dtype)
    args = [lw.operand(t, compute) for t in (x, mean, var, w, b) if t is not None]
    attrs = {"eps": float(a["eps"])} if float(a["eps"]) != 1e-5 else {}
    if training:
        attrs.update({"training": True, "momentum": float(a["momentum"])})
    if compute == x_dtype:
        ref = lw.add(n, "batch_norm", args, attrs or None)
        out = f"{ref}:0"
    else:
        ref = lw.g.add("batch_norm", args, attrs or None, n.name + "_wide")
        out = lw.cast(f"{ref}:0", compute, x_dtype, n.name)
    results = [out, None, None]
    if name == "_native_batch_norm_legit_functional":
        results += [lw.cast(f"{ref}:1", compute, value(mean).dtype), lw.cast(f"{ref}:2", compute, value(var).dtype)]
    return results


def _batch_statistics_norm(lw, n, x, w, b, eps):
    """Training-mode batch norm without running statistics (nothing to
    update): x normalized by its own mean and biased variance over every
    dim but the channels (1), scaled and shifted per channel; in f32 at
    least, as PyTorch's kernels accumulate. timm's NF-Nets standardize
    their convolution weights this way (ScaledStdConv2d)."""
    xv = value(x)
    rank = xv.dim()
    if rank < 2:
        raise Unsupported("batch norm of fewer than 2 dims")
    if w is None and b is not None:
        raise Unsupported("batch norm with a bias but no weight")
    compute = torch.promote_types(xv.dtype, torch.float32)
    for t in (w, b):
        if t is not None:
            compute = torch.promote_types(compute, value(t).dtype)
    axes = [0] + list(range(2, rank))
    g, name = lw.g, n.name
    xs = lw.operand(x, compute)
    mean = g.add("mean", [xs], {"axes": axes, "keepdim": True}, name + "_mean")
    var = g.add("var", [xs], {"axes": axes, "keepdim": True, "correction": 0}, name + "_var")
    inv = g.add("rsqrt", [g.add("add", [var, literal(eps, compute)], None, name + "_var_eps")], None, name + "_inv")
    y = g.add("mul", [g.add("sub", [xs, mean], None, name + "_centered"), inv], None, name + "_normed")
    per_channel = [1, int(xv.shape[1])] + [1] * (rank - 2)
    if w is not None:
        y = g.add("mul", [y, g.add("reshape", [lw.operand(w, compute)], {"shape": per_channel}, name + "_w")],
                  None, name + "_scaled")
    if b is not None:
        y = g.add("add", [y, g.add("reshape", [lw.operand(b, compute)], {"shape": per_channel}, name + "_b")],
                  None, name + "_shifted")
    return [lw.cast(y, compute, xv.dtype, name), None, None]


def _convolution(lw, n):
    a = bind(n)
    x, w = value(a["input"]), value(a["weight"])
    if a.get("transposed"):
        raise Unsupported("transposed convolution")
    if x.dim() not in (3, 4):
        raise Unsupported(f"{x.dim() - 2}-D convolution")
    if any(int(p) for p in (a.get("output_padding") or [])):
        raise Unsupported("output_padding")
    out = lw.out(n)
    if not out.dtype.is_floating_point:
        raise Unsupported("integer convolution")
    one_d = x.dim() == 3  # conv1d as conv2d over a height of 1: (N, C, 1, L), weight (O, C/g, 1, K)

    def spatial(v, fill):
        v = [int(e) for e in v]
        return [fill] + v[-1:] if one_d else v
    attrs = {"stride": spatial(a["stride"], 1), "padding": spatial(a["padding"], 0),
             "dilation": spatial(a["dilation"], 1), "groups": int(a["groups"])}
    xr, wr = lw.operand(a["input"], out.dtype), lw.operand(a["weight"], out.dtype)
    if one_d:
        xs, ws = [int(d) for d in x.shape], [int(d) for d in w.shape]
        xr = lw.g.add("reshape", [xr], {"shape": xs[:2] + [1, xs[2]]}, n.name + "_x2d")
        wr = lw.g.add("reshape", [wr], {"shape": ws[:2] + [1, ws[2]]}, n.name + "_w2d")
    args = [xr, wr]
    if a.get("bias") is not None:
        args.append(lw.operand(a["bias"], out.dtype))
    if not one_d:
        return lw.add(n, "conv2d", args, attrs)
    y = lw.g.add("conv2d", args, attrs, n.name + "_2d")
    return lw.reshape(n, y, out.shape)


def _pair(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [int(v[0]), int(v[-1])]


def _max_pool(lw, n):
    a = bind(n)
    if value(a["self"]).dim() != 4:
        raise Unsupported("max pooling of a 3-D input")
    kernel = _pair(a["kernel_size"])
    attrs = {"kernel_size": kernel, "stride": _pair(a.get("stride") or kernel),
             "padding": _pair(a.get("padding") or 0), "dilation": _pair(a.get("dilation") or 1)}
    if a.get("ceil_mode"):
        attrs["ceil_mode"] = True
    ref = lw.add(n, "max_pool2d", [lw.ref(a["self"])], attrs)
    return [ref, None] if packet_name(n.target) == "max_pool2d_with_indices" else ref


def _avg_pool(lw, n):
    a = bind(n)
    if value(a["self"]).dim() != 4:
        raise Unsupported("average pooling of a 3-D input")
    if a.get("divisor_override") is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    kernel = _pair(a["kernel_size"])
    attrs = {"kernel_size": kernel, "stride": _pair(a.get("stride") or kernel),
             "padding": _pair(a.get("padding") or 0)}
    if a.get("ceil_mode"):
        attrs["ceil_mode"] = True
    if a.get("count_include_pad") is False:
        attrs["count_include_pad"] = False
    return lw.add(n, "avg_pool2d", [lw.ref(a["self"])], attrs)


def _adaptive_avg_pool(lw, n):
    a = bind(n)
    x = value(a["self"])
    if x.dim() != 4:
        raise Unsupported("adaptive pooling of a 3-D input")
    hw = [int(d) for d in x.shape[2:]]
    out = [int(d) for d in lw.out(n).shape[2:]]
    if out == [1, 1]:
        return lw.add(n, "mean", [lw.ref(a["self"])], {"axes": [2, 3], "keepdim": True})
    if out == hw:
        return lw.ref(a["self"])
    if any(h % o for h, o in zip(hw, out)):
        raise Unsupported(f"adaptive pooling of {hw} to {out} (sizes that do not divide)")
    kernel = [h // o for h, o in zip(hw, out)]
    return lw.add(n, "avg_pool2d", [lw.ref(a["self"])], {"kernel_size": kernel, "stride": kernel})


def _embedding(lw, n):
    a = bind(n)
    if a.get("sparse"):
        raise Unsupported("sparse embedding gradients")
    if a.get("scale_grad_by_freq"):
        raise Unsupported("embedding with scale_grad_by_freq")
    attrs = None
    padding = a.get("padding_idx")
    if padding is not None and int(padding) >= 0:
        attrs = {"padding_idx": int(padding)}
    indices = a["indices"]
    if value(indices).dtype not in (torch.int64, torch.int32):
        raise Unsupported(f"embedding indices of {value(indices).dtype}")
    return lw.add(n, "embedding", [lw.ref(indices), lw.ref(a["weight"])], attrs)


def _native_dropout(lw, n):
    """native_dropout(input, p, train) -> (output, mask): tensorc's dropout
    (its own random stream from the per-call seed; PyTorch's masks are
    another draw of the same distribution). The mask is PyTorch's
    backward's: nothing in the forward graph reads it."""
    a = bind(n)
    p = float(a["p"])
    x = lw.ref(a["input"])
    if a.get("train") is False or p == 0.0:
        return [x, None]
    if not 0.0 < p < 1.0:
        raise Unsupported(f"dropout probability {p}")
    if not value(a["input"]).is_floating_point():
        raise Unsupported("dropout of an integer tensor")
    lw.dropouts += 1
    return [lw.add(n, "dropout", [x, lw.seed()], {"p": p, "stream": lw.dropouts - 1}), None]


def _bernoulli(lw, n):
    """bernoulli(x, p) and bernoulli_(x, p) (stochastic depth: DropPath,
    torchvision's stochastic_depth): x's shape and dtype, each element 1
    with probability p, else 0: tensorc's dropout of ones with drop
    probability 1 - p (its own stream of the call's seed, as native_dropout;
    another draw of the same distribution than eager's), nonzero as 1. The
    in-place form is lowered as a new value only where nothing else reads
    the tensor it overwrites (the `empty` it fills)."""
    a = bind(n)
    out = lw.out(n)
    p = a.get("p")
    if p is None or isinstance(p, fx.Node):
        raise Unsupported("bernoulli with a tensor of probabilities")
    if not out.is_floating_point():
        raise Unsupported("bernoulli of an integer tensor")
    if packet_name(n.target) == "bernoulli_" and len(a["self"].users) != 1:
        raise Unsupported("bernoulli_ of a tensor read elsewhere")
    p = float(p)
    shape = [int(d) for d in out.shape]
    dtype = dtype_name(out.dtype)
    if p >= 1.0 or p <= 0.0:
        return lw.add(n, "ones" if p >= 1.0 else "zeros", [], {"shape": shape, "dtype": dtype})
    ones = lw.g.add("ones", [], {"shape": shape, "dtype": "f32"}, n.name + "_ones")
    lw.dropouts += 1
    kept = lw.g.add("dropout", [ones, lw.seed()], {"p": 1.0 - p, "stream": lw.dropouts - 1}, n.name + "_kept")
    hit = lw.g.add("ne", [kept, literal(0.0, torch.float32)], None, n.name + "_hit")
    return lw.add(n, "cast", [hit], {"to": dtype})


def _empty(lw, n):
    """empty / new_empty: a tensor whose values nobody may read before
    writing them (bernoulli_ fills it): zeros of its shape and dtype."""
    out = lw.out(n)
    return lw.add(n, "zeros", [], {"shape": [int(d) for d in out.shape], "dtype": dtype_name(out.dtype)})


def _nll_loss(lw, n):
    """nll_loss_forward of log_softmax(x, 1): cross_entropy(x) (one fused op
    that tensorc differentiates); (loss, total_weight)."""
    a = bind(n)
    if a.get("weight") is not None:
        raise Unsupported("nll_loss with class weights")
    logp = a["self"]
    reduction = {0: "none", 1: "mean", 2: "sum"}[int(a["reduction"])]
    # log_softmax then a cast to a wider float (what CUDA autocast gave for
    # cross_entropy of bf16 logits): computed from the logits in the wider
    # dtype, which rounds once where the two steps round twice.
    widened = isinstance(logp, fx.Node) and packet_name(logp.target) == "_to_copy" and \
        isinstance(logp.args[0], fx.Node) and packet_name(logp.args[0].target) == "_log_softmax" and \
        value(logp).dtype.is_floating_point and torch.finfo(value(logp).dtype).bits >= torch.finfo(value(logp.args[0]).dtype).bits
    softmax = logp.args[0] if widened else logp
    x = softmax.args[0] if isinstance(softmax, fx.Node) and packet_name(softmax.target) == "_log_softmax" else None
    if x is None or not lw.has(x) or value(x).dim() != 2 or _norm(int(softmax.args[1]), 2) != 1:
        raise Unsupported("nll_loss of anything but log_softmax over the classes of [N, C] logits")
    if value(x).dtype != value(softmax).dtype:
        raise Unsupported("nll_loss of a log_softmax that changes the dtype")
    attrs = {}
    if reduction != "mean":
        attrs["reduction"] = reduction
    if int(a["ignore_index"]) != -100:
        attrs["ignore_index"] = int(a["ignore_index"])
    logits = lw.operand(x, value(logp).dtype) if widened else lw.ref(x)
    return [lw.add(n, "cross_entropy", [logits, lw.ref(a["target"])], attrs or None), None]


def _constant_pad(lw, n):
    a = bind(n)
    out = lw.out(n)
    attrs = {"pads": [int(p) for p in a["pad"]]}
    if float(a.get("value") or 0) != 0:
        attrs["value"] = float(a["value"])
    return lw.add(n, "pad", [lw.ref(a["self"])], attrs)


def _filled(fill):
    """zeros / ones / full / scalar_tensor / *_like with a value."""
    def rule(lw, n):
        a = bind(n)
        out = lw.out(n)
        v = fill if fill is not None else a.get("fill_value", a.get("s"))
        if isinstance(v, fx.Node):
            raise Unsupported("a fill value computed at run time")
        shape = [int(d) for d in out.shape]
        dtype = dtype_name(out.dtype)
        if v == 0:
            return lw.add(n, "zeros", [], {"shape": shape, "dtype": dtype})
        if v == 1:
            return lw.add(n, "ones", [], {"shape": shape, "dtype": dtype})
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            if not out.dtype.is_floating_point:
                raise Unsupported("a non-finite fill of integers")
            return lw.add(n, "broadcast_to", [literal(v, out.dtype)], {"shape": shape}) if shape else \
                lw.add(n, "add", [literal(v, out.dtype), literal(0, out.dtype)])
        return lw.add(n, "full", [], {"shape": shape, "value": float(v), "dtype": dtype})
    return rule


def _arange(lw, n):
    a = bind(n)
    out = lw.out(n)
    start, end, step = a.get("start", 0) or 0, a["end"], a.get("step", 1) or 1
    if any(isinstance(v, float) and not float(v).is_integer() for v in (start, end, step)):
        raise Unsupported("arange with fractional bounds")
    attrs = {"start": int(start), "end": int(end)}
    if int(step) != 1:
        attrs["step"] = int(step)
    if int(start) == 0:
        del attrs["start"]
    ref = lw.g.add("iota", [], attrs, n.name + "_i64")
    return lw.cast(ref, torch.int64, out.dtype, n.name)


def _elementary(kind):
    """Functions PyTorch's decompositions write with prims (which tensorc
    does not lower): expm1 and log1p accurate near 0 (expm1: its Taylor
    polynomial below 1e-3; log1p: log(u) * x / (u - 1), u = 1 + x, exact
    where u rounds to 1), log2, trunc, frac."""
    def rule(lw, n):
        a = bind(n)
        out = lw.out(n)
        if not out.is_floating_point():
            raise Unsupported(f"{kind} of {out.dtype}")
        x = lw.operand(a["self"], out.dtype)
        g, name = lw.g, n.name

        def op(o, args, tag):
            return g.add(o, args, None, name + tag)
        if kind == "expm1":
            x2 = op("mul", [x, x], "_x2")
            taylor = op("add", [x, op("mul", [x2, op("add", [literal(0.5, out.dtype),
                                                            op("mul", [x, literal(1 / 6, out.dtype)], "_c3")],
                                                     "_c")], "_t2")], "_taylor")
            small = op("lt", [op("abs", [x], "_abs"), literal(1e-3, out.dtype)], "_small")
            return lw.add(n, "where", [small, taylor, op("sub", [op("exp", [x], "_exp"), literal(1, out.dtype)],
                                                         "_em1")])
        if kind == "log1p":
            u = op("add", [x, literal(1, out.dtype)], "_u")
            d = op("sub", [u, literal(1, out.dtype)], "_d")
            exact = op("eq", [d, literal(0, out.dtype)], "_exact")
            scaled = op("mul", [op("log", [u], "_log"), op("div", [x, op("where", [exact, literal(1, out.dtype), d],
                                                                           "_dsafe")], "_ratio")], "_scaled")
            return lw.add(n, "where", [exact, x, scaled])
        if kind == "log2":
            return lw.add(n, "mul", [op("log", [x], "_ln"), literal(1 / math.log(2), out.dtype)])
        neg = op("lt", [x, literal(0, out.dtype)], "_neg")  # trunc, frac (x - trunc x)
        if kind == "trunc":
            return lw.add(n, "where", [neg, op("ceil", [x], "_ceil"), op("floor", [x], "_floor")])
        return lw.add(n, "sub", [x, op("where", [neg, op("ceil", [x], "_ceil"), op("floor", [x], "_floor")],
                                       "_trunc")])
    return rule


def _vector_norm(lw, n):
    """linalg_vector_norm(x, ord, dim, keepdim): ord 2 sqrt(sum x^2), 1
    sum |x|, inf / -inf max / min |x|, 0 the count of nonzeros, else
    (sum |x|^ord)^(1/ord) (F.normalize's)."""
    a = bind(n)
    out = lw.out(n)
    if a.get("dtype") is not None or not out.is_floating_point():
        raise Unsupported("vector_norm with a dtype")
    x = lw.operand(a["self"], out.dtype)
    rank = value(a["self"]).dim()
    dims = a.get("dim")
    attrs = {"axes": list(range(rank))} if not dims else {"axes": sorted({_norm(int(d), rank) for d in dims})}
    if a.get("keepdim"):
        attrs["keepdim"] = True
    if rank == 0:
        attrs = None
    order = float(a.get("ord", 2) if a.get("ord") is not None else 2)
    g, name = lw.g, n.name
    mag = g.add("abs", [x], None, name + "_abs")
    if order == float("inf") or order == -float("inf"):
        return lw.add(n, "max" if order > 0 else "min", [mag], attrs) if attrs else mag
    if order == 0:
        nz = g.add("cast", [g.add("ne", [x, literal(0, out.dtype)], None, name + "_nz")], {"to": dtype_name(out.dtype)},
                   name + "_count1")
        return lw.add(n, "sum", [nz], attrs) if attrs else nz
    if order == 1:
        return lw.add(n, "sum", [mag], attrs) if attrs else mag
    if order == 2:
        sq = g.add("mul", [x, x], None, name + "_sq")
        total = g.add("sum", [sq], attrs, name + "_sum") if attrs else sq
        return lw.add(n, "sqrt", [total])
    powered = g.add("pow", [mag, literal(order, out.dtype)], None, name + "_pow")
    total = g.add("sum", [powered], attrs, name + "_sum") if attrs else powered
    return lw.add(n, "pow", [total, literal(1 / order, out.dtype)])


def _nan_to_num(lw, n):
    """nan_to_num(x, nan, posinf, neginf): nan -> nan (0 by default), +-inf ->
    the dtype's largest / lowest finite value by default."""
    a = bind(n)
    out = lw.out(n)
    if not out.is_floating_point():
        return lw.operand(a["self"], out.dtype)
    info = torch.finfo(out.dtype)
    fills = [0.0 if a.get("nan") is None else float(a["nan"]), info.max if a.get("posinf") is None else
             float(a["posinf"]), info.min if a.get("neginf") is None else float(a["neginf"])]
    x = lw.operand(a["self"], out.dtype)
    g, name = lw.g, n.name
    y = g.add("where", [g.add("eq", [x, literal(float("inf"), out.dtype)], None, name + "_pinf"),
                        literal(fills[1], out.dtype), x], None, name + "_p")
    y = g.add("where", [g.add("eq", [x, literal(float("-inf"), out.dtype)], None, name + "_ninf"),
                        literal(fills[2], out.dtype), y], None, name + "_n")
    return lw.add(n, "where", [g.add("ne", [x, x], None, name + "_nan"), literal(fills[0], out.dtype), y])


def _linspace(lw, n):
    """linspace(start, end, steps): start + i * step in f64, cast (PyTorch's
    halves agree to the last bit only up to rounding)."""
    a = bind(n)
    out = lw.out(n)
    steps = int(a["steps"])
    start, end = float(a["start"]), float(a["end"])
    if steps == 1:
        return lw.add(n, "full", [], {"shape": [1], "value": start, "dtype": dtype_name(out.dtype)})
    step = (end - start) / (steps - 1)
    i = lw.g.add("cast", [lw.g.add("iota", [], {"end": steps}, n.name + "_i")], {"to": "f64"}, n.name + "_i64")
    v = lw.g.add("add", [lw.g.add("mul", [i, literal(step, torch.float64)], None, n.name + "_scaled"),
                         literal(start, torch.float64)], None, n.name + "_f64")
    return lw.cast(v, torch.float64, out.dtype, n.name)


def _log_sigmoid(lw, n):
    """log_sigmoid_forward(x) -> (min(x, 0) - log1p(exp(-|x|)), buffer): the
    buffer is PyTorch's backward's (tensorc differentiates the output)."""
    a = bind(n)
    x = value(a["self"])
    if not x.is_floating_point():
        raise Unsupported("log_sigmoid of integers")
    dt = x.dtype
    g, name = lw.g, n.name
    ref = lw.ref(a["self"])
    e = g.add("exp", [g.add("neg", [g.add("abs", [ref], None, name + "_abs")], None, name + "_nabs")], None,
              name + "_e")
    u = g.add("add", [e, literal(1, dt)], None, name + "_u")  # log1p(e), e in (0, 1]: u - 1 exact enough
    soft = g.add("mul", [g.add("log", [u], None, name + "_logu"),
                         g.add("div", [e, g.add("where", [g.add("eq", [u, literal(1, dt)], None, name + "_one"),
                                                          literal(1, dt), g.add("sub", [u, literal(1, dt)], None,
                                                                                name + "_d")], None,
                                                name + "_dsafe")], None, name + "_ratio")], None, name + "_log1p")
    soft = g.add("where", [g.add("eq", [u, literal(1, dt)], None, name + "_tiny"), e, soft], None, name + "_sp")
    out = lw.add(n, "sub", [g.add("minimum", [ref, literal(0, dt)], None, name + "_min"), soft])
    return [out, None]


def _lerp(lw, n):
    """lerp(a, b, w): a + w (b - a) where |w| < 0.5, else b - (b - a)(1 - w),
    as PyTorch computes it."""
    a = bind(n)
    dt = lw.out(n).dtype
    x, y = lw.operand(a["self"], dt), lw.operand(a["end"], dt)
    w = lw.operand(a["weight"], dt)
    g, name = lw.g, n.name
    d = g.add("sub", [y, x], None, name + "_d")
    low = g.add("add", [x, g.add("mul", [w, d], None, name + "_wd")], None, name + "_low")
    high = g.add("sub", [y, g.add("mul", [d, g.add("sub", [literal(1, dt), w], None, name + "_1mw")], None,
                                  name + "_d1mw")], None, name + "_high")
    small = g.add("lt", [g.add("abs", [w], None, name + "_absw"), literal(0.5, dt)], None, name + "_small")
    return lw.add(n, "where", [small, low, high])


def _reduced(lw, n, ref, reduction):
    """A loss's reduction (PyTorch's enum: 0 none, 1 mean, 2 sum)."""
    if reduction == 0:
        return ref
    return lw.add(n, "mean" if reduction == 1 else "sum", [ref])


def _robust_loss(kind):
    """smooth_l1_loss (beta) and huber_loss (delta): quadratic near 0, linear
    beyond, reduced."""
    def rule(lw, n):
        a = bind(n)
        dt = lw.out(n).dtype
        x, t = lw.operand(a["self"], dt), lw.operand(a["target"], dt)
        k = float(a.get("beta" if kind == "smooth_l1" else "delta", 1.0))
        g, name = lw.g, n.name
        d = g.add("abs", [g.add("sub", [x, t], None, name + "_diff")], None, name + "_d")
        sq = g.add("mul", [g.add("mul", [d, d], None, name + "_d2"), literal(0.5 / k if kind == "smooth_l1" and k > 0
                                                                             else 0.5, dt)], None, name + "_quad")
        if kind == "smooth_l1":
            if k == 0:
                return _reduced(lw, n, d, int(a.get("reduction", 1)))
            lin = g.add("sub", [d, literal(0.5 * k, dt)], None, name + "_lin")
            near = g.add("lt", [d, literal(k, dt)], None, name + "_near")
        else:
            lin = g.add("mul", [g.add("sub", [d, literal(0.5 * k, dt)], None, name + "_excess"), literal(k, dt)],
                        None, name + "_lin")
            near = g.add("le", [d, literal(k, dt)], None, name + "_near")
        loss = g.add("where", [near, sq, lin], None, name + "_loss")
        return _reduced(lw, n, loss, int(a.get("reduction", 1)))
    return rule


def _moments(kind):
    """var_mean / std_mean: (var or std, mean) over the dims."""
    def rule(lw, n):
        a = bind(n)
        x = a["self"]
        v = value(x)
        if not v.is_floating_point():
            raise Unsupported(f"{kind} of integers")
        rank = v.dim()
        correction = a.get("correction")
        if a.get("unbiased") is not None:
            correction = 1 if a["unbiased"] else 0
        correction = 1 if correction is None else correction
        if float(correction) != int(correction):
            raise Unsupported("a fractional correction")
        attrs = {}
        if a.get("dim"):
            attrs["axes"] = sorted({_norm(int(d), rank) for d in a["dim"]})
        if a.get("keepdim"):
            attrs["keepdim"] = True
        ref = lw.ref(x)
        var = lw.g.add("var", [ref], dict(attrs, correction=int(correction)), n.name + "_var")
        if kind == "std_mean":
            var = lw.g.add("sqrt", [var], None, n.name + "_std")
        return [var, lw.g.add("mean", [ref], attrs or None, n.name + "_mean")]
    return rule


def _select_scatter(lw, n):
    """select_scatter(x, src, dim, index): x with x.select(dim, index)
    replaced by src (an assignment to one row)."""
    a = bind(n)
    x, out = value(a["self"]), lw.out(n)
    rank = x.dim()
    dim = _norm(int(a["dim"]), rank)
    size = int(x.shape[dim])
    index = int(a["index"])
    index = index + size if index < 0 else index
    shape = [int(d) for d in x.shape]
    shape[dim] = 1
    src = lw.g.add("reshape", [lw.operand(a["src"], out.dtype)], {"shape": shape}, n.name + "_row")
    pads = [0] * (2 * rank)
    pads[2 * (rank - 1 - dim)], pads[2 * (rank - 1 - dim) + 1] = index, size - index - 1
    placed = lw.g.add("pad", [src], {"pads": pads}, n.name + "_placed") if size > 1 else src
    at = lw.g.add("reshape", [lw.g.add("iota", [], {"end": size}, n.name + "_at")],
                  {"shape": [size] + [1] * (rank - 1 - dim)}, n.name + "_along")
    here = lw.g.add("eq", [at, literal(index, torch.int64)], None, n.name + "_here")
    return lw.add(n, "where", [here, placed, lw.operand(a["self"], out.dtype)])


def _addmv(lw, n):
    """addmv(v, M, x, beta, alpha): beta v + alpha (M @ x)."""
    a = bind(n)
    dt = lw.out(n).dtype
    prod = lw.g.add("matmul", [lw.operand(a["mat"], dt), lw.operand(a["vec"], dt)], None, n.name + "_mv")
    alpha, beta = a.get("alpha", 1), a.get("beta", 1)
    if alpha != 1:
        prod = lw.g.add("mul", [prod, literal(alpha, dt)], None, n.name + "_alpha")
    if beta == 0:
        return prod
    base = lw.operand(a["self"], dt)
    if beta != 1:
        base = lw.g.add("mul", [base, literal(beta, dt)], None, n.name + "_beta")
    return lw.add(n, "add", [base, prod])


def _hardshrink(lw, n):
    a = bind(n)
    dt = lw.out(n).dtype
    x = lw.operand(a["self"], dt)
    lambd = float(a.get("lambd", 0.5))
    keep = lw.g.add("gt", [lw.g.add("abs", [x], None, n.name + "_abs"), literal(lambd, dt)], None, n.name + "_keep")
    return lw.add(n, "where", [keep, x, literal(0, dt)])


def _edge_pad(kind):
    """reflection_pad / replication_pad (1d, 2d, 3d): along each padded dim
    (pairs from the last dim, as F.pad) an index_select of the source index:
    reflected (without repeating the edge) or clamped to the edge."""
    def rule(lw, n):
        a = bind(n)
        x = value(a["self"])
        ref = lw.ref(a["self"])
        pads = [int(p) for p in a["padding"]]
        for k in range(len(pads) // 2):
            left, right = pads[2 * k], pads[2 * k + 1]
            if left == 0 and right == 0:
                continue
            d = x.dim() - 1 - k
            size = int(x.shape[d])
            if left < 0 or right < 0:
                raise Unsupported(f"{kind} with a negative pad")
            if kind == "reflection" and (left >= size or right >= size):
                raise Unsupported(f"reflection pad {left}, {right} of a dim of {size}")
            g, name = lw.g, n.name + f"_d{d}"
            at = g.add("sub", [g.add("iota", [], {"end": size + left + right}, name + "_i"),
                               literal(left, torch.int64)], None, name + "_at")
            if kind == "reflection":
                last = literal(size - 1, torch.int64)
                mirrored = g.add("abs", [at], None, name + "_abs")
                at = g.add("sub", [last, g.add("abs", [g.add("sub", [last, mirrored], None, name + "_back")], None,
                                               name + "_abs2")], None, name + "_reflected")
            else:
                at = g.add("minimum", [g.add("maximum", [at, literal(0, torch.int64)], None, name + "_lo"),
                                       literal(size - 1, torch.int64)], None, name + "_clamped")
            ref = g.add("index_select", [ref, at], {"axis": d}, name + "_padded")
        return ref
    return rule


def _pixel_shuffle(kind):
    """pixel_shuffle (N, C r^2, H, W) -> (N, C, H r, W r) and its inverse
    pixel_unshuffle: a reshape, a permute, a reshape (leading batch dims
    kept)."""
    def rule(lw, n):
        a = bind(n)
        x = value(a["self"])
        r = int(a["upscale_factor" if kind == "shuffle" else "downscale_factor"])
        sizes = [int(d) for d in x.shape]
        lead, (c, h, w) = sizes[:-3], sizes[-3:]
        b = len(lead)
        ref = lw.ref(a["self"])
        g, name = lw.g, n.name
        if kind == "shuffle":
            parts = lead + [c // (r * r), r, r, h, w]
            order = list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2]
        else:
            parts = lead + [c, h // r, r, w // r, r]
            order = list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3]
        ref = g.add("reshape", [ref], {"shape": parts}, name + "_split")
        ref = g.add("permute", [ref], {"dims": order}, name + "_moved")
        return lw.reshape(n, ref, lw.out(n).shape)
    return rule


def _im2col(lw, n):
    """im2col (nn.Unfold: ConvBERT's span convolution): (N, C, H, W) ->
    (N, C kh kw, Ho Wo), each kernel tap a strided slice of the zero-padded
    input, the taps concatenated after the channels."""
    a = bind(n)
    x = value(a["self"])
    if x.dim() != 4:
        raise Unsupported("im2col of a batch without its batch dim")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_pair(a[k]) for k in ("kernel_size", "dilation", "padding", "stride"))
    nb, c, h, w = (int(d) for d in x.shape)
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise Unsupported("im2col with no output position")
    g, name = lw.g, n.name
    ref = lw.ref(a["self"])
    if ph or pw:
        ref = g.add("pad", [ref], {"pads": [pw, pw, ph, ph]}, name + "_padded")
    taps = []
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dh, j * dw
            tap = g.add("slice", [ref], {"axes": [2, 3], "starts": [y0, x0],
                                         "ends": [y0 + (ho - 1) * sh + 1, x0 + (wo - 1) * sw + 1],
                                         "steps": [sh, sw]}, name + f"_tap{i}_{j}")
            taps.append(g.add("reshape", [tap], {"shape": [nb, c, 1, ho * wo]}, name + f"_row{i}_{j}"))
    cols = taps[0] if len(taps) == 1 else g.add("concat", taps, {"axis": 2}, name + "_taps")
    return lw.reshape(n, cols, lw.out(n).shape)


def _flip(lw, n):
    """flip(x, dims): along each dim an index_select of size - 1 - iota
    (PyTorch's decomposition goes through prims.rev)."""
    a = bind(n)
    x = value(a["self"])
    ref = lw.ref(a["self"])
    dims = sorted({_norm(int(d), max(x.dim(), 1)) for d in a["dims"]})
    for d in dims:
        size = int(x.shape[d]) if x.dim() else 1
        if size == 1:
            continue
        i = lw.g.add("iota", [], {"end": size}, n.name + f"_i{d}")
        back = lw.g.add("sub", [literal(size - 1, torch.int64), i], None, n.name + f"_back{d}")
        ref = lw.g.add("index_select", [ref, back], {"axis": d}, n.name + f"_flipped{d}")
    return ref


def _cumsum(lw, n):
    """cumsum(x, dim): y[..., i] = the sum of x[..., j] over j <= i, as one
    reduction over a new last axis of x masked by the lower triangle (a
    fused nest; quadratic in the scanned length, which is short where
    models scan: position ids over a sequence). PyTorch's own decomposition
    goes through prims, which tensorc does not lower."""
    a = bind(n)
    x, out = value(a["self"]), lw.out(n)
    rank = x.dim()
    src = lw.operand(a["self"], out.dtype)
    if rank == 0:
        return lw.add(n, "reshape", [src], {"shape": []})
    axis = _norm(int(a["dim"]), rank)
    length = int(x.shape[axis])
    if length > 8192:
        raise Unsupported(f"cumsum along {length} elements (tensorc's is quadratic in the length)")
    if axis != rank - 1:
        src = lw.g.add("transpose", [src], {"dim0": axis, "dim1": rank - 1}, n.name + "_last")
    sizes = [int(d) for d in x.shape]
    sizes[axis], sizes[-1] = sizes[-1], sizes[axis]
    row = lw.g.add("reshape", [src], {"shape": sizes[:-1] + [1, length]}, n.name + "_row")
    i = lw.g.add("reshape", [lw.g.add("iota", [], {"end": length}, n.name + "_i")], {"shape": [length, 1]},
                 n.name + "_rows")
    j = lw.g.add("iota", [], {"end": length}, n.name + "_j")
    upto = lw.g.add("le", [j, i], None, n.name + "_upto")
    terms = lw.g.add("where", [upto, row, literal(0, out.dtype)], None, n.name + "_terms")
    ref = lw.g.add("sum", [terms], {"axes": [rank]}, n.name + ("_sums" if axis != rank - 1 else ""))
    if axis != rank - 1:
        ref = lw.g.add("transpose", [ref], {"dim0": axis, "dim1": rank - 1}, n.name)
    return ref


def _upsample_nearest(lw, n):
    """upsample_nearest1d/2d (interpolate mode 'nearest'): along each
    spatial dim an index_select of source row min(floor(i * scale), in - 1),
    scale the inverse of the given scale factor or in / out, in f32 as
    PyTorch's kernels compute it."""
    a = bind(n)
    x = value(a.get("input", a.get("self")))
    ref = lw.ref(a.get("input", a.get("self")))
    out = [int(d) for d in lw.out(n).shape]
    spatial = x.dim() - 2
    factors = a.get("scale_factors")
    given = list(factors) if factors else [a.get("scales_h"), a.get("scales_w")][2 - spatial:] if spatial == 2 \
        else [a.get("scales")]
    for k in range(spatial):
        axis, size, target = 2 + k, int(x.shape[2 + k]), out[2 + k]
        if size == target:
            continue
        scale = 1.0 / float(given[k]) if given and k < len(given) and given[k] and float(given[k]) > 0 \
            else size / target
        i = lw.g.add("cast", [lw.g.add("iota", [], {"end": target}, n.name + "_dst")], {"to": "f32"},
                     n.name + "_dst_f32")
        src = lw.g.add("floor", [lw.g.add("mul", [i, float(torch.tensor(scale, dtype=torch.float32))], None,
                                          n.name + "_scaled")], None, n.name + "_floor")
        src = lw.g.add("minimum", [lw.g.add("cast", [src], {"to": "i64"}, n.name + "_src"),
                                   literal(size - 1, torch.int64)], None, n.name + "_clamped")
        ref = lw.g.add("index_select", [ref, src], {"axis": axis}, n.name + f"_rows{k}")
    return ref


def _fill(lw, n):
    """fill(self, value): self's shape and dtype, every element the value (a
    number or a 0-d tensor)."""
    a = bind(n)
    out = lw.out(n)
    shape = [int(d) for d in out.shape]
    v = a["value"]
    if isinstance(v, fx.Node):
        if value(v).dim() != 0:
            raise Unsupported("fill with a tensor of rank > 0")
        ref = lw.operand(v, out.dtype)
        return lw.add(n, "broadcast_to", [ref], {"shape": shape}) if shape else ref
    return _filled(v)(lw, n)


def _slice_scatter(lw, n):
    """slice_scatter(self, src, dim, start, end, step=1): self with the slice
    replaced by src (what functionalization makes of an assignment to a
    slice, as Swin's window masks are built): src padded to self's shape,
    then where(inside the slice, it, self). One fused nest."""
    a = bind(n)
    base = a.get("self", a.get("input"))  # the schema's name (self; input in newer PyTorch)
    x, out = value(base), lw.out(n)
    rank = x.dim()
    dim = _norm(int(a.get("dim", 0) or 0), rank)
    size = int(x.shape[dim])
    step = int(a.get("step", 1) or 1)
    start, end = a.get("start"), a.get("end")
    start = 0 if start is None else int(start)
    end = size if end is None else int(end)
    start, end = [min(max(v + size if v < 0 else v, 0), size) for v in (start, end)]
    if step != 1:
        raise Unsupported(f"slice_scatter with step {step}")
    src = lw.operand(a["src"], out.dtype)
    if start == 0 and end == size:
        return lw.add(n, "reshape", [src], {"shape": [int(d) for d in out.shape]})
    if end <= start:
        return lw.operand(base, out.dtype)
    pads = [0] * (2 * rank)
    pads[2 * (rank - 1 - dim)], pads[2 * (rank - 1 - dim) + 1] = start, size - end
    placed = lw.g.add("pad", [src], {"pads": pads}, n.name + "_placed")
    at = lw.g.add("iota", [], {"end": size}, n.name + "_at")
    at = lw.g.add("reshape", [at], {"shape": [size] + [1] * (rank - 1 - dim)}, n.name + "_along")
    inside = lw.g.add("logical_and", [lw.g.add("ge", [at, literal(start, torch.int64)], None, n.name + "_from"),
                                      lw.g.add("lt", [at, literal(end, torch.int64)], None, n.name + "_to")],
                      None, n.name + "_inside")
    return lw.add(n, "where", [inside, placed, lw.operand(base, out.dtype)])


def _as_strided(lw, n):
    """as_strided(self, size, stride, offset) where it is a view tensorc
    values can express: self's elements in row-major order (its strides
    contiguous, size-1 dims aside), read whole and in order by the result
    (its strides the contiguous ones of `size`, size-1 dims aside, offset
    0): a reshape (ConvNeXt's pooled features). Other layouts stay in
    PyTorch."""
    a = bind(n)
    x, out = value(a["self"]), lw.out(n)

    def row_major(shape, strides):
        expect = 1
        for d, st in zip(reversed([int(v) for v in shape]), reversed([int(v) for v in strides])):
            if d != 1 and st != expect:
                return False
            expect *= d
        return True

    size, stride = [int(v) for v in a["size"]], [int(v) for v in a["stride"]]
    offset = int(a.get("storage_offset") or 0)
    if offset != 0 or not row_major(x.shape, x.stride()) or not row_major(size, stride) or \
            x.numel() != out.numel():
        raise Unsupported("as_strided that is not a reshape of its input")
    return lw.reshape(n, lw.ref(a["self"]), size)


def _index_select(lw, n):
    a = bind(n)
    axis = _norm(int(a["dim"]), max(value(a["self"]).dim(), 1))
    return lw.add(n, "index_select", [lw.ref(a["self"]), lw.ref(a["index"])], {"axis": axis})


def _gather(lw, n):
    a = bind(n)
    if a.get("sparse_grad"):
        raise Unsupported("gather with sparse_grad")
    axis = _norm(int(a["dim"]), max(value(a["self"]).dim(), 1))
    return lw.add(n, "gather", [lw.ref(a["self"]), lw.ref(a["index"])], {"axis": axis})


def _index(lw, n):
    """x[i0, i1, ...] with integer index tensors (aten.index.Tensor and
    _unsafe_index, which PyTorch's decompositions of interpolation and
    cumulative ops emit): the index tensors broadcast together; where the
    indexed dims are adjacent their result dims take their place, otherwise
    they come first (PyTorch's rule), so x is permuted to put the indexed
    dims first. Adjacent indexed dims are one flattened dim indexed by
    the row-major linear index: one index_select. Negative indices wrap as
    PyTorch wraps them; boolean masks (data-dependent shapes) are not
    lowered."""
    a = bind(n)
    x = value(a["self"])
    indices = list(a["indices"]) + [None] * (x.dim() - len(a["indices"]))
    used = [k for k, i in enumerate(indices) if i is not None]
    if not used:
        raise Unsupported("indexing without an index tensor")
    for k in used:
        iv = value(indices[k])
        if iv.dtype not in (torch.int64, torch.int32):
            raise Unsupported(f"indexing with a {iv.dtype} tensor")
    src, sizes = lw.ref(a["self"]), [int(d) for d in x.shape]
    if used != list(range(used[0], used[0] + len(used))):  # not adjacent: indexed dims first
        order = used + [k for k in range(x.dim()) if k not in used]
        src = lw.g.add("permute", [src], {"dims": order}, n.name + "_indexed_first")
        sizes = [sizes[k] for k in order]
        indices = [indices[k] for k in order]
        used = list(range(len(used)))
    first, count = used[0], len(used)
    shapes = [tuple(int(d) for d in value(indices[k]).shape) for k in used]
    shape = list(torch.broadcast_shapes(*shapes))
    linear = None
    for k in used:  # row-major linear index over the indexed dims, each wrapped
        ref, iv = lw.ref(indices[k]), value(indices[k])
        ref = lw.cast(ref, iv.dtype, torch.int64, n.name + "_i64")
        negative = lw.g.add("lt", [ref, literal(0, torch.int64)], None, n.name + "_negative")
        wrapped = lw.g.add("add", [ref, literal(sizes[k], torch.int64)], None, n.name + "_wrapped")
        ref = lw.g.add("where", [negative, wrapped, ref], None, n.name + "_wrapped_index")
        if linear is None:
            linear = ref
        else:
            linear = lw.g.add("mul", [linear, literal(sizes[k], torch.int64)], None, n.name + "_row")
            linear = lw.g.add("add", [linear, ref], None, n.name + "_linear")
    if tuple(shapes[0]) != tuple(shape) or count > 1:
        linear = lw.g.add("broadcast_to", [linear], {"shape": shape or [1]}, n.name + "_broadcast")
    numel = 1
    for d in shape:
        numel *= d
    linear = lw.g.add("reshape", [linear], {"shape": [numel]}, n.name + "_flat")
    if count > 1:
        flat = 1
        for k in used:
            flat *= sizes[k]
        src = lw.g.add("reshape", [src], {"shape": sizes[:first] + [flat] + sizes[first + count:]},
                       n.name + "_flattened")
    out = lw.g.add("index_select", [src, linear], {"axis": first}, n.name + "_select")
    want = [int(d) for d in lw.out(n).shape]
    if [int(d) for d in sizes[:first]] + shape + sizes[first + count:] != want:
        raise Unsupported(f"indexing whose result shape {want} is not PyTorch's rule's")
    if len(want) != x.dim() - count + 1 or shape != [numel]:
        out = lw.reshape(n, out, want)
    return out


def _sdpa(lw, n):
    """PyTorch's fused attention ops (the variant its dispatcher chose for
    the device) -> one tc attention op; the extra results (log-sum-exp,
    seeds) are the backward's. Dropout on the probabilities (training)
    draws tensorc's dropout stream from the call's seed, as native_dropout's
    (the op's seed operand: the fused 16-bit kernels apply it, otherwise
    the compiler writes it out as softmax -> dropout -> matmul)."""
    a = bind(n)
    q, k, v = a["query"], a["key"], a["value"]
    mask = a.get("attn_bias", a.get("attn_mask"))
    # The output has the query's dtype; the fused variants return several
    # results (the others are the backward's).
    out = value(q)
    results = len(n.target._schema.returns)
    attrs = {}
    if a.get("is_causal"):
        attrs["is_causal"] = True
    if a.get("scale") is not None:
        attrs["scale"] = float(a["scale"])
    args = [lw.ref(q), lw.ref(k), lw.ref(v)]
    if mask is not None:
        args.append(lw.operand(mask, out.dtype) if value(mask).dtype != torch.bool else lw.ref(mask))
    p = float(a.get("dropout_p") or 0)
    if p != 0:
        if not 0.0 < p < 1.0:
            raise Unsupported(f"attention dropout probability {p}")
        if a.get("enable_gqa"):
            raise Unsupported("attention dropout with enable_gqa")
        if mask is None:
            args.append(None)
        lw.dropouts += 1
        args.append(lw.seed())
        attrs["dropout_p"] = p
        attrs["dropout_stream"] = lw.dropouts - 1
    ref = lw.add(n, "scaled_dot_product_attention", args, attrs or None)
    return [ref] + [None] * (results - 1) if results > 1 else ref


def _safe_softmax(lw, n):
    """softmax whose rows of only -inf give 0, not NaN (PyTorch's attention
    with a mask that hides a whole row)."""
    a = bind(n)
    out = lw.out(n)
    if a.get("dtype") is not None and a["dtype"] != out.dtype:
        raise Unsupported("_safe_softmax with a dtype")
    rank = value(a["self"]).dim()
    if rank == 0:
        raise Unsupported("softmax of a scalar")
    axis = _norm(int(a["dim"]), rank)
    x = lw.operand(a["self"], out.dtype)
    soft = lw.g.add("softmax", [x], {"axis": axis}, n.name + "_softmax")
    top = lw.g.add("max", [x], {"axes": [axis], "keepdim": True}, n.name + "_max")
    hidden = lw.g.add("eq", [top, literal(float("-inf"), out.dtype)], None, n.name + "_hidden")
    return lw.add(n, "where", [hidden, literal(0, out.dtype), soft])


RULES = {}


def _register(rule, *names):
    for name in names:
        RULES[name] = rule


for _op in ("add", "sub", "mul", "maximum", "minimum"):
    _register(_binary(_op), _op)
_register(_binary("pow"), "float_power")
_register(_rsub, "rsub")
_register(_div, "div")
for _kind in ("floor_divide", "remainder", "fmod"):
    _register(_modular(_kind), _kind)
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    _register(_compare(_op), _op)
for _op in ("neg", "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "silu", "erf",
            "reciprocal", "sign", "floor", "ceil", "logical_not"):
    _register(_unary(_op), _op)
_register(_logical("logical_and"), "logical_and")
_register(_logical("logical_or"), "logical_or")
_register(_bitwise_not, "bitwise_not")
_register(_bitwise("and"), "bitwise_and")
_register(_bitwise("or"), "bitwise_or")
_register(_gelu, "gelu")
_register(_pow, "pow")
_register(_clamp, "clamp")
_register(_where, "where")
_register(_masked_fill, "masked_fill")
_register(_to_copy, "_to_copy")
_register(_identity, "clone", "alias", "detach", "lift_fresh_copy", "lift_fresh", "alias_copy", "detach_copy",
          "contiguous", "_conj", "resolve_conj", "resolve_neg")
_register(_copy, "copy")
_register(_native_dropout, "native_dropout")
_register(_view, "view", "_unsafe_view", "reshape", "view_copy", "_reshape_alias", "_reshape_alias_copy",
          "unsqueeze", "unsqueeze_copy", "squeeze", "squeeze_copy", "flatten", "unflatten")
_register(_expand, "expand", "expand_copy")
_register(_permute, "permute", "permute_copy")
_register(_transpose, "transpose", "transpose_copy")
_register(_t, "t", "t_copy", "numpy_T")
_register(_slice, "slice", "slice_copy")
_register(_select, "select", "select_copy")
_register(_cat, "cat", "concat")
_register(_split, "split", "split_with_sizes", "split_copy", "split_with_sizes_copy")
_register(_reduction("sum"), "sum")
_register(_reduction("mean"), "mean")
_register(_reduction("prod"), "prod")
_register(_reduction("logsumexp"), "logsumexp")
_register(_extreme("max"), "amax", "max")
_register(_extreme("min"), "amin", "min")
_register(_arg_extreme("argmax"), "argmax")
_register(_arg_extreme("argmin"), "argmin")
_register(_var, "var")
_register(_any_all("any"), "any")
_register(_any_all("all"), "all")
for _kind in ("isnan", "isinf", "isfinite"):
    _register(_special_values(_kind), _kind)
_register(_matmul, "mm", "bmm")
_register(_addmm, "addmm")
_register(_softmax("softmax"), "_softmax", "softmax")
_register(_safe_softmax, "_safe_softmax")
_register(_softmax("log_softmax"), "_log_softmax", "log_softmax")
_register(_layer_norm, "native_layer_norm")
_register(_batch_norm, "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
          "_native_batch_norm_legit_functional")
_register(_convolution, "convolution")
_register(_max_pool, "max_pool2d_with_indices", "max_pool2d")
_register(_avg_pool, "avg_pool2d")
_register(_adaptive_avg_pool, "_adaptive_avg_pool2d", "adaptive_avg_pool2d")
_register(_embedding, "embedding")
_register(_nll_loss, "nll_loss_forward")
_register(_constant_pad, "constant_pad_nd")
_register(_filled(0), "zeros", "zeros_like", "new_zeros")
_register(_filled(1), "ones", "ones_like", "new_ones")
_register(_filled(None), "full", "full_like", "new_full", "scalar_tensor")
_register(_arange, "arange")
_register(_index_select, "index_select")
_register(_cumsum, "cumsum")
_register(_flip, "flip")
_register(_im2col, "im2col")
_register(_pixel_shuffle("shuffle"), "pixel_shuffle")
_register(_pixel_shuffle("unshuffle"), "pixel_unshuffle")
_register(_edge_pad("reflection"), "reflection_pad1d", "reflection_pad2d", "reflection_pad3d")
_register(_edge_pad("replication"), "replication_pad1d", "replication_pad2d", "replication_pad3d")
for _kind in ("expm1", "log1p", "log2", "trunc", "frac"):
    _register(_elementary(_kind), _kind)
_register(_vector_norm, "linalg_vector_norm")
_register(_nan_to_num, "nan_to_num")
_register(_linspace, "linspace")
_register(_log_sigmoid, "log_sigmoid_forward")
_register(_lerp, "lerp")
_register(_robust_loss("smooth_l1"), "smooth_l1_loss")
_register(_robust_loss("huber"), "huber_loss")
_register(_moments("var_mean"), "var_mean")
_register(_moments("std_mean"), "std_mean")
_register(_select_scatter, "select_scatter")
_register(_addmv, "addmv")
_register(_hardshrink, "hardshrink")
_register(_bitwise("xor"), "bitwise_xor")
_register(_bernoulli, "bernoulli", "bernoulli_")
_register(_empty, "empty", "new_empty", "empty_like", "empty_strided", "new_empty_strided")
_register(_fill, "fill")
_register(_slice_scatter, "slice_scatter")
_register(_as_strided, "as_strided")
_register(_upsample_nearest, "upsample_nearest2d", "upsample_nearest1d")
_register(_gather, "gather")
_register(_index, "index", "_unsafe_index")
_register(_sdpa, "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
          "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
          "scaled_dot_product_attention")


def lower_graph(nodes, inputs, outputs, name):
    """The graph file of ATen `nodes` (in order) reading `inputs` (fx nodes
    whose values come from outside) and returning `outputs` (fx nodes)."""
    lw = Lowering(name)
    for node in inputs:
        try:
            lw.add_input(node)
        except Unsupported as e:
            # The first op reading it is the one that cannot be lowered.
            e.node = next((n for n in nodes if node in n.all_input_nodes), None)
            raise
    for node in nodes:
        try:
            lw.lower(node)
        except Unsupported as e:
            e.node = node
            raise
    lw.g.outputs = [lw.ref(o) for o in outputs]
    return lw.g.json()
