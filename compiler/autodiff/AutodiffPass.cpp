// The tensorc-autodiff pass: the module's function -> its joint function.
// The pass converts the module to a graph, differentiates it with
// buildJointGraph, and imports the result in place of the old function.
#include "passes/Passes.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/frontend/GraphTransform.h"

namespace tensorc {

#define GEN_PASS_DEF_AUTODIFFPASS
#include "passes/Passes.h.inc"

namespace {

struct AutodiffPass : impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    autodiff::AutodiffOptions options;
    options.wrt.assign(wrt.begin(), wrt.end());
    options.of.assign(of.begin(), of.end());
    if (mlir::failed(
            transformModuleAsGraph(getOperation(), "tensorc-autodiff", [&](const Graph &forward) {
              return autodiff::buildJointGraph(forward, options).graph;
            })))
      signalPassFailure();
  }
};

} // namespace
} // namespace tensorc
