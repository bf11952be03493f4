// Partitioned forward + backward graphs compute exactly the joint graph's
// gradients, for every memory budget; smaller budgets save fewer bytes.
#include "TestUtil.h"

#include "compiler/autodiff/Partition.h"
#include "compiler/driver/RandomInputs.h"

using namespace tensorc;
using namespace tensorc::testing;
using trace::Tensor;
using trace::Tracer;

namespace {

Graph mlp() {
  Tracer t("mlp");
  Tensor x = t.input("x", DType::F64, {"B", 6});
  Tensor y = t.input("y", DType::I64, {"B"});
  Tensor w1 = t.parameter("w1", DType::F64, {6, 5}), b1 = t.parameter("b1", DType::F64, {5});
  Tensor w2 = t.parameter("w2", DType::F64, {5, 3}), b2 = t.parameter("b2", DType::F64, {3});
  Tensor h = trace::layer_norm(trace::gelu(trace::matmul(x, w1) + b1));
  t.output(trace::cross_entropy(trace::matmul(h, w2) + b2, y));
  return t.graph();
}

Graph attentionBlock() {
  Tracer t("attn");
  Tensor x = t.input("x", DType::F64, {"B", "T", 4});
  Tensor wq = t.parameter("wq", DType::F64, {4, 4}), wk = t.parameter("wk", DType::F64, {4, 4});
  Tensor o = trace::scaled_dot_product_attention(trace::matmul(x, wq), trace::matmul(x, wk), x,
                                                 std::nullopt, true);
  t.output(trace::softmax(o + x) * 3.0);
  return t.graph();
}

// Runs the joint graph, and forward-then-backward, on the same inputs and
// checks the gradients are identical.
void checkPartition(const Graph &forward, const autodiff::PartitionOptions &options,
                    int64_t *savedBytes) {
  autodiff::JointGraph joint = autodiff::buildJointGraph(forward);
  autodiff::PartitionResult parts = autodiff::partitionJointGraph(forward, joint, options);
  *savedBytes = parts.savedBytes;
  GraphAnalysis ja = analyzeGraph(joint.graph, "joint");
  std::map<std::string, HostTensor> inputs =
      completeInputs(joint.graph, ja, {}, 11, {{"B", 3}, {"T", 5}});
  std::vector<HostTensor> expected = interpret(joint.graph, ja, inputs).outputs;

  GraphAnalysis fa = analyzeGraph(parts.forward, "forward");
  std::map<std::string, HostTensor> forwardInputs;
  for (const GraphInput &in : parts.forward.inputs)
    forwardInputs.emplace(in.name, inputs.at(in.name));
  std::vector<HostTensor> fwdOut = interpret(parts.forward, fa, forwardInputs).outputs;
  ASSERT_EQ(fwdOut.size(), forward.outputs.size() + parts.saved.size());

  std::map<std::string, HostTensor> backwardInputs;
  for (const GraphInput &in : parts.backward.inputs) {
    auto saved = std::find_if(parts.saved.begin(), parts.saved.end(),
                              [&](const auto &s) { return s.name == in.name; });
    if (saved != parts.saved.end())
      backwardInputs.emplace(in.name,
                             fwdOut[forward.outputs.size() + (saved - parts.saved.begin())]);
    else
      backwardInputs.emplace(in.name, inputs.at(in.name));
  }
  GraphAnalysis ba = analyzeGraph(parts.backward, "backward");
  std::vector<HostTensor> grads = interpret(parts.backward, ba, backwardInputs).outputs;
  ASSERT_EQ(grads.size(), joint.gradientOutputs.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const HostTensor &want = expected[forward.outputs.size() + i];
    ASSERT_EQ(grads[i].shape(), want.shape());
    for (int64_t k = 0; k < want.numel(); ++k)
      EXPECT_EQ(grads[i].getF(k), want.getF(k)) << joint.gradientOutputs[i] << "[" << k << "]";
  }
  for (size_t i = 0; i < forward.outputs.size(); ++i)
    for (int64_t k = 0; k < expected[i].numel(); ++k)
      EXPECT_EQ(fwdOut[i].getF(k), expected[i].getF(k));
}

TEST(Partition, GradientsMatchTheJointGraphForEveryBudget) {
  for (const Graph &g : {mlp(), attentionBlock()}) {
    SCOPED_TRACE(g.name);
    int64_t all = 0, minCut = 0;
    autodiff::PartitionOptions saveAll;
    saveAll.saveAll = true;
    checkPartition(g, saveAll, &all);
    checkPartition(g, {}, &minCut);
    EXPECT_LE(minCut, all);
    int64_t previous = minCut;
    for (int64_t budget : {minCut / 2, minCut / 4, int64_t(0)}) {
      autodiff::PartitionOptions options;
      options.memoryBudget = budget;
      int64_t saved = 0;
      checkPartition(g, options, &saved);
      EXPECT_LE(saved, previous) << "budget " << budget;
      EXPECT_LE(saved, budget) << "budget " << budget;
      previous = saved;
    }
  }
}

} // namespace
