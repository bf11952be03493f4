// From the loop nests' module (func/scf/arith/math/memref plus the LLVM
// dialect for the calling convention) to native code: lowering to the LLVM
// dialect, then LLVM -O3 for the target CPU, linked into a shared library.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <map>
#include <string>
#include <vector>

namespace tensorc::codegen::cpu {

// Loads the dialects the CPU backend emits.
void loadCpuDialects(mlir::MLIRContext &ctx);

// Lowers the module to the LLVM dialect. Throws Error on failure.
void lowerToLLVMDialect(mlir::ModuleOp module);

struct NativeCode {
  std::string library; // ELF shared library bytes
  std::string triple, cpu;
  std::vector<std::string> features;
};

// Lowers, compiles for `cpu` and links; `constants` become NUL-terminated
// strings the library exports by name (the kernels' signatures). Throws Error.
NativeCode compileToSharedLibrary(mlir::ModuleOp module, const std::string &cpu,
                                  const std::map<std::string, std::string> &constants = {});

} // namespace tensorc::codegen::cpu
