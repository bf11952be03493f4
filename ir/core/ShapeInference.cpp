#include "ir/core/ShapeInference.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace tensorc {
namespace {

using Operands = std::vector<OperandRef>;
using Rule = std::function<std::vector<TensorSpec>(const Operands &, const AttrMap &)>;

std::string describe(const OperandRef &o) { return o.name + " is " + o.spec->str(); }
const TensorSpec &spec(const Operands &ops, size_t i) { return *ops[i].spec; }

void requireFloat(const OperandRef &o) {
  check(isFloat(o.spec->dtype), describe(o) + "; a float dtype is required");
}
void requireNumeric(const OperandRef &o) {
  check(isNumeric(o.spec->dtype), describe(o) + "; a numeric dtype (not i1) is required");
}
void requireInteger(const OperandRef &o) {
  check(isInteger(o.spec->dtype), describe(o) + "; an integer dtype (i64 or i32) is required");
}
void requireRank(const OperandRef &o, int64_t rank) {
  check(o.spec->rank() == rank, describe(o) + "; rank " + std::to_string(rank) + " is required");
}
void requireSameDType(const OperandRef &a, const OperandRef &b) {
  check(a.spec->dtype == b.spec->dtype,
        "dtypes differ: " + describe(a) + ", " + describe(b) + " (insert a cast)");
}
void requireStatic(const OperandRef &o, int64_t axis, const char *why) {
  check(o.spec->shape[axis].isStatic(),
        describe(o) + "; dim " + std::to_string(axis) + " must be static " + why);
}
std::vector<TensorSpec> one(DType dtype, Shape shape) {
  return {TensorSpec{dtype, std::move(shape)}};
}

// A dim's size when it is static, for rules that need numbers.
int64_t staticSize(const Dim &d) { return d.value(); }

std::vector<int64_t> intsOr(const AttrMap &attrs, const char *key, std::vector<int64_t> fallback) {
  return hasAttr(attrs, key) ? getInts(attrs, key) : fallback;
}

void requirePairs(const std::vector<int64_t> &v, const char *key, int64_t minValue) {
  check(v.size() == 2,
        std::string(key) + " must have 2 values (height, width), got " + std::to_string(v.size()));
  for (int64_t x : v)
    check(x >= minValue, std::string(key) + " values must be >= " + std::to_string(minValue) +
                             ", got " + std::to_string(x));
}

// ---------------------------------------------------------------- elementwise

Rule unary(std::function<void(const OperandRef &)> require, bool boolResult = false) {
  return [=](const Operands &ops, const AttrMap &) {
    if (require)
      require(ops[0]);
    return one(boolResult ? DType::I1 : spec(ops, 0).dtype, spec(ops, 0).shape);
  };
}

Rule binary(std::function<void(const OperandRef &)> require, bool boolResult, bool sameDType) {
  return [=](const Operands &ops, const AttrMap &) {
    if (sameDType)
      requireSameDType(ops[0], ops[1]);
    if (require) {
      require(ops[0]);
      require(ops[1]);
    }
    Shape shape = broadcastShapes(spec(ops, 0).shape, spec(ops, 1).shape, ops[0].name, ops[1].name);
    return one(boolResult ? DType::I1 : spec(ops, 0).dtype, shape);
  };
}

std::vector<TensorSpec> inferWhere(const Operands &ops, const AttrMap &) {
  check(isBool(spec(ops, 0).dtype), describe(ops[0]) + "; the condition must be i1");
  requireSameDType(ops[1], ops[2]);
  Shape s = broadcastShapes(spec(ops, 0).shape, spec(ops, 1).shape, ops[0].name, ops[1].name);
  s = broadcastShapes(s, spec(ops, 2).shape, "broadcast(" + ops[0].name + ", " + ops[1].name + ")",
                      ops[2].name);
  return one(spec(ops, 1).dtype, s);
}

std::vector<TensorSpec> inferCast(const Operands &ops, const AttrMap &attrs) {
  return one(getDType(attrs, "to"), spec(ops, 0).shape);
}

std::vector<TensorSpec> inferClamp(const Operands &ops, const AttrMap &attrs) {
  requireNumeric(ops[0]);
  check(hasAttr(attrs, "min") || hasAttr(attrs, "max"), "needs at least one of 'min' and 'max'");
  return one(spec(ops, 0).dtype, spec(ops, 0).shape);
}

// ---------------------------------------------------------------- reductions

Shape reducedShape(const Shape &shape, const std::vector<int64_t> &axes, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(Dim::of(1));
  }
  return out;
}

Rule reduction(bool floatOnly) {
  return [=](const Operands &ops, const AttrMap &attrs) {
    floatOnly ? requireFloat(ops[0]) : requireNumeric(ops[0]);
    std::vector<int64_t> axes = normalizeAxes(attrs, "axes", spec(ops, 0).rank());
    return one(spec(ops, 0).dtype,
               reducedShape(spec(ops, 0).shape, axes, getBool(attrs, "keepdim")));
  };
}

std::vector<TensorSpec> inferArgReduction(const Operands &ops, const AttrMap &attrs) {
  requireNumeric(ops[0]);
  const Shape &shape = spec(ops, 0).shape;
  bool keepdim = getBool(attrs, "keepdim");
  if (!hasAttr(attrs, "axis"))
    return one(DType::I64, keepdim ? Shape(shape.size(), Dim::of(1)) : Shape{});
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), int64_t(shape.size()));
  return one(DType::I64, reducedShape(shape, {axis}, keepdim));
}

std::vector<TensorSpec> inferVar(const Operands &ops, const AttrMap &attrs) {
  check(getInt(attrs, "correction") >= 0, "correction must be >= 0");
  return reduction(true)(ops, attrs);
}

// ---------------------------------------------------------------- matmul

std::vector<TensorSpec> inferMatmul(const Operands &ops, const AttrMap &) {
  requireSameDType(ops[0], ops[1]);
  requireNumeric(ops[0]);
  Shape a = spec(ops, 0).shape, b = spec(ops, 1).shape;
  check(!a.empty() && !b.empty(),
        "matmul needs operands of rank >= 1: " + describe(ops[0]) + ", " + describe(ops[1]));
  bool aVector = a.size() == 1, bVector = b.size() == 1;
  if (aVector)
    a.insert(a.begin(), Dim::of(1));
  if (bVector)
    b.push_back(Dim::of(1));
  check(a.back() == b[b.size() - 2], "inner dims differ: " + ops[0].name + " is " +
                                         shapeStr(spec(ops, 0).shape) + ", " + ops[1].name +
                                         " is " + shapeStr(spec(ops, 1).shape));
  Shape batch = broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2),
                                ops[0].name + " batch dims", ops[1].name + " batch dims");
  if (!aVector)
    batch.push_back(a[a.size() - 2]);
  if (!bVector)
    batch.push_back(b.back());
  return one(spec(ops, 0).dtype, batch);
}

