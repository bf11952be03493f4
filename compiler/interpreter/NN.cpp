// Neural-network ops, each written out from its definition in docs/ops.md.
#include "compiler/interpreter/Interpreter.h"
#include "compiler/interpreter/Kernels.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <cmath>
#include <optional>
#include <limits>

namespace tensorc::interp {
namespace {

// A tensor viewed as (outer, n, inner) around `axis`.
struct AxisView {
  int64_t outer, n, inner;
  AxisView(const std::vector<int64_t> &shape, int64_t axis)
      : outer(product(shape, 0, axis)), n(shape[axis]),
        inner(product(shape, axis + 1, shape.size())) {}
  int64_t at(int64_t o, int64_t k, int64_t i) const { return (o * n + k) * inner + i; }
};

std::vector<HostTensor> softmax(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  bool log = c.node.node->op == "log_softmax";
  AxisView v(x.shape(), normalizeAxis(getInt(c.attrs(), "axis"), x.rank()));
  HostTensor out = c.result();
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double m = -INFINITY;
      for (int64_t k = 0; k < v.n; ++k)
        m = std::max(m, x.getF(v.at(o, k, i)));
      double sum = 0;
      for (int64_t k = 0; k < v.n; ++k)
        sum += std::exp(x.getF(v.at(o, k, i)) - m);
      for (int64_t k = 0; k < v.n; ++k) {
        double z = x.getF(v.at(o, k, i)) - m;
        out.setF(v.at(o, k, i), log ? z - std::log(sum) : std::exp(z) / sum);
      }
    }
  return {std::move(out)};
}

// layer_norm and rms_norm: normalize each row of (outer, n) where n spans the
// trailing axes from `axis`.
std::vector<HostTensor> norm(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  bool rms = c.node.node->op == "rms_norm";
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  int64_t n = product(x.shape(), axis, x.shape().size());
  int64_t outer = n == 0 ? 0 : x.numel() / n;
  double eps = hasAttr(c.attrs(), "eps") ? getFloat(c.attrs(), "eps") : dtypeEpsilon(x.dtype());
  HostTensor out = c.result();
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += x.getF(o * n + j);
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j) {
      double v = x.getF(o * n + j);
      var += rms ? v * v : (v - mean) * (v - mean);
    }
    var /= double(n);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) {
      double y = ((rms ? x.getF(o * n + j) : x.getF(o * n + j) - mean)) * inv;
      if (c.has(1))
        y *= c.arg(1).getF(j);
      if (!rms && c.has(2))
        y += c.arg(2).getF(j);
      out.setF(o * n + j, y);
    }
  }
  return {std::move(out)};
}

std::vector<HostTensor> crossEntropy(const OpCall &c) {
  const HostTensor &logits = c.arg(0), &target = c.arg(1);
  const std::string &reduction = getEnum(c.attrs(), "reduction");
  int64_t ignore = getInt(c.attrs(), "ignore_index");
  double smoothing = getFloat(c.attrs(), "label_smoothing");
  // logits (N, C, rest...) -> (N, C, inner); (C) -> (1, C, 1).
  int64_t classAxis = logits.rank() >= 2 ? 1 : 0;
  AxisView v(logits.shape(), classAxis);
  int64_t C = v.n;
  HostTensor losses(logits.dtype(), {v.outer * v.inner});
  double total = 0;
  int64_t counted = 0;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t t = o * v.inner + i;
      int64_t y = target.getI(t);
      if (y == ignore) {
        losses.setF(t, 0.0);
        continue;
      }
      check(y >= 0 && y < C, "target " + std::to_string(y) + " is outside the classes [0, " +
                                 std::to_string(C) + ")");
      double m = -INFINITY;
      for (int64_t k = 0; k < C; ++k)
        m = std::max(m, logits.getF(v.at(o, k, i)));
      double sum = 0;
      for (int64_t k = 0; k < C; ++k)
        sum += std::exp(logits.getF(v.at(o, k, i)) - m);
      double logZ = m + std::log(sum);
      double nll = logZ - logits.getF(v.at(o, y, i));
      double smooth = 0;
      for (int64_t k = 0; k < C; ++k)
        smooth += logZ - logits.getF(v.at(o, k, i));
      double loss = (1 - smoothing) * nll + smoothing / double(C) * smooth;
      losses.setF(t, loss);
      total += loss;
      ++counted;
    }
  HostTensor out = c.result();
  if (reduction == "none") {
    for (int64_t t = 0; t < losses.numel(); ++t)
      out.setF(t, losses.getF(t));
  } else {
    out.setF(0, reduction == "sum" ? total : total / double(counted));
  }
  return {std::move(out)};
}

