"""torch.fx graph -> tensorc graph file (format: docs/graph-format.md).

The module is traced with torch.fx (torch.nn's modules stay leaves and are
lowered here), then run once on the example inputs so every value's dtype,
shape and (for shape arithmetic) concrete value is known. Values computed
from no input at all (a causal mask from torch.ones(...).tril()) become
constants; every other op must map to tensorc's op set.
"""
import builtins
import contextlib
import json
import math
import operator
import os
import re
from collections import OrderedDict

import torch
import torch.fx as fx
from torch.fx import _symbolic_trace

from . import _dynamic, _safetensors
from ._common import DTYPES, UnsupportedOp, literal as _literal
from ._ops import _FUNCTIONS, _MODULES

CONSTANT_LIMIT = 1 << 20  # elements of one inlined constant


class _ConcreteProxy(fx.Proxy):
    """A proxy that also holds its value on the example inputs, so shape
    code traces as plain Python (`B, T, C = x.size()`, `x.shape[-1]`,
    `len(x)`): the example inputs fix every shape."""

    value = None

    def size(self, dim=None):
        return self.value.size() if dim is None else self.value.size(dim)

    @property
    def shape(self):
        return self.value.shape

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def device(self):
        return self.value.device

    def dim(self):
        return self.value.dim()

    def __len__(self):
        return len(self.value)

    def __iter__(self):
        return iter([self[i] for i in range(len(self.value))])

    def __bool__(self):
        return bool(self.value)

    # The fields of torch.max/min along a dim, (values, indices): traced as
    # getattr calls with concrete values (fx's lazy attribute proxies have none).
    @property
    def values(self):
        return self.tracer.create_proxy("call_function", builtins.getattr, (self, "values"), {})

    @property
    def indices(self):
        return self.tracer.create_proxy("call_function", builtins.getattr, (self, "indices"), {})


def _lookup(root, qualname):
    """A parameter, buffer or tensor attribute by path, without
    Module.__getattr__ (the tracer patches it)."""
    *modules, name = qualname.split(".")
    m = root
    for part in modules:
        m = m._modules[part]
    for table in (m._parameters, m._buffers, m.__dict__):
        if name in table:
            return table[name]
    raise AttributeError(qualname)


def _lookup_module(root, qualname):
    m = root
    for part in qualname.split(".") if qualname else []:
        m = m._modules[part]
    return m


@contextlib.contextmanager
def _unpatched():
    """Module.__call__ and __getattr__ as they are outside tracing: values
    on the example inputs are computed, not traced."""
    patched = (torch.nn.Module.__call__, torch.nn.Module.__getattr__)
    torch.nn.Module.__call__, torch.nn.Module.__getattr__ = (_symbolic_trace._orig_module_call,
                                                             _symbolic_trace._orig_module_getattr)
    try:
        yield
    finally:
        torch.nn.Module.__call__, torch.nn.Module.__getattr__ = patched


def _concrete(a):
    return fx.node.map_aggregate(a, lambda x: x.value if isinstance(x, _ConcreteProxy) else x)


class _LazyConstant:
    """A tensor computed from no input (torch.ones(s, s).tril() in a
    forward): added to the graph as a constant only where an op reads it,
    so the steps that built it leave nothing behind."""

    def __init__(self, make):
        self.make = make


class _Env(dict):
    """fx node -> its value in the tensorc graph."""

    def __getitem__(self, node):
        v = super().__getitem__(node)
        if isinstance(v, _LazyConstant):
            v = v.make()
            self[node] = v
        return v


