// MLIR passes over tc modules implemented as graph transformations.
#include "passes/Passes.h"

#include "compiler/frontend/GraphTransform.h"
#include "compiler/transforms/Decompose.h"

namespace tensorc {

#define GEN_PASS_DEF_DECOMPOSEPASS
#include "passes/Passes.h.inc"

namespace {

struct DecomposePass : impl::DecomposePassBase<DecomposePass> {
  using DecomposePassBase::DecomposePassBase;
  void runOnOperation() override {
    std::set<std::string> selected(ops.begin(), ops.end());
    if (mlir::failed(transformModuleAsGraph(getOperation(), "tensorc-decompose", [&](const Graph &g) {
          return transforms::decomposeGraph(g, selected);
        })))
      signalPassFailure();
  }
};

} // namespace
} // namespace tensorc
