// The CUDA backend's top level (issue 6, first slice): a tc module after a
// backend pipeline becomes an artifact whose code is one CUDA C++
// translation unit holding every loop nest as a kernel template with its
// variants (CudaKernel.h); matmul steps are library calls (cuBLASLt in the
// GPU runtime). The runtime compiles the source with NVRTC for the GPU it
// finds and caches the binaries (runtime/cache).
#pragma once

#include "runtime/artifact/Artifact.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>

namespace tensorc::codegen::cuda {

struct CudaCompileOptions {
  std::string arch = "sm_90"; // recorded; the runtime compiles for the GPU it finds
  // conv2d: "cudnn" (convolution steps: cuDNN's engines at run time, a
  // direct nest where cuDNN is missing or declines; its gradients too when
  // the pipeline kept them whole), "gemm" (im2col + cuBLASLt, groups 1) or
  // "direct" (a reduction nest per output); docs/cuda-backend.md has the
  // measurements.
  std::string conv = "cudnn";
  // A linear layer's bias gradient on cuBLASLt's BGRADA/BGRADB epilogue of
  // its weight-gradient GEMM. Off: on an H100 cuBLASLt runs it as a kernel
  // of its own (globalKernelBgradAB_v2, 37 us for 8192 x 4096 bf16) beside
  // the GEMM, slower than the generated column reduction (32 us); an MLP's
  // backward step 0.483-0.557 ms without, 0.542-0.566 with
  // (docs/cuda-backend.md). Tests turn it on to keep the path checked.
  bool gemmBiasGradient = false;
  std::map<std::string, std::string> record;
};

artifact::Artifact compileCudaArtifact(mlir::ModuleOp module, const CudaCompileOptions &options);

} // namespace tensorc::codegen::cuda