std::vector<HostTensor> embedding(const OpCall &c) {
  const HostTensor &idx = c.arg(0), &w = c.arg(1);
  int64_t V = w.shape()[0], D = w.shape()[1];
  HostTensor out = c.result();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t row = idx.getI(i);
    check(row >= 0 && row < V, "index " + std::to_string(row) +
                                   " is outside the table's rows [0, " + std::to_string(V) + ")");
    for (int64_t d = 0; d < D; ++d)
      out.setF(i * D + d, w.getF(row * D + d));
  }
  return {std::move(out)};
}

// Sums in f64 (the oracle), rounded once to the result's dtype.
std::vector<HostTensor> embeddingBackward(const OpCall &c) {
  const HostTensor &g = c.arg(0), &idx = c.arg(1);
  int64_t V = getInt(c.attrs(), "num_weights"), D = g.shape().back();
  int64_t padding = hasAttr(c.attrs(), "padding_idx") ? getInt(c.attrs(), "padding_idx") : -1;
  std::vector<double> sums(size_t(V * D), 0.0);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t row = idx.getI(i);
    check(row >= 0 && row < V, "index " + std::to_string(row) + " is outside the table's rows [0, " +
                                   std::to_string(V) + ")");
    if (row == padding)
      continue;
    for (int64_t d = 0; d < D; ++d)
      sums[size_t(row * D + d)] += g.getF(i * D + d);
  }
  HostTensor out = c.result();
  for (int64_t i = 0; i < V * D; ++i)
    out.setF(i, sums[size_t(i)]);
  return {std::move(out)};
}

std::vector<HostTensor> dropout(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  uint64_t seed = uint64_t(c.arg(1).getI(0));
  double p = getFloat(c.attrs(), "p");
  uint32_t stream = uint32_t(getInt(c.attrs(), "stream"));
  HostTensor out = c.result();
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::array<uint32_t, 4> r = philox4x32({uint32_t(i), uint32_t(uint64_t(i) >> 32), stream, 0},
                                           {uint32_t(seed), uint32_t(seed >> 32)});
    double u = double(r[0] >> 8) * (1.0 / 16777216.0);
    out.setF(i, p < 1 && u >= p ? x.getF(i) / (1 - p) : 0.0);
  }
  return {std::move(out)};
}

std::vector<HostTensor> batchNorm(const OpCall &c) {
  const HostTensor &x = c.arg(0), &rm = c.arg(1), &rv = c.arg(2);
  bool training = getBool(c.attrs(), "training");
  double momentum = getFloat(c.attrs(), "momentum"), eps = getFloat(c.attrs(), "eps");
  AxisView v(x.shape(), 1);
  int64_t C = v.n, count = v.outer * v.inner;
  HostTensor y = c.result(0), newMean = c.result(1), newVar = c.result(2);
  for (int64_t ch = 0; ch < C; ++ch) {
    double mean = rm.getF(ch), var = rv.getF(ch);
    if (training) {
      check(count > 1, "training needs more than one value per channel");
      double sum = 0, sq = 0;
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t i = 0; i < v.inner; ++i)
          sum += x.getF(v.at(o, ch, i));
      mean = sum / double(count);
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t i = 0; i < v.inner; ++i) {
          double d = x.getF(v.at(o, ch, i)) - mean;
          sq += d * d;
        }
      var = sq / double(count);
      newMean.setF(ch, (1 - momentum) * rm.getF(ch) + momentum * mean);
      newVar.setF(ch, (1 - momentum) * rv.getF(ch) + momentum * sq / double(count - 1));
    } else {
      newMean.setF(ch, mean);
      newVar.setF(ch, var);
    }
    double inv = 1.0 / std::sqrt(var + eps);
    double scale = c.has(3) ? c.arg(3).getF(ch) : 1.0, shift = c.has(4) ? c.arg(4).getF(ch) : 0.0;
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i)
        y.setF(v.at(o, ch, i), (x.getF(v.at(o, ch, i)) - mean) * inv * scale + shift);
  }
  return {std::move(y), std::move(newMean), std::move(newVar)};
}

