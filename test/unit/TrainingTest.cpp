// The training-step graph, run for 50 steps on the interpreter, trains a small
// MLP on a synthetic classification problem exactly as a hand-written update
// of the joint graph's gradients does, and lowers the loss.
#include "TestUtil.h"

#include "compiler/autodiff/TrainingStep.h"

#include <random>

using namespace tensorc;
using namespace tensorc::testing;
using trace::Tensor;
using trace::Tracer;

namespace {

Graph classifier() {
  Tracer t("clf");
  Tensor x = t.input("x", DType::F64, {"B", 4});
  Tensor y = t.input("y", DType::I64, {"B"});
  Tensor w1 = t.parameter("w1", DType::F64, {4, 8}), b1 = t.parameter("b1", DType::F64, {8});
  Tensor w2 = t.parameter("w2", DType::F64, {8, 3}), b2 = t.parameter("b2", DType::F64, {3});
  t.output(trace::cross_entropy(trace::matmul(trace::tanh(trace::matmul(x, w1) + b1), w2) + b2, y));
  return t.graph();
}

// 32 points, labels from a fixed random linear teacher (seed 2026).
std::map<std::string, HostTensor> dataset() {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> normal(0, 1);
  HostTensor x(DType::F64, {32, 4}), y(DType::I64, {32});
  double teacher[4][3];
  for (auto &row : teacher)
    for (double &v : row)
      v = normal(rng);
  for (int i = 0; i < 32; ++i) {
    double score[3] = {0, 0, 0};
    for (int k = 0; k < 4; ++k) {
      x.setF(i * 4 + k, normal(rng));
      for (int c = 0; c < 3; ++c)
        score[c] += x.getF(i * 4 + k) * teacher[k][c];
    }
    y.setI(i, std::max_element(score, score + 3) - score);
  }
  std::map<std::string, HostTensor> data{{"x", x}, {"y", y}};
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"w1", {4, 8}}, {"b1", {8}}, {"w2", {8, 3}}, {"b2", {3}}}) {
    HostTensor p(DType::F64, shape);
    for (int64_t i = 0; i < p.numel(); ++i)
      p.setF(i, 0.5 * normal(rng));
    data.emplace(name, p);
  }
  return data;
}

double f32(double v) { return double(float(v)); }

