// The reference interpreter against hand-computed values, op by op.
// Expected values come from closed forms worked out by hand or with Python's
// math module, never from the code under test.
#include "TestUtil.h"

#include "ir/core/Error.h"

#include <limits>
#include <random>

using namespace tensorc;
using namespace tensorc::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const int64_t kEnd = std::numeric_limits<int64_t>::max();

HostTensor x4() { return f64({4}, {-1.5, 0.0, 0.5, 2.0}); }

TEST(Interpreter, UnaryFloat) {
  struct Case {
    const char *op;
    std::vector<double> expected;
  };
  std::vector<Case> cases = {
      {"neg", {1.5, -0.0, -0.5, -2.0}},
      {"abs", {1.5, 0.0, 0.5, 2.0}},
      {"exp", {0.22313016014842982, 1.0, 1.6487212707001282, 7.38905609893065}},
      {"tanh", {-0.9051482536448664, 0.0, 0.46211715726000974, 0.9640275800758169}},
      {"sigmoid", {0.18242552380635635, 0.5, 0.6224593312018546, 0.8807970779778823}},
      {"silu", {-0.2736382857095345, 0.0, 0.3112296656009273, 1.7615941559557646}},
      {"sin", {-0.9974949866040544, 0.0, 0.479425538604203, 0.9092974268256817}},
      {"cos", {0.0707372016677029, 1.0, 0.8775825618903728, -0.4161468365471424}},
      {"erf", {-0.9661051464753108, 0.0, 0.5204998778130465, 0.9953222650189527}},
      {"gelu", {-0.10021080190328713, 0.0, 0.34573123063700656, 1.9544997361036416}},
      {"relu", {0.0, 0.0, 0.5, 2.0}},
      {"floor", {-2.0, 0.0, 0.0, 2.0}},
      {"ceil", {-1.0, 0.0, 1.0, 2.0}},
      {"sign", {-1.0, 0.0, 1.0, 1.0}},
      {"reciprocal", {-1.0 / 1.5, kInf, 2.0, 0.5}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.op);
    expectValues(runOp1(c.op, {x4()}), {4}, c.expected);
  }
  expectValues(runOp1("gelu", {x4()}, {{"approximate", std::string("tanh")}}), {4},
               {-0.10042842301976707, 0.0, 0.34571400982514394, 1.954597694087775});
  HostTensor pos = f64({3}, {0.25, 1.0, 4.0});
  expectValues(runOp1("log", {pos}), {3}, {-1.3862943611198906, 0.0, 1.3862943611198906});
  expectValues(runOp1("sqrt", {pos}), {3}, {0.5, 1.0, 2.0});
  expectValues(runOp1("rsqrt", {pos}), {3}, {2.0, 1.0, 0.5});
  expectValues(runOp1("log", {f64({2}, {0.0, -1.0})}), {2}, {-kInf, kNaN});
  // nan passes through relu; sign(nan) is 0, as in PyTorch.
  expectValues(runOp1("relu", {f64({1}, {kNaN})}), {1}, {kNaN});
  expectValues(runOp1("sign", {f64({1}, {kNaN})}), {1}, {0.0});
}

TEST(Interpreter, UnaryIntegerAndBool) {
  HostTensor ints = tensor(DType::I32, {4}, {-3, 0, 5, -2147483648.0});
  expectValues(runOp1("neg", {ints}), {4}, {3, 0, -5, -2147483648.0}); // wraps like int32
  expectValues(runOp1("abs", {ints}), {4}, {3, 0, 5, -2147483648.0});
  expectValues(runOp1("relu", {ints}), {4}, {0, 0, 5, 0});
  expectValues(runOp1("sign", {ints}), {4}, {-1, 0, 1, -1});
  HostTensor r = runOp1("logical_not", {f32({3}, {0.0, 2.0, -0.0})});
  EXPECT_EQ(r.dtype(), DType::I1);
  expectValues(r, {3}, {1, 0, 1});
}

TEST(Interpreter, LowPrecisionRoundsOncePerOp) {
  // exp(1) = 2.71828... rounds to 2.71875 in f16 and 2.71875 in bf16.
  HostTensor h = runOp1("exp", {tensor(DType::F16, {1}, {1.0})});
  EXPECT_EQ(h.getF(0), 2.71875);
  HostTensor b = runOp1("exp", {tensor(DType::BF16, {1}, {1.0})});
  EXPECT_EQ(b.getF(0), 2.71875);
  // 1 + 2^-11 is a tie in f16: rounds to even (1.0).
  HostTensor sum = runOp1(
      "add", {tensor(DType::F16, {1}, {1.0}), tensor(DType::F16, {1}, {std::ldexp(1.0, -11)})});
  EXPECT_EQ(sum.getF(0), 1.0);
}

TEST(Interpreter, BinaryBroadcasting) {
  HostTensor a = f64({2, 1}, {1, 2}), b = f64({3}, {10, 20, 30});
  expectValues(runOp1("add", {a, b}), {2, 3}, {11, 21, 31, 12, 22, 32});
  expectValues(runOp1("sub", {a, b}), {2, 3}, {-9, -19, -29, -8, -18, -28});
  expectValues(runOp1("mul", {a, b}), {2, 3}, {10, 20, 30, 20, 40, 60});
  expectValues(runOp1("div", {b, a}), {2, 3}, {10, 20, 30, 5, 10, 15});
  expectValues(runOp1("pow", {a, f64({}, {3})}), {2, 1}, {1, 8});
  expectValues(runOp1("maximum", {f64({3}, {1, kNaN, 3}), f64({3}, {2, 0, -1})}), {3},
               {2, kNaN, 3});
  expectValues(runOp1("minimum", {f64({3}, {1, kNaN, 3}), f64({3}, {2, 0, -1})}), {3},
               {1, kNaN, -1});
  expectValues(runOp1("div", {f64({3}, {1, -1, 0}), f64({}, {0})}), {3}, {kInf, -kInf, kNaN});
}

