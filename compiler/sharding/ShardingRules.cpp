#include "compiler/sharding/ShardingRules.h"

#include "ir/core/FusedAttention.h"
#include "ir/core/ShapeInference.h"

#include <algorithm>
#include <numeric>

namespace tensorc::sharding {
namespace {

class RuleBuilder {
public:
  explicit RuleBuilder(const TypedNode &n) : node(n) {
    rule.operandDims.resize(n.argTypes.size());
    rule.resultDims.resize(n.results.size());
  }
  int factor(bool replicated = false) {
    rule.replicated.push_back(replicated);
    return rule.numFactors++;
  }
  int64_t operandRank(size_t i) const {
    const Arg a = i < node.node->args.size() ? node.node->args[i] : Arg::absent();
    return a.kind == Arg::Kind::Value ? node.argTypes[i]->rank() : -1; // literals: no dims
  }
  const Shape &operandShape(size_t i) const { return node.argTypes[i]->shape; }
  // Operand `i` aligned from the right with `dims` (NumPy broadcasting):
  // a dim equal to the result's takes its factor, a broadcast one none.
  void alignRight(size_t i, const std::vector<int> &dims, const Shape &shape) {
    int64_t rank = operandRank(i);
    if (rank < 0)
      return;
    std::vector<int> &out = rule.operandDims[i];
    out.assign(size_t(rank), kNoFactor);
    for (int64_t d = 0; d < rank; ++d) {
      size_t r = dims.size() - size_t(rank) + size_t(d);
      if (operandShape(i)[d] == shape[r])
        out[d] = dims[r];
    }
  }
  const TypedNode &node;
  FactorRule rule;
};

std::vector<int> freshFactors(RuleBuilder &b, int64_t rank) {
  std::vector<int> f;
  for (int64_t d = 0; d < rank; ++d)
    f.push_back(b.factor());
  return f;
}

FactorRule elementwise(const TypedNode &n) {
  RuleBuilder b(n);
  const Shape &shape = n.results[0].shape;
  std::vector<int> dims = freshFactors(b, int64_t(shape.size()));
  for (size_t i = 0; i < n.argTypes.size(); ++i)
    if (n.argTypes[i])
      b.alignRight(i, dims, shape);
  b.rule.resultDims[0] = dims;
  return b.rule;
}

std::optional<FactorRule> reduction(const TypedNode &n) {
  const std::string &op = n.node->op;
  RuleBuilder b(n);
  int64_t rank = n.argTypes[0]->rank();
  std::vector<int64_t> axes = op == "argmax" || op == "argmin"
                                  ? (hasAttr(n.attrs, "axis")
                                         ? std::vector<int64_t>{normalizeAxis(getInt(n.attrs, "axis"), rank)}
                                         : std::vector<int64_t>())
                                  : normalizeAxes(n.attrs, "axes", rank);
  if (axes.empty() && (op == "argmax" || op == "argmin"))
    return std::nullopt; // the flat index of the whole tensor
  bool partial = op == "sum" || op == "mean" || op == "max" || op == "min";
  b.rule.partial = op == "max" || op == "min" ? op : partial ? "sum" : "";
  bool keepdim = getBool(n.attrs, "keepdim");
  std::vector<int> &x = b.rule.operandDims[0], &y = b.rule.resultDims[0];
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    int f = b.factor(reduced && !partial);
    x.push_back(f);
    if (!reduced)
      y.push_back(f);
    else if (keepdim)
      y.push_back(kNoFactor);
  }
  return b.rule;
}

std::optional<FactorRule> matmul(const TypedNode &n) {
  const Shape &a = n.argTypes[0]->shape, &bShape = n.argTypes[1]->shape, &y = n.results[0].shape;
  if (a.size() < 2 || bShape.size() < 2)
    return std::nullopt;
  RuleBuilder b(n);
  std::vector<int> dims = freshFactors(b, int64_t(y.size())); // batch..., m, n
  int k = b.factor();
  size_t r = y.size();
  auto operand = [&](size_t i, const Shape &s, int inner, bool lhs) {
    std::vector<int> &out = b.rule.operandDims[i];
    out.assign(s.size(), kNoFactor);
    for (size_t d = 0; d + 2 < s.size(); ++d) {
      size_t yd = r - s.size() + d;
      if (s[d] == y[yd])
        out[d] = dims[yd];
    }
    out[s.size() - 2] = lhs ? dims[r - 2] : inner;
    out[s.size() - 1] = lhs ? inner : dims[r - 1];
  };
  operand(0, a, k, true);
  operand(1, bShape, k, false);
  b.rule.resultDims[0] = dims;
  return b.rule;
}

// x's dims from `from` on (a norm's or softmax's) must stay whole; weight
// and bias (shaped like those dims) take their factors.
FactorRule wholeTrailing(const TypedNode &n, int64_t from, int64_t to) {
  RuleBuilder b(n);
  int64_t rank = n.argTypes[0]->rank();
  std::vector<int> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(b.factor(d >= from && d <= to));
  b.rule.operandDims[0] = dims;
  for (size_t i = 1; i < n.argTypes.size(); ++i)
    if (n.argTypes[i])
      b.alignRight(i, dims, n.argTypes[0]->shape);
  b.rule.resultDims[0] = dims;
  return b.rule;
}

std::optional<FactorRule> crossEntropy(const TypedNode &n) {
  const std::string &reduction = getEnum(n.attrs, "reduction");
  int64_t rank = n.argTypes[0]->rank();
  if (rank < 2)
    return std::nullopt;
  RuleBuilder b(n);
  b.rule.partial = "sum";
  std::vector<int> rows; // N, d1, ...
  for (int64_t d = 0; d < rank - 1; ++d)
    rows.push_back(b.factor());
  // Classes split (a static count): vocab-parallel, each device's block of
  // the classes; the partition completes the row statistics (max, sum of
  // exponentials, the target's logit) with all_reduces (SpmdPartition).
  int classes = b.factor(!n.argTypes[0]->shape[1].isStatic());
  std::vector<int> logits = {rows[0], classes};
  logits.insert(logits.end(), rows.begin() + 1, rows.end());
  b.rule.operandDims[0] = logits;
  b.rule.operandDims[1] = rows;
  if (reduction == "none")
    b.rule.resultDims[0] = rows;
  // A mean over split rows: the partitioner divides the partial sum by the
  // global count of counted rows (SpmdPartition.cpp).
  return b.rule;
}

FactorRule permutation(const TypedNode &n, const std::vector<int64_t> &perm) {
  RuleBuilder b(n);
  std::vector<int> x = freshFactors(b, int64_t(perm.size()));
  b.rule.operandDims[0] = x;
  for (int64_t p : perm)
    b.rule.resultDims[0].push_back(x[size_t(p)]);
  return b.rule;
}

// Attention: the leading (batch, head) dims split; the rest stay whole. The
// mask broadcasts from the right; the log-sum-exp is the query's dims but
// the last.
std::optional<FactorRule> attention(const TypedNode &n) {
  const Shape &q = n.argTypes[n.node->op == "scaled_dot_product_attention_backward" ? 1 : 0]->shape;
  if (q.size() < 3)
    return std::nullopt;
  RuleBuilder b(n);
  size_t lead = q.size() - 2;
  std::vector<int> leading = freshFactors(b, int64_t(lead));
  auto dimsOf = [&](const Shape &s, bool fromRight, std::vector<int> &out) {
    out.assign(s.size(), kNoFactor);
    for (size_t d = 0; d < s.size(); ++d) {
      size_t qd = fromRight ? q.size() - s.size() + d : d;
      if (qd < lead && s[d] == q[qd])
        out[d] = leading[qd];
      else if (qd < lead && !(fromRight && s[d] == Dim::of(1)))
        return false; // a leading dim that neither matches nor broadcasts
      else if (qd >= lead)
        out[d] = b.factor(true);
    }
    return true;
  };
  for (size_t i = 0; i < n.argTypes.size(); ++i) {
    if (!n.argTypes[i] || b.operandRank(i) < 0)
      continue;
    bool mask = n.schema->operands[std::min(i, n.schema->operands.size() - 1)].name == "mask";
    if (!mask && n.argTypes[i]->rank() < int64_t(lead))
      return std::nullopt;
    if (!dimsOf(n.argTypes[i]->shape, mask, b.rule.operandDims[i]))
      return std::nullopt;
  }
  for (size_t r = 0; r < n.results.size(); ++r)
    if (!dimsOf(n.results[r].shape, false, b.rule.resultDims[r]))
      return std::nullopt;
  return b.rule;
}

// reshape, flatten: dims regroup without moving elements. Dims match up in
// groups of equal products; in each group only the major (first) dims can
// split, and together: a dim split G ways in row-major order is the same
// elements as the major dim of its group split G ways (which must divide).
// Size-1 dims never split.
std::optional<FactorRule> regroup(const TypedNode &n) {
  const Shape &in = n.argTypes[0]->shape, &out = n.results[0].shape;
  RuleBuilder b(n);
  std::vector<int> &x = b.rule.operandDims[0], &y = b.rule.resultDims[0];
  x.assign(in.size(), kNoFactor);
  y.assign(out.size(), kNoFactor);
  size_t i = 0, j = 0;
  auto skipOnes = [&] {
    while (i < in.size() && in[i] == Dim::of(1))
      ++i;
    while (j < out.size() && out[j] == Dim::of(1))
      ++j;
  };
  skipOnes();
  while (i < in.size() && j < out.size()) {
    size_t i0 = i, j0 = j;
    Dim pa = in[i++], pb = out[j++];
    while (pa != pb) {
      if (pb.dividedBy(pa) && i < in.size())
        pa = pa * in[i++];
      else if (pa.dividedBy(pb) && j < out.size())
        pb = pb * out[j++];
      else
        return std::nullopt;
    }
    int f = b.factor();
    x[i0] = f;
    y[j0] = f;
    for (size_t k = i0 + 1; k < i; ++k)
      if (in[k] != Dim::of(1))
        x[k] = b.factor(true);
    for (size_t k = j0 + 1; k < j; ++k)
      if (out[k] != Dim::of(1))
        y[k] = b.factor(true);
    skipOnes();
  }
  if (i != in.size() || j != out.size())
    return std::nullopt;
  return b.rule;
}

// concat, split: the joined axis stays whole.
FactorRule alongAxis(const TypedNode &n, int64_t axis) {
  RuleBuilder b(n);
  int64_t rank = n.results[0].rank();
  std::vector<int> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(b.factor(d == axis));
  for (size_t i = 0; i < n.argTypes.size(); ++i)
    if (n.argTypes[i])
      b.rule.operandDims[i] = dims;
  for (size_t r = 0; r < n.results.size(); ++r)
    b.rule.resultDims[r] = dims;
  return b.rule;
}

// slice: dims it keeps whole (start 0, step 1, end past the size) split;
// the dims it cuts stay whole.
FactorRule sliceRule(const TypedNode &n) {
  RuleBuilder b(n);
  const Shape &x = n.argTypes[0]->shape;
  SliceAttrs s = sliceAttrs(n.attrs);
  std::vector<int> dims;
  for (size_t d = 0; d < x.size(); ++d) {
    bool cut = false;
    for (size_t k = 0; k < s.axes.size(); ++k) {
      if (normalizeAxis(s.axes[k], int64_t(x.size())) != int64_t(d))
        continue;
      bool whole = s.starts[k] == 0 && s.steps[k] == 1 && x[d].isStatic() && s.ends[k] >= x[d].value();
      bool wholeSymbolic = s.starts[k] == 0 && s.steps[k] == 1 && s.ends[k] >= (int64_t(1) << 62);
      cut = !(whole || wholeSymbolic);
    }
    dims.push_back(b.factor(cut));
  }
  b.rule.operandDims[0] = dims;
  b.rule.resultDims[0] = dims;
  return b.rule;
}

} // namespace