void trainAndCompare(autodiff::Optimizer kind, double lr) {
  Graph forward = classifier();
  autodiff::TrainingStepOptions options;
  options.optimizer.kind = kind;
  options.optimizer.lr = lr;
  options.optimizer.weightDecay = kind == autodiff::Optimizer::AdamW ? 0.01 : 0.0;
  autodiff::TrainingStep step = autodiff::buildTrainingStep(forward, options);
  autodiff::JointGraph joint = autodiff::buildJointGraph(forward);
  GraphAnalysis sa = analyzeGraph(step.graph, "step"), ja = analyzeGraph(joint.graph, "joint");

  std::map<std::string, HostTensor> state = dataset(); // the step graph's inputs
  std::map<std::string, HostTensor> reference = state; // the hand-written loop's parameters
  std::map<std::string, std::vector<double>> m, v, buffer;
  for (const std::string &s : step.stateInputs) {
    HostTensor zero = s == "step"
                          ? HostTensor(DType::F32, {})
                          : HostTensor(DType::F64, state.at(s.substr(0, s.find('.'))).shape());
    state.emplace(s, zero);
  }
  double firstLoss = 0, lastLoss = 0;
  for (int it = 1; it <= 50; ++it) {
    // The compiled step.
    std::vector<HostTensor> out = interpret(step.graph, sa, state).outputs;
    if (it == 1)
      firstLoss = out[0].getF(0);
    lastLoss = out[0].getF(0);
    for (size_t i = 0; i < step.updatedOutputs.size(); ++i) {
      std::string name = step.updatedOutputs[i];
      name = name.substr(0, name.size() - std::string(".next").size());
      state.at(name) = out[1 + i];
    }
    // The reference: joint-graph gradients, update written out by hand.
    std::vector<HostTensor> jo = interpret(joint.graph, ja, reference).outputs;
    EXPECT_EQ(jo[0].getF(0), lastLoss) << "step " << it;
    for (size_t p = 0; p < joint.wrt.size(); ++p) {
      const std::string &w = joint.wrt[p];
      HostTensor &param = reference.at(w);
      const HostTensor &g = jo[1 + p];
      for (int64_t i = 0; i < param.numel(); ++i) {
        double gi = g.getF(i), pi = param.getF(i);
        if (kind == autodiff::Optimizer::Sgd) {
          param.setF(i, pi - gi * lr);
        } else if (kind == autodiff::Optimizer::Momentum) {
          std::vector<double> &b = buffer[w];
          b.resize(param.numel(), 0.0);
          b[i] = b[i] * 0.9 + gi;
          param.setF(i, pi - b[i] * lr);
        } else {
          std::vector<double> &mm = m[w], &vv = v[w];
          mm.resize(param.numel(), 0.0);
          vv.resize(param.numel(), 0.0);
          mm[i] = mm[i] * 0.9 + gi * (1 - 0.9);
          vv[i] = vv[i] * 0.999 + gi * gi * (1 - 0.999);
          // The step counter and bias corrections are f32, as in the graph.
          double c1 = f32(1.0 - f32(std::pow(double(0.9f), double(it))));
          double c2 = f32(1.0 - f32(std::pow(double(0.999f), double(it))));
          param.setF(i, pi * (1 - lr * 0.01) - (mm[i] / c1) / (std::sqrt(vv[i] / c2) + 1e-8) * lr);
        }
      }
    }
    for (const std::string &w : joint.wrt)
      for (int64_t i = 0; i < reference.at(w).numel(); ++i)
        ASSERT_NEAR(state.at(w).getF(i), reference.at(w).getF(i),
                    1e-12 * std::max(1.0, std::fabs(reference.at(w).getF(i))))
            << w << "[" << i << "] at step " << it;
  }
  EXPECT_LT(lastLoss, 0.6 * firstLoss) << "first " << firstLoss << ", last " << lastLoss;
}

TEST(TrainingStep, SgdMatchesAHandWrittenLoop) { trainAndCompare(autodiff::Optimizer::Sgd, 0.5); }
TEST(TrainingStep, MomentumMatchesAHandWrittenLoop) {
  trainAndCompare(autodiff::Optimizer::Momentum, 0.1);
}
TEST(TrainingStep, AdamWMatchesAHandWrittenLoop) {
  trainAndCompare(autodiff::Optimizer::AdamW, 0.05);
}

TEST(TrainingStep, AccumulationAddsEarlierGradients) {
  Graph forward = classifier();
  autodiff::TrainingStepOptions options;
  options.accumulate = true;
  options.optimizer.lr = 1.0;
  autodiff::TrainingStep step = autodiff::buildTrainingStep(forward, options);
  autodiff::JointGraph joint = autodiff::buildJointGraph(forward);
  std::map<std::string, HostTensor> inputs = dataset();
  std::vector<HostTensor> grads =
      interpret(joint.graph, analyzeGraph(joint.graph, "j"), inputs).outputs;
  // With w.grad = dL/dw already accumulated once, the step moves by 2 * dL/dw.
  for (size_t p = 0; p < joint.wrt.size(); ++p)
    inputs.emplace(joint.wrt[p] + ".grad", grads[1 + p]);
  std::vector<HostTensor> out =
      interpret(step.graph, analyzeGraph(step.graph, "s"), inputs).outputs;
  for (size_t p = 0; p < joint.wrt.size(); ++p) {
    const HostTensor &before = inputs.at(joint.wrt[p]);
    for (int64_t i = 0; i < before.numel(); ++i)
      EXPECT_NEAR(out[1 + p].getF(i), before.getF(i) - 2 * grads[1 + p].getF(i), 1e-12);
  }
}

} // namespace

