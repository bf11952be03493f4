#include "runtime/cuda/CudnnConvolution.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cstdlib>

namespace tensorc::cuda {

using namespace cudnn;

namespace {
enum Uid : int64_t { kX = 1, kW, kY };
} // namespace

CudnnConvolution::CudnnConvolution() {
  // $TENSORC_CUDNN_HEURISTIC=a|b: which of cuDNN's rankings picks the engine.
  const char *h = std::getenv("TENSORC_CUDNN_HEURISTIC");
  if (h && (std::string(h) == "a" || std::string(h) == "A"))
    heuristic_ = Heuristic::A;
  if (h && (std::string(h) == "b" || std::string(h) == "B"))
    heuristic_ = Heuristic::B;
}

int64_t CudnnConvolutionEngines::workspaceBytes() const {
  int64_t most = 0;
  for (const std::unique_ptr<Plan> &p : plans)
    most = std::max(most, p->workspaceBytes());
  return most;
}

const CudnnConvolutionEngines *CudnnConvolution::engines(const CudnnConvolutionShape &s, std::string &why) {
  return engines_.get(s, why, [&](std::string &reason) -> std::unique_ptr<CudnnConvolutionEngines> {
    Graph g;
    const std::vector<int64_t> xDims{s.n, s.c, s.h, s.w}, wDims{s.k, s.c / s.groups, s.r, s.s},
        yDims{s.n, s.k, s.p, s.q};
    // NCHW dims; strides of NCHW or, channels-last, of NHWC storage.
    auto strides = [&](const std::vector<int64_t> &d) {
      if (!s.channelsLast)
        return contiguous(d);
      return std::vector<int64_t>{d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
    };
    Tensor x = g.tensor(s.dtype, xDims, strides(xDims), kX);
    Tensor w = g.tensor(s.dtype, wDims, strides(wDims), kW);
    Tensor y = g.tensor(s.dtype, yDims, strides(yDims), kY);
    ConvolutionGeometry geometry;
    for (int i = 0; i < 2; ++i) {
      geometry.stride[i] = s.stride[i];
      geometry.padding[i] = s.padding[i];
      geometry.dilation[i] = s.dilation[i];
    }
    g.convolution(s.direction, geometry, x, w, y);
    std::vector<int> rejected{kNoteDownConvertInputs};
    if (s.dtype == kFloat && !s.allowTf32)
      rejected.push_back(kNoteTensorCore);
    auto e = std::make_unique<CudnnConvolutionEngines>();
    e->plans = g.buildAll(reason, rejected, heuristic_, kCandidates);
    if (e->plans.empty() && heuristic_ != Heuristic::A) // B found nothing: A's ranking
      e->plans = g.buildAll(reason, rejected, Heuristic::A, kCandidates);
    return e->plans.empty() ? nullptr : std::move(e);
  });
}

void CudnnConvolution::run(const Plan &p, DevicePtr x, DevicePtr w, DevicePtr y, DevicePtr workspace,
                           Stream stream) {
  p.execute({{kX, x}, {kW, w}, {kY, y}}, workspace, stream);
}

} // namespace tensorc::cuda
