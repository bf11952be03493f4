// Helpers for the unit tests: build tensors, run one op or a traced graph on
// the interpreter, compare with tolerances by dtype.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/trace/Tracer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <optional>
#include <string>
#include <vector>

namespace tensorc::testing {

// A fresh random seed per call, so every run tests new inputs; failures print
// it (SCOPED_TRACE), and TENSORC_TEST_SEED=<seed> replays it (every call then
// returns that seed).
inline uint64_t freshSeed() {
  if (const char *fixed = std::getenv("TENSORC_TEST_SEED"))
    return std::strtoull(fixed, nullptr, 10);
  static std::random_device device;
  return (uint64_t(device()) << 32) | device();
}

inline HostTensor tensor(DType dtype, std::vector<int64_t> shape, std::vector<double> values) {
  HostTensor t(dtype, std::move(shape));
  EXPECT_EQ(int64_t(values.size()), t.numel()) << "test data does not fill the tensor";
  for (int64_t i = 0; i < t.numel() && i < int64_t(values.size()); ++i)
    isFloat(dtype) ? t.setF(i, values[i]) : t.setI(i, int64_t(values[i]));
  return t;
}
inline HostTensor f32(std::vector<int64_t> shape, std::vector<double> v) {
  return tensor(DType::F32, shape, v);
}
inline HostTensor f64(std::vector<int64_t> shape, std::vector<double> v) {
  return tensor(DType::F64, shape, v);
}
inline HostTensor i64(std::vector<int64_t> shape, std::vector<double> v) {
  return tensor(DType::I64, shape, v);
}

// Runs a traced graph on the interpreter (inputs named in0, in1, ...).
inline std::vector<HostTensor> runTraced(const trace::Tracer &t,
                                         const std::vector<HostTensor> &inputs) {
  GraphAnalysis a = analyzeGraph(t.graph(), "test");
  std::map<std::string, HostTensor> named;
  for (size_t i = 0; i < inputs.size(); ++i)
    named.emplace(t.graph().inputs[i].name, inputs[i]);
  return interpret(t.graph(), a, named).outputs;
}

// Runs one op whose tensor operands are `args` (nullopt: absent optional).
inline std::vector<HostTensor> runOp(const std::string &op,
                                     const std::vector<std::optional<HostTensor>> &args,
                                     AttrMap attrs = {}) {
  trace::Tracer t("op");
  std::vector<trace::Operand> operands;
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) {
      operands.push_back(std::monostate{});
      continue;
    }
    std::vector<std::variant<int64_t, std::string>> shape(args[i]->shape().begin(),
                                                          args[i]->shape().end());
    operands.push_back(t.input("in" + std::to_string(i), args[i]->dtype(), shape));
    inputs.push_back(*args[i]);
  }
  for (const trace::Tensor &r : t.call(op, operands, attrs))
    t.output(r);
  return runTraced(t, inputs);
}

inline HostTensor runOp1(const std::string &op, const std::vector<std::optional<HostTensor>> &args,
                         AttrMap attrs = {}) {
  return runOp(op, args, std::move(attrs)).at(0);
}

// Relative tolerance by dtype: a few ulps of the format.
inline double tolerance(DType d) {
  switch (d) {
  case DType::F64:
    return 1e-12;
  case DType::F32:
    return 1e-6;
  case DType::F16:
    return 1e-3;
  case DType::BF16:
    return 8e-3;
  default:
    return 0;
  }
}

inline void expectValues(const HostTensor &t, std::vector<int64_t> shape,
                         std::vector<double> expected) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.numel(), int64_t(expected.size()));
  double tol = tolerance(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double got = isFloat(t.dtype()) ? t.getF(i) : double(t.getI(i));
    double want = expected[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i;
    } else if (std::isinf(want)) {
      EXPECT_EQ(got, want) << "element " << i;
    } else {
      EXPECT_NEAR(got, want, tol * std::max(1.0, std::fabs(want))) << "element " << i;
    }
  }
}

} // namespace tensorc::testing
