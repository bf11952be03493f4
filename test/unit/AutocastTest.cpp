// Autocast keeps the function within low-precision rounding, keeps the
// signature, and trains: parameters get f32 gradients through the casts.
#include "TestUtil.h"

#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/transforms/Autocast.h"

#ifndef TENSORC_EXAMPLES_DIR
#error "TENSORC_EXAMPLES_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::testing;

namespace {

TEST(Autocast, ExamplesStayCloseAndKeepTheirSignature) {
  for (const char *name : {"mlp.json", "transformer_block.json"}) {
    for (DType low : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(name) + " " + std::string(dtypeName(low)));
      Graph g = readGraphFile(std::string(TENSORC_EXAMPLES_DIR) + "/" + name);
      GraphAnalysis ga = analyzeGraph(g, "before");
      Graph a = transforms::autocastGraph(g, low);
      GraphAnalysis aa = analyzeGraph(a, "after");
      ASSERT_EQ(aa.outputs, ga.outputs);
      bool lowered = false;
      for (const TypedNode &n : aa.nodes)
        if (n.node->op == "matmul")
          lowered |= n.results[0].dtype == low;
      EXPECT_TRUE(lowered);
      std::map<std::string, HostTensor> inputs = completeInputs(g, ga, {}, 5, {{"B", 2}, {"T", 3}});
      std::vector<HostTensor> want = interpret(g, ga, inputs).outputs,
                              got = interpret(a, aa, inputs).outputs;
      for (size_t i = 0; i < want.size(); ++i) {
        double scale = 0;
        for (int64_t k = 0; k < want[i].numel(); ++k)
          scale = std::max(scale, std::fabs(want[i].getF(k)));
        for (int64_t k = 0; k < want[i].numel(); ++k)
          EXPECT_NEAR(got[i].getF(k), want[i].getF(k), 0.03 * std::max(1.0, scale))
              << g.outputs[i] << "[" << k << "]";
      }
    }
  }
}

TEST(Autocast, TrainingStepUpdatesInF32) {
  Graph g = readGraphFile(std::string(TENSORC_EXAMPLES_DIR) + "/mlp.json");
  Graph a = transforms::autocastGraph(g, DType::BF16);
  autodiff::TrainingStepOptions options;
  options.optimizer.kind = autodiff::Optimizer::AdamW;
  autodiff::TrainingStep step = autodiff::buildTrainingStep(a, options);
  GraphAnalysis sa = analyzeGraph(step.graph, "step");
  for (size_t i = 0; i < step.updatedOutputs.size(); ++i)
    EXPECT_EQ(sa.outputs[g.outputs.size() + i].dtype, DType::F32) << step.updatedOutputs[i];
  std::map<std::string, HostTensor> inputs = completeInputs(step.graph, sa, {}, 3, {{"B", 4}});
  for (const std::string &s : step.stateInputs)
    inputs.at(s).fillBytes(0);
  std::vector<HostTensor> out = interpret(step.graph, sa, inputs).outputs;
  EXPECT_TRUE(std::isfinite(out[1].getF(0)));
}

} // namespace
