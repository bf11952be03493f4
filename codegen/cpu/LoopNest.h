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

struct NestSpec {
  std::string symbol;
  std::vector<std::string> symbols; // the order of the `symbols` argument
  Shape space;
  std::vector<bool> reduced;        // per space dim (all false: elementwise)
  std::string reduction;            // "", "sum", "mean", "max", "min", "prod"
  bool keepdim = false;
  std::vector<NestOperand> operands; // [0] is written
};

// Computes the value at one iteration point, in the written value's compute
// type; `ivs` has one index per space dim, `memrefs` one per operand.
using PointFn = std::function<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                          mlir::ArrayRef<mlir::Value> ivs,
                                          mlir::ArrayRef<mlir::Value> memrefs)>;

// Adds the nest's function to `module`. Throws Error.
void emitLoopNest(mlir::ModuleOp module, const NestSpec &spec, const PointFn &point);

// Whether the nest's outermost loop can be split over threads, and its trip
// count and total iterations (for the artifact's loop step).
bool nestIsParallel(const NestSpec &spec);
Dim nestExtent(const NestSpec &spec);
Dim nestWork(const NestSpec &spec);

} // namespace tensorc::codegen::cpu
