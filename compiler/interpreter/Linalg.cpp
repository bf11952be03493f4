// matmul, conv2d (and its gradients) and 2-D pooling as direct loops with f64/i64 accumulation.
#include "compiler/interpreter/Kernels.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <array>
#include <cmath>

namespace tensorc::interp {
namespace {

std::vector<HostTensor> matmul(const OpCall &c) {
  const HostTensor &a = c.arg(0), &b = c.arg(1);
  HostTensor out = c.result();
  MatmulDims d = matmulDims(a.shape(), b.shape(), out.shape());
  int64_t M = d.M, K = d.K, N = d.N;
  bool floats = isFloat(a.dtype());
  for (int64_t bi = 0; bi < d.batches; ++bi) {
    int64_t aBase = d.aOffset(bi), bBase = d.bOffset(bi);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t o = (bi * M + i) * N + j;
        if (floats) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += a.getF(aBase + i * K + k) * b.getF(bBase + k * N + j);
          out.setF(o, acc);
        } else {
          uint64_t acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += uint64_t(a.getI(aBase + i * K + k)) * uint64_t(b.getI(bBase + k * N + j));
          out.setI(o, int64_t(acc));
        }
      }
  }
  return {std::move(out)};
}

std::vector<HostTensor> conv2d(const OpCall &c) {
  const HostTensor &x = c.arg(0), &w = c.arg(1);
  const AttrMap &a = c.attrs();
  std::vector<int64_t> stride = getInts(a, "stride"), pad = getInts(a, "padding"),
                       dil = getInts(a, "dilation");
  int64_t groups = getInt(a, "groups");
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t O = w.shape()[0], Cg = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  HostTensor out = c.result();
  int64_t HO = out.shape()[2], WO = out.shape()[3], Og = O / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / Og;
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox) {
          double acc = c.has(2) ? c.arg(2).getF(o) : 0.0;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * stride[0] - pad[0] + ky * dil[0];
                int64_t ix = ox * stride[1] - pad[1] + kx * dil[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                  continue;
                int64_t cin = g * Cg + ci;
                acc += x.getF(((n * C + cin) * H + iy) * W + ix) *
                       w.getF(((o * Cg + ci) * KH + ky) * KW + kx);
              }
          out.setF(((n * O + o) * HO + oy) * WO + ox, acc);
        }
    }
  return {std::move(out)};
}

// Every (output position, kernel tap) pair of a conv2d reading the input
// inside its bounds: visit(n, o, oy, ox, cin, ci, ky, kx, iy, ix).
template <typename Visit>
void forEachConvTap(const std::vector<int64_t> &xShape, const std::vector<int64_t> &wShape,
                    const std::vector<int64_t> &outShape, const AttrMap &a, Visit visit) {
  std::vector<int64_t> stride = getInts(a, "stride"), pad = getInts(a, "padding"), dil = getInts(a, "dilation");
  int64_t groups = getInt(a, "groups");
  int64_t N = xShape[0], H = xShape[2], W = xShape[3];
  int64_t O = wShape[0], Cg = wShape[1], KH = wShape[2], KW = wShape[3];
  int64_t HO = outShape[2], WO = outShape[3], Og = O / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < HO; ++oy)
        for (int64_t ox = 0; ox < WO; ++ox)
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * stride[0] - pad[0] + ky * dil[0];
                int64_t ix = ox * stride[1] - pad[1] + kx * dil[1];
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                  visit(n, o, oy, ox, (o / Og) * Cg + ci, ci, ky, kx, iy, ix);
              }
}

