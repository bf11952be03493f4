// The tc dialect's C++ declarations: dialect, types, attributes, ops.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tensorc::tc {

// Verifies that an op's result types are exactly those ShapeInference infers
// from its operands and attributes (the TC_InferredResultTypes trait).
mlir::LogicalResult verifyInferredResultTypes(mlir::Operation *op);

template <typename ConcreteType>
class InferredResultTypes : public mlir::OpTrait::TraitBase<ConcreteType, InferredResultTypes> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyInferredResultTypes(op);
  }
};

} // namespace tensorc::tc

#include "ir/dialect/TCDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/dialect/TCTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/dialect/TCAttrs.h.inc"

#define GET_OP_CLASSES
#include "ir/dialect/TCOps.h.inc"