TEST(Interpreter, IntegerArithmeticWraps) {
  HostTensor big(DType::I64, {1});
  big.setI(0, std::numeric_limits<int64_t>::max());
  HostTensor one = i64({1}, {1});
  HostTensor r = runOp1("add", {big, one});
  EXPECT_EQ(r.getI(0), std::numeric_limits<int64_t>::min());
  HostTensor i32 =
      runOp1("mul", {tensor(DType::I32, {1}, {65536}), tensor(DType::I32, {1}, {65536})});
  EXPECT_EQ(i32.getI(0), 0);
}

TEST(Interpreter, Comparisons) {
  HostTensor a = f64({4}, {1, 2, kNaN, 4}), b = f64({4}, {1, 3, kNaN, 3});
  expectValues(runOp1("eq", {a, b}), {4}, {1, 0, 0, 0});
  expectValues(runOp1("ne", {a, b}), {4}, {0, 1, 1, 1});
  expectValues(runOp1("lt", {a, b}), {4}, {0, 1, 0, 0});
  expectValues(runOp1("le", {a, b}), {4}, {1, 1, 0, 0});
  expectValues(runOp1("gt", {a, b}), {4}, {0, 0, 0, 1});
  expectValues(runOp1("ge", {a, b}), {4}, {1, 0, 0, 1});
  HostTensor p = tensor(DType::I1, {4}, {0, 0, 1, 1}), q = tensor(DType::I1, {4}, {0, 1, 0, 1});
  expectValues(runOp1("logical_and", {p, q}), {4}, {0, 0, 0, 1});
  expectValues(runOp1("logical_or", {p, q}), {4}, {0, 1, 1, 1});
  expectValues(runOp1("logical_and", {f32({2}, {2.5, 0}), i64({2}, {3, 3})}), {2}, {1, 0});
}

TEST(Interpreter, WhereCastClamp) {
  HostTensor c = tensor(DType::I1, {2, 1}, {1, 0});
  expectValues(runOp1("where", {c, f64({3}, {1, 2, 3}), f64({}, {-1})}), {2, 3},
               {1, 2, 3, -1, -1, -1});
  expectValues(runOp1("cast", {f64({4}, {-1.7, 2.5, 1e10, kNaN})}, {{"to", DType::I32}}), {4},
               {-1, 2, 2147483647.0, 0});
  expectValues(runOp1("cast", {f64({3}, {0, -2, 0.1})}, {{"to", DType::I1}}), {3}, {0, 1, 1});
  expectValues(runOp1("cast", {f64({1}, {1.0009765625 + 1e-9})}, {{"to", DType::F16}}), {1},
               {1.0009765625});
  expectValues(runOp1("clamp", {f64({4}, {-2, 0.5, 9, kNaN})}, {{"min", 0.0}, {"max", 6.0}}), {4},
               {0, 0.5, 6, kNaN});
  expectValues(runOp1("clamp", {f64({2}, {-2, 9})}, {{"min", 3.0}, {"max", 1.0}}), {2}, {1, 1});
  expectValues(runOp1("clamp", {i64({3}, {-5, 2, 7})}, {{"min", -1.5}}), {3}, {-1, 2, 7});
}

TEST(Interpreter, Reductions) {
  HostTensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("sum", {x}), {}, {21});
  expectValues(runOp1("sum", {x}, {{"axes", std::vector<int64_t>{-1}}}), {2}, {6, 15});
  expectValues(runOp1("sum", {x}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", true}}), {1, 3},
               {5, 7, 9});
  expectValues(runOp1("mean", {x}, {{"axes", std::vector<int64_t>{1}}}), {2}, {2, 5});
  expectValues(runOp1("max", {x}, {{"axes", std::vector<int64_t>{0}}}), {3}, {4, 5, 6});
  expectValues(runOp1("min", {x}, {{"axes", std::vector<int64_t>{1}}}), {2}, {1, 4});
  expectValues(runOp1("prod", {x}, {{"axes", std::vector<int64_t>{1}}}), {2}, {6, 120});
  expectValues(runOp1("var", {x}, {{"axes", std::vector<int64_t>{1}}}), {2}, {1, 1});
  expectValues(runOp1("var", {x}, {{"correction", int64_t(0)}}), {}, {17.5 / 6});
  expectValues(runOp1("var", {f64({1}, {3})}), {}, {kNaN});
  expectValues(runOp1("max", {f64({3}, {1, kNaN, 2})}), {}, {kNaN});
  // logsumexp around the maximum: no overflow at 1000; -inf, +inf and nan
  // propagate as log(sum(exp(x))) would.
  expectValues(runOp1("logsumexp", {x}, {{"axes", std::vector<int64_t>{1}}}), {2},
               {3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0)),
                6 + std::log(1 + std::exp(-1.0) + std::exp(-2.0))});
  expectValues(runOp1("logsumexp", {f64({2}, {1000, 1000})}), {}, {1000 + std::log(2.0)});
  const double inf = std::numeric_limits<double>::infinity();
  expectValues(runOp1("logsumexp", {f64({2}, {-inf, -inf})}), {}, {-inf});
  expectValues(runOp1("logsumexp", {f64({2}, {1, inf})}), {}, {inf});
  expectValues(runOp1("logsumexp", {f64({3}, {inf, kNaN, 1})}), {}, {kNaN});
  expectValues(runOp1("logsumexp", {f64({2}, {-inf, 0})}), {}, {0});
  expectValues(runOp1("sum", {i64({3}, {1, 2, 3})}), {}, {6});
  // Three axes of a (2, 2, 2) tensor, listed out of order.
  HostTensor cube = f64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expectValues(runOp1("sum", {cube}, {{"axes", std::vector<int64_t>{2, 0}}}), {2},
               {1 + 2 + 5 + 6, 3 + 4 + 7 + 8});
}

