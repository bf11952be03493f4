// MLIR passes over tc modules implemented as graph transformations.
#include "passes/Passes.h"

#include "compiler/frontend/GraphTransform.h"
#include "compiler/transforms/Autocast.h"
#include "compiler/transforms/Decompose.h"
#include "compiler/transforms/FoldConstants.h"
#include "compiler/transforms/NarrowAttention.h"
#include "compiler/transforms/PadMatmuls.h"
#include "compiler/transforms/RecognizeAttention.h"
#include "compiler/transforms/RunChecks.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "ir/core/Error.h"

namespace tensorc {

#define GEN_PASS_DEF_AUTOCASTPASS
#define GEN_PASS_DEF_DECOMPOSEPASS
#define GEN_PASS_DEF_FOLDCONSTANTSPASS
#define GEN_PASS_DEF_NARROWATTENTIONPASS
#define GEN_PASS_DEF_PADMATMULSPASS
#define GEN_PASS_DEF_RECOGNIZEATTENTIONPASS
#define GEN_PASS_DEF_RUNCHECKSPASS
#include "passes/Passes.h.inc"

namespace {

struct AutocastPass : impl::AutocastPassBase<AutocastPass> {
  using AutocastPassBase::AutocastPassBase;
  void runOnOperation() override {
    std::optional<DType> low = parseDType(dtype);
    if (!low || (*low != DType::BF16 && *low != DType::F16)) {
      getOperation().emitError() << "tensorc-autocast: dtype must be bf16 or f16, got '" << dtype
                                 << "'";
      return signalPassFailure();
    }
    if (mlir::failed(
            transformModuleAsGraph(getOperation(), "tensorc-autocast", [&](const Graph &g) {
              return transforms::autocastGraph(g, *low);
            })))
      signalPassFailure();
  }
};

struct FoldConstantsPass : impl::FoldConstantsPassBase<FoldConstantsPass> {
  using FoldConstantsPassBase::FoldConstantsPassBase;
  void runOnOperation() override {
    if (mlir::failed(
            transformModuleAsGraph(getOperation(), "tensorc-fold-constants", [&](const Graph &g) {
              return transforms::foldConstants(g, maxElements);
            })))
      signalPassFailure();
  }
};

struct NarrowAttentionPass : impl::NarrowAttentionPassBase<NarrowAttentionPass> {
  using NarrowAttentionPassBase::NarrowAttentionPassBase;
  void runOnOperation() override {
    if (mlir::failed(transformModuleAsGraph(getOperation(), "tensorc-narrow-attention",
                                            [&](const Graph &g) { return transforms::narrowAttention(g); })))
      signalPassFailure();
  }
};

struct PadMatmulsPass : impl::PadMatmulsPassBase<PadMatmulsPass> {
  using PadMatmulsPassBase::PadMatmulsPassBase;
  void runOnOperation() override {
    if (mlir::failed(transformModuleAsGraph(getOperation(), "tensorc-pad-matmuls", [&](const Graph &g) {
          return transforms::padMatmuls(g, nullptr, minimumWork);
        })))
      signalPassFailure();
  }
};

struct RecognizeAttentionPass : impl::RecognizeAttentionPassBase<RecognizeAttentionPass> {
  using RecognizeAttentionPassBase::RecognizeAttentionPassBase;
  void runOnOperation() override {
    if (mlir::failed(transformModuleAsGraph(
            getOperation(), "tensorc-recognize-attention",
            [&](const Graph &g) { return transforms::recognizeAttention(g); })))
      signalPassFailure();
  }
};

struct DecomposePass : impl::DecomposePassBase<DecomposePass> {
  using DecomposePassBase::DecomposePassBase;
  void runOnOperation() override {
    std::set<std::string> selected(ops.begin(), ops.end());
    if (mlir::failed(
            transformModuleAsGraph(getOperation(), "tensorc-decompose", [&](const Graph &g) {
              return transforms::decomposeGraph(g, selected, keepFusedAttention);
            })))
      signalPassFailure();
  }
};

struct RunChecksPass : impl::RunChecksPassBase<RunChecksPass> {
  using RunChecksPassBase::RunChecksPassBase;
  void runOnOperation() override {
    // The graph's checks become the results' tc.check attributes on import.
    if (mlir::failed(transformModuleAsGraph(getOperation(), "tensorc-run-checks", [&](const Graph &g) {
          return transforms::addRunChecks(g, "tensorc-run-checks");
        })))
      signalPassFailure();
  }
};

} // namespace
} // namespace tensorc
