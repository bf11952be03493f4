// CPU code generation for loop-nest kernels (first slice of the CPU
// backend, issue 5): a graph of elementwise ops (static or symbolic dims; a
// symbolic dim is a dynamic memref dim) becomes
// one linalg.generic over memrefs whose body is the whole chain of scalar
// ops (one loop nest, no intermediate buffers), lowered through scf/cf to the
// LLVM dialect. Broadcast operands read through indexing maps.
#pragma once

#include "compiler/graph/Graph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace tensorc::codegen::cpu {

// Loads the dialects the CPU backend emits.
void loadCpuDialects(mlir::MLIRContext &ctx);

// Whether buildLoopKernel supports `op` (on f32/f64 values).
bool isSupportedElementwiseOp(const std::string &op);

// `graph`: inputs, elementwise nodes, one output; the output may be a final
// sum/mean/max/min/prod whose elementwise prologue runs in the same loop
// nest (reduction iterators; mean needs static reduced dims). The module
// holds `func.func @<name>(inputs..., output)` on memrefs with the C
// interface. Throws Error for an unsupported op or shape.
mlir::OwningOpRef<mlir::ModuleOp> buildLoopKernel(mlir::MLIRContext &ctx, const Graph &graph,
                                                  const std::string &name);

// Lowers such a module to the LLVM dialect. Throws Error on failure.
void lowerToLLVMDialect(mlir::ModuleOp module);

} // namespace tensorc::codegen::cpu