// ---------------------------------------------------------------- nn

std::vector<TensorSpec> inferSoftmax(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  normalizeAxis(getInt(attrs, "axis"), spec(ops, 0).rank());
  return one(spec(ops, 0).dtype, spec(ops, 0).shape);
}

// weight/bias of a norm over the trailing axes starting at `axis`.
void checkAffine(const Operands &ops, size_t index, const Shape &expected) {
  if (index >= ops.size() || !ops[index].spec)
    return;
  requireSameDType(ops[0], ops[index]);
  check(spec(ops, index).shape == expected, describe(ops[index]) + "; expected shape " +
                                                shapeStr(expected) + " to match " +
                                                describe(ops[0]));
}

std::vector<TensorSpec> inferNorm(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  const Shape &shape = spec(ops, 0).shape;
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), int64_t(shape.size()));
  if (hasAttr(attrs, "eps"))
    check(getFloat(attrs, "eps") >= 0, "eps must be >= 0");
  Shape normalized(shape.begin() + axis, shape.end());
  for (size_t i = 1; i < ops.size(); ++i)
    checkAffine(ops, i, normalized);
  return one(spec(ops, 0).dtype, shape);
}

std::vector<TensorSpec> inferCrossEntropy(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireInteger(ops[1]);
  const Shape &logits = spec(ops, 0).shape;
  check(!logits.empty(), describe(ops[0]) + "; logits need rank >= 1");
  double smoothing = getFloat(attrs, "label_smoothing");
  check(smoothing >= 0 && smoothing <= 1, "label_smoothing must be in [0, 1]");
  Shape expected; // (N, d1, ...) for logits (N, C, d1, ...); () for (C)
  if (logits.size() >= 2) {
    expected.push_back(logits[0]);
    expected.insert(expected.end(), logits.begin() + 2, logits.end());
  }
  check(spec(ops, 1).shape == expected, describe(ops[1]) + "; expected target shape " +
                                            shapeStr(expected) + " for " + describe(ops[0]));
  DType dtype = spec(ops, 0).dtype;
  return getEnum(attrs, "reduction") == "none" ? one(dtype, expected) : one(dtype, {});
}

// padding_idx, where given, is a row of the table (when its size is known).
void checkPaddingIndex(const AttrMap &attrs, const Dim &rows) {
  if (!hasAttr(attrs, "padding_idx"))
    return;
  int64_t p = getInt(attrs, "padding_idx");
  check(p >= 0 && (!rows.isStatic() || p < rows.value()),
        "padding_idx " + std::to_string(p) + " is outside the table's rows [0, " + rows.str() + ")");
}

std::vector<TensorSpec> inferEmbedding(const Operands &ops, const AttrMap &attrs) {
  requireInteger(ops[0]);
  requireRank(ops[1], 2);
  checkPaddingIndex(attrs, spec(ops, 1).shape[0]);
  Shape out = spec(ops, 0).shape;
  out.push_back(spec(ops, 1).shape[1]);
  return one(spec(ops, 1).dtype, out);
}

std::vector<TensorSpec> inferEmbeddingBackward(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireInteger(ops[1]);
  const Shape &g = spec(ops, 0).shape, &idx = spec(ops, 1).shape;
  check(g.size() == idx.size() + 1 && std::equal(idx.begin(), idx.end(), g.begin()),
        describe(ops[0]) + "; expected the indices' shape " + shapeStr(idx) + " plus one dim (" +
            describe(ops[1]) + ")");
  int64_t numWeights = getInt(attrs, "num_weights");
  check(numWeights >= 1, "num_weights must be >= 1, got " + std::to_string(numWeights));
  checkPaddingIndex(attrs, Dim::of(numWeights));
  DType dtype = spec(ops, 0).dtype;
  if (dtype == DType::F16 || dtype == DType::BF16)
    dtype = DType::F32; // the accumulator
  return one(dtype, {Dim::of(numWeights), g.back()});
}

std::vector<TensorSpec> inferDropout(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireInteger(ops[1]);
  requireRank(ops[1], 0);
  double p = getFloat(attrs, "p");
  check(p >= 0 && p <= 1, "p must be in [0, 1], got " + attrStr(Attr(p)));
  check(getInt(attrs, "stream") >= 0, "stream must be >= 0");
  return one(spec(ops, 0).dtype, spec(ops, 0).shape);
}

std::vector<TensorSpec> inferConv2d(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireSameDType(ops[0], ops[1]);
  requireRank(ops[0], 4);
  requireRank(ops[1], 4);
  const Shape &x = spec(ops, 0).shape, &w = spec(ops, 1).shape;
  for (int64_t axis : {1, 2, 3})
    requireStatic(ops[0], axis, "for conv2d (channels and spatial dims)");
  for (int64_t axis : {0, 1, 2, 3})
    requireStatic(ops[1], axis, "for conv2d");
  std::vector<int64_t> stride = getInts(attrs, "stride"), padding = getInts(attrs, "padding"),
                       dilation = getInts(attrs, "dilation");
  requirePairs(stride, "stride", 1);
  requirePairs(padding, "padding", 0);
  requirePairs(dilation, "dilation", 1);
  int64_t groups = getInt(attrs, "groups");
  check(groups >= 1, "groups must be >= 1");
  int64_t inC = staticSize(x[1]), outC = staticSize(w[0]);
  check(outC % groups == 0 && inC % groups == 0,
        "channels must divide by groups=" + std::to_string(groups) + ": " + describe(ops[0]) +
            ", " + describe(ops[1]));
  check(staticSize(w[1]) * groups == inC,
        "weight in-channels times groups must equal input channels: " + describe(ops[0]) + ", " +
            describe(ops[1]) + ", groups=" + std::to_string(groups));
  if (ops.size() > 2 && ops[2].spec) {
    requireSameDType(ops[0], ops[2]);
    check(spec(ops, 2).shape == Shape{w[0]},
          describe(ops[2]) + "; bias must be (" + w[0].str() + ")");
  }
  Shape out{x[0], w[0]};
  for (int k = 0; k < 2; ++k) {
    int64_t o = windowOutputSize(staticSize(x[2 + k]), staticSize(w[2 + k]), stride[k], padding[k],
                                 dilation[k], false);
    check(o >= 1,
          "the kernel " + shapeStr(w) + " does not fit the padded input " + describe(ops[0]));
    out.push_back(Dim::of(o));
  }
  return one(spec(ops, 0).dtype, out);
}

