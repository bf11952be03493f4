// conv2d and its gradients by cuDNN's engines (forward, backward data,
// backward filter), one operation graph each. Plans are built once per
// problem and kept; a problem cuDNN cannot run is remembered with the
// reason, and the caller runs its own kernel (the artifact's direct nest).
//
// Numerics: f32 accumulation; f32 problems never run on TF32 tensor cores
// unless allowed (the artifact's --allow-tf32, PyTorch's allow_tf32), and
// engines that down-convert their inputs are never used (PyTorch's filter).
#pragma once

#include "runtime/cuda/Cudnn.h"

#include <memory>
#include <string>
#include <tuple>

namespace tensorc::cuda {

struct CudnnConvolutionShape {
  cudnn::ConvolutionDirection direction = cudnn::ConvolutionDirection::Forward;
  int dtype = cudnn::kFloat; // or kHalf, kBfloat16
  int64_t n = 0, c = 0, h = 0, w = 0; // x
  int64_t k = 0, r = 0, s = 0;        // w: [k, c / groups, r, s]
  int64_t p = 0, q = 0;               // y: [n, k, p, q]
  int64_t groups = 1;
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  bool allowTf32 = false;
  // Every tensor NHWC (w [k, r, s, c / groups]) instead of NCHW: the dims
  // above stay NCHW, the strides say where each element is.
  bool channelsLast = false;
  auto key() const {
    return std::tie(direction, dtype, n, c, h, w, k, r, s, p, q, groups, stride[0], stride[1], padding[0],
                    padding[1], dilation[0], dilation[1], allowTf32, channelsLast);
  }
  bool operator<(const CudnnConvolutionShape &o) const { return key() < o.key(); }
};

// A problem's plans in the heuristic's order: [0] cuDNN's first choice,
// the rest candidates for the autotuner.
struct CudnnConvolutionEngines {
  std::vector<std::unique_ptr<cudnn::Plan>> plans;
  // The largest workspace among them (what a session reserves).
  int64_t workspaceBytes() const;
};

class CudnnConvolution {
public:
  // At most this many engines per problem are kept (and timed by the
  // autotuner): cuDNN's heuristic ranks the rest lower.
  static constexpr size_t kCandidates = 6;
  CudnnConvolution();
  // The engines for `s`, built on first use; null with `why` when cuDNN is
  // missing or declines the problem.
  const CudnnConvolutionEngines *engines(const CudnnConvolutionShape &s, std::string &why);
  // Queues the plan: x, w, y are NCHW (or channelsLast: NHWC) device
  // tensors (the direction's output among them); `workspace` holds the
  // plan's workspaceBytes().
  static void run(const cudnn::Plan &p, DevicePtr x, DevicePtr w, DevicePtr y, DevicePtr workspace,
                  Stream stream);

private:
  cudnn::Heuristic heuristic_ = cudnn::Heuristic::A;
  cudnn::PlanCache<CudnnConvolutionShape, CudnnConvolutionEngines> engines_;
};

} // namespace tensorc::cuda