TEST(Interpreter, ArgReductions) {
  HostTensor x = f64({2, 3}, {1, 5, 5, 7, 0, 7});
  expectValues(runOp1("argmax", {x}, {{"axis", int64_t(1)}}), {2}, {1, 0}); // first on ties
  expectValues(runOp1("argmin", {x}, {{"axis", int64_t(-1)}}), {2}, {0, 1});
  expectValues(runOp1("argmax", {x}), {}, {3});
  expectValues(runOp1("argmax", {x}, {{"axis", int64_t(0)}, {"keepdim", true}}), {1, 3}, {1, 0, 1});
  expectValues(runOp1("argmax", {f64({3}, {1, kNaN, 9})}), {}, {1}); // nan counts as the maximum
}

TEST(Interpreter, EmptyReductions) {
  // slice to an empty range, then reduce: sum is 0, prod 1, mean nan, max an error.
  trace::Tracer t;
  auto x = t.input("x", DType::F64, {3});
  auto e = trace::slice(x, {0}, {2}, {1});
  EXPECT_EQ(e.shape(), (Shape{Dim::of(0)}));
  t.output(trace::sum(e));
  t.output(trace::prod(e));
  t.output(trace::mean(e));
  auto out = runTraced(t, {f64({3}, {1, 2, 3})});
  expectValues(out[0], {}, {0});
  expectValues(out[1], {}, {1});
  expectValues(out[2], {}, {kNaN});
  trace::Tracer t2;
  auto y = t2.input("y", DType::F64, {3});
  t2.output(trace::max(trace::slice(y, {0}, {5}, {9})));
  EXPECT_THROW(runTraced(t2, {f64({3}, {1, 2, 3})}), Error);
}