// stride, padding, dilation and groups of conv2d and its gradients, checked.
struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};
ConvGeometry convGeometry(const AttrMap &attrs) {
  ConvGeometry g{getInts(attrs, "stride"), getInts(attrs, "padding"), getInts(attrs, "dilation"),
                 getInt(attrs, "groups")};
  requirePairs(g.stride, "stride", 1);
  requirePairs(g.padding, "padding", 0);
  requirePairs(g.dilation, "dilation", 1);
  check(g.groups >= 1 && g.groups <= kMaxElements, "groups must be in [1, 2^40]");
  return g;
}

// A gradient's result: `shape` (not counted: a symbolic batch), then sizes
// from attributes (input_size, kernel_size) and products of them, bounded
// before anything multiplies them further.
std::vector<TensorSpec> convGradientResult(DType dtype, Shape shape, const std::vector<__int128> &sizes) {
  __int128 total = 1;
  for (__int128 s : sizes) {
    check(s >= 1 && s <= kMaxElements, "a conv2d gradient's size is out of range");
    total *= s;
    check(total <= kMaxElements, "a conv2d gradient's result has more than 2^40 elements");
    shape.push_back(Dim::of(int64_t(s)));
  }
  return one(dtype, shape);
}

// The gradients' `grad` must be conv2d's output for an input of spatial size
// `inputSize` and a kernel of `kernel`.
void requireConvOutput(const OperandRef &grad, const std::vector<int64_t> &inputSize,
                       const std::vector<int64_t> &kernel, const ConvGeometry &g) {
  for (int k = 0; k < 2; ++k) {
    int64_t o = windowOutputSize(inputSize[size_t(k)], kernel[size_t(k)], g.stride[size_t(k)],
                                 g.padding[size_t(k)], g.dilation[size_t(k)], false);
    check(o >= 1 && o == staticSize(grad.spec->shape[size_t(2 + k)]),
          describe(grad) + "; conv2d of a " + std::to_string(inputSize[0]) + "x" + std::to_string(inputSize[1]) +
              " input by a " + std::to_string(kernel[0]) + "x" + std::to_string(kernel[1]) + " kernel gives " +
              (o >= 1 ? std::to_string(o) : std::string("no output")) + " along dim " + std::to_string(2 + k));
  }
}

void requireConvOperands(const Operands &ops) {
  requireFloat(ops[0]);
  requireSameDType(ops[0], ops[1]);
  requireRank(ops[0], 4);
  requireRank(ops[1], 4);
  for (size_t o : {size_t(0), size_t(1)})
    for (int64_t axis = o == 0 ? 1 : 0; axis < 4; ++axis)
      requireStatic(ops[o], axis, "for a conv2d gradient");
}

// conv2d_backward_input(grad [N, O, Ho, Wo], weight [O, C/g, kH, kW]) -> [N, C, H, W].
std::vector<TensorSpec> inferConv2dBackwardInput(const Operands &ops, const AttrMap &attrs) {
  requireConvOperands(ops);
  ConvGeometry g = convGeometry(attrs);
  std::vector<int64_t> inputSize = getInts(attrs, "input_size");
  requirePairs(inputSize, "input_size", 1);
  const Shape &dy = spec(ops, 0).shape, &w = spec(ops, 1).shape;
  check(staticSize(w[0]) % g.groups == 0 && dy[1] == w[0],
        describe(ops[0]) + ", " + describe(ops[1]) + "; the gradient's channels must be the weight's " +
            "output channels, divisible by groups=" + std::to_string(g.groups));
  check(inputSize[0] <= kMaxElements && inputSize[1] <= kMaxElements, "input_size values must be <= 2^40");
  requireConvOutput(ops[0], inputSize, {staticSize(w[2]), staticSize(w[3])}, g);
  return convGradientResult(spec(ops, 0).dtype, {dy[0]},
                            {__int128(staticSize(w[1])) * g.groups, inputSize[0], inputSize[1]});
}

// conv2d_backward_weight(grad [N, O, Ho, Wo], x [N, C, H, W]) -> [O, C/g, kH, kW].
std::vector<TensorSpec> inferConv2dBackwardWeight(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireSameDType(ops[0], ops[1]);
  requireRank(ops[0], 4);
  requireRank(ops[1], 4);
  for (size_t o : {size_t(0), size_t(1)})
    for (int64_t axis = 1; axis < 4; ++axis)
      requireStatic(ops[o], axis, "for a conv2d gradient");
  ConvGeometry g = convGeometry(attrs);
  std::vector<int64_t> kernel = getInts(attrs, "kernel_size");
  requirePairs(kernel, "kernel_size", 1);
  const Shape &dy = spec(ops, 0).shape, &x = spec(ops, 1).shape;
  check(dy[0] == x[0], describe(ops[0]) + ", " + describe(ops[1]) + "; batch sizes differ");
  check(staticSize(dy[1]) % g.groups == 0 && staticSize(x[1]) % g.groups == 0,
        describe(ops[0]) + ", " + describe(ops[1]) + "; channels must divide by groups=" +
            std::to_string(g.groups));
  check(kernel[0] <= kMaxElements && kernel[1] <= kMaxElements, "kernel_size values must be <= 2^40");
  requireConvOutput(ops[0], {staticSize(x[2]), staticSize(x[3])}, kernel, g);
  return convGradientResult(spec(ops, 0).dtype, {},
                            {staticSize(dy[1]), staticSize(x[1]) / g.groups, kernel[0], kernel[1]});
}

// channels_last convolutions: the NCHW rule on the operands read as NCHW
// (N, H, W, C) -> (N, C, H, W), its result back to channels-last order.
// Rank and staticness are the NCHW rule's checks (a permuted rank-4 shape
// keeps them); a wrong rank never reaches the permute.
Shape toChannelsFirst(const Shape &s) { return s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; }
Shape toChannelsLast(const Shape &s) { return s.size() == 4 ? Shape{s[0], s[2], s[3], s[1]} : s; }
template <std::vector<TensorSpec> (*Rule)(const Operands &, const AttrMap &)>
std::vector<TensorSpec> inferChannelsLastAware(const Operands &ops, const AttrMap &attrs) {
  if (!getBool(attrs, "channels_last"))
    return Rule(ops, attrs);
  Operands first = ops;
  for (size_t i = 0; i < 2 && i < first.size(); ++i)
    if (first[i].spec)
      first[i].spec->shape = toChannelsFirst(first[i].spec->shape);
  std::vector<TensorSpec> out = Rule(first, attrs);
  for (TensorSpec &t : out)
    t.shape = toChannelsLast(t.shape);
  return out;
}

