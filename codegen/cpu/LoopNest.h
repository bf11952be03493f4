// One loop nest of a CPU kernel as a native function with the runtime's
// calling convention (runtime/core/KernelLibrary.h):
//
//   void symbol(void **operands, const int64_t *symbols, int64_t begin, int64_t end)
//
// operands[0] is the value written, the rest are read; each is a contiguous
// row-major tensor whose symbolic dims are computed from `symbols` (so one
// kernel serves every size). The nest iterates over `space`; parallel dims
// outermost (the first one restricted to [begin, end), so the runtime can
// split it over threads), reduced dims innermost with the accumulator in a
// register (f32 for f16/bf16 results). Emitted as scf loops over memrefs.
#pragma once

#include "ir/core/Dim.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace tensorc::codegen::cpu {

struct NestOperand {
  DType dtype;
  Shape shape;
};

// What code at one iteration point can use.
struct NestContext {
  mlir::OpBuilder &b;
  mlir::Location loc;
  mlir::ArrayRef<mlir::Value> ivs;     // one index per space dim
  mlir::ArrayRef<mlir::Value> memrefs; // one per operand
  std::function<mlir::Value(const Dim &)> size; // a size as an index value
};

// The attribute on a point function's memref.load that reads its operand
// somewhere other than at the point's own indices (a row's first element,
// a gather): the CUDA printer reads it through the operand's second pointer
// (`e<k>`), which a chain kernel whose row cache holds only the block's
// part of the row points at device memory.
inline constexpr const char *kElsewhereLoad = "elsewhere";

// The value at one iteration point (for reductions: the element to
// combine), in the compute type of the nest's `valueDtype`.
using PointFn = std::function<mlir::Value(NestContext &)>;
// After a reduction: the accumulator -> the value stored.
using EpilogueFn = std::function<mlir::Value(NestContext &, mlir::Value)>;

struct NestSpec {
  std::string symbol;
  std::vector<std::string> symbols; // the order of the `symbols` argument
  Shape space;
  std::vector<bool> reduced; // per space dim (all false: elementwise)
  // "", "sum", "mean", "max", "min", "prod", or "argmax"/"argmin" (the
  // row-major position among the reduced dims of the first max/min; nan
  // counts as the largest, as in the interpreter).
  std::string reduction;
  bool keepdim = false;
  std::vector<NestOperand> operands; // [0] is written
  DType valueDtype = DType::F32;     // the point values' dtype (accumulated in its compute type)
  std::vector<Dim> outputOffset;     // added to the store's indices (concat); empty: none
  EpilogueFn epilogue;               // optional, reductions only
};

// Adds the nest's function to `module`. Throws Error.
void emitLoopNest(mlir::ModuleOp module, const NestSpec &spec, const PointFn &point);

// Whether the nest's outermost loop can be split over threads, and its trip
// count and total iterations (for the artifact's loop step).
bool nestIsParallel(const NestSpec &spec);
Dim nestExtent(const NestSpec &spec);
Dim nestWork(const NestSpec &spec);

} // namespace tensorc::codegen::cpu
