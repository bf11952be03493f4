"""PyTorch -> tensorc: export an nn.Module (through torch.fx) as a tensorc
graph file (docs/pytorch.md).

    import tensorc.torch
    graph = tensorc.torch.export(model, (x,), "model.json")   # + model.json's weights
    tensorc.torch.explain(model, x)                           # every unsupported op at once
    fast = tensorc.torch.compile(model, (x,), target="cuda")  # then fast(x), like model(x)
    fast = torch.compile(model, backend="tensorc")            # PyTorch >= 2.0 (Dynamo)

Parameters become trainable inputs named by their module path
(`fc1.weight`), buffers become inputs (`bn.running_mean`), both in
PyTorch's layouts (nn.Linear's [out, in] weight is read through a
transposed view). The example inputs fix every shape (static dims) unless
`dynamic=` makes dims symbolic (_dynamic.py). An op
the exporter does not map is one error naming the op, the module path and
the source line; `explain` lists them all.
"""
from ._compile import CompiledModule, compile
from ._dynamo_backend import register as _register_backend, tensorc_backend
from ._aten import StrictFallbackError
from ._export import UnsupportedOp, explain, export, export_with_weights
from ._safetensors import load_file as load_safetensors, save_file as save_safetensors

__all__ = ["CompiledModule", "StrictFallbackError", "UnsupportedOp", "compile", "explain", "export", "export_with_weights",
           "load_safetensors", "save_safetensors", "tensorc_backend"]

_register_backend()  # torch.compile(model, backend="tensorc")
