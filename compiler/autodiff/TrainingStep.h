// A whole training step as one graph: forward, backward and the optimizer
// update, with parameters and optimizer state as inputs and their updated
// values as outputs (the runtime updates them in place).
//
// Naming contract (docs/autodiff.md): for a parameter `w`, the step reads
// `w` and its state (`w.momentum`, or `w.exp_avg` and `w.exp_avg_sq`, and the
// shared scalar `step` for AdamW) and returns `w.next`, `w.momentum.next`,
// ... in that order after the forward outputs. With dynamic loss scaling the
// step also reads `loss_scale` and `good_steps` (f32 scalars) and returns
// their `.next` values last. With accumulation, it also
// reads `w.grad` (the sum of earlier micro-batches' gradients) and updates
// with `w.grad + dL/dw`.
#pragma once

#include "compiler/autodiff/Autodiff.h"

#include <string>
#include <vector>

namespace tensorc::autodiff {

enum class Optimizer { Sgd, Momentum, AdamW };

struct OptimizerOptions {
  Optimizer kind = Optimizer::Sgd;
  double lr = 1e-3;
  double momentum = 0.9;
  double weightDecay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// Dynamic loss scaling (as torch.cuda.amp.GradScaler), for f16 training:
// the loss is multiplied by the input `loss_scale` before the backward, the
// gradients are divided by it; if any gradient is inf or nan the step is
// skipped (parameters and state keep their values) and the scale is
// multiplied by `backoff`; after `growthInterval` clean steps in a row
// (counted in the input `good_steps`) it is multiplied by `growth`.
struct LossScalingOptions {
  bool enabled = false;
  double growth = 2.0, backoff = 0.5;
  int64_t growthInterval = 2000;
};

struct TrainingStepOptions {
  AutodiffOptions autodiff; // `of` must name one scalar loss (default: the only one)
  OptimizerOptions optimizer;
  bool accumulate = false; // add `w.grad` inputs to this step's gradients
  LossScalingOptions lossScaling;
};

struct TrainingStep {
  Graph graph;
  std::vector<std::string> parameters;     // the `wrt` inputs, updated
  std::vector<std::string> stateInputs;    // optimizer state inputs, in order
  std::vector<std::string> updatedOutputs; // `w.next`, state `.next`, in order
};

TrainingStep buildTrainingStep(const Graph &forward, const TrainingStepOptions &options);

Optimizer parseOptimizer(const std::string &name); // sgd | momentum | adamw
std::string optimizerName(Optimizer kind);          // its name for parseOptimizer

} // namespace tensorc::autodiff
