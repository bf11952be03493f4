"""Partitioning an ATen graph: what tensorc lowers is grouped into
partitions (PyTorch's CapabilityBasedPartitioner: maximal groups without a
cycle through the nodes left out), each compiled by tensorc; the nodes it
does not lower stay in the graph and run in PyTorch between them, on the
same tensors (no copies), their backward PyTorch's own."""
import operator

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupport

from .graph_file import Unsupported
from .lowering import Lowering, op_name, packet_name, value

# Ops that move or relabel data without computing: a partition of these
# alone runs in PyTorch (a call into tensorc would cost more than the view).
_NON_COMPUTE = {
    "view", "_unsafe_view", "reshape", "view_copy", "_reshape_alias", "_reshape_alias_copy", "unsqueeze",
    "unsqueeze_copy", "squeeze", "squeeze_copy", "flatten", "unflatten", "expand", "expand_copy", "permute",
    "permute_copy", "transpose", "transpose_copy", "t", "t_copy", "numpy_T", "slice", "slice_copy", "select",
    "select_copy", "clone", "alias", "detach", "lift_fresh_copy", "lift_fresh", "alias_copy", "detach_copy",
    "contiguous", "_to_copy", "split", "split_with_sizes", "split_copy", "split_with_sizes_copy", "copy",
}


class _ScratchLowering(Lowering):
    """Lowers one node alone: every tensor it reads becomes an input."""

    def ref(self, a):
        if isinstance(a, fx.Node) and a not in self.env:
            self.add_input(a)
        return super().ref(a)

    def has(self, a):
        if isinstance(a, fx.Node) and a not in self.env:
            self.add_input(a)
        return super().has(a)


def why_not_lowered(node):
    """None where tensorc lowers `node`; else the reason."""
    if node.op != "call_function":
        return "not an op"
    try:
        lw = _ScratchLowering("probe")
        if node.target is operator.getitem:
            producer = node.args[0]
            reason = why_not_lowered(producer)
            if reason:
                return reason
            lw.lower(producer)
        lw.lower(node)
    except Unsupported as e:
        return str(e)
    except Exception as e:  # a rule meeting a form it does not know
        return f"{type(e).__name__}: {e}"
    return None


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _tensors(x)]
    return []


def off_device(node, device):
    """Where `node` reads or makes a tensor on another device than the
    program's target (a CPU tensor in a CUDA program: a mask left on the
    host, a .cpu() copy), the reason it stays in PyTorch, else None. A
    rank-0 CPU operand is fine: the partition moves its value."""
    if device is None:
        return None
    if any(t.device.type != device for t in _tensors(value(node))):
        return f"a tensor on {next(t.device for t in _tensors(value(node)) if t.device.type != device)}, " \
               f"not the program's {device}"
    for a in node.all_input_nodes:
        for t in _tensors(value(a)):
            if t.device.type != device and t.dim() > 0:
                return f"an operand on {t.device}, not the program's {device}"
    return None


class _Support(OperatorSupport):
    def __init__(self, refused, device):
        super().__init__()
        self.refused = refused  # node -> reason
        self.device = device

    def is_node_supported(self, submodules, node):
        if node in self.refused:
            return False
        reason = off_device(node, self.device) if node.op == "call_function" else None
        reason = reason or why_not_lowered(node)
        if reason is not None:
            self.refused[node] = reason
            return False
        return True


def _computes(nodes):
    return any(packet_name(n.target) not in _NON_COMPUTE for n in nodes if n.target is not operator.getitem)


def propose(gm, refused, device=None):
    """Partitions of `gm` (lists of nodes) that tensorc compiles for
    `device` ("cuda", "cpu"; None: any); `refused` (node -> reason) gets
    every op node left to PyTorch."""
    partitioner = CapabilityBasedPartitioner(gm, _Support(refused, device), allows_single_node_partition=True)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    partitions = []
    for p in partitioner.propose_partitions():
        nodes = sorted(p.nodes, key=order.__getitem__)
        if _computes(nodes):
            partitions.append(nodes)
    return partitions


def fallback_ops(gm, refused):
    """[(op name, reason, source line)] of the op nodes that run in PyTorch,
    one per op and reason, the graph's own bookkeeping left out."""
    seen, out = set(), []
    for node, reason in refused.items():
        if node.op != "call_function" or packet_name(node.target) in ("copy_",) or node.target is operator.getitem:
            continue
        v = value(node)
        if isinstance(v, torch.Tensor) and v.numel() == 0:  # an empty tensor made: no work to speak of
            continue
        name = op_name(node.target)
        if (name, reason) in seen:
            continue
        seen.add((name, reason))
        out.append((name, reason, source_line(node)))
    return out


def source_line(node):
    """Where the op is in the model's code (the last frame of the stack fx
    recorded), or ""."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    if not lines:
        return ""
    last = lines[-1]
    try:
        path = last.split('"')[1]
        line = last.split("line ")[1].split(",")[0]
        return f"{path}:{line}"
    except IndexError:
        return last
