// The tensorc-autodiff pass: the module's function -> its joint function.
// The pass converts the module to a graph, differentiates it with
// buildJointGraph, and imports the result in place of the old function.
#include "passes/Passes.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

namespace tensorc {

#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"

namespace {

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    try {
      Graph forward = exportGraph(module);
      autodiff::AutodiffOptions options;
      options.wrt.assign(wrt.begin(), wrt.end());
      options.of.assign(of.begin(), of.end());
      autodiff::JointGraph joint = autodiff::buildJointGraph(forward, options);
      joint.graph.name = forward.name; // the function keeps its name
      GraphAnalysis analysis = analyzeGraph(joint.graph, "tensorc-autodiff");
      mlir::OwningOpRef<mlir::ModuleOp> result =
          importGraph(*module.getContext(), joint.graph, analysis, "tensorc-autodiff");
      module.getBody()->clear();
      module.getBody()->getOperations().splice(module.getBody()->end(), result->getBody()->getOperations());
    } catch (const Error &e) {
      module.emitError() << e.what();
      signalPassFailure();
    }
  }
};

} // namespace
} // namespace tensorc