TEST(Interpreter, Matmul) {
  HostTensor a = f64({2, 3}, {1, 2, 3, 4, 5, 6}), b = f64({3, 2}, {7, 8, 9, 10, 11, 12});
  expectValues(runOp1("matmul", {a, b}), {2, 2}, {58, 64, 139, 154});
  HostTensor v = f64({3}, {1, 0, -1});
  expectValues(runOp1("matmul", {a, v}), {2}, {-2, -2});
  expectValues(runOp1("matmul", {v, b}), {2}, {-4, -4});
  expectValues(runOp1("matmul", {v, v}), {}, {2});
  // Batch dims broadcast: (2, 1, 2, 2) x (3, 2, 2) -> (2, 3, 2, 2).
  HostTensor l = f64({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  HostTensor r = f64({3, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0, 5, 5, 5, 5});
  expectValues(runOp1("matmul", {l, r}), {2, 3, 2, 2},
               {1, 2, 3, 4, 0, 1, 1, 0, 5, 5, 5, 5, 2, 4, 6, 8, 0, 2, 2, 0, 10, 10, 10, 10});
  expectValues(runOp1("matmul", {i64({1, 2}, {3, 4}), i64({2, 1}, {5, 6})}), {1, 1}, {39});
}

TEST(Interpreter, SoftmaxFamily) {
  HostTensor x = f64({2, 3}, {1, 2, 3, 1001, 1002, 1003});
  std::vector<double> sm = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  std::vector<double> lsm = {-2.40760596444438, -1.4076059644443801, -0.4076059644443803};
  expectValues(runOp1("softmax", {x}), {2, 3}, {sm[0], sm[1], sm[2], sm[0], sm[1], sm[2]});
  expectValues(runOp1("log_softmax", {x}), {2, 3},
               {lsm[0], lsm[1], lsm[2], lsm[0], lsm[1], lsm[2]});
  // Along axis 0 of a column.
  expectValues(runOp1("softmax", {f64({3, 1}, {1, 2, 3})}, {{"axis", int64_t(0)}}), {3, 1}, sm);
}

TEST(Interpreter, Norms) {
  HostTensor x = f64({1, 4}, {1, 2, 3, 4});
  std::vector<double> ln = {-1.3416354199689269, -0.447211806656309, 0.447211806656309,
                            1.3416354199689269};
  expectValues(runOp1("layer_norm", {x}), {1, 4}, ln);
  HostTensor w = f64({4}, {1, 2, 1, 2}), b = f64({4}, {0, 0, 1, 1});
  expectValues(runOp1("layer_norm", {x, w, b}), {1, 4},
               {ln[0], 2 * ln[1], ln[2] + 1, 2 * ln[3] + 1});
  expectValues(runOp1("layer_norm", {x, std::nullopt, b}), {1, 4},
               {ln[0], ln[1], ln[2] + 1, ln[3] + 1});
  // axis 0 of (2, 2) normalizes all four values together.
  expectValues(runOp1("layer_norm", {f64({2, 2}, {1, 2, 3, 4})}, {{"axis", int64_t(0)}}), {2, 2},
               ln);
  expectValues(runOp1("rms_norm", {x}, {{"eps", 1e-6}}), {1, 4},
               {0.3651483473268884, 0.7302966946537768, 1.0954450419806652, 1.4605933893075536});
  expectValues(
      runOp1("rms_norm", {x, w}, {{"eps", 1e-6}}), {1, 4},
      {0.3651483473268884, 2 * 0.7302966946537768, 1.0954450419806652, 2 * 1.4605933893075536});
}

TEST(Interpreter, CrossEntropy) {
  HostTensor logits = f64({2, 3}, {1, 2, 3, 1, 1, 1});
  HostTensor target = i64({2}, {2, 0});
  double l1 = 0.40760596444438013, l2 = 1.0986122886681096;
  expectValues(runOp1("cross_entropy", {logits, target}), {}, {(l1 + l2) / 2});
  expectValues(runOp1("cross_entropy", {logits, target}, {{"reduction", std::string("sum")}}), {},
               {l1 + l2});
  expectValues(runOp1("cross_entropy", {logits, target}, {{"reduction", std::string("none")}}), {2},
               {l1, l2});
  expectValues(runOp1("cross_entropy", {logits, i64({2}, {2, -100})}), {}, {l1});
  expectValues(runOp1("cross_entropy", {logits, i64({2}, {7, 0})}, {{"ignore_index", int64_t(7)}}),
               {}, {l2});
  expectValues(runOp1("cross_entropy", {logits, target}, {{"label_smoothing", 0.1}}), {},
               {0.8031091265562449});
  expectValues(runOp1("cross_entropy", {logits, i64({2}, {-100, -100})}), {}, {kNaN});
  EXPECT_THROW(runOp1("cross_entropy", {logits, i64({2}, {3, 0})}), Error);
  // (N, C, d) logits with (N, d) targets: class axis 1.
  HostTensor spatial = f64({1, 3, 2}, {1, 1, 2, 1, 3, 1});
  expectValues(
      runOp1("cross_entropy", {spatial, i64({1, 2}, {2, 1})}, {{"reduction", std::string("none")}}),
      {1, 2}, {l1, l2});
  // A single (C) row with a scalar target.
  expectValues(runOp1("cross_entropy", {f64({3}, {1, 2, 3}), i64({}, {2})}), {}, {l1});
}

TEST(Interpreter, EmbeddingGatherIndexSelect) {
  HostTensor table = f64({3, 2}, {0, 1, 10, 11, 20, 21});
  expectValues(runOp1("embedding", {i64({2, 2}, {2, 0, 1, 1}), table}), {2, 2, 2},
               {20, 21, 0, 1, 10, 11, 10, 11});
  EXPECT_THROW(runOp1("embedding", {i64({1}, {3}), table}), Error);
  EXPECT_THROW(runOp1("embedding", {i64({1}, {-1}), table}), Error);
  HostTensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("gather", {x, i64({2, 2}, {2, 0, 1, 1})}, {{"axis", int64_t(1)}}), {2, 2},
               {3, 1, 5, 5});
  expectValues(runOp1("gather", {x, i64({1, 3}, {1, 0, 1})}, {{"axis", int64_t(0)}}), {1, 3},
               {4, 2, 6});
  EXPECT_THROW(runOp1("gather", {x, i64({1, 1}, {5})}, {{"axis", int64_t(1)}}), Error);
  expectValues(runOp1("index_select", {x, i64({3}, {1, 1, 0})}, {{"axis", int64_t(0)}}), {3, 3},
               {4, 5, 6, 4, 5, 6, 1, 2, 3});
  expectValues(
      runOp1("index_select", {x, tensor(DType::I32, {2}, {2, 0})}, {{"axis", int64_t(-1)}}), {2, 2},
      {3, 1, 6, 4});
}

TEST(Interpreter, EmbeddingBackwardSumsRowsByIndex) {
  // Rows 1 and 2 of grad go to table row 1; table rows 0 and 3 stay zero.
  HostTensor g = f64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), idx = i64({2, 2}, {2, 1, 1, 3});
  expectValues(runOp1("embedding_backward", {g, i64({2, 2}, {2, 1, 1, 2})}, {{"num_weights", int64_t(4)}}), {4, 2},
               {0, 0, 8, 10, 8, 10, 0, 0});
  expectValues(runOp1("embedding_backward", {g, tensor(DType::I32, {2, 2}, {0, 0, 0, 0})},
                      {{"num_weights", int64_t(1)}}),
               {1, 2}, {16, 20});
  EXPECT_THROW(runOp1("embedding_backward", {g, idx}, {{"num_weights", int64_t(3)}}), Error); // 3 is out
  EXPECT_THROW(runOp1("embedding_backward", {g, i64({2, 2}, {0, -1, 0, 0})}, {{"num_weights", int64_t(3)}}), Error);
  EXPECT_THROW(runOp1("embedding_backward", {g, i64({4}, {0, 0, 0, 0})}, {{"num_weights", int64_t(3)}}), Error);
  EXPECT_THROW(runOp1("embedding_backward", {g, idx}, {{"num_weights", int64_t(0)}}), Error);
}