// Attention's operands and the probabilities of one row, shared by the
// forward and the backward: P[i, :] = softmax(q[i] . k[j] * scale + mask)
// (masked: -inf; a fully masked row is 0 with log-sum-exp +inf, as PyTorch's
// SDPA since 2.5 and the CUDA kernels).
struct Attention {
  const HostTensor &q, &k, &v;
  const HostTensor *mask;
  int64_t L, E, S, Ev;
  double scale;
  bool causal;
  std::vector<int64_t> batch; // the broadcast batch dims
  // Dropout on the probabilities (the dropout op's, element by element of
  // P's [batch..., L, S]); p = 0: none.
  double dropoutP = 0;
  uint64_t seed = 0;
  uint32_t stream = 0;

  // `first`: query's operand index; `seedAt`: the seed's.
  Attention(const OpCall &c, size_t first, size_t seedAt, const std::vector<int64_t> &resultShape)
      : q(c.arg(first)), k(c.arg(first + 1)), v(c.arg(first + 2)),
        mask(c.has(first + 3) ? &c.arg(first + 3) : nullptr), L(q.shape()[q.rank() - 2]),
        E(q.shape().back()), S(k.shape()[k.rank() - 2]), Ev(v.shape().back()),
        scale(hasAttr(c.attrs(), "scale") ? getFloat(c.attrs(), "scale")
                                          : 1.0 / std::sqrt(double(E))),
        causal(getBool(c.attrs(), "is_causal")), batch(resultShape.begin(), resultShape.end() - 2) {
    if (c.has(seedAt)) {
      dropoutP = getFloat(c.attrs(), "dropout_p");
      seed = uint64_t(c.arg(seedAt).getI(0));
      stream = uint32_t(getInt(c.attrs(), "dropout_stream"));
    }
  }

