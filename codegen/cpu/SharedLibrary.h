// Native code for CPU kernels: an LLVM-dialect module becomes an object file
// for the host (LLVM's TargetMachine, -O3), and objects become one shared
// library (the system linker, `cc -shared`, on the compiling machine) that
// the runtime loads with dlopen: the runtime itself never links LLVM.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace tensorc::codegen::cpu {

// Object code for the host CPU. Throws Error.
std::string emitObject(mlir::ModuleOp llvmDialectModule);

// Links objects into a shared library (its bytes). Throws Error naming the
// linker's complaint.
std::string linkSharedLibrary(const std::vector<std::string> &objects);

} // namespace tensorc::codegen::cpu
