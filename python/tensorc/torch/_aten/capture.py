"""Capture at the ATen level (docs/pytorch.md, "What is captured").

A module, or the graph Dynamo hands a backend, is traced with make_fx on
fake tensors (shapes and dtypes, no data: no model code runs on real
values) under PyTorch's functionalization, so the graph holds ATen ops
only, with:

- in-place updates as functional ops plus one `aten.copy_` back into the
  mutated input at the end (run by PyTorch, so the caller's tensor is
  updated as eager updates it);
- autocast's casts as explicit `aten._to_copy` nodes: autocast runs in the
  dispatcher above the trace, so the graph is the program autocast made;
- PyTorch's decompositions for the ops in `decompositions.py`.

Parameters and buffers are lifted to graph inputs (tied weights are one
input), read from the module at every call by their names.
"""
import contextlib

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .decompositions import decomposition_table


def _functionalize(fn):
    """PyTorch's functionalization (torch.func >= 2.0, functorch in 1.13)."""
    try:
        from torch.func import functionalize
    except ImportError:
        from functorch import functionalize
    return functionalize(fn)


def _functional_call(module, tensors, args):
    try:
        from torch.func import functional_call
    except ImportError:
        from torch.nn.utils.stateless import functional_call
    return functional_call(module, tensors, args)


def module_state(module):
    """The module's parameters and buffers: ([(unique tensor's first name,
    tensor)], {every name: index into that list}). A tensor reached under
    several names (tied input/output embeddings) is one entry."""
    unique, index, seen = [], {}, {}
    for prefix, m in module.named_modules(remove_duplicate=False):
        for table in (m._parameters, m._buffers):
            for name, t in table.items():
                if t is None:
                    continue
                full = f"{prefix}.{name}" if prefix else name
                if full in index:
                    continue
                k = seen.get(id(t))
                if k is None:
                    k = seen[id(t)] = len(unique)
                    unique.append((full, t))
                index[full] = k
    return unique, index


def _fake_mode_of(values):
    """The FakeTensorMode of the fake tensors among `values` (Dynamo's
    example inputs), else None."""
    try:
        from torch._guards import detect_fake_mode
        return detect_fake_mode(values)
    except ImportError:
        pass
    from torch._subclasses.fake_tensor import FakeTensor
    for v in values:
        if isinstance(v, FakeTensor):
            return v.fake_mode
    return None


def _writes(target):
    """Whether the op writes into an argument (copy_ back into an input)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return True  # not an ATen op: keep it
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _drop_empty_concatenands(gm):
    """cat() skips 1-D empty operands (PyTorch's rule for the `torch.tensor([])`
    a KV cache starts from): dropped from the graph where the others already
    have the result's dtype, so the cache's empty constant does not split a
    model's partitions."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or getattr(getattr(node.target, "overloadpacket", None), "__name__", "") != "cat":
            continue
        tensors = node.args[0]
        out = node.meta.get("val")
        values = [t.meta.get("val") if isinstance(t, torch.fx.Node) else None for t in tensors]
        if out is None or any(v is None for v in values):
            continue
        kept = [t for t, v in zip(tensors, values) if not (v.dim() == 1 and v.numel() == 0)]
        if not kept or len(kept) == len(tensors) or any(v.dtype != out.dtype for t, v in zip(tensors, values)
                                                         if t in kept):
            continue
        node.args = (kept,) + tuple(node.args[1:])
    gm.recompile()


def _drop_unused(gm):
    """Removes ops whose results nothing reads (the empty tensors batch norm
    returns for its backward, detach() of saved values) and that write
    nothing; the copies back into inputs stay."""
    for node in reversed(list(gm.graph.nodes)):
        if node.op == "call_function" and not node.users and not _writes(node.target):
            gm.graph.erase_node(node)
    gm.recompile()


def _distinct(args):
    """The trace's arguments, a tensor given twice (compile(m, (ids, ids)))
    copied: make_fx keys its proxies by tensor, so both inputs would read
    one placeholder and the program would treat every later call's two
    tensors as one."""
    seen, out = set(), []
    for a in args:
        if isinstance(a, torch.Tensor) and id(a) in seen:
            a = a.detach().clone().requires_grad_(a.requires_grad)
        seen.add(id(a))
        out.append(a)
    return out


def _is_fake(t):
    from torch._subclasses.fake_tensor import FakeTensor
    return isinstance(t, FakeTensor)


@contextlib.contextmanager
def _autocast_off():
    with torch.autocast("cpu", enabled=False):
        if torch.cuda.is_available():
            with torch.autocast("cuda", enabled=False):
                yield
        else:
            yield


class Captured:
    """An ATen graph (`gm`, a torch.fx.GraphModule) and what feeds it:
    `state` [(name, tensor)] the module's parameters and buffers (the
    graph's first inputs), then the call's inputs."""

    def __init__(self, gm, state_names, n_inputs):
        self.gm, self.state_names, self.n_inputs = gm, state_names, n_inputs


def capture(module, example_inputs, autocast=None):
    """The ATen graph of `module(*example_inputs)` (its parameters and
    buffers lifted to the graph's first inputs). `example_inputs` may be
    real or Dynamo's fake tensors (then traced in their fake mode).
    `autocast`: (device type, dtype) to trace under torch.autocast
    (tensorc.torch.compile's caller asked for it), else the ambient mode
    as eager would see it (Dynamo's graphs carry their own regions)."""
    unique, index = module_state(module)
    n_state = len(unique)

    def flat(*args):
        state, inputs = args[:n_state], args[n_state:]
        tensors = {name: state[k] for name, k in index.items()}
        ctx = torch.autocast(autocast[0], dtype=autocast[1]) if autocast else contextlib.nullcontext()
        with ctx:
            return _functional_call(module, tensors, tuple(inputs))

    state = [t for _, t in unique]
    fake_mode = _fake_mode_of([x for x in example_inputs if isinstance(x, torch.Tensor)])

    def trace(fn, args):
        traced = make_fx(fn, decomposition_table=decomposition_table(),
                         tracing_mode="real" if fake_mode else "fake")
        if not fake_mode:
            return traced(*args)
        with fake_mode:
            return traced(*[fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) and not _is_fake(a) else a
                            for a in args])

    # Two traces. The first records the ops as autocast hands them on
    # (autocast sits above the trace in the dispatcher, as in eager: it
    # sees layer_norm, not the native_layer_norm that functionalization's
    # decomposition would show it); the second functionalizes that ATen
    # graph with autocast off (its casts are in it).
    args = _distinct([*state, *example_inputs])
    eager_ops = trace(flat, args)
    with _autocast_off():
        gm = trace(_functionalize(eager_ops), args)
    _drop_empty_concatenands(gm)
    _drop_unused(gm)
    for node in gm.graph.nodes:  # tensor constants: PyTorch 1.13 records no value for them
        if node.op == "get_attr" and node.meta.get("val") is None:
            node.meta["val"] = getattr(gm, node.target, None)
    return Captured(gm, [name for name, _ in unique], len(example_inputs))
