#include "runtime/cuda/CudnnAttention.h"

#include "ir/core/Error.h"

#include <limits>

namespace tensorc::cuda {

using namespace cudnn;

namespace {

// Tensor uids of the graphs' memory operands.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv, kSoftmaxSum, kDqAccum, kBias };

// The f32 dQ accumulator follows the plan's own workspace at this alignment.
constexpr size_t kAlign = 256;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Top-left causal mask: scores of key columns after the query row become
// -inf (cudnn-frontend's diagonal band mask before cuDNN 9.21: generated
// row and column indices, a comparison, a select).
Tensor causalMask(Graph &g, const Tensor &scores) {
  Tensor row = g.pointwise(kGenIndex, scores, nullptr, nullptr, nullptr, kInt32, kFloat, 2);
  Tensor col = g.pointwise(kGenIndex, scores, nullptr, nullptr, nullptr, kInt32, kFloat, 3);
  Tensor keep = g.pointwise(kCmpGe, row, &col, nullptr, nullptr, kBoolean, kBoolean);
  Tensor minusInf = g.scalar(-std::numeric_limits<float>::infinity());
  return g.pointwise(kBinarySelect, scores, &minusInf, &keep);
}

// The scaled scores plus the additive mask, where there is one (cudnn-frontend's
// SDPA bias: a pointwise add of a tensor that broadcasts over [b, h, L, S]).
Tensor withBias(Graph &g, const CudnnAttentionShape &s, const Tensor &x) {
  if (!s.bias)
    return x;
  Tensor bias = g.tensor(s.dtype, {s.biasDims.begin(), s.biasDims.end()}, {s.biasStrides.begin(), s.biasStrides.end()},
                         kBias);
  return g.pointwise(kAdd, x, &bias);
}

struct Layout {
  std::vector<int64_t> q, k, kT, row; // strides: [b,h,L,D], [b,h,S,D], K^T as [b,h,D,S], [b,h,L,1]
  explicit Layout(const CudnnAttentionShape &s)
      : q{s.h * s.L * s.D, s.L * s.D, s.D, 1}, k{s.h * s.S * s.D, s.S * s.D, s.D, 1},
        kT{s.h * s.S * s.D, s.S * s.D, 1, s.D}, row{s.h * s.L, s.L, 1, 1} {}
};

void describeForward(Graph &g, const CudnnAttentionShape &s) {
  const int64_t b = s.b, h = s.h, L = s.L, S = s.S, D = s.D;
  const Layout l(s);
  Tensor q = g.tensor(s.dtype, {b, h, L, D}, l.q, kQ);
  Tensor kT = g.tensor(s.dtype, {b, h, D, S}, l.kT, kK);
  Tensor v = g.tensor(s.dtype, {b, h, S, D}, l.k, kV);
  Tensor o = g.tensor(s.dtype, {b, h, L, D}, l.q, kO);
  Tensor scores = g.virtualTensor(kFloat, {b, h, L, S});
  g.matmul(q, kT, scores);
  Tensor scale = g.scalar(s.scale);
  Tensor x = withBias(g, s, g.pointwise(kMul, scores, &scale));
  if (s.causal)
    x = causalMask(g, x);
  // Softmax as cuDNN's fusion engines expect it: max, exp(x - max), sum,
  // statistics = max + log(sum), probabilities in the I/O type.
  Tensor max = g.virtualTensor(kFloat, {b, h, L, 1}, l.row);
  g.reduction(kReduceMax, x, max);
  Tensor e = g.pointwise(kExp, g.pointwise(kSub, x, &max));
  Tensor sum = g.virtualTensor(kFloat, {b, h, L, 1}, l.row);
  g.reduction(kReduceAdd, e, sum);
  // The statistics always: cuDNN 9.19 declined every forward without them
  // (an H100); a forward whose caller keeps none writes them to workspace.
  Tensor logSum = g.pointwise(kLog, sum);
  Tensor stats = g.tensor(kFloat, {b, h, L, 1}, l.row, kStats);
  g.pointwise(kAdd, max, &logSum, nullptr, &stats);
  Tensor p = g.pointwise(kDiv, e, &sum, nullptr, nullptr, s.dtype);
  g.matmul(p, v, o);
}

void describeBackward(Graph &g, const CudnnAttentionShape &s) {
  const int64_t b = s.b, h = s.h, L = s.L, S = s.S, D = s.D;
  const Layout l(s);
  Tensor q = g.tensor(s.dtype, {b, h, L, D}, l.q, kQ);
  Tensor kT = g.tensor(s.dtype, {b, h, D, S}, l.kT, kK);
  Tensor vT = g.tensor(s.dtype, {b, h, D, S}, l.kT, kV);
  Tensor o = g.tensor(s.dtype, {b, h, L, D}, l.q, kO);
  Tensor dout = g.tensor(s.dtype, {b, h, L, D}, l.q, kDout);
  Tensor stats = g.tensor(kFloat, {b, h, L, 1}, l.row, kStats);
  Tensor dq = g.tensor(s.dtype, {b, h, L, D}, l.q, kDq);
  Tensor dk = g.tensor(s.dtype, {b, h, S, D}, l.k, kDk);
  Tensor dv = g.tensor(s.dtype, {b, h, S, D}, l.k, kDv);
  Tensor one = g.scalar(1.0f), scale = g.scalar(s.scale);
  // delta = rowsum(dO * O), written to memory (cuDNN reads it back).
  Tensor prod = g.virtualTensor(kFloat, {b, h, L, D}, {h * L * D, L * D, h * D, 1});
  g.pointwise(kMul, dout, &o, nullptr, &prod);
  Tensor rowSum = g.virtualTensor(kFloat, {b, h, L, 1}, l.row);
  g.reduction(kReduceAdd, prod, rowSum);
  Tensor delta = g.tensor(kFloat, {b, h, L, 1}, l.row, kSoftmaxSum);
  g.pointwise(kMul, rowSum, &one, nullptr, &delta);
  // P = exp(scale * Q K^T - stats), masked; dV = P^T dO.
  Tensor scores = g.virtualTensor(kFloat, {b, h, L, S});
  g.matmul(q, kT, scores);
  Tensor x = g.pointwise(kSub, withBias(g, s, g.pointwise(kMul, scores, &scale)), &stats);
  if (s.causal)
    x = causalMask(g, x);
  Tensor p = g.pointwise(kExp, x);
  Tensor pT = g.virtualTensor(s.dtype, {b, h, S, L}, {h * L * S, L * S, 1, S});
  g.reshape(p, pT);
  g.matmul(pT, dout, dv);
  // dS = P * (dO V^T - delta) * scale; dK = dS^T Q; dQ = dS K (f32, then cast).
  Tensor dP = g.virtualTensor(kFloat, {b, h, L, S});
  g.matmul(dout, vT, dP);
  Tensor dS = g.pointwise(kMul, g.pointwise(kMul, g.pointwise(kSub, dP, &delta), &p), &scale);
  Tensor dST = g.virtualTensor(s.dtype, {b, h, S, L}, {h * L * S, L * S, 1, S});
  g.reshape(dS, dST);
  g.matmul(dST, q, dk);
  Tensor k = g.virtualTensor(s.dtype, {b, h, S, D}, l.k);
  g.reshape(kT, k);
  Tensor dqAccum = g.tensor(kFloat, {b, h, L, D}, l.q, kDqAccum);
  g.matmul(dS, k, dqAccum);
  g.pointwise(kIdentity, dqAccum, nullptr, nullptr, &dq);
}

} // namespace

bool CudnnAttention::eligible(const CudnnAttentionShape &s) {
  // cuDNN's flash-attention engines: 16-bit I/O, head dims a multiple of 8
  // up to 128 (the range every 9.x release covers), non-empty problems.
  return (s.dtype == kHalf || s.dtype == kBfloat16) && s.D % 8 == 0 && s.D > 0 && s.D <= 128 && s.L > 0 &&
         s.S > 0 && s.b > 0 && s.h > 0;
}

const Plan *CudnnAttention::plan(const CudnnAttentionShape &s, std::string &why) {
  return plans_.get(s, why, [&](std::string &reason) -> std::unique_ptr<Plan> {
    const Library &lib = Library::get();
    // Before 9.6 the dQ accumulator had to be zeroed by the caller.
    if (lib.version() < 90600) {
      reason = "cuDNN " + std::to_string(lib.version()) + " is older than 9.6";
      return nullptr;
    }
    Graph g;
    if (s.backward)
      describeBackward(g, s);
    else
      describeForward(g, s);
    return g.build(reason);
  });
}

size_t CudnnAttention::workspaceBytes(const CudnnAttentionShape &s, const Plan &p) {
  size_t bytes = alignUp(size_t(p.workspaceBytes()));
  if (s.backward)
    bytes += alignUp(size_t(s.b * s.h * s.L * s.D) * sizeof(float)); // dQ's f32 accumulator
  else if (!s.stats)
    bytes += alignUp(size_t(s.b * s.h * s.L) * sizeof(float)); // statistics no one reads
  return bytes;
}

void CudnnAttention::run(const CudnnAttentionShape &s, const Plan &p, const CudnnAttentionTensors &t,
                         DevicePtr workspace, Stream stream) {
  std::map<int64_t, DevicePtr> ptr{{kQ, t.q}, {kK, t.k}, {kV, t.v}, {kO, t.o}};
  if (s.bias)
    ptr[kBias] = t.bias;
  if (s.backward) {
    ptr.insert({{kStats, t.lse}, {kDout, t.dout}, {kDq, t.dq}, {kDk, t.dk}, {kDv, t.dv}, {kSoftmaxSum, t.delta}});
    ptr[kDqAccum] = workspace + alignUp(size_t(p.workspaceBytes()));
  } else {
    ptr[kStats] = s.stats ? t.lse : workspace + alignUp(size_t(p.workspaceBytes()));
  }
  p.execute(ptr, workspace, stream);
}

} // namespace tensorc::cuda
