#include "compiler/autodiff/TrainingStep.h"

#include "compiler/autodiff/GradRules.h"
#include "ir/core/Error.h"

namespace tensorc::autodiff {

using trace::Tensor;
using trace::Tracer;

Optimizer parseOptimizer(const std::string &name) {
  if (name == "sgd")
    return Optimizer::Sgd;
  if (name == "momentum")
    return Optimizer::Momentum;
  if (name == "adamw")
    return Optimizer::AdamW;
  fail("unknown optimizer \"" + name + "\" (expected sgd, momentum or adamw)");
}

std::string optimizerName(Optimizer kind) {
  switch (kind) {
  case Optimizer::Sgd:
    return "sgd";
  case Optimizer::Momentum:
    return "momentum";
  case Optimizer::AdamW:
    return "adamw";
  }
  return "sgd";
}

TrainingStep buildTrainingStep(const Graph &given, const TrainingStepOptions &options) {
  const Graph forwardGraph = withoutChecks(given);
  Graph forward = forwardGraph;
  AutodiffOptions autodiffOptions = options.autodiff;
  const LossScalingOptions &scaling = options.lossScaling;
  if (scaling.enabled) {
    // Differentiate loss * loss_scale instead of the loss.
    Tracer f(forward);
    GraphAnalysis a = analyzeGraph(forward, "train " + forward.name);
    std::string loss = autodiffOptions.of.empty() ? "" : autodiffOptions.of[0];
    if (loss.empty())
      for (size_t i = 0; i < forward.outputs.size(); ++i)
        if (a.outputs[i].rank() == 0 && isFloat(a.outputs[i].dtype))
          loss = loss.empty()
                     ? forward.outputs[i]
                     : (fail("train " + forward.name + ": several scalar outputs; use --loss"), "");
    check(!loss.empty(), "train " + forward.name + ": loss scaling needs a scalar loss");
    Tensor scale = f.input("loss_scale", DType::F32, {});
    Tensor l = f.value(loss);
    Tensor scaled = f.call("mul", {trace::cast(l, DType::F32), scale}, {}, "scaled_loss")[0];
    f.output(scaled);
    forward = f.graph();
    forward.outputs = forwardGraph.outputs;
    forward.outputs.push_back(scaled.ref());
    autodiffOptions.of = {scaled.ref()};
  }
  JointGraph joint = buildJointGraph(forward, autodiffOptions);
  check(joint.cotangentInputs.empty(),
        "train " + forward.name + ": the loss must be one scalar output (use --loss to choose it)");
  const OptimizerOptions &o = options.optimizer;
  check(o.lr >= 0 && o.weightDecay >= 0 && o.momentum >= 0 && o.beta1 >= 0 && o.beta1 < 1 &&
            o.beta2 >= 0 && o.beta2 < 1 && o.eps >= 0,
        "train " + forward.name + ": optimizer hyperparameters out of range");
  Tracer t(joint.graph);
  TrainingStep step;
  step.parameters = joint.wrt;
  std::vector<Tensor> updated;
  std::optional<Tensor> stepCount, stepNext;
  if (o.kind == Optimizer::AdamW) {
    stepCount = t.input("step", DType::F32, {});
    step.stateInputs.push_back("step");
    stepNext = *stepCount + 1.0;
  }
  // Unscaled gradients and the overflow check: any inf or nan makes the sum
  // of g * 0 nan.
  std::vector<Tensor> grads;
  std::optional<Tensor> overflow, scale, goodSteps;
  if (scaling.enabled) {
    scale = t.value("loss_scale");
    goodSteps = t.input("good_steps", DType::F32, {});
    std::optional<Tensor> probe;
    for (const std::string &ref : joint.gradientOutputs) {
      Tensor g = t.value(ref);
      Tensor unscaled = g / trace::cast(*scale, g.dtype());
      grads.push_back(unscaled);
      Tensor p = trace::cast(trace::sum(unscaled * 0.0), DType::F32);
      probe = probe ? *probe + p : p;
    }
    overflow = trace::ne(*probe, *probe);
  } else {
    for (const std::string &ref : joint.gradientOutputs)
      grads.push_back(t.value(ref));
  }
  // With loss scaling, a skipped step keeps every value as it was.
  auto keepOnOverflow = [&](Tensor next, const Tensor &previous, const std::string &name) {
    if (overflow)
      return t.call("where", {*overflow, previous, next}, {}, name)[0];
    try {
      return next.named(name);
    } catch (const Error &) {
      return t.call("mul", {next, 1.0}, {}, name)[0]; // already used: a named copy
    }
  };
  for (size_t i = 0; i < joint.wrt.size(); ++i) {
    const std::string &w = joint.wrt[i];
    Tensor p = t.value(w);
    Tensor g = grads[i];
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
      updated.push_back(keepOnOverflow(p - gd * o.lr, p, w + ".next"));
      break;
    }
    case Optimizer::Momentum: {
      // PyTorch SGD with momentum (no dampening): b = mu * b + g; p -= lr * b.
      Tensor buffer = t.input(w + ".momentum", d, shape);
      step.stateInputs.push_back(w + ".momentum");
      Tensor gd = o.weightDecay ? g + p * o.weightDecay : g;
      Tensor next = buffer * o.momentum + gd;
      updated.push_back(keepOnOverflow(p - next * o.lr, p, w + ".next"));
      updated.push_back(keepOnOverflow(next, buffer, w + ".momentum.next"));
      break;
    }
    case Optimizer::AdamW: {
      // PyTorch AdamW: p *= 1 - lr * wd; m, v moments; bias-corrected step.
      Tensor m = t.input(w + ".exp_avg", d, shape), v = t.input(w + ".exp_avg_sq", d, shape);
      step.stateInputs.push_back(w + ".exp_avg");
      step.stateInputs.push_back(w + ".exp_avg_sq");
      Tensor mNext = m * o.beta1 + g * (1 - o.beta1);
      Tensor vNext = v * o.beta2 + g * g * (1 - o.beta2);
      Tensor c1 = trace::cast(trace::sub(1.0, trace::pow(o.beta1, *stepNext)), d);
      Tensor c2 = trace::cast(trace::sub(1.0, trace::pow(o.beta2, *stepNext)), d);
      Tensor denom = trace::sqrt(vNext / c2) + o.eps;
      Tensor decayed = o.weightDecay ? p * (1 - o.lr * o.weightDecay) : p;
      updated.push_back(keepOnOverflow(decayed - (mNext / c1) / denom * o.lr, p, w + ".next"));
      updated.push_back(keepOnOverflow(mNext, m, w + ".exp_avg.next"));
      updated.push_back(keepOnOverflow(vNext, v, w + ".exp_avg_sq.next"));
      break;
    }
    }
  }
  if (stepNext)
    updated.push_back(keepOnOverflow(*stepNext, *stepCount, "step.next"));
  if (scaling.enabled) {
    // good = overflow ? 0 : good + 1; grow after growthInterval clean steps.
    Tensor counted = *goodSteps + 1.0;
    Tensor grow = trace::ge(counted, double(scaling.growthInterval));
    Tensor grown = trace::where(grow, *scale * scaling.growth, *scale);
    updated.push_back(
        t.call("where", {*overflow, *scale * scaling.backoff, grown}, {}, "loss_scale.next")[0]);
    Tensor cleanCount = trace::where(grow, 0.0, counted);
    updated.push_back(t.call("where", {*overflow, 0.0, cleanCount}, {}, "good_steps.next")[0]);
    step.stateInputs.push_back("loss_scale");
    step.stateInputs.push_back("good_steps");
  }
  Graph g = t.graph();
  g.name = forwardGraph.name + "_train_step";
  g.outputs = forwardGraph.outputs;
  for (const Tensor &u : updated) {
    g.outputs.push_back(u.ref());
    step.updatedOutputs.push_back(u.ref());
  }
  step.graph = g;
  return step;
}

} // namespace tensorc::autodiff
