// Conversions between MLIR's tc types/attributes and ir/core's MLIR-free
// TensorSpec/Attr, so that one shape-inference rule set serves both.
#pragma once

#include "ir/core/OpSchema.h"
#include "ir/dialect/TCDialect.h"

#include <optional>
#include <string>

namespace tensorc::tc {

mlir::Type toMlirElementType(mlir::MLIRContext *ctx, DType dtype);
std::optional<DType> toDType(mlir::Type elementType);

TcTensorType toMlirType(mlir::MLIRContext *ctx, const TensorSpec &spec);
// nullopt if `type` is not a !tc.tensor.
std::optional<TensorSpec> toTensorSpec(mlir::Type type);

mlir::Attribute toMlirAttr(mlir::MLIRContext *ctx, const Attr &attr);
// Converts the attribute named by `def` (throws Error if the kind is wrong).
Attr toCoreAttr(mlir::Attribute attr, const AttrDef &def);

// The schema attributes present on `op` (inherent ones only).
AttrMap coreAttrs(mlir::Operation *op, const OpSchema &schema);
// The schema of a tc op, or nullptr for ops outside the op set (tc.mesh).
const OpSchema *schemaOf(mlir::Operation *op);

// Operands of `op` laid out as ShapeInference expects: absent optional
// operands as nullopt, the variadic operand expanded.
std::vector<std::optional<mlir::Value>> schemaOperands(mlir::Operation *op, const OpSchema &schema);

// The inverse for an op being built (no variadic operand): adds the present
// operands to `state`, and operandSegmentSizes where the op's definition
// needs it (AttrSizedOperandSegments) or where an absent optional operand
// comes before a present one (read positionally otherwise).
void addSchemaOperands(mlir::OperationState &state, const std::vector<std::optional<mlir::Value>> &operands);

} // namespace tensorc::tc
