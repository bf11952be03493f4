// gradcheck: gradients from the derived backward graph, evaluated on the
// reference interpreter in f64, against central finite differences of the
// forward graph. Inputs are fresh random values each run (the seed is
// printed on failure); points of non-differentiability are avoided by the
// input ranges and by drawing no two values of an input closer than the step
// (drawApart).
#include "TestUtil.h"

#include "compiler/autodiff/Autodiff.h"
#include "ir/core/Error.h"

#include <functional>
#include <random>

using namespace tensorc;
using namespace tensorc::testing;
using trace::Tensor;
using trace::Tracer;

namespace {

struct In {
  std::string name;
  trace::DimSpec declared;    // as the graph declares it (may be symbolic)
  std::vector<int64_t> shape; // the concrete shape to run
  DType dtype = DType::F64;
  double lo = -1, hi = 1; // float range; integers in [0, hi)
  bool wrt = true;
  std::vector<int64_t> fixed; // integers: these values instead of random ones
};

In floats(std::string name, std::vector<int64_t> shape, double lo = -1, double hi = 1) {
  return {
      std::move(name), trace::DimSpec(shape.begin(), shape.end()), shape, DType::F64, lo, hi, true, {}};
}
In ints(std::string name, std::vector<int64_t> shape, int64_t bound) {
  return {std::move(name),
          trace::DimSpec(shape.begin(), shape.end()),
          shape,
          DType::I64,
          0,
          double(bound),
          false,
          {}};
}
In symbolic(std::string name, trace::DimSpec declared, std::vector<int64_t> shape) {
  return {std::move(name), std::move(declared), std::move(shape), DType::F64, -1, 1, true, {}};
}

HostTensor draw(const In &in, std::mt19937_64 &rng) {
  HostTensor t(in.dtype, in.shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(in.dtype))
      t.setF(i, std::uniform_real_distribution<double>(in.lo, in.hi)(rng));
    else if (!in.fixed.empty())
      t.setI(i, in.fixed.at(size_t(i)));
    else
      t.setI(i, std::uniform_int_distribution<int64_t>(0, int64_t(in.hi) - 1)(rng));
  }
  return t;
}

// Central differences step by h = 1e-6 (relative); a max or min over values
// closer than h (in one tensor or across devices of an all_reduce) would
// switch its argument inside the step and the numeric gradient would be
// meaningless. So float values of one input are redrawn until every pair is
// at least kMinGap apart (a seed once drew -0.192766762 on device 1 and
// -0.192765916 on device 4).
constexpr double kMinGap = 1e-4;
HostTensor drawApart(const In &in, std::mt19937_64 &rng, std::vector<double> &taken) {
  HostTensor t = draw(in, rng);
  if (!isFloat(in.dtype))
    return t;
  for (int64_t i = 0; i < t.numel(); ++i) {
    auto near = [&](double v) {
      for (double u : taken)
        if (std::fabs(u - v) < kMinGap)
          return true;
      return false;
    };
    double v = t.getF(i);
    for (int attempt = 0; near(v) && attempt < 1000; ++attempt)
      v = std::uniform_real_distribution<double>(in.lo, in.hi)(rng);
    t.setF(i, v);
    taken.push_back(v);
  }
  return t;
}

// An SPMD program (docs/sharding.md) is differentiated as the sum over
// devices of each device's <c_d, y_d>; one device is the ordinary case.
using PerDevice = std::vector<std::map<std::string, HostTensor>>;

double run(const Graph &g, const GraphAnalysis &a, const PerDevice &inputs,
           const std::vector<HostTensor> &cotangents) {
  std::vector<InterpreterResult> results = interpretSpmd(g, a, inputs);
  double total = 0;
  for (size_t d = 0; d < results.size(); ++d) {
    const HostTensor &y = results[d].outputs.at(0);
    for (int64_t i = 0; i < y.numel(); ++i)
      total += y.getF(i) * (cotangents.empty() ? 1.0 : cotangents[d].getF(i));
  }
  return total;
}

using Build = std::function<Tensor(Tracer &, const std::vector<Tensor> &)>;

// Checks d<c, f(inputs)>/d(input) of the forward graph's first output for
// every input in `wrt`, against central differences, with c a random
// cotangent (1 for a scalar output). `ins` describes how to draw each input.
void gradcheckGraph(const Graph &forward, const std::vector<In> &ins,
                    const std::vector<std::string> &wrt, double tol, uint64_t seed,
                    bool separateBackward);

// With the backward as part of one joint program and as its own program
// (prepareForAutodiff's forms), both must be right.
void gradcheckGraph(const Graph &forward, const std::vector<In> &ins,
                    const std::vector<std::string> &wrt, double tol, uint64_t seed) {
  for (bool separate : {false, true}) {
    SCOPED_TRACE(separate ? "backward as its own program" : "joint program");
    gradcheckGraph(forward, ins, wrt, tol, seed, separate);
  }
}