TEST(Interpreter, PhiloxKnownAnswers) {
  // Random123's known-answer vectors for philox4x32-10.
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Interpreter, DropoutIsReproducibleAndScaled) {
  std::vector<double> ones(10000, 1.0);
  HostTensor x = f64({10000}, ones), seed = i64({}, {42});
  HostTensor a = runOp1("dropout", {x, seed}, {{"p", 0.25}});
  HostTensor b = runOp1("dropout", {x, seed}, {{"p", 0.25}});
  HostTensor c = runOp1("dropout", {x, i64({}, {43})}, {{"p", 0.25}});
  HostTensor s = runOp1("dropout", {x, seed}, {{"p", 0.25}, {"stream", int64_t(1)}});
  int kept = 0, differ = 0, differStream = 0;
  for (int64_t i = 0; i < 10000; ++i) {
    EXPECT_EQ(a.getF(i), b.getF(i));
    EXPECT_TRUE(a.getF(i) == 0.0 || a.getF(i) == 1.0 / 0.75);
    kept += a.getF(i) != 0;
    differ += a.getF(i) != c.getF(i);
    differStream += a.getF(i) != s.getF(i);
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);
  EXPECT_GT(differ, 1000);
  EXPECT_GT(differStream, 1000);
  // Element 0 by the formula: keep iff (philox(0, seed)[0] >> 8) * 2^-24 >= p.
  double u0 = double(philox4x32({0, 0, 0, 0}, {42, 0})[0] >> 8) / 16777216.0;
  EXPECT_EQ(a.getF(0) != 0, u0 >= 0.25);
  expectValues(runOp1("dropout", {f64({2}, {3, 4}), seed}, {{"p", 0.0}}), {2}, {3, 4});
  expectValues(runOp1("dropout", {f64({2}, {3, 4}), seed}, {{"p", 1.0}}), {2}, {0, 0});
}

