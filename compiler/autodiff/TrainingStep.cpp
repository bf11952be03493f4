#include "compiler/autodiff/TrainingStep.h"

#include "compiler/autodiff/GradRules.h"
#include "ir/core/Error.h"

namespace tensorc::autodiff {

using trace::Tensor;
using trace::Tracer;

Optimizer parseOptimizer(const std::string &name) {
  if (name == "sgd") return Optimizer::Sgd;
  if (name == "momentum") return Optimizer::Momentum;
  if (name == "adamw") return Optimizer::AdamW;
  fail("unknown optimizer \"" + name + "\" (expected sgd, momentum or adamw)");
}

TrainingStep buildTrainingStep(const Graph &forward, const TrainingStepOptions &options) {
  JointGraph joint = buildJointGraph(forward, options.autodiff);
  check(joint.cotangentInputs.empty(),
        "train " + forward.name + ": the loss must be one scalar output (use --loss to choose it)");
  const OptimizerOptions &o = options.optimizer;
  check(o.lr >= 0 && o.weightDecay >= 0 && o.momentum >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 &&
            o.beta2 < 1 && o.eps >= 0,
        "train " + forward.name + ": optimizer hyperparameters out of range");
  Tracer t(joint.graph);
  TrainingStep step;
  step.parameters = joint.wrt;
  std::vector<Tensor> updated;
  std::optional<Tensor> stepCount, stepNext;
  if (o.kind == Optimizer::AdamW) {
    stepCount = t.input("step", DType::F32, {});
    step.stateInputs.push_back("step");
    stepNext = t.call("add", {*stepCount, 1.0}, {}, "step.next")[0];
  }
  for (size_t i = 0; i < joint.wrt.size(); ++i) {
    const std::string &w = joint.wrt[i];
    Tensor p = t.value(w);
    Tensor g = t.value(joint.gradientOutputs[i]);
    DType d = p.dtype();
    trace::DimSpec shape = dimSpec(p.shape());
    if (options.accumulate) {
      Tensor earlier = t.input(w + ".grad", d, shape);
      step.stateInputs.push_back(w + ".grad");
      g = g + earlier;
    }
    switch (o.kind) {
    case Optimizer::Sgd: {
      // PyTorch SGD: g += wd * p; p -= lr * g.
      Tensor gd = o.weightDecay ? g + p * o.weightDecay : g;
      updated.push_back(t.call("sub", {p, gd * o.lr}, {}, w + ".next")[0]);
      break;
    }
    case Optimizer::Momentum: {
      // PyTorch SGD with momentum (no dampening): b = mu * b + g; p -= lr * b.
      Tensor buffer = t.input(w + ".momentum", d, shape);
      step.stateInputs.push_back(w + ".momentum");
      Tensor gd = o.weightDecay ? g + p * o.weightDecay : g;
      Tensor next = t.call("add", {buffer * o.momentum, gd}, {}, w + ".momentum.next")[0];
      updated.push_back(t.call("sub", {p, next * o.lr}, {}, w + ".next")[0]);
      updated.push_back(next);
      break;
    }
    case Optimizer::AdamW: {
      // PyTorch AdamW: p *= 1 - lr * wd; m, v moments; bias-corrected step.
      Tensor m = t.input(w + ".exp_avg", d, shape), v = t.input(w + ".exp_avg_sq", d, shape);
      step.stateInputs.push_back(w + ".exp_avg");
      step.stateInputs.push_back(w + ".exp_avg_sq");
      Tensor mNext = t.call("add", {m * o.beta1, g * (1 - o.beta1)}, {}, w + ".exp_avg.next")[0];
      Tensor vNext = t.call("add", {v * o.beta2, g * g * (1 - o.beta2)}, {}, w + ".exp_avg_sq.next")[0];
      Tensor c1 = trace::cast(trace::sub(1.0, trace::pow(o.beta1, *stepNext)), d);
      Tensor c2 = trace::cast(trace::sub(1.0, trace::pow(o.beta2, *stepNext)), d);
      Tensor denom = trace::sqrt(vNext / c2) + o.eps;
      Tensor decayed = o.weightDecay ? p * (1 - o.lr * o.weightDecay) : p;
      updated.push_back(t.call("sub", {decayed, (mNext / c1) / denom * o.lr}, {}, w + ".next")[0]);
      updated.push_back(mNext);
      updated.push_back(vNext);
      break;
    }
    }
  }
  if (stepNext)
    updated.push_back(*stepNext);
  Graph g = t.graph();
  g.name = forward.name + "_train_step";
  g.outputs = forward.outputs;
  for (const Tensor &u : updated) {
    g.outputs.push_back(u.ref());
    step.updatedOutputs.push_back(u.ref());
  }
  step.graph = g;
  return step;
}

} // namespace tensorc::autodiff
