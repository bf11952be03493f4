// Every pass preserves semantics: each example and test graph gives the same
// outputs on the reference interpreter before and after each pass of the
// default pipelines (fresh random inputs; tolerance by dtype).
#include "TestUtil.h"

#include "compiler/driver/Model.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/transforms/BackendPipelines.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <random>

#ifndef TENSORC_SOURCE_DIR
#error "TENSORC_SOURCE_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::testing;

namespace {

std::vector<std::string> graphFiles() {
  std::string root = TENSORC_SOURCE_DIR;
  return {root + "/examples/mlp.json",
          root + "/examples/transformer_block.json",
          root + "/test/graph/Inputs/features.json",
          root + "/test/autodiff/Inputs/chain.json",
          root + "/test/passes/Inputs/composites.json",
          root + "/test/passes/Inputs/attention.json",
          root + "/test/passes/Inputs/attention-dropout.json"};
}

// Every pass that is meant to preserve the function computed.
std::vector<std::string> pipelines() {
  return {"canonicalize",
          "cse",
          "tensorc-simplify",
          "tensorc-decompose",
          "tensorc-simplify-pipeline",
          "tensorc-decompose,tensorc-simplify,cse",
          "tensorc-fuse",
          "tensorc-kernel-pipeline",
          "tensorc-decompose,tensorc-kernel-pipeline",
          // logsumexp kept (the CUDA backend's choice): softmax, log_softmax
          // and cross_entropy decompose into it (the online row statistics).
          "tensorc-decompose{ops=softmax,log_softmax,cross_entropy,scaled_dot_product_attention}",
          "tensorc-decompose{ops=softmax,log_softmax,cross_entropy},tensorc-kernel-pipeline",
          "tensorc-plan-memory",
          "tensorc-fold-constants",
          "tensorc-recognize-attention",
          "tensorc-schedule",
          "tensorc-run-checks",
          "tensorc-cpu-pipeline",
          "tensorc-cuda-pipeline"};
}

void expectClose(const HostTensor &a, const HostTensor &b, const std::string &what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  // Rewrites change rounding order: allow a few ulps of the dtype per op.
  double tol = 100 * tolerance(a.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.getF(i), y = b.getF(i);
    if (std::isnan(x) || std::isnan(y)) {
      EXPECT_EQ(std::isnan(x), std::isnan(y)) << what << "[" << i << "]";
      continue;
    }
    EXPECT_NEAR(x, y, tol * std::max({1.0, std::fabs(x), std::fabs(y)})) << what << "[" << i << "]";
  }
}

TEST(PassSemantics, EveryPassPreservesEveryGraph) {
  static bool registered = [] {
    registerTensorcPasses();
    registerTensorcPipelines();
    registerBackendPipelines();
    mlir::registerCanonicalizerPass();
    mlir::registerCSEPass();
    return true;
  }();
  (void)registered;
  for (const std::string &file : graphFiles()) {
    for (const std::string &pipeline : pipelines()) {
      uint64_t seed = freshSeed();
      SCOPED_TRACE(file + " | " + pipeline + " | seed " + std::to_string(seed));
      std::unique_ptr<Model> model = loadModel(file);
      Graph before = model->graph;
      GraphAnalysis beforeAnalysis = model->analysis;
      mlir::PassManager pm(model->context.get());
      ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm))) << pipeline;
      ASSERT_TRUE(mlir::succeeded(pm.run(*model->module))) << pipeline;
      Graph after = exportGraph(*model->module);
      GraphAnalysis afterAnalysis = analyzeGraph(after, "after");
      std::map<std::string, HostTensor> inputs =
          completeInputs(before, beforeAnalysis, {}, seed, {{"B", 3}, {"T", 5}, {"N", 2}});
      std::vector<HostTensor> want = interpret(before, beforeAnalysis, inputs).outputs;
      std::vector<HostTensor> got = interpret(after, afterAnalysis, inputs).outputs;
      // The backend pipelines append run-time checks (tensorc-run-checks):
      // i32 scalars, 0 on these valid inputs.
      ASSERT_GE(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        expectClose(got[i], want[i], before.outputs[i]);
      for (size_t i = want.size(); i < got.size(); ++i) {
        EXPECT_TRUE(pipeline.find("pipeline") != std::string::npos ||
                    pipeline == "tensorc-run-checks")
            << "a pass added an output";
        EXPECT_TRUE(got[i].dtype() == DType::I32 && got[i].rank() == 0 && got[i].getI(0) == 0)
            << "check " << after.outputs[i];
      }
    }
  }
}

} // namespace