class _Tracer(fx.Tracer):
    """Traces with concrete values beside the proxies and records each
    node's module path (the module whose forward made it)."""

    def __init__(self, example_inputs):
        super().__init__()
        self.record_stack_traces = True
        self.proxy_buffer_attributes = True  # buffers are graph inputs, not constants
        self._path = []
        self._inputs = list(example_inputs)

    def call_module(self, m, forward, args, kwargs):
        self._path.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self._path.pop()

    def proxy(self, node):
        return _ConcreteProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        p.node.meta["tensorc_path"] = self._path[-1] if self._path else ""
        with torch.no_grad(), _unpatched():
            if kind == "placeholder":
                if not self._inputs:
                    raise TypeError(f"tensorc.torch: no example input for argument '{target}'")
                p.value = self._inputs.pop(0)
            elif kind == "get_attr":
                p.value = _lookup(self.root, target)
            elif kind == "call_function":
                p.value = target(*_concrete(args), **_concrete(kwargs))
            elif kind == "call_method":
                cargs = _concrete(args)
                p.value = getattr(cargs[0], target)(*cargs[1:], **_concrete(kwargs))
            elif kind == "call_module":
                p.value = _lookup_module(self.root, target)(*_concrete(args), **_concrete(kwargs))
        return p


class _Values(fx.Interpreter):
    """Runs the graph once, keeping every node's value."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        v = super().run_node(n)
        self.values[n] = v
        return v


def _source_line(node):
    trace = node.stack_trace or ""
    # Innermost first (traceback.walk_stack): the first frame of the user's code.
    for path, line in re.findall(r'File "([^"]+)", line (\d+)', trace):
        if not re.search(r"[/\\](tensorc[/\\]torch|torch[/\\](fx|nn[/\\]modules))[/\\]", path):
            return f"{path}:{line}"
    return ""


def _describe(node, gm):
    if node.op == "call_module":
        return f"module {type(gm.get_submodule(node.target)).__name__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    t = node.target
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__name__", str(t))
    if mod.startswith("torch.nn.functional"):
        return f"torch.nn.functional.{name}"
    if mod == "_operator" or mod == "operator":
        return f"operator.{name}"
    return f"torch.{name}" if mod.startswith("torch") else name


class _Graph:
    def __init__(self, name):
        self.name = name
        self.inputs, self.nodes, self.outputs = [], [], []
        self.output_values = []  # the outputs' values on the example inputs
        self.names = set()
        self.tensors = OrderedDict()  # input name -> tensor (example inputs, parameters, buffers)
        self.sources = OrderedDict()  # input name -> ("input", position), ("param", module path), ("seed", None)
        self.state = []  # (graph input, output reference): the input's value after a call (running statistics)
        self.counters = []  # buffers a call adds 1 to (batch norm's num_batches_tracked)

    def unique(self, base):
        base = re.sub(r"[^A-Za-z0-9_.]", "_", base) or "v"
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def add_input(self, name, t, trainable=False, source=None):
        if t.dtype not in DTYPES:
            raise UnsupportedOp(f"input dtype {t.dtype}", "", "", f"input '{name}'")
        if t.dim() > 0 and min(t.shape) < 1:
            raise UnsupportedOp(f"empty input '{name}'", "", "", "inputs need every dim >= 1")
        name = self.unique(name)
        entry = {"name": name, "dtype": DTYPES[t.dtype], "shape": list(t.shape)}
        if trainable:
            entry["trainable"] = True
        self.inputs.append(entry)
        self.tensors[name] = t
        self.sources[name] = source
        return name

    def add(self, op, args, attrs=None, name="v"):
        name = self.unique(name)
        node = {"name": name, "op": op, "args": args}
        if attrs:
            node["attrs"] = attrs
        self.nodes.append(node)
        return name

    def constant(self, t, name):
        causal = self.causal_mask(t, name)
        if causal is not None:
            return causal
        if t.dtype not in DTYPES:
            raise UnsupportedOp(f"constant of dtype {t.dtype}", "", "")
        if t.numel() > CONSTANT_LIMIT:
            raise UnsupportedOp("a computed constant", "", "", f"{t.numel()} elements (limit {CONSTANT_LIMIT})")
        data = t.detach().cpu().reshape(-1).tolist()
        if t.dtype.is_floating_point:
            data = [_literal(float(x)) if not math.isfinite(x) else x for x in data]
            data = [d["literal"] if isinstance(d, dict) else d for d in data]
        value = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data": data}
        return self.add("constant", [], {"value": value}, name)

    def causal_mask(self, t, name):
        """A boolean [..., R, C] constant (leading dims 1) that is the causal
        mask, j <= i (torch.ones(R, C).tril(), kept where true) or j > i
        (its complement, masked where true), as index comparisons: no R x C
        data in the graph, and the attention it masks is recognized as
        causal (compiler/transforms/RecognizeAttention.cpp)."""
        if t.dtype != torch.bool or t.dim() < 2 or any(d != 1 for d in t.shape[:-2]) or t.numel() < 4:
            return None
        rows, cols = t.shape[-2], t.shape[-1]
        lower = torch.ones(rows, cols, dtype=torch.bool).tril()
        flat = t.detach().cpu().reshape(rows, cols)
        if torch.equal(flat, lower):
            op = "ge"
        elif torch.equal(flat, ~lower):
            op = "lt"
        else:
            return None
        r = self.add("reshape", [self.add("iota", [], {"end": rows}, name + "_rows")], {"shape": [rows, 1]})
        c = self.add("reshape", [self.add("iota", [], {"end": cols}, name + "_cols")], {"shape": [1, cols]})
        mask = self.add(op, [r, c], None, name + ("_keep" if op == "ge" else "_masked"))
        if t.dim() > 2:
            mask = self.add("reshape", [mask], {"shape": list(t.shape)}, name)
        return mask

    def json(self):
        return {"format": "tensorc.graph", "version": 1, "name": self.name, "inputs": self.inputs,
                "nodes": self.nodes, "outputs": self.outputs}


class _Exporter:
    def __init__(self, gm, values, name):
        self.gm, self.values = gm, values
        self.g = _Graph(name)
        self.env = _Env()
        self.placeholders = 0
        self.depends = {}  # node -> whether it depends on a graph input or parameter
        self.params = dict(gm.named_parameters())
        self.buffers = dict(gm.named_buffers())
        self.dropouts = 0  # each training-mode dropout's stream

    # Operands ------------------------------------------------------------
    def ref(self, a):
        if isinstance(a, fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.ref(x) for x in a)
        if isinstance(a, (int, float, bool)) or a is None:
            return _literal(a)
        if isinstance(a, torch.dtype):
            return a
        raise UnsupportedOp(f"argument of type {type(a).__name__}", "", "")

    def val(self, a):
        return self.values[a] if isinstance(a, fx.Node) else a

    def param_input(self, qualname):
        """The graph input of a parameter or buffer, created on first use."""
        key = ("param", qualname)
        if key not in self.env:
            if qualname in self.params:
                p = self.params[qualname]
                self.env[key] = self.g.add_input(qualname, p.detach(), trainable=p.requires_grad,
                                                 source=("param", qualname))
            else:
                t = self.buffers.get(qualname)
                if t is None:
                    t = operator.attrgetter(qualname)(self.gm)
                self.env[key] = self.g.add_input(qualname, t.detach(), source=("param", qualname))
        return self.env[key]

    def seed_input(self):
        """The graph input every training-mode dropout draws its mask from
        (an i64 scalar; CompiledModule passes a fresh one per call)."""
        key = ("seed",)
        if key not in self.env:
            self.env[key] = self.g.add_input("dropout_seed", torch.zeros((), dtype=torch.int64),
                                             source=("seed", None))
        return self.env[key]

    def dropout(self, n, x, p):
        """Training-mode dropout of reference `x`: its own stream of the seed."""
        if not 0 <= p <= 1:
            raise self.unsupported(f"dropout probability {p}")
        self.dropouts += 1
        return self.g.add("dropout", [x, self.seed_input()], {"p": float(p), "stream": self.dropouts - 1}, n.name)

    # Emission ------------------------------------------------------------
    def run(self, problems=None):
        """Emits every node. With a `problems` list, an unsupported op is
        appended there and replaced by a stand-in, so later ops are still
        checked (explain)."""
        failed = set()
        for n in self.gm.graph.nodes:
            self.current = n
            if problems is not None and n.op != "output" and any(a in failed for a in n.all_input_nodes):
                failed.add(n)  # reads a stand-in: its own problem, if any, is not known
                self.env[n] = self.g.unique(n.name)
                self.depends[n] = True
                continue
            try:
                self.emit(n)
            except UnsupportedOp as ex:
                if problems is None:
                    raise
                problems.append(ex)
                failed.add(n)
                self.env[n] = self.g.unique(n.name)
                self.depends[n] = True
        return self.g

    def emit(self, n):
        if n.op == "placeholder":
            v = self.values[n]
            if isinstance(v, (int, float, bool)):
                # A number (a size Dynamo passes as a graph input): the graph
                # is specialized to its value, like shape code.
                self.env[n] = v
                self.depends[n] = False
                self.placeholders += 1
                return
            if not isinstance(v, torch.Tensor):
                raise UnsupportedOp(f"non-tensor input '{n.target}'", "", "")
            self.env[n] = self.g.add_input(n.target, v, source=("input", self.placeholders))
            self.placeholders += 1
            self.depends[n] = True
        elif n.op == "get_attr":
            self.depends[n] = True
            v = self.values[n]
            if not isinstance(v, torch.Tensor):
                self.env[n] = v
            elif n.target.startswith("_tensor_constant") and (mask := self.g.causal_mask(v, n.name)):
                # fx keeps a tensor the model made from no input (a mask) as
                # a buffer: a causal one is index comparisons instead.
                self.env[n] = mask
            elif n.target in self.params or n.target in self.buffers:
                self.env[n] = self.param_input(n.target)
            else:  # a tensor the model computed from no input (fx's _tensor_constant)
                self.env[n] = self.g.constant(v, n.name)
        elif n.op == "output":
            self.emit_outputs(n.args[0])
        else:
            self.depends[n] = any(self.depends.get(a, False) for a in n.all_input_nodes)
            v = self.values[n]
            if not self.depends[n] and isinstance(v, torch.Tensor):
                self.env[n] = _LazyConstant(lambda v=v, name=n.name: self.g.constant(v, name))
            elif not isinstance(v, (torch.Tensor, list, tuple)) or (
                    isinstance(v, (list, tuple)) and not any(isinstance(x, torch.Tensor) for x in v)):
                self.env[n] = v  # shape arithmetic: a concrete Python value
            else:
                self.env[n] = self.lower(n)

    def emit_outputs(self, out):
        flat = []

        def walk(o):
            if isinstance(o, (list, tuple)):
                for x in o:
                    walk(x)
            elif isinstance(o, dict):
                for x in o.values():
                    walk(x)
            elif isinstance(o, fx.Node):
                flat.append(self.env[o] if self.depends.get(o) else self.g.constant(self.values[o], o.name))
                self.g.output_values.append(self.values[o])
            elif o is not None:
                raise UnsupportedOp(f"output of type {type(o).__name__}", "", "")
        walk(out)
        if not flat:
            raise UnsupportedOp("a model without tensor outputs", "", "")
        # Buffers a training-mode op updates (batch norm's running
        # statistics): outputs after the model's, written back by the caller.
        for name, ref in self.g.state:
            flat.append(ref)
            self.g.output_values.append(self.g.tensors[name])
        self.g.outputs = flat

    def unsupported(self, why=""):
        n = self.current
        return UnsupportedOp(_describe(n, self.gm), n.meta.get("tensorc_path", ""), _source_line(n), why)

    def lower(self, n):
        if n.op == "call_module":
            m = self.gm.get_submodule(n.target)
            rule = _MODULES.get(type(m))
            if rule is None:
                raise self.unsupported()
            return rule(self, n, m)
        key = n.target if n.op == "call_function" else ("method", n.target)
        rule = _FUNCTIONS.get(key)
        if rule is None:
            raise self.unsupported()
        return rule(self, n)

    # Helpers for rules -----------------------------------------------------
    def arg(self, n, i, name, default=None):
        if i < len(n.args):
            return n.args[i]
        return n.kwargs.get(name, default)

    def out(self, n):
        return self.values[n]

    def cast_to(self, a, dtype):
        """Reference of `a` (node or literal) as `dtype` (tensors cast when needed)."""
        if isinstance(a, fx.Node) and isinstance(self.values[a], torch.Tensor) and self.values[a].dtype != dtype:
            return self.g.add("cast", [self.env[a]], {"to": DTYPES[dtype]}, self.current.name + "_cast")
        return self.ref(a)

    def elementwise(self, n, op, operands, compute_dtype=None):
        """An elementwise op with PyTorch's type promotion made explicit."""
        dtype = compute_dtype or self.out(n).dtype
        return self.g.add(op, [self.cast_to(a, dtype) for a in operands], None, n.name)


