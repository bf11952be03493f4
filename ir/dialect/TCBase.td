// The tc dialect: tensorc's graph-level IR.
#ifndef TC_BASE_TD
#define TC_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def TC_Dialect : Dialect {
  let name = "tc";
  let cppNamespace = "::tensorc::tc";
  let summary = "tensorc's dialect of deep-learning graph ops";
  let description = [{
    Values are `!tc.tensor` types: ranked tensors whose dims are static or
    symbolic monomials (`B`, `B*T`, `2*C`). Every op infers its result types
    from its operands and attributes with the one rule set in
    ir/core/ShapeInference.cpp; the verifier checks that the declared result
    types are exactly the inferred ones.

    Rules shared by every op:

    - **dtypes**: f64, f32, f16, bf16, i64, i32, i1. There is no implicit
      promotion: operands that must agree must have the same dtype (insert a
      `tc.cast`). Float results in f16/bf16 are rounded once per op.
    - **Broadcasting** (NumPy/PyTorch): shapes align on the right; a dim of
      size 1 stretches; otherwise dims must be equal, and symbolic dims are
      equal only when they are the same monomial.
    - **Axes**: negative axes count from the end (`-1` is the last); an axis
      list may not repeat an axis.
    - **Symbolic dims**: bound at run time from the inputs that have them as
      a plain dim; ops whose result size would not be a monomial (slicing or
      padding a symbolic dim, concatenating `B` with `C`) are rejected.
    - **Scalar literals** in graph files become `tc.constant` scalars with the
      `tc.literal` attribute and the dtype of the op's first non-i1 tensor
      argument (docs/graph-format.md).

    Discardable attributes: `tc.name` (a value's name in the graph file),
    `tc.trainable` (a function argument that is a trainable parameter),
    `tc.sharding` (a `#tc.sharding` on a value), `tc.literal` (a tc.constant
    written as a scalar literal in the graph file), `tc.dim_bounds` (on a
    function: symbol name -> [min, max]), `tc.check` (on a function's i32
    scalar result: a run-time check's message, see below).

    Run-time errors: where an op's description calls an input a run-time
    error (a cross_entropy target outside the classes, an embedding, gather
    or index_select index out of range, max/min/argmax/argmin over an empty
    range), every engine refuses the run with one error naming the node.
    The interpreter checks as it computes; compiled code clamps indices so
    that no kernel reads out of bounds, computes a flag per checked index
    (the `tensorc-run-checks` pass, results marked `tc.check`), and the
    runtime raises the check's message after the run (on CUDA, when the
    run's stream is synchronized). An empty range known at compile time is
    a compile error. `tensorc compile --no-run-checks` leaves the checks
    out: out-of-range indices are then clamped silently.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let usePropertiesForAttributes = 0;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerTypes();
  }];
}

// Every tc op's result types are the ones ir/core/ShapeInference infers.
def TC_InferredResultTypes : NativeOpTrait<"InferredResultTypes"> {
  let cppNamespace = "::tensorc::tc";
}

#endif // TC_BASE_TD
