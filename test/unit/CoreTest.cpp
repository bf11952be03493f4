// ir/core: symbolic dims and shape inference rules.
#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <gtest/gtest.h>

using namespace tensorc;

namespace {

Dim D(const char *s) { return *Dim::parse(s); }

TEST(Dim, ParsePrintMultiply) {
  EXPECT_EQ(D("784").value(), 784);
  EXPECT_TRUE(D("784").isStatic());
  EXPECT_EQ(D("T*B").str(), "B*T"); // canonical order
  EXPECT_EQ(D("B*2").str(), "2*B");
  EXPECT_EQ((D("B") * D("T")).str(), "B*T");
  EXPECT_EQ((D("3") * D("B") * D("4")).str(), "12*B");
  EXPECT_TRUE(D("B").isPlainSymbol());
  EXPECT_FALSE(D("2*B").isPlainSymbol());
  for (const char *bad : {"", "*", "B*", "B+1", "1B", "2*3*B", "B**T", "é"})
    EXPECT_FALSE(Dim::parse(bad).has_value()) << bad;
  EXPECT_EQ(D("B*T").dividedBy(D("T"))->str(), "B");
  EXPECT_EQ(D("12*B").dividedBy(D("4"))->str(), "3*B");
  EXPECT_FALSE(D("B").dividedBy(D("T")).has_value());
  EXPECT_FALSE(D("6").dividedBy(D("4")).has_value());
  EXPECT_EQ(*D("2*B*T").evaluate({{"B", 3}, {"T", 5}}), 30);
  EXPECT_FALSE(D("B").evaluate({}).has_value());
  EXPECT_THROW(Dim::of(int64_t(1) << 40) * Dim::of(int64_t(1) << 40), Error);
}

std::vector<TensorSpec> infer(const std::string &op, std::vector<TensorSpec> args,
                              AttrMap attrs = {}) {
  const OpSchema *schema = findOpSchema(op);
  std::vector<OperandRef> refs;
  for (size_t i = 0; i < args.size(); ++i)
    refs.push_back({args[i], "a" + std::to_string(i)});
  return inferResultTypes(*schema, refs, completeAttrs(*schema, attrs));
}

TensorSpec T(std::vector<const char *> dims, DType d = DType::F32) {
  TensorSpec s{d, {}};
  for (const char *x : dims)
    s.shape.push_back(D(x));
  return s;
}

std::string message(std::function<void()> f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

TEST(ShapeInference, Broadcasting) {
  EXPECT_EQ(infer("add", {T({"B", "1"}), T({"3"})})[0], T({"B", "3"}));
  EXPECT_EQ(infer("add", {T({"1"}), T({"B", "T"})})[0], T({"B", "T"}));
  EXPECT_EQ(infer("mul", {T({}), T({"2", "3"})})[0], T({"2", "3"}));
  EXPECT_EQ(message([] {
              infer("add", {T({"B"}), T({"4"})});
            }),
            "cannot broadcast a0 (B) with a1 (4): B vs 4");
  EXPECT_EQ(infer("lt", {T({"2"}), T({"2"})})[0].dtype, DType::I1);
}

TEST(ShapeInference, MatmulForms) {
  EXPECT_EQ(infer("matmul", {T({"B", "784"}), T({"784", "10"})})[0], T({"B", "10"}));
  EXPECT_EQ(infer("matmul", {T({"3"}), T({"3"})})[0], T({}));
  EXPECT_EQ(infer("matmul", {T({"3"}), T({"5", "3", "2"})})[0], T({"5", "2"}));
  EXPECT_EQ(infer("matmul", {T({"5", "2", "3"}), T({"3"})})[0], T({"5", "2"}));
  EXPECT_EQ(infer("matmul", {T({"2", "1", "4", "3"}), T({"7", "3", "5"})})[0],
            T({"2", "7", "4", "5"}));
  EXPECT_EQ(message([] {
              infer("matmul", {T({"B", "784"}), T({"512", "256"})});
            }),
            "inner dims differ: a0 is (B, 784), a1 is (512, 256)");
}

TEST(ShapeInference, ReshapeWithSymbols) {
  EXPECT_EQ(infer("reshape", {T({"B", "T", "64"})}, {{"shape", Shape{D("B*T"), D("64")}}})[0],
            T({"B*T", "64"}));
  EXPECT_EQ(infer("reshape", {T({"B*T", "64"})},
                  {{"shape", Shape{D("B"), Dim::of(-1), D("16"), D("4")}}})[0],
            T({"B", "T", "16", "4"}));
  EXPECT_EQ(infer("flatten", {T({"N", "3", "4"})}, {{"start_axis", int64_t(1)}})[0],
            T({"N", "12"}));
  EXPECT_EQ(infer("concat", {T({"B", "2"}), T({"B", "2"})})[0], T({"2*B", "2"}));
}

TEST(ShapeInference, NegativeAxesAndKeepdim) {
  EXPECT_EQ(infer("sum", {T({"2", "3", "4"})}, {{"axes", std::vector<int64_t>{-1, 0}}})[0],
            T({"3"}));
  EXPECT_EQ(infer("sum", {T({"2", "3", "4"})},
                  {{"axes", std::vector<int64_t>{-2}}, {"keepdim", true}})[0],
            T({"2", "1", "4"}));
  EXPECT_EQ(infer("argmax", {T({"2", "3"})})[0], T({}, DType::I64));
  EXPECT_EQ(infer("unsqueeze", {T({"2"})}, {{"axis", int64_t(-1)}})[0], T({"2", "1"}));
  EXPECT_EQ(message([] {
              infer("softmax", {T({"2"})}, {{"axis", int64_t(-2)}});
            }),
            "axis -2 is out of range for rank 1");
}

TEST(ShapeInference, WindowSizes) {
  // PyTorch: (H + 2p - d(k-1) - 1) / s + 1, rounded down or up.
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 1, false), 2);
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(4, 2, 2, 1, 1, true),
            3); // the last window would start in the right padding
  EXPECT_EQ(windowOutputSize(32, 3, 1, 1, 1, false), 32);
  EXPECT_EQ(windowOutputSize(9, 3, 2, 1, 1, false), 5);
}

