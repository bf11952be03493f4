// The CPU backend's top level: a tc module after tensorc-cpu-pipeline (one
// function of tc.fused kernels and views) becomes an artifact
// (runtime/artifact/Artifact.h): its values, views and arena buffers, a
// launch sequence of loop nests and matmul calls, and a shared library with
// every loop nest compiled to native code.
#pragma once

#include "codegen/Program.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace tensorc::codegen::cpu {

struct CpuCompileOptions {
  // LLVM CPU name the code is tuned for and may use the features of:
  // "host" (this machine), or e.g. "x86-64" (any x86-64), "x86-64-v3".
  std::string cpu = "host";
  std::map<std::string, std::string> record; // compile options to record
  // The program builder's choices; all off by default on the CPU (the
  // tests turn on the GPU backend's to check them against the interpreter).
  ProgramOptions program;
};

// Throws Error naming the op for anything the CPU backend cannot run.
artifact::Artifact compileCpuArtifact(mlir::ModuleOp module, const CpuCompileOptions &options);

// Whether the CPU backend runs `op` (for `tensorc ops`).
bool cpuSupportsOp(const std::string &op);

} // namespace tensorc::codegen::cpu
