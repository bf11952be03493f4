#include "compiler/transforms/Decompose.h"

#include "compiler/autodiff/GradRules.h"
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/RewriteGraph.h"
#include "compiler/trace/Tracer.h"
#include "ir/core/Error.h"
#include "ir/core/FusedAttention.h"
#include "ir/core/ShapeInference.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

namespace tensorc::transforms {

using autodiff::Centered;
using autodiff::centerAroundShift;
using autodiff::countOver;
using autodiff::dimSpec;
using trace::Operand;
using trace::Tensor;
using trace::Tracer;
using namespace trace;

namespace {

struct Context {
  Tracer &t;
  const TypedNode &node;
  std::vector<Operand> args;
  bool onlineLogSumExp = false; // see decomposeGraph
  const AttrMap &attrs() const { return node.attrs; }
  const Tensor &in(size_t i) const { return std::get<Tensor>(args.at(i)); }
  bool has(size_t i) const { return i < args.size() && std::holds_alternative<Tensor>(args[i]); }
};

using Rule = std::function<std::vector<Tensor>(const Context &)>;

double attentionScale(const Context &c, const Tensor &q) {
  check(hasAttr(c.attrs(), "scale") || q.shape().back().isStatic(),
        "the default scale needs a static embedding dim");
  return hasAttr(c.attrs(), "scale") ? getFloat(c.attrs(), "scale")
                                     : 1.0 / std::sqrt(double(q.shape().back().value()));
}

Tensor softmaxOf(const Context &c, const Tensor &x, int64_t axis);

// softmax(q k^T * scale + masks): q, k, v and the optional mask are operands
// first .. first + 3 (attention: 0; its backward: 1, after the cotangent).
// The scaled, masked scores q k^T * scale (+ mask) of attention's operands
// from `first` (q, k, v, mask).
Tensor attentionScores(const Context &c, size_t first) {
  const Tensor &q = c.in(first), &k = c.in(first + 1);
  Tensor s = matmul(q, transpose(k, -1, -2)) * attentionScale(c, q);
  if (getBool(c.attrs(), "is_causal")) {
    const Dim &L = q.shape()[q.rank() - 2], &S = k.shape()[k.rank() - 2];
    Tensor rows = reshape(iota_length(c.t, dimSpec({L})[0]), {dimSpec({L})[0], int64_t(1)});
    Tensor cols = reshape(iota_length(c.t, dimSpec({S})[0]), {int64_t(1), dimSpec({S})[0]});
    s = where(ge(rows, cols), s, -INFINITY);
  }
  if (c.has(first + 3)) {
    const Tensor &mask = c.in(first + 3);
    s = isBool(mask.dtype()) ? where(mask, s, -INFINITY) : s + mask;
  }
  return s;
}

// A row whose every score is -inf (a user mask hid every key) has no
// probability: 0, as PyTorch's SDPA (_safe_softmax). Without a user mask no
// row is fully masked (the causal mask keeps each row's first key).
Tensor fullyMaskedRows(const Tensor &s) { return eq(max(s, {-1}, true), -INFINITY); }

Tensor attentionProbabilities(const Context &c, size_t first) {
  Tensor s = attentionScores(c, first), p = softmaxOf(c, s, -1);
  return c.has(first + 3) ? where(fullyMaskedRows(s), 0.0, p) : p;
}

// Attention's dropout (operand `seedAt`, absent: none) of `x`, a tensor of
// the probabilities' shape: the dropout op over [batch..., L, S] of the
// result's batch (probabilities broadcast along v's batch dims first, so
// element indices are the interpreter's).
Tensor attentionDropout(const Context &c, size_t seedAt, const Tensor &x, const Shape &resultShape) {
  if (!c.has(seedAt))
    return x;
  Shape full(resultShape.begin(), resultShape.end() - 1);
  full.push_back(x.shape().back());
  Tensor y = x.shape() == full ? x : broadcast_to(x, dimSpec(full));
  return dropout(y, c.in(seedAt), getFloat(c.attrs(), "dropout_p"), getInt(c.attrs(), "dropout_stream"));
}

// The sizes of a conv2d gradient node: input (N, C, H, W), weight
// (O, Cg, KH, KW), output (N, O, Ho, Wo), from its operands and result.
struct ConvTaps {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups, C, H, W, O, Cg, KH, KW, Og, Ho, Wo;
  Dim N;
  explicit ConvTaps(const Context &c)
      : stride(getInts(c.attrs(), "stride")), padding(getInts(c.attrs(), "padding")),
        dilation(getInts(c.attrs(), "dilation")), groups(getInt(c.attrs(), "groups")) {
    check(!c.attrs().count("channels_last") || !getBool(c.attrs(), "channels_last"),
          c.node.node->op + ": a channels-last convolution gradient has no decomposition (cuDNN runs it)");
    const bool input = c.node.node->op == "conv2d_backward_input";
    const Shape &g = c.node.argTypes[0]->shape, &x = input ? c.node.results[0].shape : c.node.argTypes[1]->shape,
                &w = input ? c.node.argTypes[1]->shape : c.node.results[0].shape;
    N = g[0];
    C = x[1].value(), H = x[2].value(), W = x[3].value();
    O = w[0].value(), Cg = w[1].value(), KH = w[2].value(), KW = w[3].value();
    Og = O / groups, Ho = g[2].value(), Wo = g[3].value();
  }
  // g as (N, groups, Og, Ho, Wo).
  Tensor grouped(const Tensor &g) const {
    return reshape(g, dimSpec({N, Dim::of(groups), Dim::of(Og), Dim::of(Ho), Dim::of(Wo)}));
  }
};

std::vector<int64_t> trailing(int64_t from, int64_t rank) {
  std::vector<int64_t> axes(rank - from);
  std::iota(axes.begin(), axes.end(), from);
  return axes;
}

// t where finite, else 0: the shift of a log-sum-exp. Around a finite
// maximum no exp overflows; a row of -inf only then gives -inf, one holding
// +inf gives +inf and one holding nan gives nan (shifting by an infinite
// maximum would make -inf - -inf = nan of the first two).
Tensor finiteOrZero(const Tensor &t) { return where(lt(abs(t), INFINITY), t, 0.0); }

// log(sum(exp(x))) over `axes`, around the maximum (keepdim).
Tensor logSumExpOf(const Tensor &x, const std::vector<int64_t> &axes) {
  Tensor shift = finiteOrZero(max(x, axes, true));
  return shift + log(sum(exp(x - shift), axes, true));
}

// A row's log-sum-exp in the form softmax, log_softmax and cross_entropy
// share (CSE merges the forward's with the gradient's): `z` = x - shift,
// `lse` = log(sum(exp(z))), so log_softmax = z - lse and softmax =
// exp(z - lse).
struct RowLogSumExp {
  Tensor shift, z, lse;
};

// Classic (three passes over the row: max, sum of exp, then the result):
// shift = the row's max. Online (Context::onlineLogSumExp, for backends
// that keep the logsumexp op): shift = the row's max too (made 0 where it
// is not finite), the sum of exp(x - shift) by the one-pass logsumexp, and
// the lse made nan where it is +inf or -inf (the classic form's x - max is
// nan there: a row holding +inf or of -inf only is nan throughout, as in
// PyTorch). The shift must be the max: x - shift keeps x's digits only
// where the shift is near the row's largest values. (The row's first
// element, which saved the max pass, lost them where it is a masked
// position: a Hugging Face mask's finfo.min before a local attention
// window made every kept probability 1/n, GPT-Neo's output wrong.)
RowLogSumExp rowLogSumExp(const Context &c, const Tensor &x, int64_t axis) {
  axis = normalizeAxis(axis, x.rank());
  if (!c.onlineLogSumExp || !x.shape()[size_t(axis)].isStatic()) {
    Tensor m = max(x, {axis}, true);
    Tensor z = x - m;
    return {m, z, log(sum(exp(z), {axis}, true))};
  }
  Tensor shift = finiteOrZero(max(x, {axis}, true));
  Tensor z = x - shift;
  Tensor lse = logsumexp(z, {axis}, true);
  return {shift, z, lse + (lse - lse)};
}

Tensor softmaxOf(const Context &c, const Tensor &x, int64_t axis) {
  if (!c.onlineLogSumExp) {
    Tensor e = exp(x - max(x, {axis}, true));
    return e / sum(e, {axis}, true);
  }
  RowLogSumExp r = rowLogSumExp(c, x, axis);
  return exp(r.z - r.lse);
}

Tensor logSoftmaxOf(const Context &c, const Tensor &x, int64_t axis) {
  RowLogSumExp r = rowLogSumExp(c, x, axis);
  return r.z - r.lse;
}

// Collectives along an axis other than 0, as the flat collectives runtimes
// have (NCCL and MPI exchange contiguous chunks: all_gather concatenates
// along the first dim): the axis's G chunks are moved to a leading dim of
// size G first, or after.
trace::MeshAxes groupOf(const Context &c) {
  return {getEnum(c.attrs(), "mesh"), getStrings(c.attrs(), "axes")};
}
int64_t groupSize(const Context &c) {
  trace::MeshAxes over = groupOf(c);
  return DeviceGroups(findMesh(c.t.graph().meshes, over.mesh), over.axes).groupSize();
}
// x with `axis` split into (G, size / G) and the G dim moved to the front.
Tensor chunksFirst(const Tensor &x, int64_t axis, int64_t G) {
  trace::DimSpec split = dimSpec(x.shape());
  Dim part = *x.shape()[axis].dividedBy(Dim::of(G)); // shape inference checked it divides
  split[axis] = dimSpec({part})[0];
  split.insert(split.begin() + axis, G);
  std::vector<int64_t> perm{axis};
  for (int64_t d = 0; d <= x.rank(); ++d)
    if (d != axis)
      perm.push_back(d);
  return permute(reshape(x, split), perm);
}
// The inverse: a leading dim of G chunks merged into `axis` (of the rest).
Tensor chunksInto(const Tensor &y, int64_t axis) {
  std::vector<int64_t> perm;
  for (int64_t d = 1; d <= axis; ++d)
    perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = axis + 1; d < y.rank(); ++d)
    perm.push_back(d);
  Tensor moved = axis == 0 ? y : permute(y, perm);
  return flatten(moved, axis, axis + 1);
}
Tensor squeezeFirst(const Tensor &y) { return squeeze(y, {0}); }

std::vector<Tensor> flatCollective(const Context &c) {
  const std::string &op = c.node.node->op;
  const Tensor &x = c.in(0);
  auto axisOf = [&](const char *key) { return normalizeAxis(getInt(c.attrs(), key), x.rank()); };
  int64_t G = groupSize(c);
  if (op == "all_gather") {
    int64_t axis = axisOf("axis");
    if (axis == 0)
      return {all_gather(x, groupOf(c), 0)};
    return {chunksInto(all_gather(unsqueeze(x, 0), groupOf(c), 0), axis)};
  }
  if (op == "reduce_scatter" || op == "all_slice") {
    int64_t axis = axisOf("axis");
    if (axis == 0)
      return {op == "all_slice" ? all_slice(x, groupOf(c), 0)
                                : reduce_scatter(x, groupOf(c), 0, getEnum(c.attrs(), "reduction"))};
    Tensor chunks = chunksFirst(x, axis, G);
    Tensor mine = op == "all_slice" ? all_slice(chunks, groupOf(c), 0)
                                    : reduce_scatter(chunks, groupOf(c), 0, getEnum(c.attrs(), "reduction"));
    return {squeezeFirst(mine)};
  }
  // all_to_all: chunk r of the split axis to member r, received in member
  // order along the concat axis.
  int64_t split = axisOf("split_axis"), concat = axisOf("concat_axis");
  if (split == 0 && concat == 0)
    return {all_to_all(x, groupOf(c), 0, 0)};
  Tensor exchanged = all_to_all(chunksFirst(x, split, G), groupOf(c), 0, 0);
  return {chunksInto(exchanged, concat)};
}

const std::map<std::string, Rule> &rules() {
  static const std::map<std::string, Rule> r = {
      {"softmax",
       [](const Context &c) { return std::vector{softmaxOf(c, c.in(0), getInt(c.attrs(), "axis"))}; }},
      {"log_softmax",
       [](const Context &c) {
         return std::vector{logSoftmaxOf(c, c.in(0), getInt(c.attrs(), "axis"))};
       }},
      {"logsumexp",
       [](const Context &c) {
         const Tensor &x = c.in(0);
         std::vector<int64_t> axes = normalizeAxes(c.attrs(), "axes", x.rank());
         Tensor lse = logSumExpOf(x, axes);
         return std::vector{getBool(c.attrs(), "keepdim") ? lse : squeeze(lse, axes)};
       }},
      {"all_gather", flatCollective},
      {"reduce_scatter", flatCollective},
      {"all_slice", flatCollective},
      {"all_to_all", flatCollective},
      {"gelu",
       [](const Context &c) {
         const Tensor &x = c.in(0);
         if (getEnum(c.attrs(), "approximate") == "tanh") {
           Tensor inner = (x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI);
           return std::vector{x * 0.5 * add(1.0, tanh(inner))};
         }
         return std::vector{x * 0.5 * add(1.0, erf(x * (1.0 / std::sqrt(2.0))))};
       }},
      {"silu", [](const Context &c) { return std::vector{c.in(0) * sigmoid(c.in(0))}; }},
      {"var",
       [](const Context &c) {
         const Tensor &x = c.in(0);
         std::vector<int64_t> axes = normalizeAxes(c.attrs(), "axes", x.rank());
         bool keepdim = getBool(c.attrs(), "keepdim");
         Tensor centered = centerAroundShift(x, axes).centered;
         Tensor ss = sum(centered * centered, axes, keepdim);
         Operand n = countOver(c.t, x, axes);
         // max(0, N - correction), as PyTorch: an empty or too small set is
         // 0/0 = nan (N - correction < 0 would give -0).
         double correction = double(getInt(c.attrs(), "correction"));
         Operand denom = std::holds_alternative<double>(n)
                             ? Operand(std::max(0.0, std::get<double>(n) - correction))
                             : Operand(maximum(sub(n, correction), 0.0));
         return std::vector{div(ss, denom)};
       }},
      {"layer_norm",
       [](const Context &c) {
         const Tensor &x = c.in(0);
         std::vector<int64_t> axes =
             trailing(normalizeAxis(getInt(c.attrs(), "axis"), x.rank()), x.rank());
         Tensor centered = centerAroundShift(x, axes).centered;
         Tensor y = centered *
                    rsqrt(add(mean(centered * centered, axes, true), getFloat(c.attrs(), "eps")));
         if (c.has(1))
           y = y * c.in(1);
         if (c.has(2))
           y = y + c.in(2);
         return std::vector{y};
       }},
      {"rms_norm",
       [](const Context &c) {
         const Tensor &x = c.in(0);
         std::vector<int64_t> axes =
             trailing(normalizeAxis(getInt(c.attrs(), "axis"), x.rank()), x.rank());
         double eps =
             hasAttr(c.attrs(), "eps") ? getFloat(c.attrs(), "eps") : dtypeEpsilon(x.dtype());
         Tensor y = x * rsqrt(add(mean(x * x, axes, true), eps));
         return std::vector{c.has(1) ? y * c.in(1) : y};
       }},
      {"batch_norm",
       [](const Context &c) {
         const Tensor &x = c.in(0), &rm = c.in(1), &rv = c.in(2);
         trace::DimSpec view(x.rank(), int64_t(1));
         view[1] = dimSpec({x.shape()[1]})[0];
         std::vector<int64_t> axes{0};
         for (int64_t a = 2; a < x.rank(); ++a)
           axes.push_back(a);
         double eps = getFloat(c.attrs(), "eps"), momentum = getFloat(c.attrs(), "momentum");
         Tensor mean = reshape(rm, view), var = reshape(rv, view);
         Tensor newMean = rm, newVar = rv;
         std::optional<Tensor> batchCentered;
         if (getBool(c.attrs(), "training")) {
           Centered stats = centerAroundShift(x, axes);
           mean = stats.mean();
           Tensor centered = stats.centered;
           batchCentered = centered;
           Tensor ss = sum(centered * centered, axes, true);
           Operand n = countOver(c.t, x, axes);
           var = div(ss, n);
           Operand n1 = std::holds_alternative<double>(n) ? Operand(std::get<double>(n) - 1.0)
                                                          : Operand(sub(n, 1.0));
           Tensor unbiased = reshape(div(ss, n1), dimSpec(rm.shape()));
           newMean = rm * (1 - momentum) + reshape(mean, dimSpec(rm.shape())) * momentum;
           newVar = rv * (1 - momentum) + unbiased * momentum;
         }
         Tensor y = (batchCentered ? *batchCentered : x - mean) * rsqrt(add(var, eps));
         if (c.has(3))
           y = y * reshape(c.in(3), view);
         if (c.has(4))
           y = y + reshape(c.in(4), view);
         return std::vector{y, newMean, newVar};
       }},
      {"cross_entropy",
       [](const Context &c) {
         const Tensor &logits = c.in(0), &target = c.in(1);
         int64_t classAxis = logits.rank() >= 2 ? 1 : 0;
         // -log p[target] = lse - z[target] with z = x - shift: the
         // target's logit is gathered (one element per row; a one-hot
         // product would be one more pass over every row), the row statistics
         // are log_softmax's (CSE shares them with the gradient's softmax).
         RowLogSumExp r = rowLogSumExp(c, logits, classAxis);
         // Indices out of range (ignore_index) are clamped by gather's
         // lowering; their rows are masked out below. z[target] is gathered
         // from the stored logits, not from z (which stays in registers).
         Tensor picked = gather(logits, unsqueeze(target, classAxis), classAxis);
         Tensor nll = squeeze(r.lse - (picked - r.shift), {classAxis});
         double s = getFloat(c.attrs(), "label_smoothing");
         Tensor loss = nll;
         if (s != 0.0) {
           Operand n = countOver(c.t, logits, {classAxis});
           Tensor smooth = -sum(r.z - r.lse, {classAxis});
           loss = nll * (1 - s) + (std::holds_alternative<double>(n)
                                       ? smooth * (s / std::get<double>(n))
                                       : smooth * s / n);
         }
         Tensor valid = cast(ne(target, getInt(c.attrs(), "ignore_index")), logits.dtype());
         loss = loss * valid;
         const std::string &reduction = getEnum(c.attrs(), "reduction");
         if (reduction == "none")
           return std::vector{loss};
         if (reduction == "sum")
           return std::vector{sum(loss)};
         return std::vector{sum(loss) / sum(valid)};
       }},
      {"scaled_dot_product_attention",
       [](const Context &c) {
         if (hasAttr(c.attrs(), "out_dtype")) { // f32 on the exactly converted 16-bit operands
           Context wide = c;
           DType to = getDType(c.attrs(), "out_dtype");
           for (size_t i = 0; i < 4; ++i)
             if (c.has(i) && !isBool(c.in(i).dtype()))
               wide.args[i] = cast(c.in(i), to);
           Tensor p = attentionDropout(wide, 4, attentionProbabilities(wide, 0), c.node.results[0].shape);
           return std::vector{matmul(p, wide.in(2))};
         }
         Tensor p = attentionDropout(c, 4, attentionProbabilities(c, 0), c.node.results[0].shape);
         return std::vector{matmul(p, c.in(2))};
       }},
      // The log-sum-exp from the same scores (CSE shares their product).
      {"scaled_dot_product_attention_with_lse",
       [](const Context &narrow) {
         Context c = narrow;
         if (hasAttr(narrow.attrs(), "out_dtype")) // f32 on the exactly converted 16-bit operands
           for (size_t i = 0; i < 4; ++i)
             if (narrow.has(i) && !isBool(narrow.in(i).dtype()))
               c.args[i] = cast(narrow.in(i), getDType(narrow.attrs(), "out_dtype"));
         DType wide = c.node.results[1].dtype;
         Tensor s = attentionScores(c, 0);
         Tensor lse = squeeze(logSumExpOf(s.dtype() == wide ? s : cast(s, wide), {-1}), {-1});
         if (c.has(3)) // a fully masked row's log-sum-exp is +inf, as the kernels'
           lse = where(squeeze(fullyMaskedRows(s), {-1}), INFINITY, lse);
         Tensor p = attentionDropout(c, 4, attentionProbabilities(c, 0), c.node.results[0].shape);
         return std::vector{matmul(p, c.in(2)), lse};
       }},
      // A bias apart, as an add after the convolution (a convolution
      // library's forward without it; the add fuses with what follows).
      {"conv2d",
       [](const Context &c) {
         // The attributes as they are (channels_last too): x, w and no bias.
         Tensor y = c.in(0).tracer()->call("conv2d", {c.in(0), c.in(1)}, c.attrs())[0];
         if (!c.has(2))
           return std::vector{y};
         // Channels-last output (N, Ho, Wo, O): the bias broadcasts along the last dim.
         if (c.attrs().count("channels_last") && getBool(c.attrs(), "channels_last"))
           return std::vector{y + c.in(2)};
         return std::vector{y + reshape(c.in(2), {c.in(2).shape()[0].value(), 1, 1})};
       }},
      // conv2d's gradients as one GEMM per kernel tap (the old autodiff
      // rule): dx sums each tap's g @ w_tap placed back into the padded
      // input; dw stacks each tap's g^T @ x_tap.
      {"conv2d_backward_input",
       [](const Context &c) {
         const Tensor &g = c.in(0), &w = c.in(1);
         ConvTaps k(c);
         std::optional<Tensor> dx;
         for (int64_t ki = 0; ki < k.KH; ++ki)
           for (int64_t kj = 0; kj < k.KW; ++kj) {
             // w[:, :, ki, kj] as (groups, Og, Cg); dtap[n, grp, c, i, j] = sum_o g[n, grp, o, i, j] * w_tap[grp, o, c]
             Tensor wTap = reshape(slice(w, {2, 3}, {ki, kj}, {ki + 1, kj + 1}), {k.groups, k.Og, k.Cg});
             Tensor gm = reshape(permute(k.grouped(g), {1, 0, 3, 4, 2}),
                                 dimSpec({Dim::of(k.groups), k.N * Dim::of(k.Ho * k.Wo), Dim::of(k.Og)}));
             Tensor tap = matmul(gm, wTap); // (groups, N*Ho*Wo, Cg)
             tap = permute(reshape(tap, dimSpec({Dim::of(k.groups), k.N, Dim::of(k.Ho), Dim::of(k.Wo),
                                                 Dim::of(k.Cg)})),
                           {1, 0, 4, 2, 3});
             tap = reshape(tap, dimSpec({k.N, Dim::of(k.C), Dim::of(k.Ho), Dim::of(k.Wo)}));
             Tensor placed = autodiff::untap(tap, ki, kj, k.stride, k.dilation, k.H + 2 * k.padding[0],
                                             k.W + 2 * k.padding[1]);
             dx = dx ? *dx + placed : placed;
           }
         return std::vector{autodiff::unpad2d(*dx, k.padding)};
       }},
      {"conv2d_backward_weight",
       [](const Context &c) {
         const Tensor &g = c.in(0), &x = c.in(1);
         ConvTaps k(c);
         Tensor padded = pad(x, {k.padding[1], k.padding[1], k.padding[0], k.padding[0]});
         std::vector<Tensor> taps;
         for (int64_t ki = 0; ki < k.KH; ++ki)
           for (int64_t kj = 0; kj < k.KW; ++kj) {
             // dw[grp*Og + o, c, ki, kj] = sum_{n,i,j} g[n, grp, o, i, j] * x_tap[n, grp, c, i, j]
             Tensor xt = autodiff::tapSlice(padded, ki, kj, k.stride, k.dilation, k.Ho, k.Wo);
             xt = reshape(xt, dimSpec({k.N, Dim::of(k.groups), Dim::of(k.Cg), Dim::of(k.Ho), Dim::of(k.Wo)}));
             Tensor xm = reshape(permute(xt, {1, 0, 3, 4, 2}),
                                 dimSpec({Dim::of(k.groups), k.N * Dim::of(k.Ho * k.Wo), Dim::of(k.Cg)}));
             Tensor gm = reshape(permute(k.grouped(g), {1, 2, 0, 3, 4}),
                                 dimSpec({Dim::of(k.groups), Dim::of(k.Og), k.N * Dim::of(k.Ho * k.Wo)}));
             taps.push_back(reshape(matmul(gm, xm), {k.O, k.Cg, 1})); // (groups*Og, Cg, 1)
           }
         return std::vector{reshape(taps.size() == 1 ? taps[0] : concat(taps, 2), {k.O, k.Cg, k.KH, k.KW})};
       }},
      // The gradients recompute the probabilities (as the interpreter and
      // FlashAttention do) and sum over batch dims an operand was broadcast
      // along. With dropout, its mask is drawn again (the same seed and
      // stream): dv = dropout(P)^T g, dP = dropout(g v^T).
      {"scaled_dot_product_attention_backward",
       [](const Context &narrow) {
         // out_dtype: the f32 gradients of the f32 attention of the exactly
         // converted 16-bit operands (and cotangent).
         Context c = narrow;
         if (hasAttr(narrow.attrs(), "out_dtype")) {
           DType to = getDType(narrow.attrs(), "out_dtype");
           for (size_t i = 0; i < 5; ++i)
             if (narrow.has(i) && !isBool(narrow.in(i).dtype()) && narrow.in(i).dtype() != to)
               c.args[i] = cast(narrow.in(i), to);
         }
         const Tensor &g = c.in(0), &q = c.in(1), &k = c.in(2), &v = c.in(3);
         Tensor p = attentionProbabilities(c, 1);
         Tensor dv = matmul(transpose(attentionDropout(c, 7, p, g.shape()), -1, -2), g);
         Tensor dp = attentionDropout(c, 7, matmul(g, transpose(v, -1, -2)), g.shape());
         Tensor ds = p * (dp - sum(dp * p, {-1}, true)) * attentionScale(c, q);
         Tensor dq = matmul(ds, k), dk = matmul(transpose(ds, -1, -2), q);
         return std::vector{autodiff::reduceToShape(dq, q.shape()),
                            autodiff::reduceToShape(dk, k.shape()),
                            autodiff::reduceToShape(dv, v.shape())};
       }},
  };
  return r;
}

} // namespace

const std::set<std::string> &decomposableOps() {
  static const std::set<std::string> ops = [] {
    std::set<std::string> s;
    for (const auto &[name, rule] : rules())
      s.insert(name);
    return s;
  }();
  return ops;
}

Graph decomposeGraph(const Graph &graph, const std::set<std::string> &requested,
                     bool keepFusedAttention) {
  const std::set<std::string> &ops = requested.empty() ? decomposableOps() : requested;
  for (const std::string &op : ops)
    check(decomposableOps().count(op), "decompose: op '" + op + "' has no decomposition");
  return rewriteGraph(
      graph, "decompose",
      [&](Tracer &t, const TypedNode &n,
          const std::vector<Operand> &args) -> std::optional<std::vector<Tensor>> {
        bool fusedAttention =
            keepFusedAttention &&
            isFusedAttentionOp(n.node->op) &&
            fusedAttentionRefusal(n.argTypes, n.node->op == "scaled_dot_product_attention_backward")
                .empty();
        if (!ops.count(n.node->op) || fusedAttention)
          return std::nullopt;
        // A backend that keeps logsumexp gets the online row statistics.
        return rules().at(n.node->op)(Context{t, n, args, !ops.count("logsumexp")});
      });
}

} // namespace tensorc::transforms
