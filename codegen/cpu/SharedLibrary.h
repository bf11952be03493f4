// Native code for CPU kernels: an LLVM-dialect module becomes an object file
// for the host (LLVM's TargetMachine, -O3), and objects become one shared
// library (the system linker, `cc -shared`, on the compiling machine) that
// the runtime loads with dlopen: the runtime itself never links LLVM.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace tensorc::codegen::cpu {

struct ObjectCode {
  std::vector<std::string> objects; // one per part compiled on its own thread
  std::string triple, cpu;
  std::vector<std::string> features; // those the runtime checks (avx2, ...)
};

// Object code for `cpu` ("host" or an LLVM CPU name such as x86-64-v3),
// optimized at -O3: a module of many kernels in parts, on threads
// (TENSORC_CPU_CODEGEN_THREADS; default the cores, at most 16). Throws Error.
ObjectCode emitObject(mlir::ModuleOp llvmDialectModule, const std::string &cpu);

// Links objects into a shared library (its bytes). Throws Error naming the
// linker's complaint.
std::string linkSharedLibrary(const std::vector<std::string> &objects);

} // namespace tensorc::codegen::cpu