void gradcheckGraph(const Graph &forward, const std::vector<In> &ins,
                    const std::vector<std::string> &wrt, double tol, uint64_t seed,
                    bool separateBackward) {
  std::mt19937_64 rng(seed);
  autodiff::AutodiffOptions options;
  options.wrt = wrt;
  options.of = {forward.outputs.at(0)};
  options.separateBackward = separateBackward;
  autodiff::JointGraph joint = autodiff::buildJointGraph(forward, options);
  GraphAnalysis fa = analyzeGraph(forward, "forward");
  GraphAnalysis ja = analyzeGraph(joint.graph, "joint");

  size_t devices = size_t(spmdDevices(forward));
  PerDevice inputs(devices);
  for (const In &in : ins) {
    std::vector<double> taken; // this input's float values on every device so far
    for (auto &perDevice : inputs)
      perDevice.emplace(in.name, drawApart(in, rng, taken));
  }
  std::vector<InterpreterResult> forwardResults = interpretSpmd(forward, fa, inputs);
  std::vector<HostTensor> cot;
  PerDevice jointInputs = inputs;
  if (!joint.cotangentInputs.empty()) {
    ASSERT_EQ(joint.cotangentInputs.size(), 1u);
    for (size_t d = 0; d < devices; ++d) {
      HostTensor c(DType::F64, forwardResults[d].outputs.at(0).shape());
      for (int64_t i = 0; i < c.numel(); ++i)
        c.setF(i, std::uniform_real_distribution<double>(-1, 1)(rng));
      jointInputs[d].emplace(joint.cotangentInputs[0], c);
      cot.push_back(std::move(c));
    }
  }
  std::vector<InterpreterResult> jointResults = interpretSpmd(joint.graph, ja, jointInputs);
  size_t first = forward.outputs.size();
  for (size_t d = 0; d < devices; ++d) {
    const std::vector<HostTensor> &outs = jointResults[d].outputs;
    ASSERT_EQ(outs.size(), first + joint.wrt.size());
    for (size_t w = 0; w < joint.wrt.size(); ++w) {
      HostTensor analytic = outs[first + w];
      HostTensor x = inputs[d].at(joint.wrt[w]);
      ASSERT_EQ(analytic.shape(), x.shape()) << joint.wrt[w];
      for (int64_t i = 0; i < x.numel(); ++i) {
        double v = x.getF(i), h = 1e-6 * std::max(1.0, std::fabs(v));
        PerDevice plus = inputs, minus = inputs;
        plus[d].at(joint.wrt[w]).setF(i, v + h);
        minus[d].at(joint.wrt[w]).setF(i, v - h);
        double numeric = (run(forward, fa, plus, cot) - run(forward, fa, minus, cot)) / (2 * h);
        double got = analytic.getF(i);
        EXPECT_NEAR(got, numeric, tol * std::max(1.0, std::fabs(numeric)) + 1e-7)
            << "d/d " << joint.wrt[w] << "[" << i << "]"
            << (devices > 1 ? " on device " + std::to_string(d) : std::string());
      }
    }
  }
}

void gradcheck(const std::string &label, std::vector<In> ins, Build build, double tol = 1e-6,
               const std::optional<Mesh> &mesh = std::nullopt) {
  uint64_t seed = freshSeed();
  SCOPED_TRACE(label + " (seed " + std::to_string(seed) + ")");
  Tracer t("f");
  if (mesh)
    t.mesh(mesh->name, mesh->axes, mesh->sizes);
  std::vector<Tensor> args;
  std::vector<std::string> wrt;
  for (const In &in : ins) {
    args.push_back(t.input(in.name, in.dtype, in.declared));
    if (in.wrt)
      wrt.push_back(in.name);
  }
  t.output(build(t, args));
  gradcheckGraph(t.graph(), ins, wrt, tol, seed);
}