namespace {

TEST(TrainingStep, DynamicLossScaling) {
  Graph forward = classifier();
  autodiff::TrainingStepOptions plain;
  plain.optimizer.kind = autodiff::Optimizer::Momentum;
  plain.optimizer.lr = 0.1;
  autodiff::TrainingStepOptions scaled = plain;
  scaled.lossScaling.enabled = true;
  scaled.lossScaling.growthInterval = 2;
  autodiff::TrainingStep a = autodiff::buildTrainingStep(forward, plain);
  autodiff::TrainingStep b = autodiff::buildTrainingStep(forward, scaled);
  GraphAnalysis aa = analyzeGraph(a.graph, "plain"), ba = analyzeGraph(b.graph, "scaled");
  std::map<std::string, HostTensor> inputs = dataset();
  for (const std::string &s : a.stateInputs)
    inputs.emplace(s, HostTensor(DType::F64, inputs.at(s.substr(0, s.find('.'))).shape()));
  auto scalar = [](double v) {
    HostTensor t(DType::F32, {});
    t.setF(0, v);
    return t;
  };
  auto outputOf = [](const autodiff::TrainingStep &s, const std::vector<HostTensor> &out,
                     const std::string &name) {
    for (size_t i = 0; i < s.updatedOutputs.size(); ++i)
      if (s.updatedOutputs[i] == name)
        return out[1 + i];
    ADD_FAILURE() << "no output " << name;
    return HostTensor();
  };
  std::vector<HostTensor> want = interpret(a.graph, aa, inputs).outputs;

  // A power-of-two scale is exact: the same update as without scaling.
  std::map<std::string, HostTensor> in = inputs;
  in.emplace("loss_scale", scalar(1024));
  in.emplace("good_steps", scalar(0));
  std::vector<HostTensor> got = interpret(b.graph, ba, in).outputs;
  for (std::string w : {"w1", "b2"}) {
    HostTensor x = outputOf(a, want, w + ".next"), y = outputOf(b, got, w + ".next");
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_NEAR(y.getF(i), x.getF(i), 1e-12) << w;
  }
  EXPECT_EQ(outputOf(b, got, "loss_scale.next").getF(0), 1024);
  EXPECT_EQ(outputOf(b, got, "good_steps.next").getF(0), 1);

  // The second clean step in a row doubles the scale and restarts the count.
  in.at("good_steps") = scalar(1);
  got = interpret(b.graph, ba, in).outputs;
  EXPECT_EQ(outputOf(b, got, "loss_scale.next").getF(0), 2048);
  EXPECT_EQ(outputOf(b, got, "good_steps.next").getF(0), 0);

  // Overflow: the step is skipped and the scale halved.
  in.at("loss_scale") = scalar(INFINITY);
  got = interpret(b.graph, ba, in).outputs;
  for (std::string w : {"w1", "b2"}) {
    HostTensor y = outputOf(b, got, w + ".next"), m = outputOf(b, got, w + ".momentum.next");
    for (int64_t i = 0; i < y.numel(); ++i) {
      EXPECT_EQ(y.getF(i), inputs.at(w).getF(i)) << w;
      EXPECT_EQ(m.getF(i), 0.0) << w;
    }
  }
  EXPECT_TRUE(std::isinf(outputOf(b, got, "loss_scale.next").getF(0)));
  EXPECT_EQ(outputOf(b, got, "good_steps.next").getF(0), 0);
  // A nan gradient (from a nan input) is caught the same way.
  in.at("loss_scale") = scalar(1024);
  in.at("x").setF(0, NAN);
  got = interpret(b.graph, ba, in).outputs;
  EXPECT_EQ(outputOf(b, got, "loss_scale.next").getF(0), 512);
  EXPECT_EQ(outputOf(b, got, "w1.next").getF(0), inputs.at("w1").getF(0));
}

} // namespace