TEST(Interpreter, Conv2d) {
  // 1x1x3x3 input, 1x1x2x2 kernel of ones: window sums.
  HostTensor x = f64({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor w = f64({1, 1, 2, 2}, {1, 1, 1, 1});
  expectValues(runOp1("conv2d", {x, w}), {1, 1, 2, 2}, {12, 16, 24, 28});
  expectValues(runOp1("conv2d", {x, w, f64({1}, {100})}), {1, 1, 2, 2}, {112, 116, 124, 128});
  // Padding 1, stride 2: corners see one input each side.
  expectValues(
      runOp1("conv2d", {x, w},
             {{"padding", std::vector<int64_t>{1, 1}}, {"stride", std::vector<int64_t>{2, 2}}}),
      {1, 1, 2, 2}, {1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9});
  // Dilation 2 with a 2x2 kernel touches the four corners.
  expectValues(runOp1("conv2d", {x, w}, {{"dilation", std::vector<int64_t>{2, 2}}}), {1, 1, 1, 1},
               {1 + 3 + 7 + 9});
  // Groups: two channels, each with its own 1x1 kernel.
  HostTensor x2 = f64({1, 2, 1, 2}, {1, 2, 3, 4});
  HostTensor w2 = f64({2, 1, 1, 1}, {10, -1});
  expectValues(runOp1("conv2d", {x2, w2}, {{"groups", int64_t(2)}}), {1, 2, 1, 2},
               {10, 20, -3, -4});
  // Cross-correlation, not convolution: the kernel is not flipped.
  HostTensor w3 = f64({1, 1, 1, 2}, {1, -1});
  expectValues(runOp1("conv2d", {f64({1, 1, 1, 3}, {1, 2, 4}), w3}), {1, 1, 1, 2}, {-1, -2});
}

TEST(Interpreter, Pooling) {
  HostTensor x = f64({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::vector<int64_t> k2{2, 2};
  expectValues(runOp1("max_pool2d", {x}, {{"kernel_size", k2}}), {1, 1, 1, 1}, {5});
  expectValues(runOp1("max_pool2d", {x}, {{"kernel_size", k2}, {"ceil_mode", true}}), {1, 1, 2, 2},
               {5, 6, 8, 9});
  expectValues(
      runOp1("max_pool2d", {x}, {{"kernel_size", k2}, {"stride", std::vector<int64_t>{1, 1}}}),
      {1, 1, 2, 2}, {5, 6, 8, 9});
  expectValues(
      runOp1("avg_pool2d", {x}, {{"kernel_size", k2}, {"stride", std::vector<int64_t>{1, 1}}}),
      {1, 1, 2, 2}, {3, 4, 6, 7});
  // Padding 1 with a 2x2 window and stride 2: the corner window holds one
  // input; count_include_pad divides by 4, otherwise by 1.
  AttrMap padded{{"kernel_size", k2}, {"padding", std::vector<int64_t>{1, 1}}};
  expectValues(runOp1("avg_pool2d", {x}, padded), {1, 1, 2, 2},
               {0.25, 5.0 / 4, 11.0 / 4, 28.0 / 4});
  padded["count_include_pad"] = false;
  expectValues(runOp1("avg_pool2d", {x}, padded), {1, 1, 2, 2}, {1, 2.5, 5.5, 7});
  expectValues(
      runOp1("max_pool2d", {x}, {{"kernel_size", k2}, {"padding", std::vector<int64_t>{1, 1}}}),
      {1, 1, 2, 2}, {1, 3, 7, 9});
}

TEST(Interpreter, BatchNorm) {
  // x (2, 2, 1): channel 0 holds {1, 3}, channel 1 holds {2, 6}.
  HostTensor x = f64({2, 2, 1}, {1, 2, 3, 6});
  HostTensor rm = f64({2}, {0, 1}), rv = f64({2}, {1, 4});
  std::vector<HostTensor> train = runOp("batch_norm", {x, rm, rv, std::nullopt, std::nullopt},
                                        {{"training", true}, {"eps", 0.0}});
  // Batch means 2 and 4, biased variances 1 and 4.
  expectValues(train[0], {2, 2, 1}, {-1, -1, 1, 1});
  expectValues(train[1], {2}, {0.9 * 0 + 0.1 * 2, 0.9 * 1 + 0.1 * 4});
  expectValues(train[2], {2}, {0.9 * 1 + 0.1 * 2, 0.9 * 4 + 0.1 * 8}); // unbiased: 2 and 8
  std::vector<HostTensor> eval =
      runOp("batch_norm", {x, rm, rv, f64({2}, {2, 1}), f64({2}, {0, 10})}, {{"eps", 0.0}});
  expectValues(eval[0], {2, 2, 1}, {2 * 1, 10 + 0.5, 2 * 3, 10 + 2.5});
  expectValues(eval[1], {2}, {0, 1});
  expectValues(eval[2], {2}, {1, 4});
  EXPECT_THROW(runOp("batch_norm", {f64({1, 2}, {1, 2}), rm, rv}, {{"training", true}}), Error);
}

TEST(Interpreter, Attention) {
  HostTensor q = f64({2, 2}, {1, 0, 0, 1}), v = f64({2, 2}, {1, 2, 3, 4});
  expectValues(runOp1("scaled_dot_product_attention", {q, q, v}, {{"is_causal", true}}), {2, 2},
               {1, 2, 2.3395230986533138, 3.3395230986533138});
  HostTensor full = runOp1("scaled_dot_product_attention", {q, q, v});
  expectValues(full, {2, 2},
               {1.6604769013466862, 2.6604769013466862, 2.3395230986533138, 3.3395230986533138});
  // A boolean mask equal to the causal one gives the causal result.
  HostTensor mask = tensor(DType::I1, {2, 2}, {1, 0, 1, 1});
  expectValues(runOp1("scaled_dot_product_attention", {q, q, v, mask}), {2, 2},
               {1, 2, 2.3395230986533138, 3.3395230986533138});
  // An additive mask of -inf does the same; scale 0 averages the values.
  HostTensor additive = f64({2, 2}, {0, -kInf, 0, 0});
  expectValues(runOp1("scaled_dot_product_attention", {q, q, v, additive}, {{"scale", 0.0}}),
               {2, 2}, {1, 2, 2, 3});
  // A fully masked row is 0, as PyTorch's SDPA (_safe_softmax, since 2.5).
  HostTensor none = tensor(DType::I1, {2, 2}, {0, 0, 1, 1});
  expectValues(runOp1("scaled_dot_product_attention", {q, q, v, none}, {{"scale", 0.0}}), {2, 2},
               {0, 0, 2, 3});
  // Batch dims broadcast: one key/value set for two query batches.
  HostTensor q2 = f64({2, 1, 2}, {1, 0, 0, 1});
  expectValues(runOp1("scaled_dot_product_attention", {q2, q, v}), {2, 1, 2},
               {1.6604769013466862, 2.6604769013466862, 2.3395230986533138, 3.3395230986533138});
}

// Attention's dropout is the dropout op on its probabilities, element by
// element of [batch..., L, S] (v's batch dims broadcast included): the
// fused op equals softmax -> dropout -> matmul exactly, forward and backward.
TEST(Interpreter, AttentionDropoutIsTheDropoutOp) {
  std::mt19937_64 rng(freshSeed());
  std::uniform_real_distribution<double> u(-1, 1);
  auto draw = [&](std::vector<int64_t> shape) {
    HostTensor t(DType::F64, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setF(i, u(rng));
    return t;
  };
  HostTensor q = draw({2, 5, 4}), k = draw({6, 4}), v = draw({3, 1, 6, 2}), seed = i64({}, {77});
  AttrMap attrs{{"dropout_p", 0.3}, {"dropout_stream", int64_t(5)}, {"scale", 0.7}};
  HostTensor fused = runOp1("scaled_dot_product_attention", {q, k, v, std::nullopt, seed}, attrs);
  HostTensor scores = runOp1("mul", {runOp1("matmul", {q, runOp1("transpose", {k}, {{"dim0", int64_t(0)},
                                                                                    {"dim1", int64_t(1)}})}),
                                     f64({}, {0.7})});
  HostTensor p = runOp1("broadcast_to", {runOp1("softmax", {scores})},
                        {{"shape", Shape{Dim::of(3), Dim::of(2), Dim::of(5), Dim::of(6)}}});
  HostTensor dropped = runOp1("dropout", {p, seed}, {{"p", 0.3}, {"stream", int64_t(5)}});
  HostTensor want = runOp1("matmul", {dropped, v});
  ASSERT_EQ(fused.shape(), want.shape());
  int zeros = 0;
  for (int64_t i = 0; i < dropped.numel(); ++i)
    zeros += dropped.getF(i) == 0;
  EXPECT_GT(zeros, 10) << "some probabilities dropped";
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(fused.getF(i), want.getF(i), 1e-12) << i;
  // The backward: dv = dropped^T g; dP = dropout(g v^T).
  HostTensor g = draw({3, 2, 5, 2});
  std::vector<HostTensor> grads =
      runOp("scaled_dot_product_attention_backward",
            {g, q, k, v, std::nullopt, std::nullopt, std::nullopt, seed}, attrs);
  HostTensor dv = runOp1("sum", {runOp1("matmul", {runOp1("transpose", {dropped}, {{"dim0", int64_t(-1)},
                                                                                    {"dim1", int64_t(-2)}}),
                                                   g})},
                         {{"axes", std::vector<int64_t>{1}}, {"keepdim", true}});
  ASSERT_EQ(grads[2].shape(), dv.shape());
  for (int64_t i = 0; i < dv.numel(); ++i)
    EXPECT_NEAR(grads[2].getF(i), dv.getF(i), 1e-12) << i;
  // Without a seed nothing is dropped; a seed needs dropout_p > 0 and vice versa.
  EXPECT_THROW(runOp1("scaled_dot_product_attention", {q, k, v, std::nullopt, seed}), Error);
  EXPECT_THROW(runOp1("scaled_dot_product_attention", {q, k, v}, {{"dropout_p", 0.3}}), Error);
}

TEST(Interpreter, ShapeOps) {
  HostTensor x = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("reshape", {x}, {{"shape", Shape{Dim::of(3), Dim::of(-1)}}}), {3, 2},
               {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(-1)}}), {3, 2},
               {1, 4, 2, 5, 3, 6});
  HostTensor cube = f64({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("permute", {cube}, {{"dims", std::vector<int64_t>{2, 0, 1}}}), {3, 2, 1},
               {1, 4, 2, 5, 3, 6});
  expectValues(
      runOp1("broadcast_to", {f64({3}, {1, 2, 3})}, {{"shape", Shape{Dim::of(2), Dim::of(3)}}}),
      {2, 3}, {1, 2, 3, 1, 2, 3});
  expectValues(runOp1("squeeze", {cube}), {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("squeeze", {cube}, {{"axes", std::vector<int64_t>{0}}}), {2, 1, 3},
               {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("unsqueeze", {x}, {{"axis", int64_t(-1)}}), {2, 3, 1}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("flatten", {cube}, {{"start_axis", int64_t(1)}}), {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("flatten", {f64({}, {7})}), {1}, {7});
  expectValues(runOp1("concat", {x, f64({2, 1}, {9, 9})}, {{"axis", int64_t(1)}}), {2, 4},
               {1, 2, 3, 9, 4, 5, 6, 9});
  std::vector<HostTensor> parts =
      runOp("split", {x}, {{"sizes", std::vector<int64_t>{1, 2}}, {"axis", int64_t(1)}});
  expectValues(parts[0], {2, 1}, {1, 4});
  expectValues(parts[1], {2, 2}, {2, 3, 5, 6});
  expectValues(runOp1("pad", {x}, {{"pads", std::vector<int64_t>{1, 0, 0, 1}}, {"value", -1.0}}),
               {3, 4}, {-1, 1, 2, 3, -1, 4, 5, 6, -1, -1, -1, -1});
  expectValues(runOp1("pad", {x}, {{"pads", std::vector<int64_t>{-1, -1}}}), {2, 1}, {2, 5});
}

TEST(Interpreter, Slices) {
  HostTensor x = f64({7}, {0, 1, 2, 3, 4, 5, 6});
  auto slice = [&](int64_t start, int64_t end, int64_t step) {
    return runOp1("slice", {x},
                  {{"starts", std::vector<int64_t>{start}},
                   {"ends", std::vector<int64_t>{end}},
                   {"steps", std::vector<int64_t>{step}}});
  };
  expectValues(slice(1, 5, 1), {4}, {1, 2, 3, 4});
  expectValues(slice(1, kEnd, 2), {3}, {1, 3, 5});
  expectValues(slice(-3, -1, 1), {2}, {4, 5});
  expectValues(slice(-100, 2, 1), {2}, {0, 1});
  expectValues(slice(5, 2, 1), {0}, {});   // empty range
  expectValues(slice(7, 100, 1), {0}, {}); // start past the end
  expectValues(slice(0, 7, 3), {3}, {0, 3, 6});
  HostTensor m = f64({2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp1("slice", {m},
                      {{"axes", std::vector<int64_t>{-1, 0}},
                       {"starts", std::vector<int64_t>{1, 1}},
                       {"ends", std::vector<int64_t>{3, 2}}}),
               {1, 2}, {5, 6});
}

TEST(Interpreter, Creation) {
  trace::Tracer t;
  auto n = t.input("n", DType::F32, {"N"});
  t.output(trace::full(t, {"N", 2}, 2.5, DType::F16));
  t.output(trace::zeros(t, {2}, DType::I32));
  t.output(trace::ones(t, {"N"}, DType::I1));
  t.output(trace::iota(t, 0, 10, -3));
  t.output(trace::iota(t, 5, 0, 2, DType::F32));
  DenseValue dv{DType::I64, {2, 2}, {}, {1, 2, 3, 4}};
  t.output(trace::constant(t, dv));
  DenseValue splat{DType::F64, {3}, {0.5}, {}};
  t.output(trace::constant(t, splat));
  t.output(n);
  auto out = runTraced(t, {f32({3}, {0, 0, 0})});
  expectValues(out[0], {3, 2}, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
  EXPECT_EQ(out[0].dtype(), DType::F16);
  expectValues(out[1], {2}, {0, 0});
  expectValues(out[2], {3}, {1, 1, 1});
  expectValues(out[3], {4}, {10, 7, 4, 1});
  expectValues(out[4], {3}, {0, 2, 4});
  expectValues(out[5], {2, 2}, {1, 2, 3, 4});
  expectValues(out[6], {3}, {0.5, 0.5, 0.5});
}

TEST(Interpreter, SymbolicDimsBindAtRunTime) {
  // One graph, run at two batch sizes.
  trace::Tracer t;
  t.bound("B", 1, 8);
  auto x = t.input("x", DType::F64, {"B", 2});
  auto y = trace::sum(trace::reshape(x, {"2*B"}));
  t.output(y);
  t.output(trace::mean(x, {0}));
  GraphAnalysis a = analyzeGraph(t.graph(), "test");
  InterpreterResult r1 = interpret(t.graph(), a, {{"x", f64({1, 2}, {1, 2})}});
  EXPECT_EQ(r1.bindings.at("B"), 1);
  expectValues(r1.outputs[0], {}, {3});
  InterpreterResult r3 = interpret(t.graph(), a, {{"x", f64({3, 2}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(r3.bindings.at("B"), 3);
  expectValues(r3.outputs[0], {}, {21});
  expectValues(r3.outputs[1], {2}, {3, 4});
  EXPECT_THROW(interpret(t.graph(), a, {{"x", f64({9, 2}, std::vector<double>(18, 0))}}),
               Error); // above the bound
  EXPECT_THROW(interpret(t.graph(), a, {{"x", f64({3, 3}, std::vector<double>(9, 0))}}),
               Error);                              // static dim
  EXPECT_THROW(interpret(t.graph(), a, {}), Error); // missing input
  EXPECT_THROW(interpret(t.graph(), a, {{"x", tensor(DType::F32, {1, 2}, {1, 2})}}),
               Error); // dtype
}

TEST(Interpreter, ConflictingBindingsAreRejected) {
  trace::Tracer t;
  auto a = t.input("a", DType::F64, {"B"});
  auto b = t.input("b", DType::F64, {"B"});
  t.output(a + b);
  GraphAnalysis an = analyzeGraph(t.graph(), "test");
  try {
    interpret(t.graph(), an, {{"a", f64({2}, {1, 2})}, {"b", f64({3}, {1, 2, 3})}});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "input \"b\" dim 0 binds B = 3 but an earlier input bound B = 2");
  }
}

} // namespace

namespace {

// Every float op in every float dtype agrees with its f64 result to the
// dtype's precision: one rounding per op, computed in double.
TEST(Interpreter, EveryFloatDTypeMatchesF64) {
  HostTensor base = f64({3, 5}, {0.3, -0.7, 1.1, 0.05, -1.9, 0.8, 0.25, -0.33, 1.7, -0.2, 0.6, 0.9,
                                 -1.2, 0.45, 0.15});
  HostTensor positive =
      f64({3, 5}, {0.3, 0.7, 1.1, 0.05, 1.9, 0.8, 0.25, 0.33, 1.7, 0.2, 0.6, 0.9, 1.2, 0.45, 0.15});
  auto convert = [](const HostTensor &t, DType d) {
    HostTensor out(d, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      out.setF(i, t.getF(i));
    return out;
  };
  struct Case {
    std::string op;
    bool positiveOnly;
    AttrMap attrs;
    int arity;
  };
  std::vector<Case> cases;
  for (const char *op : {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "sin",
                         "cos", "erf", "floor", "ceil", "sign"})
    cases.push_back({op, false, {}, 1});
  for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal"})
    cases.push_back({op, true, {}, 1});
  for (const char *op : {"add", "sub", "mul", "maximum", "minimum"})
    cases.push_back({op, false, {}, 2});
  cases.push_back({"div", true, {}, 2});
  cases.push_back({"pow", true, {}, 2});
  for (const char *op : {"sum", "mean", "max", "min", "prod", "var", "logsumexp"})
    cases.push_back({op, false, {{"axes", std::vector<int64_t>{1}}}, 1});
  cases.push_back({"softmax", false, {}, 1});
  cases.push_back({"log_softmax", false, {}, 1});
  cases.push_back({"layer_norm", false, {}, 1});
  cases.push_back({"rms_norm", false, {}, 1});
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    for (const Case &c : cases) {
      SCOPED_TRACE(c.op + " " + std::string(dtypeName(d)));
      const HostTensor &in = c.positiveOnly ? positive : base;
      std::vector<std::optional<HostTensor>> low{convert(in, d)},
          wide{convert(convert(in, d), DType::F64)};
      if (c.arity == 2) {
        low.push_back(convert(positive, d));
        wide.push_back(convert(convert(positive, d), DType::F64));
      }
      AttrMap attrs = c.attrs;
      if (c.op == "rms_norm")
        attrs["eps"] = 1e-6;
      HostTensor got = runOp1(c.op, low, attrs);
      HostTensor want = runOp1(c.op, wide, attrs);
      ASSERT_EQ(got.dtype(), d);
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t i = 0; i < got.numel(); ++i)
        EXPECT_NEAR(got.getF(i), want.getF(i),
                    tolerance(d) * std::max(1.0, std::fabs(want.getF(i))))
            << i;
    }
  }
  // matmul accumulates in double: a bf16 product matches f64 up to one rounding.
  HostTensor a = convert(base, DType::BF16), b = convert(positive, DType::BF16);
  HostTensor bt = runOp1("transpose", {b}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
  HostTensor got = runOp1("matmul", {a, bt});
  HostTensor want = runOp1("matmul", {convert(a, DType::F64), convert(bt, DType::F64)});
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.getF(i), want.getF(i),
                tolerance(DType::BF16) * std::max(1.0, std::fabs(want.getF(i))));
}

} // namespace