TEST(ShapeInference, SliceRanges) {
  auto len = [](int64_t size, int64_t s, int64_t e, int64_t st) {
    return sliceRange(size, s, e, st).length;
  };
  EXPECT_EQ(len(7, 1, 5, 1), 4);
  EXPECT_EQ(len(7, 1, INT64_MAX, 2), 3);
  EXPECT_EQ(len(7, -3, -1, 1), 2);
  EXPECT_EQ(len(7, 5, 2, 1), 0);
  EXPECT_EQ(len(7, -100, 100, 3), 3);
}

TEST(OpSchema, AttributesAreCheckedAndDefaulted) {
  const OpSchema &sum = *findOpSchema("sum");
  AttrMap complete = completeAttrs(sum, {});
  EXPECT_EQ(std::get<bool>(complete.at("keepdim")), false);
  EXPECT_FALSE(complete.count("axes"));
  EXPECT_EQ(message([&] {
              completeAttrs(sum, {{"keepdim", int64_t(1)}});
            }),
            "attribute 'keepdim' must be a bool, got int");
  EXPECT_EQ(message([&] {
              completeAttrs(sum, {{"axis", int64_t(1)}});
            }),
            "unknown attribute 'axis'");
  EXPECT_EQ(message([] {
              completeAttrs(*findOpSchema("transpose"), {{"dim0", int64_t(0)}});
            }),
            "missing required attribute 'dim1'");
  EXPECT_TRUE(canonicalAttrs(sum, {{"keepdim", false}}).empty());
  EXPECT_EQ(canonicalAttrs(sum, {{"keepdim", true}}).size(), 1u);
}

} // namespace
