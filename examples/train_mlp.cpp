// Trains the MLP example on the CPU through the embeddable runtime only (no
// compiler, no Python): a synthetic 10-class dataset drawn from a seed, a
// compiled training step (forward, backward and optimizer update in one
// artifact) run for STEPS steps with its `X.next` outputs fed back as the
// next step's `X` inputs, then accuracy on held-out samples with the
// compiled forward model.
//
//   tensorc compile examples/mlp.json --train --optimizer sgd --lr 0.1 --target cpu -o step.tcx
//   tensorc compile examples/mlp.json --target cpu -o mlp.tcx
//   train_mlp step.tcx mlp.tcx [STEPS] [SEED]
#include "tensorc/Runtime.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace rt = tensorc::runtime;

namespace {

constexpr int64_t kFeatures = 784, kClasses = 10, kBatch = 64;

// Each class is a random prototype; a sample is its prototype plus noise.
struct Dataset {
  std::vector<float> prototypes;
  std::mt19937_64 rng;
  explicit Dataset(uint64_t seed) : prototypes(size_t(kClasses * kFeatures)), rng(seed) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float &p : prototypes)
      p = 0.12f * n(rng);
  }
  void batch(rt::Tensor &x, rt::Tensor &labels) {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::uniform_int_distribution<int64_t> cls(0, kClasses - 1);
    float *xp = static_cast<float *>(x.data());
    int64_t *lp = static_cast<int64_t *>(labels.data());
    for (int64_t i = 0; i < labels.numel(); ++i) {
      lp[i] = cls(rng);
      for (int64_t f = 0; f < kFeatures; ++f)
        xp[i * kFeatures + f] = prototypes[size_t(lp[i] * kFeatures + f)] + noise(rng);
    }
  }
};

std::vector<int64_t> concreteShape(const rt::TensorInfo &info) {
  std::vector<int64_t> shape;
  for (const std::string &d : info.shape)
    shape.push_back(d == "B" ? kBatch : std::stoll(d));
  return shape;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: train_mlp STEP.tcx FORWARD.tcx [STEPS] [SEED]\n");
    return 2;
  }
  int steps = argc > 3 ? std::atoi(argv[3]) : 300;
  uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0;
  try {
    auto step = rt::Executable::load(argv[1]);
    auto forward = rt::Executable::load(argv[2]);
    Dataset data(seed);
    std::mt19937_64 init(seed + 1);
    // Inputs by name: data, parameters (PyTorch's default uniform init),
    // optimizer state (zeros).
    std::map<std::string, rt::Tensor> state;
    for (const rt::TensorInfo &in : step->inputs()) {
      rt::Tensor t(in.dtype, concreteShape(in));
      std::memset(t.data(), 0, t.nbytes());
      bool parameter = in.name == "w1" || in.name == "b1" || in.name == "w2" || in.name == "b2";
      if (parameter) {
        float bound = 1.0f / std::sqrt(float(in.name.back() == '1' ? kFeatures : 128));
        std::uniform_real_distribution<float> u(-bound, bound);
        for (int64_t i = 0; i < t.numel(); ++i)
          static_cast<float *>(t.data())[i] = u(init);
      }
      state.emplace(in.name, std::move(t));
    }
    // Output i feeds input "name" when it is called "name.next".
    std::vector<std::pair<size_t, std::string>> feedback;
    size_t lossIndex = 0;
    for (size_t i = 0; i < step->outputs().size(); ++i) {
      const std::string &name = step->outputs()[i].name;
      if (name == "loss")
        lossIndex = i;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".next") == 0)
        feedback.emplace_back(i, name.substr(0, name.size() - 5));
    }
    rt::Session session(step);
    for (int s = 1; s <= steps; ++s) {
      data.batch(state.at("x"), state.at("labels"));
      std::vector<rt::TensorView> in;
      for (const rt::TensorInfo &i : step->inputs())
        in.push_back(state.at(i.name).view());
      std::vector<rt::Tensor> out = session.run(in);
      for (auto &[o, name] : feedback)
        std::memcpy(state.at(name).data(), out[o].data(), out[o].nbytes());
      if (s == 1 || s % 25 == 0)
        std::printf("step %4d  loss %.4f\n", s, double(*static_cast<float *>(out[lossIndex].data())));
    }
    // Held-out accuracy with the forward model and the trained parameters.
    rt::Session eval(forward);
    int64_t correct = 0, total = 0;
    for (int b = 0; b < 16; ++b) {
      data.batch(state.at("x"), state.at("labels"));
      std::vector<rt::TensorView> in;
      for (const rt::TensorInfo &i : forward->inputs())
        in.push_back(state.at(i.name).view());
      std::vector<rt::Tensor> out = eval.run(in);
      const float *logits = static_cast<const float *>(out[0].data());
      const int64_t *labels = static_cast<const int64_t *>(state.at("labels").data());
      for (int64_t i = 0; i < kBatch; ++i) {
        int64_t best = 0;
        for (int64_t c = 1; c < kClasses; ++c)
          if (logits[i * kClasses + c] > logits[i * kClasses + best])
            best = c;
        correct += best == labels[i];
        ++total;
      }
    }
    std::printf("held-out accuracy: %.1f%% (%lld of %lld)\n", 100.0 * double(correct) / double(total),
                (long long)correct, (long long)total);
  } catch (const rt::Error &e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
