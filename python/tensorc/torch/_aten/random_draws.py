"""fallback_random without a partition per random op: each random op's draw
made first, in eager's order, on a fresh tensor of its input's shape (what
these ops draw depends on the shape alone, not the values), and its result
rebuilt from the draw where the graph used it. Left in place, every random
op PyTorch runs cut the graph: BERT's accuracy run compiled 38 partitions
instead of one, and EfficientNet's (a stochastic depth per block) did not
finish compiling in 240 s."""
import operator

import torch
import torch.fx as fx

from .lowering import bind, packet_name, value


def _scalar_p(n):
    """A random op's probability when it is a number (not a tensor)."""
    p = bind(n).get("p")
    return p if isinstance(p, (int, float)) and not isinstance(p, bool) else None


def _hoistable(n):
    """How `n` draws when its draw depends on its input's shape alone:
    "dropout" (native_dropout in training), "fill" (bernoulli with a number
    p, rand_like/randn_like: a result of the input's shape) or "sized" (rand,
    randn: no tensor input); None otherwise."""
    name = packet_name(n.target)
    if name == "native_dropout":
        # On a non-contiguous input PyTorch's CUDA kernel maps elements to
        # threads otherwise than on the fresh contiguous tensor: other masks.
        x = value(n.args[0]) if n.args else None
        contiguous = isinstance(x, torch.Tensor) and x.is_contiguous()
        return "dropout" if bind(n).get("train") and _scalar_p(n) is not None and contiguous else None
    if name in ("bernoulli", "bernoulli_"):
        return "fill" if _scalar_p(n) is not None else None
    if name in ("rand_like", "randn_like"):
        return "fill"
    if name in ("rand", "randn"):
        return "sized" if not any(isinstance(a, fx.Node) for a in n.all_input_nodes) else None
    return None


def _meta_like(v, dtype):
    """A value of v's shape and device, of `dtype`, for a new node's meta (a
    fake tensor where v is one)."""
    mode = getattr(v, "fake_mode", None)
    if mode is not None:
        with mode:
            return torch.empty(v.shape, dtype=dtype, device=v.device)
    return torch.empty(v.shape, dtype=dtype, device=v.device)


def hoist_random_draws(gm, draws_random):
    """Moves every random op of `gm` (those `draws_random` says) to the start,
    in their order, drawing on fresh tensors; returns the nodes it made
    that PyTorch must run (the draws and their fresh inputs), or None where
    some random op's draw depends on values (tensor probabilities, attention
    dropout): then nothing moves, since the draws' order would change."""
    graph = gm.graph
    randoms = [n for n in graph.nodes if n.op == "call_function" and draws_random(n)]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if not randoms or not placeholders or any(_hoistable(n) is None for n in randoms):
        return None
    cursor = placeholders[-1]  # the draws go after it, in order
    made = []

    def place(target, args, kwargs, val):
        nonlocal cursor
        with graph.inserting_after(cursor):
            node = graph.call_function(target, args, kwargs)
        node.meta["val"] = val
        cursor = node
        made.append(node)
        return node

    for n in randoms:
        kind = _hoistable(n)
        if kind == "sized":
            cursor.append(n)
            cursor = n
            made.append(n)
            continue
        source = n.args[0]
        v = value(source)
        size = [int(d) for d in v.shape]
        where = {"dtype": v.dtype, "device": v.device}
        if kind == "dropout":
            ones = place(torch.ops.aten.full.default, (size, 1), where, _meta_like(v, v.dtype))
            results = _dropout_results(n, source)
            drawn = place(n.target, (ones,) + tuple(n.args[1:]), dict(n.kwargs), results)
            mask = place(operator.getitem, (drawn, 1), {}, results[1])
            _rebuild_dropout(graph, n, source, mask)
        else:
            fresh = place(torch.ops.aten.empty.memory_format, (size,), where, _meta_like(v, v.dtype))
            drawn = place(n.target, (fresh,) + tuple(n.args[1:]), dict(n.kwargs), n.meta.get("val"))
            n.replace_all_uses_with(drawn)
            inputs = n.all_input_nodes
            graph.erase_node(n)
            _erase_unused(graph, inputs)
    graph.lint()
    gm.recompile()
    return made


# Ops that only make or relabel a tensor: left without users once the random
# op that filled their result moved, they go too.
_MAKERS = {"empty", "empty_like", "empty_strided", "new_empty", "zeros", "zeros_like", "ones", "ones_like", "full",
           "full_like", "detach", "alias", "clone", "lift_fresh_copy"}


def _erase_unused(graph, nodes):
    for node in nodes:
        if node.op == "call_function" and not node.users and packet_name(node.target) in _MAKERS:
            inputs = node.all_input_nodes
            graph.erase_node(node)
            _erase_unused(graph, inputs)


def _dropout_results(n, x):
    """native_dropout's (output, mask) values: its meta's, or (PyTorch 1.13
    records none for ops of several results) made from its input's."""
    v = n.meta.get("val")
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return tuple(v)
    return (_meta_like(value(x), value(x).dtype), _meta_like(value(x), torch.bool))


def _rebuild_dropout(graph, n, x, mask):
    """native_dropout's results from the drawn mask: the mask itself, and
    x * mask * 1/(1-p), computed in f32 and rounded once, as PyTorch's
    kernel does."""
    p = float(_scalar_p(n))
    out = _dropout_results(n, x)[0]
    wide_val = _meta_like(value(x), torch.float32)
    after = n

    def add(target, args, kwargs, val):
        nonlocal after
        with graph.inserting_after(after):
            after = graph.call_function(target, args, kwargs)
        after.meta["val"] = val
        return after

    wide = add(torch.ops.aten._to_copy.default, (x,), {"dtype": torch.float32}, wide_val)
    kept = add(torch.ops.aten.mul.Tensor, (wide, mask), {}, wide_val)
    scaled = add(torch.ops.aten.mul.Tensor, (kept, 1.0 / (1.0 - p) if p < 1 else 0.0), {}, wide_val)
    result = add(torch.ops.aten._to_copy.default, (scaled,), {"dtype": out.dtype}, out)
    for use in list(n.users):
        if use.op == "call_function" and use.target is operator.getitem:
            use.replace_all_uses_with(result if use.args[1] == 0 else mask)
            graph.erase_node(use)
    if not n.users:
        graph.erase_node(n)