# Entry points ---------------------------------------------------------------

def _trace(model, example_inputs):
    # Copies: in-place ops in the model must not change the caller's tensors.
    tracer = _Tracer([x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs])
    graph = tracer.trace(model)
    return fx.GraphModule(tracer.root, graph, type(model).__name__)


def _prepare(model, example_inputs):
    if not isinstance(model, torch.nn.Module):
        raise TypeError("tensorc.torch.export: model must be a torch.nn.Module")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    # Tracing runs the model (twice): what a training-mode module updates in
    # place (batch norm's running statistics) is put back afterwards.
    buffers = [(b, b.clone()) for b in model.buffers()]
    try:
        gm = model if isinstance(model, fx.GraphModule) else _trace(model, example_inputs)
        runner = _Values(gm)
        with torch.no_grad():  # on copies: in-place ops must not change the caller's tensors
            runner.run(*[x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs])
    finally:
        with torch.no_grad():
            for b, before in buffers:
                b.copy_(before)
    return gm, runner.values


def export(model, example_inputs, path=None, name=None, weights=None, dynamic=None):
    """Exports `model` called on `example_inputs` as a tensorc graph (a dict,
    also written to `path` when given, with the parameters and buffers the
    graph uses in a .safetensors file beside it: `weights`, or the path with
    the suffix .safetensors). `dynamic`: dims made symbolic, as in
    compile(). Raises UnsupportedOp for the first op that has no mapping."""
    return export_with_weights(model, example_inputs, path, name, weights, dynamic)[0]


