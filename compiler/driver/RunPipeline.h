// Running a pass pipeline with errors a user can act on: a failure throws one
// Error naming the file, the pass that failed and what it (or the verifier
// after it) said. Every compile path (the CLI's compile and run, the tests,
// the fuzzer) runs its pipelines through this.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace tensorc {

// Throws Error("WHERE: the compile pipeline failed in PASS: DIAGNOSTICS").
void runPipeline(mlir::PassManager &pm, mlir::ModuleOp module, const std::string &where);

} // namespace tensorc