std::optional<FactorRule> factorRule(const TypedNode &n) {
  const std::string &op = n.node->op;
  const std::string &category = n.schema->category;
  if (category == "unary" || category == "binary" || category == "elementwise")
    return elementwise(n);
  if (op == "sum" || op == "mean" || op == "max" || op == "min" || op == "prod" ||
      op == "logsumexp" || op == "var" || op == "argmax" || op == "argmin")
    return reduction(n);
  if (op == "matmul")
    return matmul(n);
  if (op == "softmax" || op == "log_softmax") {
    // Any dim may split; a split axis completes the rows' maximum and sum
    // of exponentials with all_reduces (SpmdPartition), cheaper than
    // gathering the rows.
    int64_t rank = n.argTypes[0]->rank();
    int64_t axis = normalizeAxis(getInt(n.attrs, "axis"), rank);
    return wholeTrailing(n, axis, axis - 1);
  }
  if (op == "layer_norm" || op == "rms_norm") {
    int64_t rank = n.argTypes[0]->rank();
    return wholeTrailing(n, normalizeAxis(getInt(n.attrs, "axis"), rank), rank - 1);
  }
  if (op == "cross_entropy")
    return crossEntropy(n);
  if (op == "transpose") {
    int64_t rank = n.argTypes[0]->rank();
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(normalizeAxis(getInt(n.attrs, "dim0"), rank))],
              perm[size_t(normalizeAxis(getInt(n.attrs, "dim1"), rank))]);
    return permutation(n, perm);
  }
  if (op == "permute") {
    std::vector<int64_t> perm;
    for (int64_t d : getInts(n.attrs, "dims"))
      perm.push_back(normalizeAxis(d, n.argTypes[0]->rank()));
    return permutation(n, perm);
  }
  if (op == "broadcast_to")
    return elementwise(n);
  if (op == "unsqueeze") {
    RuleBuilder b(n);
    int64_t rank = n.argTypes[0]->rank();
    int64_t axis = normalizeAxis(getInt(n.attrs, "axis"), rank + 1);
    std::vector<int> x = freshFactors(b, rank);
    b.rule.operandDims[0] = x;
    b.rule.resultDims[0] = x;
    b.rule.resultDims[0].insert(b.rule.resultDims[0].begin() + axis, kNoFactor);
    return b.rule;
  }
  if (op == "squeeze") {
    RuleBuilder b(n);
    const Shape &x = n.argTypes[0]->shape;
    std::vector<int64_t> axes;
    if (hasAttr(n.attrs, "axes"))
      axes = normalizeAxes(n.attrs, "axes", int64_t(x.size()));
    for (size_t d = 0; d < x.size(); ++d) {
      bool gone = x[d] == Dim::of(1) &&
                  (axes.empty() || std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end());
      int f = gone ? kNoFactor : b.factor();
      b.rule.operandDims[0].push_back(f);
      if (!gone)
        b.rule.resultDims[0].push_back(f);
    }
    return b.rule;
  }
  if (isFusedAttentionOp(op) || op == "scaled_dot_product_attention_backward")
    return attention(n);
  if (op == "reshape" || op == "flatten")
    return regroup(n);
  if (op == "embedding") {
    // Vocab-parallel where the table's rows are split (a static count): each
    // device looks up the indices among its rows, zero elsewhere
    // (SpmdPartition), so the result is a partial sum over their axes.
    RuleBuilder b(n);
    std::vector<int> indices = freshFactors(b, n.argTypes[0]->rank());
    int vocab = b.factor(!n.argTypes[1]->shape[0].isStatic()), width = b.factor();
    b.rule.operandDims[0] = indices;
    b.rule.operandDims[1] = {vocab, width};
    b.rule.resultDims[0] = indices;
    b.rule.resultDims[0].push_back(width);
    return b.rule;
  }
  if (op == "embedding_backward") {
    // Split indices (DDP's batch): partial sums of the table's gradient;
    // split rows (vocab-parallel): each device sums the indices among its
    // rows (SpmdPartition).
    RuleBuilder b(n);
    std::vector<int> indices = freshFactors(b, n.argTypes[1]->rank());
    int vocab = b.factor(), width = b.factor();
    b.rule.operandDims[0] = indices;
    b.rule.operandDims[0].push_back(width);
    b.rule.operandDims[1] = indices;
    b.rule.resultDims[0] = {vocab, width};
    return b.rule;
  }
  if (op == "gather") {
    // Dims where the index is as large as the input share a factor; the
    // input's gathered axis has its own: split (a static size), each device
    // gathers the indices among its block and zero elsewhere, a partial sum
    // (SpmdPartition: cross-entropy's gradient picks the target's logit so).
    RuleBuilder b(n);
    b.rule.partial = "sum";
    const Shape &x = n.argTypes[0]->shape, &index = n.argTypes[1]->shape;
    int64_t axis = normalizeAxis(getInt(n.attrs, "axis"), int64_t(x.size()));
    b.rule.operandDims.assign(2, {});
    for (size_t d = 0; d < x.size(); ++d) {
      bool shared = int64_t(d) != axis && index[d] == x[d];
      int xf = shared ? b.factor() : b.factor(int64_t(d) != axis || !x[d].isStatic());
      int indexFactor = shared ? xf : b.factor();
      b.rule.operandDims[0].push_back(xf);
      b.rule.operandDims[1].push_back(indexFactor);
      b.rule.resultDims[0].push_back(indexFactor);
    }
    return b.rule;
  }
  if (op == "iota" && n.results[0].rank() == 1) {
    // Split (a static length): each device's block of the sequence.
    RuleBuilder b(n);
    b.rule.resultDims[0] = {b.factor(!n.results[0].shape[0].isStatic())};
    return b.rule;
  }
  if (op == "concat")
    return alongAxis(n, normalizeAxis(getInt(n.attrs, "axis"), n.results[0].rank()));
  if (op == "split")
    return alongAxis(n, normalizeAxis(getInt(n.attrs, "axis"), n.argTypes[0]->rank()));
  if (op == "slice")
    return sliceRule(n);
  return std::nullopt;
}

} // namespace tensorc::sharding