std::vector<TensorSpec> inferPool(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireRank(ops[0], 4);
  requireStatic(ops[0], 2, "for pooling");
  requireStatic(ops[0], 3, "for pooling");
  const Shape &x = spec(ops, 0).shape;
  std::vector<int64_t> kernel = getInts(attrs, "kernel_size"), padding = getInts(attrs, "padding");
  std::vector<int64_t> stride = poolStride(attrs);
  std::vector<int64_t> dilation = intsOr(attrs, "dilation", {1, 1});
  requirePairs(kernel, "kernel_size", 1);
  requirePairs(stride, "stride", 1);
  requirePairs(padding, "padding", 0);
  requirePairs(dilation, "dilation", 1);
  for (int k = 0; k < 2; ++k)
    check(padding[k] <= kernel[k] / 2, "padding must be at most half the kernel size");
  Shape out{x[0], x[1]};
  for (int k = 0; k < 2; ++k) {
    int64_t o = windowOutputSize(staticSize(x[2 + k]), kernel[k], stride[k], padding[k],
                                 dilation[k], getBool(attrs, "ceil_mode"));
    check(o >= 1, "the window does not fit the padded input " + describe(ops[0]));
    out.push_back(Dim::of(o));
  }
  return one(spec(ops, 0).dtype, out);
}

std::vector<TensorSpec> inferPoolTaps(const Operands &ops, const AttrMap &attrs) {
  std::vector<TensorSpec> r = inferPool(ops, attrs);
  r[0].dtype = DType::I64;
  return r;
}

// max_pool2d_backward(grad [N, C, Ho, Wo], tap [N, C, Ho, Wo] integer) -> [N, C, input_size].
std::vector<TensorSpec> inferMaxPoolBackward(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  requireRank(ops[0], 4);
  requireInteger(ops[1]);
  check(spec(ops, 1).shape == spec(ops, 0).shape,
        describe(ops[1]) + "; the winning taps must have the gradient's shape " + describe(ops[0]));
  requireStatic(ops[0], 2, "for pooling");
  requireStatic(ops[0], 3, "for pooling");
  std::vector<int64_t> kernel = getInts(attrs, "kernel_size"), padding = getInts(attrs, "padding"),
                       inputSize = getInts(attrs, "input_size");
  std::vector<int64_t> stride = poolStride(attrs), dilation = getInts(attrs, "dilation");
  requirePairs(kernel, "kernel_size", 1);
  requirePairs(stride, "stride", 1);
  requirePairs(padding, "padding", 0);
  requirePairs(dilation, "dilation", 1);
  requirePairs(inputSize, "input_size", 1);
  for (int k = 0; k < 2; ++k) {
    check(inputSize[k] <= kMaxElements, "input_size values must be <= 2^40");
    int64_t floor = windowOutputSize(inputSize[k], kernel[k], stride[k], padding[k], dilation[k], false);
    int64_t ceil = windowOutputSize(inputSize[k], kernel[k], stride[k], padding[k], dilation[k], true);
    int64_t o = staticSize(spec(ops, 0).shape[size_t(2 + k)]);
    check(o >= 1 && (o == floor || o == ceil),
          describe(ops[0]) + "; max_pool2d of a " + std::to_string(inputSize[0]) + "x" +
              std::to_string(inputSize[1]) + " input gives " + std::to_string(floor) + " outputs along dim " +
              std::to_string(2 + k));
  }
  const Shape &g = spec(ops, 0).shape;
  return one(spec(ops, 0).dtype, {g[0], g[1], Dim::of(inputSize[0]), Dim::of(inputSize[1])});
}

std::vector<TensorSpec> inferBatchNorm(const Operands &ops, const AttrMap &attrs) {
  requireFloat(ops[0]);
  check(spec(ops, 0).rank() >= 2, describe(ops[0]) + "; batch_norm needs (N, C, ...)");
  check(getFloat(attrs, "eps") >= 0, "eps must be >= 0");
  Shape channels{spec(ops, 0).shape[1]};
  for (size_t i = 1; i < ops.size(); ++i)
    checkAffine(ops, i, channels);
  DType dtype = spec(ops, 0).dtype;
  return {spec(ops, 0), TensorSpec{dtype, channels}, TensorSpec{dtype, channels}};
}

// Attention's dropout: a seed (an integer scalar, as the dropout op's) with
// dropout_p in (0, 1), or neither.
void checkAttentionDropout(const OperandRef *seed, const AttrMap &attrs) {
  double p = getFloat(attrs, "dropout_p");
  check(p >= 0 && p < 1, "dropout_p must be in [0, 1), got " + attrStr(Attr(p)));
  check(getInt(attrs, "dropout_stream") >= 0 && getInt(attrs, "dropout_stream") <= int64_t(UINT32_MAX),
        "dropout_stream must be in [0, 2^32)");
  bool given = seed && seed->spec;
  check(given == (p > 0), given ? "a dropout seed without dropout_p > 0" : "dropout_p > 0 without a seed operand");
  if (given) {
    requireInteger(*seed);
    requireRank(*seed, 0);
  }
}

std::vector<TensorSpec> inferAttention(const Operands &ops, const AttrMap &attrs) {
  for (int i = 0; i < 3; ++i) {
    requireFloat(ops[i]);
    check(spec(ops, i).rank() >= 2, describe(ops[i]) + "; rank >= 2 is required");
  }
  requireSameDType(ops[0], ops[1]);
  requireSameDType(ops[0], ops[2]);
  const Shape &q = spec(ops, 0).shape, &k = spec(ops, 1).shape, &v = spec(ops, 2).shape;
  check(q.back() == k.back(),
        "query and key embedding dims differ: " + describe(ops[0]) + ", " + describe(ops[1]));
  check(k[k.size() - 2] == v[v.size() - 2],
        "key and value sequence lengths differ: " + describe(ops[1]) + ", " + describe(ops[2]));
  Shape batch = broadcastShapes(Shape(q.begin(), q.end() - 2), Shape(k.begin(), k.end() - 2),
                                ops[0].name + " batch dims", ops[1].name + " batch dims");
  batch = broadcastShapes(batch, Shape(v.begin(), v.end() - 2), "query/key batch dims",
                          ops[2].name + " batch dims");
  if (ops.size() > 3 && ops[3].spec) {
    const OperandRef &mask = ops[3];
    check(isBool(mask.spec->dtype) || mask.spec->dtype == spec(ops, 0).dtype,
          describe(mask) + "; the mask must be i1 or the query's dtype");
    Shape scores = batch;
    scores.push_back(q[q.size() - 2]);
    scores.push_back(k[k.size() - 2]);
    Shape b = broadcastShapes(scores, mask.spec->shape, "scores", mask.name);
    check(b == scores,
          describe(mask) + "; the mask must broadcast to the scores " + shapeStr(scores));
  }
  checkAttentionDropout(ops.size() > 4 ? &ops[4] : nullptr, attrs);
  batch.push_back(q[q.size() - 2]);
  batch.push_back(v.back());
  DType result = spec(ops, 0).dtype;
  // Computed in f32 on 16-bit operands (the op's description).
  if (attrs.count("out_dtype")) {
    result = getDType(attrs, "out_dtype");
    check(result == DType::F32, "out_dtype " + std::string(dtypeName(result)) + ": only f32 is supported");
    check(spec(ops, 0).dtype == DType::F16 || spec(ops, 0).dtype == DType::BF16,
          describe(ops[0]) + "; out_dtype f32 needs f16 or bf16 operands");
  }
  return one(result, batch);
}