// conv2d's input gradient dx[n, cin, iy, ix] (the sum of grad[n, o, oy, ox] *
// w[o, ci, ky, kx] over the taps reading it) or weight gradient dw[o, ci, ky,
// kx] (the sum of grad[n, o, oy, ox] * x[n, cin, iy, ix] over batch and
// output positions); operand 1 is w or x.
std::vector<HostTensor> conv2dGradient(const OpCall &c, bool input) {
  const HostTensor &g = c.arg(0), &other = c.arg(1);
  HostTensor out = c.result();
  const std::vector<int64_t> &xs = input ? out.shape() : other.shape(), &ws = input ? other.shape() : out.shape(),
                             &gs = g.shape();
  std::vector<double> acc(size_t(out.numel()), 0.0);
  forEachConvTap(xs, ws, gs, c.attrs(),
                 [&](int64_t n, int64_t o, int64_t oy, int64_t ox, int64_t cin, int64_t ci, int64_t ky,
                     int64_t kx, int64_t iy, int64_t ix) {
                   const int64_t xi = ((n * xs[1] + cin) * xs[2] + iy) * xs[3] + ix,
                                 wi = ((o * ws[1] + ci) * ws[2] + ky) * ws[3] + kx;
                   acc[size_t(input ? xi : wi)] +=
                       g.getF(((n * gs[1] + o) * gs[2] + oy) * gs[3] + ox) * other.getF(input ? wi : xi);
                 });
  for (size_t i = 0; i < acc.size(); ++i)
    out.setF(int64_t(i), acc[i]);
  return {std::move(out)};
}

std::vector<HostTensor> pool(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  const AttrMap &a = c.attrs();
  bool isMax = c.node.node->op == "max_pool2d";
  std::vector<int64_t> k = getInts(a, "kernel_size"), stride = poolStride(a),
                       pad = getInts(a, "padding");
  std::vector<int64_t> dil = isMax ? getInts(a, "dilation") : std::vector<int64_t>{1, 1};
  bool includePad = !isMax && getBool(a, "count_include_pad");
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  HostTensor out = c.result();
  int64_t HO = out.shape()[2], WO = out.shape()[3];
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oy = 0; oy < HO; ++oy)
      for (int64_t ox = 0; ox < WO; ++ox) {
        int64_t y0 = oy * stride[0] - pad[0], x0 = ox * stride[1] - pad[1];
        double acc = isMax ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int64_t ky = 0; ky < k[0]; ++ky)
          for (int64_t kx = 0; kx < k[1]; ++kx) {
            int64_t iy = y0 + ky * dil[0], ix = x0 + kx * dil[1];
            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
              continue;
            double v = x.getF((nc * H + iy) * W + ix);
            if (isMax)
              acc = (std::isnan(v) || std::isnan(acc)) ? NAN : std::max(acc, v);
            else
              acc += v;
            ++count;
          }
        if (!isMax) {
          // PyTorch's divisor: the window clipped to the padded input, or
          // only its in-bounds part without count_include_pad.
          int64_t y1 = std::min(y0 + k[0], H + pad[0]), x1 = std::min(x0 + k[1], W + pad[1]);
          int64_t padded = (y1 - y0) * (x1 - x0);
          acc /= double(includePad ? padded : count);
        }
        out.setF((nc * HO + oy) * WO + ox, acc);
      }
  return {std::move(out)};
}

// Each window's winning tap: the first maximum, a nan beating every number,
// taps in the padding -inf (the CUDA and CPU nests' argmax, to the bit).
std::vector<HostTensor> poolTaps(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  const AttrMap &a = c.attrs();
  std::vector<int64_t> k = getInts(a, "kernel_size"), stride = poolStride(a), pad = getInts(a, "padding"),
                       dil = getInts(a, "dilation");
  int64_t NC = x.shape()[0] * x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  HostTensor out = c.result();
  int64_t HO = out.shape()[2], WO = out.shape()[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oy = 0; oy < HO; ++oy)
      for (int64_t ox = 0; ox < WO; ++ox) {
        double best = 0;
        int64_t bestTap = -1;
        for (int64_t t = 0; t < k[0] * k[1]; ++t) {
          int64_t iy = oy * stride[0] - pad[0] + (t / k[1]) * dil[0], ix = ox * stride[1] - pad[1] + (t % k[1]) * dil[1];
          double v = iy >= 0 && iy < H && ix >= 0 && ix < W ? x.getF((nc * H + iy) * W + ix) : -INFINITY;
          if (bestTap < 0 || (!std::isnan(best) && (std::isnan(v) || v > best))) {
            best = v;
            bestTap = t;
          }
        }
        out.setI((nc * HO + oy) * WO + ox, bestTap);
      }
  return {std::move(out)};
}