def export_with_weights(model, example_inputs, path=None, name=None, weights=None, dynamic=None):
    """export(), plus every graph input's tensor by name (the example inputs,
    the parameters and buffers), in the graph's input order."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)

    def export_at(inputs):
        gm, values = _prepare(model, inputs)
        return _Exporter(gm, values, name or type(model).__name__).run()

    g = export_at(example_inputs)
    graph = g.json()
    spec = _dynamic.dynamic_dims(example_inputs, dynamic)
    if spec:
        graph = _dynamic.symbolize(lambda inputs: export_at(inputs).json(), example_inputs, spec)
    if path:
        with open(path, "w") as f:
            json.dump(graph, f, indent=1)
        params = OrderedDict((n, t) for n, t in g.tensors.items() if g.sources[n][0] == "param")
        _safetensors.save_file(params, weights or os.path.splitext(path)[0] + ".safetensors",
                               {"format": "pt", "producer": "tensorc.torch.export"})
    return graph, OrderedDict(g.tensors)


def explain(model, *example_inputs):
    """Every op of `model` the exporter cannot map, as UnsupportedOp
    objects (empty: the model exports). Also printed, one per line."""
    gm, values = _prepare(model, example_inputs)
    problems = []
    _Exporter(gm, values, type(model).__name__).run(problems)
    for p in problems:
        print(p)
    return problems