TEST(GradCheck, Unary) {
  for (const char *op :
       {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu", "sin", "cos", "erf", "gelu"})
    gradcheck(op, {floats("x", {2, 3})},
              [op](Tracer &t, auto &a) { return t.call(op, {a[0]})[0]; });
  gradcheck("gelu tanh", {floats("x", {5})},
            [](Tracer &, auto &a) { return trace::gelu(a[0], "tanh"); });
  for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal"})
    gradcheck(op, {floats("x", {2, 3}, 0.5, 2.0)},
              [op](Tracer &t, auto &a) { return t.call(op, {a[0]})[0]; });
}

TEST(GradCheck, BinaryWithBroadcasting) {
  for (const char *op : {"add", "sub", "mul", "maximum", "minimum"})
    gradcheck(op, {floats("a", {2, 1, 3}), floats("b", {4, 1})}, [op](Tracer &t, auto &a) {
      return t.call(op, {a[0], a[1]})[0];
    });
  gradcheck("div", {floats("a", {2, 3}), floats("b", {3}, 0.5, 2)},
            [](Tracer &, auto &a) { return a[0] / a[1]; });
  gradcheck("pow", {floats("a", {2, 3}, 0.5, 2), floats("b", {2, 1})},
            [](Tracer &, auto &a) { return trace::pow(a[0], a[1]); });
  gradcheck("literals", {floats("a", {3})}, [](Tracer &, auto &a) {
    return trace::pow(a[0] * 2.0 + 3.0, 2.0) - trace::div(1.0, trace::add(a[0], 3.0));
  });
  gradcheck("same value twice", {floats("a", {3})},
            [](Tracer &, auto &a) { return a[0] * a[0] + a[0]; });
}

TEST(GradCheck, SelectAndClamp) {
  gradcheck("where", {floats("c", {2, 3}), floats("x", {2, 3}), floats("y", {3})},
            [](Tracer &, auto &a) { return trace::where(trace::gt(a[0], 0.0), a[1], a[2]); });
  gradcheck("clamp", {floats("x", {8}, -2, 2)},
            [](Tracer &, auto &a) { return trace::clamp(a[0], -0.5, 0.75); });
  gradcheck("clamp min", {floats("x", {8}, -2, 2)},
            [](Tracer &, auto &a) { return trace::clamp(a[0], 0.1, std::nullopt); });
}

TEST(GradCheck, Reductions) {
  for (const char *op : {"sum", "mean", "max", "min", "prod", "var", "logsumexp"}) {
    gradcheck(std::string(op) + " all", {floats("x", {2, 3}, 0.5, 1.5)},
              [op](Tracer &t, auto &a) { return t.call(op, {a[0]})[0]; });
    gradcheck(std::string(op) + " axes", {floats("x", {2, 3, 4}, 0.5, 1.5)},
              [op](Tracer &t, auto &a) {
                return t.call(op, {a[0]}, {{"axes", std::vector<int64_t>{-1, 0}}})[0];
              });
    gradcheck(
        std::string(op) + " keepdim", {floats("x", {2, 3, 4}, 0.5, 1.5)}, [op](Tracer &t, auto &a) {
          return t.call(op, {a[0]}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", true}})[0];
        });
  }
  gradcheck("var correction 0", {floats("x", {3, 4})},
            [](Tracer &, auto &a) { return trace::var(a[0], {1}, false, 0); });
  gradcheck("transpose then reduce", {floats("x", {3, 4})},
            [](Tracer &, auto &a) { return trace::sum(trace::transpose(a[0], 0, 1), {0}); });
  gradcheck("symbolic mean", {symbolic("x", {"B", 3}, {5, 3})},
            [](Tracer &, auto &a) { return trace::mean(a[0], {0}); });
}

TEST(GradCheck, Matmul) {
  gradcheck("2d", {floats("a", {2, 3}), floats("b", {3, 4})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("vec-vec", {floats("a", {3}), floats("b", {3})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("vec-mat", {floats("a", {3}), floats("b", {2, 3, 4})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("mat-vec", {floats("a", {2, 4, 3}), floats("b", {3})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("batch broadcast", {floats("a", {2, 1, 2, 3}), floats("b", {3, 3, 2})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("symbolic batch", {symbolic("a", {"B", 3}, {4, 3}), floats("b", {3, 2})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  // A weight shared across batch entries: its gradient is one product over
  // the flattened rows (static and symbolic batch dims).
  gradcheck("shared weight", {floats("a", {2, 3, 4}), floats("b", {4, 5})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
  gradcheck("shared weight, symbolic rows", {symbolic("a", {"B", "T", 4}, {2, 3, 4}), floats("b", {4, 2})},
            [](Tracer &, auto &a) { return trace::matmul(a[0], a[1]); });
}

TEST(GradCheck, Normalization) {
  gradcheck("softmax", {floats("x", {2, 5})},
            [](Tracer &, auto &a) { return trace::softmax(a[0], 1); });
  gradcheck("softmax axis 0", {floats("x", {3, 2})},
            [](Tracer &, auto &a) { return trace::softmax(a[0], 0); });
  gradcheck("log_softmax", {floats("x", {2, 5})},
            [](Tracer &, auto &a) { return trace::log_softmax(a[0]); });
  gradcheck("layer_norm", {floats("x", {3, 5}), floats("w", {5}), floats("b", {5})},
            [](Tracer &, auto &a) { return trace::layer_norm(a[0], a[1], a[2]); });
  gradcheck("layer_norm two axes", {floats("x", {2, 3, 4}), floats("w", {3, 4})},
            [](Tracer &, auto &a) { return trace::layer_norm(a[0], a[1], std::nullopt, -2); });
  gradcheck("layer_norm plain", {floats("x", {2, 6})},
            [](Tracer &, auto &a) { return trace::layer_norm(a[0]); });
  gradcheck("rms_norm", {floats("x", {3, 5}), floats("w", {5})},
            [](Tracer &, auto &a) { return trace::rms_norm(a[0], a[1], -1, 1e-6); });
  gradcheck("rms_norm default eps", {floats("x", {2, 4})},
            [](Tracer &, auto &a) { return trace::rms_norm(a[0]); });
  gradcheck("batch_norm train", {floats("x", {3, 2, 2, 2}), floats("w", {2}), floats("b", {2})},
            [](Tracer &t, auto &a) {
              return trace::batch_norm(a[0], trace::zeros(t, {2}, DType::F64),
                                       trace::ones(t, {2}, DType::F64), a[1], a[2], true)[0];
            });
  gradcheck(
      "batch_norm eval",
      {floats("x", {3, 2, 2}), floats("w", {2}), floats("b", {2}), floats("m", {2}),
       floats("v", {2}, 0.5, 2.0)},
      [](Tracer &, auto &a) { return trace::batch_norm(a[0], a[3], a[4], a[1], a[2], false)[0]; });
}

TEST(GradCheck, Losses) {
  for (const char *reduction : {"mean", "sum", "none"})
    gradcheck(
        std::string("cross_entropy ") + reduction, {floats("x", {4, 5}), ints("y", {4}, 5)},
        [reduction](Tracer &, auto &a) { return trace::cross_entropy(a[0], a[1], reduction); });
  // Fixed targets: some ignored, some not (all ignored is a 0/0 mean: NaN, as in PyTorch).
  In targets = ints("y", {4}, 3);
  targets.fixed = {0, 1, 2, 1};
  gradcheck("cross_entropy smoothing ignore", {floats("x", {4, 3}), targets},
            [](Tracer &, auto &a) { return trace::cross_entropy(a[0], a[1], "mean", 1, 0.2); });
  // Without smoothing, the gradient is rebuilt from the per-row loss
  // (reduction none; or mean and sum as prepareForAutodiff rewrites them for
  // a separate backward): ignored rows read class 0 and get no gradient.
  for (const char *reduction : {"mean", "sum", "none"})
    gradcheck(std::string("cross_entropy ignore ") + reduction,
              {floats("x", {4, 3}, -30, 30), targets}, [reduction](Tracer &, auto &a) {
                return trace::cross_entropy(a[0], a[1], reduction, 1);
              });
  In spatialTargets = ints("y", {2, 2}, 3);
  spatialTargets.fixed = {2, 0, 0, 1};
  gradcheck("cross_entropy spatial ignore", {floats("x", {2, 3, 2}), spatialTargets},
            [](Tracer &, auto &a) { return trace::cross_entropy(a[0], a[1], "sum", 0); });
  gradcheck("cross_entropy spatial", {floats("x", {2, 3, 2}), ints("y", {2, 2}, 3)},
            [](Tracer &, auto &a) { return trace::cross_entropy(a[0], a[1]); });
  gradcheck("cross_entropy 1-D", {floats("x", {4}), ints("y", {}, 4)},
            [](Tracer &, auto &a) { return trace::cross_entropy(a[0], a[1]); });
}

TEST(GradCheck, IndexingOps) {
  gradcheck("embedding", {ints("i", {2, 3}, 4), floats("w", {4, 2})},
            [](Tracer &, auto &a) { return trace::embedding(a[0], a[1]); });
  gradcheck("gather", {floats("x", {3, 4}), ints("i", {2, 4}, 3)},
            [](Tracer &, auto &a) { return trace::gather(a[0], a[1], 0); });
  gradcheck("gather last axis", {floats("x", {3, 4}), ints("i", {3, 2}, 4)},
            [](Tracer &, auto &a) { return trace::gather(a[0], a[1], -1); });
  gradcheck("index_select", {floats("x", {3, 2, 4}), ints("i", {5}, 2)},
            [](Tracer &, auto &a) { return trace::index_select(a[0], a[1], 1); });
  gradcheck("dropout", {floats("x", {20})}, [](Tracer &t, auto &a) {
    return trace::dropout(a[0], trace::constant(t, DenseValue{DType::I64, {}, {}, {7}}), 0.3);
  });
}

TEST(GradCheck, ShapeOps) {
  gradcheck("reshape", {floats("x", {2, 6})}, [](Tracer &, auto &a) {
    return trace::reshape(a[0], {3, -1});
  });
  gradcheck("permute", {floats("x", {2, 3, 4})}, [](Tracer &, auto &a) {
    return trace::permute(a[0], {2, 0, 1});
  });
  gradcheck("transpose", {floats("x", {2, 3})},
            [](Tracer &, auto &a) { return trace::transpose(a[0], 0, 1); });
  gradcheck("broadcast_to", {floats("x", {3, 1})}, [](Tracer &, auto &a) {
    return trace::broadcast_to(a[0], {2, 3, 4});
  });
  gradcheck("slice", {floats("x", {7, 3})}, [](Tracer &, auto &a) {
    return trace::slice(a[0], {0, 1}, {1, -2}, {7, 3}, {3, 1});
  });
  gradcheck("concat", {floats("a", {2, 3}), floats("b", {2, 1})}, [](Tracer &, auto &a) {
    return trace::concat({a[0], a[1], a[0]}, 1);
  });
  gradcheck("split", {floats("x", {5, 2})}, [](Tracer &, auto &a) {
    std::vector<Tensor> p = trace::split(a[0], {2, 3}, 0);
    return trace::sum(p[0]) * trace::sum(p[1] * p[1]);
  });
  gradcheck("split unused part", {floats("x", {5})}, [](Tracer &, auto &a) {
    return trace::split(a[0], {2, 3})[1];
  });
  gradcheck("squeeze unsqueeze flatten", {floats("x", {2, 1, 3})}, [](Tracer &, auto &a) {
    return trace::flatten(trace::unsqueeze(trace::squeeze(a[0]), 0));
  });
  gradcheck("pad", {floats("x", {2, 3})}, [](Tracer &, auto &a) {
    return trace::pad(a[0], {1, -1, 2, 0}, 0.5);
  });
  gradcheck("symbolic reshape", {symbolic("x", {"B", "T", 4}, {2, 3, 4})}, [](Tracer &, auto &a) {
    return trace::reshape(a[0], {"B*T", 2, 2});
  });
}

TEST(GradCheck, Convolution) {
  gradcheck("conv2d", {floats("x", {2, 2, 5, 4}), floats("w", {3, 2, 2, 3}), floats("b", {3})},
            [](Tracer &, auto &a) { return trace::conv2d(a[0], a[1], a[2]); });
  gradcheck("conv2d stride pad dilation", {floats("x", {1, 2, 7, 6}), floats("w", {2, 2, 3, 2})},
            [](Tracer &, auto &a) {
              return trace::conv2d(a[0], a[1], std::nullopt, {2, 1}, {1, 2}, {2, 1});
            });
  gradcheck("conv2d groups", {floats("x", {1, 4, 4, 4}), floats("w", {6, 2, 2, 2})},
            [](Tracer &, auto &a) {
              return trace::conv2d(a[0], a[1], std::nullopt, {1, 1}, {0, 0}, {1, 1}, 2);
            });
  gradcheck("conv2d symbolic batch",
            {symbolic("x", {"N", 1, 4, 4}, {2, 1, 4, 4}), floats("w", {2, 1, 3, 3})},
            [](Tracer &, auto &a) {
              return trace::conv2d(a[0], a[1], std::nullopt, {2, 2}, {1, 1});
            });
  gradcheck("max_pool2d", {floats("x", {1, 2, 5, 5})}, [](Tracer &, auto &a) {
    return trace::max_pool2d(a[0], {2, 2});
  });
  gradcheck("max_pool2d overlap pad ceil", {floats("x", {1, 1, 6, 5})}, [](Tracer &, auto &a) {
    return trace::max_pool2d(a[0], {3, 2}, std::vector<int64_t>{2, 1}, {1, 1}, {1, 1}, true);
  });
  gradcheck("max_pool2d dilation", {floats("x", {1, 1, 6, 6})}, [](Tracer &, auto &a) {
    return trace::max_pool2d(a[0], {2, 2}, std::vector<int64_t>{1, 1}, {0, 0}, {2, 2});
  });
  gradcheck("avg_pool2d", {floats("x", {2, 1, 4, 6})}, [](Tracer &, auto &a) {
    return trace::avg_pool2d(a[0], {2, 3});
  });
  gradcheck("avg_pool2d pad ceil", {floats("x", {1, 2, 5, 5})}, [](Tracer &, auto &a) {
    return trace::avg_pool2d(a[0], {3, 3}, std::vector<int64_t>{2, 2}, {1, 1}, true, true);
  });
  gradcheck("avg_pool2d exclude pad", {floats("x", {1, 1, 5, 4})}, [](Tracer &, auto &a) {
    return trace::avg_pool2d(a[0], {2, 2}, std::vector<int64_t>{2, 2}, {1, 1}, false, false);
  });
}

// SPMD programs on a 2 x 3 mesh: each collective's rule against finite
// differences of the sum over devices (each device's inputs drawn apart).
TEST(GradCheck, Collectives) {
  Mesh mesh{"mesh", {"data", "model"}, {2, 3}};
  trace::MeshAxes data{"mesh", {"data"}}, model{"mesh", {"model"}}, both{"mesh", {"model", "data"}};
  auto check = [&](const std::string &label, std::vector<In> ins, Build build) {
    gradcheck(label, std::move(ins), std::move(build), 1e-6, mesh);
  };
  for (const char *reduction : {"sum", "mean", "max", "min"}) {
    check(std::string("all_reduce ") + reduction, {floats("x", {2, 3})},
          [&](Tracer &, const std::vector<Tensor> &a) {
            return sin(all_reduce(a[0], data, reduction)) * a[0];
          });
    check(std::string("reduce_scatter ") + reduction, {floats("x", {2, 12})},
          [&](Tracer &, const std::vector<Tensor> &a) {
            return sin(reduce_scatter(a[0], both, 1, reduction));
          });
  }
  check("all_gather", {floats("x", {2, 3})}, [&](Tracer &, const std::vector<Tensor> &a) {
    return sin(all_gather(a[0], model, 1));
  });
  check("all_to_all", {floats("x", {3, 6})}, [&](Tracer &, const std::vector<Tensor> &a) {
    return sin(all_to_all(a[0], model, 1, 0)) * 2.0;
  });
  check("all_slice", {floats("x", {2, 6})}, [&](Tracer &, const std::vector<Tensor> &a) {
    return exp(all_slice(a[0], model, 1));
  });
  check("all_slice of a symbolic dim", {symbolic("x", {"3*N", 2}, {6, 2}), symbolic("y", {"N"}, {2})},
        [&](Tracer &, const std::vector<Tensor> &a) {
          return sin(all_slice(a[0], model, 0)) * unsqueeze(a[1], 1);
        });
  check("collective_broadcast", {floats("x", {4})}, [&](Tracer &, const std::vector<Tensor> &a) {
    return sin(collective_broadcast(a[0], both, 4)) * a[0];
  });
  check("slice then gather back", {floats("x", {2, 6})}, [&](Tracer &, const std::vector<Tensor> &a) {
    return all_gather(exp(all_slice(a[0], both, 1)), both, 1);
  });
}

TEST(GradCheck, Attention) {
  gradcheck(
      "sdpa", {floats("q", {2, 3, 4}), floats("k", {2, 5, 4}), floats("v", {2, 5, 2})},
      [](Tracer &, auto &a) { return trace::scaled_dot_product_attention(a[0], a[1], a[2]); });
  gradcheck("sdpa causal", {floats("q", {2, 4, 3}), floats("k", {2, 4, 3}), floats("v", {2, 4, 3})},
            [](Tracer &, auto &a) {
              return trace::scaled_dot_product_attention(a[0], a[1], a[2], std::nullopt, true);
            });
  gradcheck("sdpa additive mask scale",
            {floats("q", {3, 2}), floats("k", {4, 2}), floats("v", {4, 3}), floats("m", {3, 4})},
            [](Tracer &, auto &a) {
              return trace::scaled_dot_product_attention(a[0], a[1], a[2], a[3], false, 0.7);
            });
  gradcheck(
      "sdpa bool mask broadcast batch",
      {floats("q", {2, 2, 3}), floats("k", {3, 3}), floats("v", {3, 2})}, [](Tracer &t, auto &a) {
        Tensor mask = trace::constant(t, DenseValue{DType::I1, {2, 3}, {}, {1, 0, 1, 1, 1, 0}});
        return trace::scaled_dot_product_attention(a[0], a[1], a[2], mask);
      });
  gradcheck("sdpa causal symbolic",
            {symbolic("q", {"T", 3}, {4, 3}), symbolic("k", {"T", 3}, {4, 3}),
             symbolic("v", {"T", 2}, {4, 2})},
            [](Tracer &, auto &a) {
              return trace::scaled_dot_product_attention(a[0], a[1], a[2], std::nullopt, true);
            });
  // Dropout on the probabilities: a fixed seed makes it a function.
  auto dropoutOf = [](Tracer &t, double p, int64_t stream) {
    return trace::AttentionDropout{trace::constant(t, DenseValue{DType::I64, {}, {}, {19}}), p, stream};
  };
  gradcheck("sdpa dropout", {floats("q", {2, 3, 4}), floats("k", {2, 5, 4}), floats("v", {2, 5, 2})},
            [&](Tracer &t, auto &a) {
              return trace::scaled_dot_product_attention(a[0], a[1], a[2], std::nullopt, false, std::nullopt,
                                                         dropoutOf(t, 0.4, 2));
            });
  gradcheck("sdpa dropout causal bool mask, v's batch broadcast",
            {floats("q", {2, 4, 3}), floats("k", {4, 3}), floats("v", {3, 1, 4, 2})}, [&](Tracer &t, auto &a) {
              Tensor mask = trace::constant(t, DenseValue{DType::I1, {4}, {}, {1, 0, 1, 1}});
              return trace::scaled_dot_product_attention(a[0], a[1], a[2], mask, true, 0.8, dropoutOf(t, 0.25, 9));
            });
  gradcheck(
      "sdpa symbolic",
      {symbolic("q", {"B", 2, 3}, {2, 2, 3}), symbolic("k", {"B", 2, 3}, {2, 2, 3}),
       symbolic("v", {"B", 2, 3}, {2, 2, 3})},
      [](Tracer &, auto &a) { return trace::scaled_dot_product_attention(a[0], a[1], a[2]); });
}

TEST(Autodiff, DeadPathsAreNotBuilt) {
  Tracer t("f");
  Tensor x = t.parameter("x", DType::F64, {3});
  Tensor y = t.input("y", DType::F64, {3});
  t.output(trace::sum(x * 2.0) + trace::sum(trace::exp(y)));
  autodiff::JointGraph joint = autodiff::buildJointGraph(t.graph());
  ASSERT_EQ(joint.wrt, std::vector<std::string>{"x"});
  // y needs no gradient, so nothing of the backward reads exp(y) (only the
  // forward sum does), and y's gradient rule is never run.
  std::string expNode;
  for (const Node &n : joint.graph.nodes)
    if (n.op == "exp")
      expNode = n.name;
  int readers = 0;
  for (const Node &n : joint.graph.nodes)
    for (const Arg &a : n.args)
      readers += a.kind == Arg::Kind::Value && parseValueRef(a.value).producer == expNode;
  EXPECT_EQ(readers, 1);
  EXPECT_EQ(joint.graph.outputs.size(), 2u);
}

// prepareForAutodiff rewrites a mean cross-entropy into per-row losses and
// their mean; every name the forward had (the loss, a node whose name a
// generated node would take) still names the same value.
TEST(Autodiff, PreparedForwardKeepsNames) {
  Tracer t("f");
  Tensor x = t.parameter("x", DType::F32, {4, 5});
  Tensor y = t.input("y", DType::I64, {4});
  Tensor loss = trace::cross_entropy(x, y).named("sum0");
  Tensor twice = (loss * 2.0).named("cross_entropy0");
  t.output(loss);
  t.output(twice);
  autodiff::JointGraph joint = autodiff::buildJointGraph(t.graph(), {{}, {"sum0"}, true, true});
  std::map<std::string, std::string> opOf;
  for (const Node &n : joint.graph.nodes)
    opOf[n.name] = n.op;
  EXPECT_EQ(opOf.at("sum0"), "div");
  EXPECT_EQ(opOf.at("cross_entropy0"), "mul");
  EXPECT_EQ(opOf.at("sum0_rows"), "cross_entropy");
  EXPECT_EQ(joint.graph.outputs.at(0), "sum0");
  EXPECT_EQ(joint.graph.outputs.at(1), "cross_entropy0");
}

TEST(Autodiff, Errors) {
  Tracer t("f");
  Tensor x = t.input("x", DType::F64, {3});
  t.output(trace::sum(x));
  EXPECT_THROW(autodiff::buildJointGraph(t.graph()), Error); // nothing trainable
  autodiff::AutodiffOptions o;
  o.wrt = {"nope"};
  EXPECT_THROW(autodiff::buildJointGraph(t.graph(), o), Error);
}

} // namespace

namespace {

// A small MLP with cross-entropy loss and a GPT-style transformer block, in
// f64 so finite differences are exact enough: every parameter's gradient.
Graph smallMlp() {
  Tracer t("mlp");
  Tensor x = t.input("x", DType::F64, {"B", 6});
  Tensor y = t.input("y", DType::I64, {"B"});
  Tensor w1 = t.parameter("w1", DType::F64, {6, 5}), b1 = t.parameter("b1", DType::F64, {5});
  Tensor w2 = t.parameter("w2", DType::F64, {5, 3}), b2 = t.parameter("b2", DType::F64, {3});
  Tensor logits = trace::matmul(trace::relu(trace::matmul(x, w1) + b1), w2) + b2;
  t.output(trace::cross_entropy(logits, y));
  return t.graph();
}

std::vector<In> smallMlpInputs() {
  return {symbolic("x", {"B", 6}, {4, 6}),
          ints("y", {4}, 3),
          floats("w1", {6, 5}),
          floats("b1", {5}),
          floats("w2", {5, 3}),
          floats("b2", {3})};
}

Graph smallTransformerBlock() {
  Tracer t("block");
  const int64_t C = 8, H = 2, D = 4;
  Tensor x = t.input("x", DType::F64, {"B", "T", C});
  auto p = [&](const char *n, trace::DimSpec s) { return t.parameter(n, DType::F64, s); };
  Tensor ln1w = p("ln1_w", {C}), ln1b = p("ln1_b", {C}), aw = p("attn_w", {C, 3 * C}),
         ab = p("attn_b", {3 * C});
  Tensor pw = p("proj_w", {C, C}), pb = p("proj_b", {C}), ln2w = p("ln2_w", {C}),
         ln2b = p("ln2_b", {C});
  Tensor fw = p("fc_w", {C, 4 * C}), fb = p("fc_b", {4 * C}), fpw = p("fc_proj_w", {4 * C, C}),
         fpb = p("fc_proj_b", {C});
  std::vector<Tensor> qkv =
      trace::split(trace::matmul(trace::layer_norm(x, ln1w, ln1b), aw) + ab, {C, C, C}, 2);
  auto heads = [&](const Tensor &v) {
    return trace::permute(trace::reshape(v, {"B", "T", H, D}), {0, 2, 1, 3});
  };
  Tensor attn = trace::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                                    std::nullopt, true);
  Tensor merged = trace::reshape(trace::permute(attn, {0, 2, 1, 3}), {"B", "T", C});
  Tensor res = x + (trace::matmul(merged, pw) + pb);
  Tensor mlp =
      trace::matmul(trace::gelu(trace::matmul(trace::layer_norm(res, ln2w, ln2b), fw) + fb, "tanh"),
                    fpw) +
      fpb;
  t.output(res + mlp);
  return t.graph();
}

TEST(GradCheck, MlpEveryParameter) {
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  gradcheckGraph(smallMlp(), smallMlpInputs(), {"w1", "b1", "w2", "b2"}, 1e-6, seed);
}

TEST(GradCheck, TransformerBlockEveryParameter) {
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<In> ins = {symbolic("x", {"B", "T", 8}, {2, 3, 8})};
  for (const auto &[name, shape] :
       std::vector<std::pair<std::string, std::vector<int64_t>>>{{"ln1_w", {8}},
                                                                 {"ln1_b", {8}},
                                                                 {"attn_w", {8, 24}},
                                                                 {"attn_b", {24}},
                                                                 {"proj_w", {8, 8}},
                                                                 {"proj_b", {8}},
                                                                 {"ln2_w", {8}},
                                                                 {"ln2_b", {8}},
                                                                 {"fc_w", {8, 32}},
                                                                 {"fc_b", {32}},
                                                                 {"fc_proj_w", {32, 8}},
                                                                 {"fc_proj_b", {8}}})
    ins.push_back(floats(name, shape));
  std::vector<std::string> wrt;
  for (size_t i = 0; i < ins.size(); ++i)
    wrt.push_back(ins[i].name);
  gradcheckGraph(smallTransformerBlock(), ins, wrt, 1e-6, seed);
}

// Double backward: the backward graph is an ordinary graph, so it is
// differentiated again. f(w) = |dL/dw|^2 for the MLP's loss L.
TEST(GradCheck, DoubleBackwardOfMlpGradientNorm) {
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  autodiff::JointGraph first = autodiff::buildJointGraph(smallMlp());
  Tracer t(first.graph);
  Tensor norm = trace::sum(trace::full(t, {}, 0.0, DType::F64));
  for (const std::string &g : first.gradientOutputs) {
    Tensor v = t.value(g);
    norm = norm + trace::sum(v * v);
  }
  t.output(norm);
  Graph g = t.graph();
  g.outputs = {norm.ref()};
  gradcheckGraph(g, smallMlpInputs(), {"w1", "b1", "w2", "b2"}, 1e-5, seed);
}

// Second derivatives of single ops: differentiate sum(dy/dx * c) again.
TEST(GradCheck, DoubleBackwardOfOps) {
  struct Case {
    const char *op;
    double lo, hi;
  };
  for (const Case &c : std::vector<Case>{{"exp", -1, 1},
                                         {"tanh", -1, 1},
                                         {"sigmoid", -1, 1},
                                         {"log", 0.5, 2},
                                         {"sqrt", 0.5, 2},
                                         {"sin", -1, 1},
                                         {"gelu", -1, 1},
                                         {"silu", -1, 1},
                                         {"softmax", -1, 1},
                                         {"log_softmax", -1, 1},
                                         {"layer_norm", -1, 1}}) {
    uint64_t seed = freshSeed();
    SCOPED_TRACE(std::string(c.op) + " seed " + std::to_string(seed));
    Tracer t("f");
    Tensor x = t.parameter("x", DType::F64, {2, 4});
    t.output(trace::sum(t.call(c.op, {x})[0] * t.call(c.op, {x})[0]));
    autodiff::JointGraph first = autodiff::buildJointGraph(t.graph());
    Tracer t2(first.graph);
    Tensor gx = t2.value(first.gradientOutputs[0]);
    Tensor out = trace::sum(gx * gx);
    t2.output(out);
    Graph g = t2.graph();
    g.outputs = {out.ref()};
    gradcheckGraph(g, {floats("x", {2, 4}, c.lo, c.hi)}, {"x"}, 1e-5, seed);
  }
}

} // namespace