// Each window's cotangent to the input element at its winning tap (taps on
// the padding, or -1, give nothing); f64 accumulation as the others here.
std::vector<HostTensor> maxPoolBackward(const OpCall &c) {
  const HostTensor &g = c.arg(0), &tap = c.arg(1);
  const AttrMap &a = c.attrs();
  std::vector<int64_t> k = getInts(a, "kernel_size"), stride = poolStride(a), pad = getInts(a, "padding"),
                       dil = getInts(a, "dilation");
  HostTensor out = c.result();
  int64_t NC = g.shape()[0] * g.shape()[1], HO = g.shape()[2], WO = g.shape()[3];
  int64_t H = out.shape()[2], W = out.shape()[3];
  std::vector<double> acc(size_t(out.numel()), 0.0);
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oy = 0; oy < HO; ++oy)
      for (int64_t ox = 0; ox < WO; ++ox) {
        int64_t o = (nc * HO + oy) * WO + ox, t = tap.getI(o);
        if (t < 0 || t >= k[0] * k[1])
          continue;
        int64_t iy = oy * stride[0] - pad[0] + (t / k[1]) * dil[0], ix = ox * stride[1] - pad[1] + (t % k[1]) * dil[1];
        if (iy >= 0 && iy < H && ix >= 0 && ix < W)
          acc[size_t((nc * H + iy) * W + ix)] += g.getF(o);
      }
  for (size_t i = 0; i < acc.size(); ++i)
    out.setF(int64_t(i), acc[i]);
  return {std::move(out)};
}

// A 4-D float tensor with its dims permuted: out.dim(i) = x.dim(perm[i]).
HostTensor permuted4(const HostTensor &x, const std::array<int64_t, 4> &perm) {
  const std::vector<int64_t> &s = x.shape();
  HostTensor out(x.dtype(), {s[size_t(perm[0])], s[size_t(perm[1])], s[size_t(perm[2])], s[size_t(perm[3])]});
  const int64_t stride[4] = {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
  int64_t i = 0;
  for (int64_t a = 0; a < out.shape()[0]; ++a)
    for (int64_t b = 0; b < out.shape()[1]; ++b)
      for (int64_t c = 0; c < out.shape()[2]; ++c)
        for (int64_t d = 0; d < out.shape()[3]; ++d)
          out.setF(i++, x.getF(a * stride[perm[0]] + b * stride[perm[1]] + c * stride[perm[2]] +
                               d * stride[perm[3]]));
  return out;
}

// A convolution kernel on channels-last operands (channels_last): the NCHW
// kernel on NCHW copies of x/grad and the weight, its result back.
Kernel channelsLastAware(Kernel nchw) {
  return [nchw](const OpCall &c) {
    if (!c.attrs().count("channels_last") || !getBool(c.attrs(), "channels_last"))
      return nchw(c);
    std::vector<HostTensor> first;
    for (size_t i = 0; i < 2; ++i)
      first.push_back(permuted4(c.arg(i), {0, 3, 1, 2}));
    OpCall call = c;
    call.args[0] = &first[0];
    call.args[1] = &first[1];
    for (std::vector<int64_t> &shape : call.resultShapes)
      shape = {shape[0], shape[3], shape[1], shape[2]};
    std::vector<HostTensor> out = nchw(call);
    for (HostTensor &t : out)
      t = permuted4(t, {0, 2, 3, 1});
    return out;
  };
}

} // namespace

void addLinalgKernels(KernelTable &t) {
  t["matmul"] = matmul;
  t["conv2d"] = channelsLastAware(conv2d);
  t["conv2d_backward_input"] = channelsLastAware([](const OpCall &c) { return conv2dGradient(c, true); });
  t["conv2d_backward_weight"] = channelsLastAware([](const OpCall &c) { return conv2dGradient(c, false); });
  t["max_pool2d"] = t["avg_pool2d"] = pool;
  t["max_pool2d_backward"] = maxPoolBackward;
  t["max_pool2d_taps"] = poolTaps;
}

} // namespace tensorc::interp