// The log-sum-exp of each query row's scaled (and masked) scores, in
// natural log: the attention output's shape without its last dim, f32 (f64
// for f64 operands).
TensorSpec attentionLse(const TensorSpec &out) {
  return {out.dtype == DType::F64 ? DType::F64 : DType::F32, Shape(out.shape.begin(), out.shape.end() - 1)};
}

std::vector<TensorSpec> inferAttentionWithLse(const Operands &ops, const AttrMap &attrs) {
  TensorSpec out = inferAttention(ops, attrs)[0];
  return {out, attentionLse(out)};
}

std::vector<TensorSpec> inferAttentionBackward(const Operands &ops, const AttrMap &attrs) {
  // The forward's operands: query, key, value, mask, seed.
  Operands forward(ops.begin() + 1, ops.begin() + std::min<size_t>(ops.size(), 5));
  forward.resize(4);
  if (ops.size() > 7)
    forward.push_back(ops[7]);
  TensorSpec out = inferAttention(forward, attrs)[0];
  // With out_dtype (f32 of 16-bit operands): the gradients are f32 too, and
  // the cotangent may come in the operands' dtype (an exact conversion of
  // the f32 one: what tensorc-narrow-attention gives the kernels).
  const bool wide = attrs.count("out_dtype") != 0;
  const TensorSpec narrowOut{spec(ops, 1).dtype, out.shape};
  check(ops[0].spec && (*ops[0].spec == out || (wide && *ops[0].spec == narrowOut)),
        describe(ops[0]) + "; the gradient must have the attention output's type " + out.str());
  // The forward's output and log-sum-exp (scaled_dot_product_attention_with_lse),
  // both or neither.
  bool saved = ops.size() > 5 && ops[5].spec, lse = ops.size() > 6 && ops[6].spec;
  check(saved == lse, "the forward's out and lse are given together or not at all");
  check(!(wide && saved), "out_dtype: the backward recomputes the forward (no saved out and lse)");
  if (saved) {
    check(*ops[5].spec == out, describe(ops[5]) + "; the saved output must have the type " + out.str());
    check(*ops[6].spec == attentionLse(out),
          describe(ops[6]) + "; the saved log-sum-exp must have the type " + attentionLse(out).str());
  }
  if (wide)
    return {TensorSpec{out.dtype, spec(ops, 1).shape}, TensorSpec{out.dtype, spec(ops, 2).shape},
            TensorSpec{out.dtype, spec(ops, 3).shape}};
  return {spec(ops, 1), spec(ops, 2), spec(ops, 3)};
}

// ---------------------------------------------------------------- shape ops

void checkShapeDims(const Shape &shape, bool allowInfer) {
  for (const Dim &d : shape)
    check(d.value() >= 1 || (allowInfer && d.isStatic() && d.value() == -1),
          "shape " + shapeStr(shape) + " has a dim that is not positive");
  if (isStaticShape(shape) && !allowInfer)
    check(numElements(shape).value() <= kMaxElements, "shape " + shapeStr(shape) + " is too large");
}

std::vector<TensorSpec> inferReshape(const Operands &ops, const AttrMap &attrs) {
  Shape target = getDims(attrs, "shape");
  Dim total = numElements(spec(ops, 0).shape);
  // A zero-size tensor (a slice or split can make one) reshapes to shapes
  // with a 0 dim; otherwise dims are positive (or one -1 to infer).
  bool empty = total.isStatic() && total.value() == 0;
  for (const Dim &d : target)
    check(d.value() >= 1 || (d.isStatic() && d.value() == -1) ||
              (empty && d.isStatic() && d.value() == 0),
          "shape " + shapeStr(target) + " has a dim that is not positive");
  int inferAt = -1;
  Dim known = Dim::of(1);
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].isStatic() && target[i].value() == -1) {
      check(inferAt < 0, "shape " + shapeStr(target) + " has more than one -1");
      inferAt = int(i);
    } else {
      known = known * target[i];
    }
  }
  if (inferAt >= 0) {
    std::optional<Dim> q = total.dividedBy(known);
    check(q.has_value(), "cannot infer the -1 in " + shapeStr(target) + " for " + describe(ops[0]));
    target[inferAt] = *q;
  }
  check(numElements(target) == total, "element counts differ: " + describe(ops[0]) + " has " +
                                          total.str() + ", shape " + shapeStr(target) + " has " +
                                          numElements(target).str());
  return one(spec(ops, 0).dtype, target);
}

std::vector<TensorSpec> inferPermute(const Operands &ops, const AttrMap &attrs) {
  const Shape &shape = spec(ops, 0).shape;
  std::vector<int64_t> dims = getInts(attrs, "dims");
  check(int64_t(dims.size()) == int64_t(shape.size()),
        "dims has " + std::to_string(dims.size()) + " entries for " + describe(ops[0]));
  std::vector<bool> seen(shape.size());
  Shape out;
  for (int64_t d : dims) {
    int64_t a = normalizeAxis(d, int64_t(shape.size()), "dims entry");
    check(!seen[a], "dims is not a permutation: axis " + std::to_string(a) + " repeats");
    seen[a] = true;
    out.push_back(shape[a]);
  }
  return one(spec(ops, 0).dtype, out);
}

std::vector<TensorSpec> inferTranspose(const Operands &ops, const AttrMap &attrs) {
  Shape shape = spec(ops, 0).shape;
  int64_t r = int64_t(shape.size());
  std::swap(shape[normalizeAxis(getInt(attrs, "dim0"), r, "dim0")],
            shape[normalizeAxis(getInt(attrs, "dim1"), r, "dim1")]);
  return one(spec(ops, 0).dtype, shape);
}

