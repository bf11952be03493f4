"""The ATen path of tensorc.torch: capture (capture.py), PyTorch's
decompositions (decompositions.py), lowering to tensorc ops
(lowering.py), partitioning with PyTorch running what is not lowered
(partition.py) and the compiled program (compiled.py)."""
from .compiled import AtenCompiled, StrictFallbackError, compile_program

__all__ = ["AtenCompiled", "StrictFallbackError", "compile_program"]