  // What dropout multiplies probability (b, i, j) by: 0 or 1 / (1 - p), the
  // dropout op's draw for element (b * L + i) * S + j.
  double dropoutFactor(int64_t b, int64_t i, int64_t j) const {
    if (dropoutP == 0)
      return 1.0;
    uint64_t at = uint64_t((b * L + i) * S + j);
    std::array<uint32_t, 4> r =
        philox4x32({uint32_t(at), uint32_t(at >> 32), stream, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
    double u = double(r[0] >> 8) * (1.0 / 16777216.0);
    return u >= dropoutP ? 1.0 / (1 - dropoutP) : 0.0;
  }

  static std::vector<int64_t> batchOf(const std::vector<int64_t> &s) {
    return {s.begin(), s.end() - 2};
  }
  // Element offsets of batch `coords` in q, k and v.
  int64_t qBase(const std::vector<int64_t> &coords) const {
    return broadcastOffset(coords, batchOf(q.shape())) * L * E;
  }
  int64_t kBase(const std::vector<int64_t> &coords) const {
    return broadcastOffset(coords, batchOf(k.shape())) * S * E;
  }
  int64_t vBase(const std::vector<int64_t> &coords) const {
    return broadcastOffset(coords, batchOf(v.shape())) * S * Ev;
  }

  // Row i's probabilities; `lse`, if given, gets the row's log-sum-exp.
  void probabilities(const std::vector<int64_t> &coords, int64_t i, std::vector<double> &p,
                     double *lse = nullptr) const {
    int64_t qb = qBase(coords), kb = kBase(coords);
    double m = -INFINITY;
    bool nan = false; // a nan score makes the row nan (softmax's)
    for (int64_t j = 0; j < S; ++j) {
      double s = 0;
      for (int64_t e = 0; e < E; ++e)
        s += q.getF(qb + i * E + e) * k.getF(kb + j * E + e);
      s *= scale;
      if (causal && j > i)
        s = -INFINITY;
      if (mask) {
        std::vector<int64_t> mc = coords;
        mc.push_back(i);
        mc.push_back(j);
        int64_t mi = broadcastOffset(mc, mask->shape());
        s = isBool(mask->dtype()) ? (mask->getI(mi) ? s : -INFINITY) : s + mask->getF(mi);
      }
      p[j] = s;
      m = std::max(m, s);
      nan = nan || std::isnan(s);
    }
    if (m == -INFINITY && !nan) { // every key masked (or no key): no probability anywhere
      std::fill(p.begin(), p.begin() + S, 0.0);
      if (lse)
        *lse = INFINITY;
      return;
    }
    double sum = 0;
    for (int64_t j = 0; j < S; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    for (int64_t j = 0; j < S; ++j)
      p[j] /= sum;
    if (lse)
      *lse = m + std::log(sum);
  }
};

// scaled_dot_product_attention, and with_lse's log-sum-exp as result 1.
std::vector<HostTensor> attention(const OpCall &c) {
  Attention a(c, 0, 4, c.resultShapes[0]);
  HostTensor out = c.result();
  std::optional<HostTensor> lse;
  if (c.resultShapes.size() > 1)
    lse = c.result(1);
  int64_t batches = product(a.batch, 0, a.batch.size());
  std::vector<double> p(a.S);
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> coords = unravel(b, a.batch);
    int64_t vb = a.vBase(coords);
    for (int64_t i = 0; i < a.L; ++i) {
      double rowLse = 0;
      a.probabilities(coords, i, p, &rowLse);
      if (lse)
        lse->setF(b * a.L + i, rowLse);
      for (int64_t j = 0; j < a.S; ++j)
        p[j] *= a.dropoutFactor(b, i, j);
      for (int64_t e = 0; e < a.Ev; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < a.S; ++j)
          acc += p[j] * a.v.getF(vb + j * a.Ev + e);
        out.setF((b * a.L + i) * a.Ev + e, acc);
      }
    }
  }
  if (lse)
    return {std::move(out), std::move(*lse)};
  return {std::move(out)};
}

// The gradients of attention, recomputing the probabilities row by row; the
// gradients of broadcast operands add up over the batch dims they were
// broadcast along.
std::vector<HostTensor> attentionBackward(const OpCall &c) {
  const HostTensor &g = c.arg(0);
  Attention a(c, 1, 7, g.shape());
  int64_t batches = product(a.batch, 0, a.batch.size());
  std::vector<double> dq(a.q.numel(), 0.0), dk(a.k.numel(), 0.0), dv(a.v.numel(), 0.0), p(a.S),
      dp(a.S);
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> coords = unravel(b, a.batch);
    int64_t qb = a.qBase(coords), kb = a.kBase(coords), vb = a.vBase(coords), gb = b * a.L * a.Ev;
    for (int64_t i = 0; i < a.L; ++i) {
      a.probabilities(coords, i, p);
      // With dropout: D = dropout(P) feeds the product, so dv = D^T g and
      // dP = dropout(g v^T) (the same factors).
      double rowsum = 0;
      for (int64_t j = 0; j < a.S; ++j) {
        double factor = a.dropoutFactor(b, i, j), d = 0;
        for (int64_t e = 0; e < a.Ev; ++e) {
          double ge = g.getF(gb + i * a.Ev + e);
          dv[vb + j * a.Ev + e] += p[j] * factor * ge;
          d += ge * a.v.getF(vb + j * a.Ev + e);
        }
        dp[j] = d * factor;
        rowsum += dp[j] * p[j];
      }
      for (int64_t j = 0; j < a.S; ++j) {
        double ds = p[j] * (dp[j] - rowsum) * a.scale;
        for (int64_t e = 0; e < a.E; ++e) {
          dq[qb + i * a.E + e] += ds * a.k.getF(kb + j * a.E + e);
          dk[kb + j * a.E + e] += ds * a.q.getF(qb + i * a.E + e);
        }
      }
    }
  }
  std::vector<HostTensor> out;
  for (auto [i, values] : {std::pair{0, &dq}, std::pair{1, &dk}, std::pair{2, &dv}}) {
    HostTensor r = c.result(i);
    for (int64_t k = 0; k < r.numel(); ++k)
      r.setF(k, (*values)[k]);
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace

void addNNKernels(KernelTable &t) {
  t["scaled_dot_product_attention_backward"] = attentionBackward;
  t["softmax"] = t["log_softmax"] = softmax;
  t["layer_norm"] = t["rms_norm"] = norm;
  t["cross_entropy"] = crossEntropy;
  t["embedding"] = embedding;
  t["embedding_backward"] = embeddingBackward;
  t["dropout"] = dropout;
  t["batch_norm"] = batchNorm;
  t["scaled_dot_product_attention"] = t["scaled_dot_product_attention_with_lse"] = attention;
}

} // namespace tensorc::interp