std::vector<TensorSpec> inferBroadcastTo(const Operands &ops, const AttrMap &attrs) {
  const Shape &target = getDims(attrs, "shape");
  // Size-0 dims are allowed (NumPy: a size-1 dim stretches to 0 too); the
  // gradient of a reduction over an empty slice broadcasts to its shape.
  for (const Dim &d : target)
    check(d.value() >= 1 || (d.isStatic() && d.value() == 0),
          "shape " + shapeStr(target) + " has a negative dim");
  if (isStaticShape(target))
    check(numElements(target).value() <= kMaxElements, "shape " + shapeStr(target) + " is too large");
  const Shape &shape = spec(ops, 0).shape;
  check(target.size() >= shape.size(),
        "cannot broadcast " + describe(ops[0]) + " to the lower rank " + shapeStr(target));
  size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    check(shape[i] == target[offset + i] || shape[i] == Dim::of(1),
          "cannot broadcast " + describe(ops[0]) + " to " + shapeStr(target) + ": dim " +
              std::to_string(i) + " is " + shape[i].str());
  return one(spec(ops, 0).dtype, target);
}

std::vector<TensorSpec> inferSlice(const Operands &ops, const AttrMap &attrs) {
  Shape shape = spec(ops, 0).shape;
  int64_t rank = int64_t(shape.size());
  const auto &[axes, starts, ends, steps] = sliceAttrs(attrs);
  check(axes.size() == starts.size() && ends.size() == starts.size() &&
            steps.size() == starts.size(),
        "axes, starts, ends and steps must have the same length");
  std::vector<bool> seen(rank);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normalizeAxis(axes[i], rank);
    check(!seen[a], "axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    check(steps[i] >= 1, "steps must be >= 1, got " + std::to_string(steps[i]));
    if (shape[a].isStatic()) {
      shape[a] = Dim::of(sliceRange(shape[a].value(), starts[i], ends[i], steps[i]).length);
    } else {
      // Only the whole range keeps a symbolic size a monomial.
      check(starts[i] == 0 && steps[i] == 1 && ends[i] == std::numeric_limits<int64_t>::max(),
            "cannot slice symbolic dim " + shape[a].str() + " of " + describe(ops[0]) +
                " with static bounds");
    }
  }
  return one(spec(ops, 0).dtype, shape);
}

std::vector<TensorSpec> inferConcat(const Operands &ops, const AttrMap &attrs) {
  check(!ops.empty(), "concat needs at least one input");
  const TensorSpec &first = spec(ops, 0);
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), first.rank());
  Shape out = first.shape;
  for (size_t i = 1; i < ops.size(); ++i) {
    requireSameDType(ops[0], ops[i]);
    const Shape &s = spec(ops, i).shape;
    check(s.size() == out.size(), "ranks differ: " + describe(ops[0]) + ", " + describe(ops[i]));
    for (size_t d = 0; d < s.size(); ++d) {
      if (int64_t(d) != axis) {
        check(s[d] == out[d], "dim " + std::to_string(d) + " differs: " + describe(ops[0]) + ", " +
                                  describe(ops[i]));
        continue;
      }
      const Dim &a = out[d], &b = s[d];
      if (a.isStatic() && b.isStatic())
        out[d] = Dim::of(a.value() + b.value());
      else if (a.symbols() == b.symbols())
        out[d] =
            Dim::of(a.coefficient() + b.coefficient()) * *a.dividedBy(Dim::of(a.coefficient()));
      else
        fail("cannot concatenate " + a.str() + " and " + b.str() + " along axis " +
             std::to_string(axis) + ": the sum is not a monomial");
    }
  }
  return one(first.dtype, out);
}

std::vector<TensorSpec> inferSplit(const Operands &ops, const AttrMap &attrs) {
  const TensorSpec &x = spec(ops, 0);
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), x.rank());
  requireStatic(ops[0], axis, "to split it");
  const std::vector<int64_t> &sizes = getInts(attrs, "sizes");
  check(!sizes.empty(), "sizes is empty");
  int64_t total = 0;
  std::vector<TensorSpec> out;
  for (int64_t s : sizes) {
    check(s >= 0 && s <= kMaxElements, "sizes must be in [0, 2^40], got " + std::to_string(s));
    total += s; // at most 2^40 per entry: checked against the dim below before it can wrap
    check(total <= kMaxElements, "sizes add up to more than 2^40");
    TensorSpec part = x;
    part.shape[axis] = Dim::of(s);
    out.push_back(part);
  }
  check(total == x.shape[axis].value(), "sizes add up to " + std::to_string(total) + " but dim " +
                                            std::to_string(axis) + " of " + describe(ops[0]) +
                                            " is " + x.shape[axis].str());
  return out;
}

std::vector<TensorSpec> inferSqueeze(const Operands &ops, const AttrMap &attrs) {
  const Shape &shape = spec(ops, 0).shape;
  int64_t rank = int64_t(shape.size());
  std::vector<int64_t> axes = normalizeAxes(attrs, "axes", rank);
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!(listed && shape[i] == Dim::of(1)))
      out.push_back(shape[i]);
  }
  return one(spec(ops, 0).dtype, out);
}

std::vector<TensorSpec> inferUnsqueeze(const Operands &ops, const AttrMap &attrs) {
  Shape shape = spec(ops, 0).shape;
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), int64_t(shape.size()) + 1);
  shape.insert(shape.begin() + axis, Dim::of(1));
  return one(spec(ops, 0).dtype, shape);
}

std::vector<TensorSpec> inferFlatten(const Operands &ops, const AttrMap &attrs) {
  const Shape &shape = spec(ops, 0).shape;
  if (shape.empty())
    return one(spec(ops, 0).dtype, {Dim::of(1)});
  int64_t rank = int64_t(shape.size());
  int64_t start = normalizeAxis(getInt(attrs, "start_axis"), rank, "start_axis");
  int64_t end = normalizeAxis(getInt(attrs, "end_axis"), rank, "end_axis");
  check(start <= end, "start_axis must not come after end_axis");
  Shape out(shape.begin(), shape.begin() + start);
  out.push_back(numElements(Shape(shape.begin() + start, shape.begin() + end + 1)));
  out.insert(out.end(), shape.begin() + end + 1, shape.end());
  return one(spec(ops, 0).dtype, out);
}

std::vector<TensorSpec> inferGather(const Operands &ops, const AttrMap &attrs) {
  requireInteger(ops[1]);
  const Shape &x = spec(ops, 0).shape, &index = spec(ops, 1).shape;
  check(x.size() == index.size(), "ranks differ: " + describe(ops[0]) + ", " + describe(ops[1]));
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), int64_t(x.size()));
  for (size_t d = 0; d < x.size(); ++d) {
    if (int64_t(d) == axis || index[d] == x[d])
      continue;
    check(index[d].isStatic() && x[d].isStatic() && index[d].value() <= x[d].value(),
          "index dim " + std::to_string(d) + " must not exceed the input's: " + describe(ops[0]) +
              ", " + describe(ops[1]));
  }
  return one(spec(ops, 0).dtype, index);
}

