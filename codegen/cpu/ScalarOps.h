// The scalar semantics of tc's elementwise ops as arith/math ops, matching
// the reference interpreter: floats computed in f32 (f16/bf16 widened) or
// f64, integers in their own width with wrapping, bools as i1. Loop nests
// call these at every iteration point.
#pragma once

#include "ir/core/Attr.h"
#include "ir/core/DType.h"

#include "mlir/IR/Builders.h"

#include <string>

namespace tensorc::codegen::cpu {

// The type a value of `dtype` is computed in.
mlir::Type computeType(mlir::MLIRContext *ctx, DType dtype);
// The element type it is stored as in memory (i1 as i8: one byte per bool).
mlir::Type storageType(mlir::MLIRContext *ctx, DType dtype);

// Converts between computed values of two dtypes (tc.cast's rules).
mlir::Value convert(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType from, DType to);
// Loaded storage element -> compute type, and back for a store.
mlir::Value fromStorage(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType dtype);
mlir::Value toStorage(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v, DType dtype);

// A constant of `dtype`'s compute type.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc, double value, DType dtype);

// Whether `op` is elementwise and emitScalarOp supports it.
bool isScalarOp(const std::string &op);

// One elementwise op on computed operands. `operandDtypes` are the tc
// operands' dtypes, `result` the result's. Throws Error for unsupported
// op/dtype combinations.
mlir::Value emitScalarOp(mlir::OpBuilder &b, mlir::Location loc, const std::string &op,
                         const AttrMap &attrs, mlir::ArrayRef<mlir::Value> operands,
                         mlir::ArrayRef<DType> operandDtypes, DType result);

// Reductions: the combine step and the identity of sum/mean/max/min/prod.
mlir::Value reductionIdentity(mlir::OpBuilder &b, mlir::Location loc, const std::string &op,
                              DType dtype);
mlir::Value combine(mlir::OpBuilder &b, mlir::Location loc, const std::string &op, mlir::Value acc,
                    mlir::Value x, DType dtype);

} // namespace tensorc::codegen::cpu
