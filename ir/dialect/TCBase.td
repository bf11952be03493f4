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

    Discardable attributes: `tc.name` (a value's name in the graph file),
    `tc.trainable` (a function argument that is a trainable parameter),
    `tc.sharding` (a `#tc.sharding` on a value), `tc.literal` (a tc.constant
    written as a scalar literal in the graph file), `tc.dim_bounds` (on a
    function: symbol name -> [min, max]).
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