std::vector<TensorSpec> inferIndexSelect(const Operands &ops, const AttrMap &attrs) {
  requireInteger(ops[1]);
  requireRank(ops[1], 1);
  Shape shape = spec(ops, 0).shape;
  int64_t axis = normalizeAxis(getInt(attrs, "axis"), int64_t(shape.size()));
  shape[axis] = spec(ops, 1).shape[0];
  return one(spec(ops, 0).dtype, shape);
}

std::vector<TensorSpec> inferPad(const Operands &ops, const AttrMap &attrs) {
  Shape shape = spec(ops, 0).shape;
  const std::vector<int64_t> &pads = getInts(attrs, "pads");
  check(pads.size() % 2 == 0 && pads.size() <= 2 * shape.size(),
        "pads must hold (before, after) pairs for at most " + std::to_string(shape.size()) +
            " dims, got " + std::to_string(pads.size()) + " values");
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    Dim &d = shape[shape.size() - 1 - i];
    int64_t before = pads[2 * i], after = pads[2 * i + 1];
    if (before == 0 && after == 0)
      continue;
    check(d.isStatic(), "cannot pad symbolic dim " + d.str() + " of " + describe(ops[0]));
    check(std::abs(before) <= kMaxElements && std::abs(after) <= kMaxElements,
          "pads " + attrStr(Attr(pads)) + " must be within +-2^40");
    int64_t size = d.value() + before + after; // each term is within 2^40: no overflow
    check(size >= 0 && size <= kMaxElements,
          "pads " + attrStr(Attr(pads)) + " crop " + describe(ops[0]) + " below zero size");
    d = Dim::of(size);
  }
  return one(spec(ops, 0).dtype, shape);
}

// ---------------------------------------------------------------- creation

std::vector<TensorSpec> inferConstant(const Operands &, const AttrMap &attrs) {
  const DenseValue &v = getDense(attrs, "value");
  Shape shape;
  int64_t n = 1;
  for (int64_t d : v.shape) {
    check(d >= 1, "constant dims must be positive");
    n = checkedMul(n, d, "constant size");
    shape.push_back(Dim::of(d));
  }
  check(v.size() == 1 || int64_t(v.size()) == n,
        "constant has " + std::to_string(v.size()) + " values for shape " + shapeStr(shape));
  return one(v.dtype, shape);
}

std::vector<TensorSpec> inferFilled(const Operands &, const AttrMap &attrs) {
  const Shape &shape = getDims(attrs, "shape");
  checkShapeDims(shape, false);
  return one(getDType(attrs, "dtype"), shape);
}

std::vector<TensorSpec> inferIota(const Operands &, const AttrMap &attrs) {
  check(hasAttr(attrs, "end") != hasAttr(attrs, "length"),
        "needs exactly one of 'end' and 'length'");
  int64_t start = getInt(attrs, "start"), step = getInt(attrs, "step");
  check(step != 0, "step must not be 0");
  check(!isBool(getDType(attrs, "dtype")), "iota needs a numeric dtype");
  if (hasAttr(attrs, "length")) {
    const Shape &length = getDims(attrs, "length");
    check(length.size() == 1, "length must hold one dim");
    checkShapeDims(length, false);
    return one(getDType(attrs, "dtype"), length);
  }
  int64_t end = getInt(attrs, "end");
  __int128 span = (__int128)end - start;
  __int128 n = span / step + ((span % step) != 0 && ((span > 0) == (step > 0)) ? 1 : 0);
  check(n >= 0 && n <= kMaxElements, "iota range [" + std::to_string(start) + ", " +
                                         std::to_string(end) + ") with step " +
                                         std::to_string(step) + " has an invalid length");
  return one(getDType(attrs, "dtype"), {Dim::of(int64_t(n))});
}

// ---------------------------------------------------------------- collectives

std::vector<TensorSpec> inferCollective(const OpSchema &op, const Operands &ops,
                                        const AttrMap &attrs, const std::vector<Mesh> &meshes) {
  const Mesh &mesh = findMesh(meshes, getEnum(attrs, "mesh"));
  checkMesh(mesh);
  DeviceGroups groups(mesh, getStrings(attrs, "axes"));
  if (op.name == "axis_index")
    return one(DType::I64, {});
  const OperandRef &x = ops[0];
  TensorSpec out = *x.spec;
  Dim g = Dim::of(groups.groupSize());
  std::string groupText = "the group size " + std::to_string(groups.groupSize()) + " (axes " +
                          attrStr(Attr(getStrings(attrs, "axes"))) + " of mesh \"" + mesh.name + "\")";
  auto gathered = [&](const char *key) {
    int64_t axis = normalizeAxis(getInt(attrs, key), x.spec->rank(), key);
    out.shape[axis] = out.shape[axis] * g;
  };
  auto scattered = [&](const char *key) {
    int64_t axis = normalizeAxis(getInt(attrs, key), x.spec->rank(), key);
    std::optional<Dim> part = out.shape[axis].dividedBy(g);
    check(part.has_value(), describe(x) + "; dim " + std::to_string(axis) + " (" +
                                out.shape[axis].str() + ") is not divisible by " + groupText);
    out.shape[axis] = *part;
  };
  if (hasAttr(attrs, "reduction")) {
    const std::string &reduction = getEnum(attrs, "reduction");
    (reduction == "mean" ? requireFloat : requireNumeric)(x);
  }
  if (op.name == "all_gather") {
    gathered("axis");
  } else if (op.name == "reduce_scatter" || op.name == "all_slice") {
    scattered("axis");
  } else if (op.name == "all_to_all") {
    scattered("split_axis");
    gathered("concat_axis");
  } else if (op.name == "collective_broadcast") {
    int64_t root = getInt(attrs, "root");
    check(root >= 0 && root < groups.groupSize(),
          "root " + std::to_string(root) + " is not a rank of " + groupText);
  } else {
    check(op.name == "all_reduce", "no shape rule for collective '" + op.name + "'");
  }
  return {out};
}

const std::unordered_map<std::string, Rule> &rules() {
  static const std::unordered_map<std::string, Rule> table = [] {
    std::unordered_map<std::string, Rule> r;
    for (const char *n : {"exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "gelu",
                          "silu", "sin", "cos", "erf"})
      r[n] = unary(requireFloat);
    for (const char *n : {"neg", "abs", "sign", "relu", "floor", "ceil"})
      r[n] = unary(requireNumeric);
    r["logical_not"] = unary(nullptr, true);
    for (const char *n : {"add", "sub", "mul", "maximum", "minimum"})
      r[n] = binary(requireNumeric, false, true);
    for (const char *n : {"div", "pow"})
      r[n] = binary(requireFloat, false, true);
    for (const char *n : {"eq", "ne", "lt", "le", "gt", "ge"})
      r[n] = binary(nullptr, true, true);
    for (const char *n : {"logical_and", "logical_or"})
      r[n] = binary(nullptr, true, false);
    r["where"] = inferWhere;
    r["cast"] = inferCast;
    r["clamp"] = inferClamp;
    for (const char *n : {"sum", "max", "min", "prod"})
      r[n] = reduction(false);
    r["mean"] = r["logsumexp"] = reduction(true);
    r["argmax"] = r["argmin"] = inferArgReduction;
    r["var"] = inferVar;
    r["matmul"] = inferMatmul;
    r["softmax"] = r["log_softmax"] = inferSoftmax;
    r["layer_norm"] = r["rms_norm"] = inferNorm;
    r["cross_entropy"] = inferCrossEntropy;
    r["embedding"] = inferEmbedding;
    r["embedding_backward"] = inferEmbeddingBackward;
    r["dropout"] = inferDropout;
    r["conv2d"] = inferChannelsLastAware<inferConv2d>;
    r["max_pool2d"] = r["avg_pool2d"] = inferPool;
    r["max_pool2d_backward"] = inferMaxPoolBackward;
    r["max_pool2d_taps"] = inferPoolTaps;
    r["batch_norm"] = inferBatchNorm;
    r["scaled_dot_product_attention"] = inferAttention;
    r["scaled_dot_product_attention_with_lse"] = inferAttentionWithLse;
    r["scaled_dot_product_attention_backward"] = inferAttentionBackward;
    r["conv2d_backward_input"] = inferChannelsLastAware<inferConv2dBackwardInput>;
    r["conv2d_backward_weight"] = inferChannelsLastAware<inferConv2dBackwardWeight>;
    r["reshape"] = inferReshape;
    r["permute"] = inferPermute;
    r["transpose"] = inferTranspose;
    r["broadcast_to"] = inferBroadcastTo;
    r["slice"] = inferSlice;
    r["concat"] = inferConcat;
    r["split"] = inferSplit;
    r["squeeze"] = inferSqueeze;
    r["unsqueeze"] = inferUnsqueeze;
    r["flatten"] = inferFlatten;
    r["gather"] = inferGather;
    r["index_select"] = inferIndexSelect;
    r["pad"] = inferPad;
    r["constant"] = inferConstant;
    r["full"] = r["zeros"] = r["ones"] = inferFilled;
    r["iota"] = inferIota;
    return r;
  }();
  return table;
}

} // namespace

int64_t normalizeAxis(int64_t axis, int64_t rank, const char *what) {
  // A rank-0 tensor has no axis to name (PyTorch accepts dim 0/-1 there for
  // some ops and not others; tensorc refuses all, see docs/graph-format.md).
  check(rank >= 1, std::string(what) + " " + std::to_string(axis) +
                       " names an axis of a rank-0 (scalar) operand; this op needs rank >= 1");
  check(axis >= -rank && axis < rank, std::string(what) + " " + std::to_string(axis) +
                                          " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalizeAxes(const AttrMap &attrs, const char *key, int64_t rank) {
  std::vector<int64_t> axes;
  if (!hasAttr(attrs, key)) {
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
    return axes;
  }
  const std::vector<int64_t> &given = getInts(attrs, key);
  check(!given.empty(), std::string(key) + " is empty; omit it to use every axis");
  for (int64_t a : given) {
    check(rank > 0, std::string(key) + " given for a rank-0 tensor");
    int64_t n = normalizeAxis(a, rank);
    check(std::find(axes.begin(), axes.end(), n) == axes.end(),
          "axis " + std::to_string(n) + " appears twice in " + key);
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

Shape broadcastShapes(const Shape &a, const Shape &b, const std::string &aName,
                      const std::string &bName) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim *da = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim *db = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    if (!da || (db && *da == Dim::of(1)))
      out[i] = *db;
    else if (!db || *db == Dim::of(1) || *da == *db)
      out[i] = *da;
    else
      fail("cannot broadcast " + aName + " " + shapeStr(a) + " with " + bName + " " + shapeStr(b) +
           ": " + da->str() + " vs " + db->str());
  }
  return out;
}

SliceAttrs sliceAttrs(const AttrMap &attrs) {
  SliceAttrs s{{}, getInts(attrs, "starts"), getInts(attrs, "ends"), {}};
  std::vector<int64_t> allAxes(s.starts.size());
  std::iota(allAxes.begin(), allAxes.end(), 0);
  s.axes = intsOr(attrs, "axes", allAxes);
  s.steps = intsOr(attrs, "steps", std::vector<int64_t>(s.starts.size(), 1));
  return s;
}

SliceRange sliceRange(int64_t size, int64_t start, int64_t end, int64_t step) {
  auto clampIndex = [size](int64_t i) {
    if (i < 0)
      i = i < -size ? 0 : i + size;
    return std::min(i, size);
  };
  int64_t s = clampIndex(start), e = clampIndex(end);
  int64_t length = e > s ? 1 + (e - s - 1) / step : 0; // no overflow for any step >= 1
  return {s, step, length};
}

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceilMode) {
  // 128-bit: kernel/stride/pad/dilation come from the graph file unbounded.
  __int128 wide = __int128(in) + 2 * __int128(pad) - __int128(dilation) * (__int128(kernel) - 1) - 1;
  if (wide < 0)
    return 0;
  check(wide <= kMaxElements, "window arguments give an output size beyond 2^40");
  int64_t span = int64_t(wide);
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // PyTorch: the last window must start inside the input or left padding.
  if (ceilMode && (out - 1) * stride >= in + pad)
    --out;
  return out;
}

std::vector<int64_t> poolStride(const AttrMap &attrs) {
  return hasAttr(attrs, "stride") ? getInts(attrs, "stride") : getInts(attrs, "kernel_size");
}

std::vector<TensorSpec> inferResultTypes(const OpSchema &op,
                                         const std::vector<OperandRef> &operands,
                                         const AttrMap &attrs, const std::vector<Mesh> &meshes) {
  auto it = rules().find(op.name);
  check(op.category == "collective" || it != rules().end(), "no shape rule for op '" + op.name + "'");
  for (const OperandRef &o : operands)
    if (o.spec)
      for (const Dim &d : o.spec->shape)
        check(!d.isStatic() || d.value() >= 0, describe(o) + " has a negative dim");
  std::vector<TensorSpec> results = op.category == "collective"
                                        ? inferCollective(op, operands, attrs, meshes)
                                        : it->second(operands, attrs);
  for (const TensorSpec &r : results)
    numElements(r.shape); // throws on overflow
  return results;
}

} // namespace tensorc
