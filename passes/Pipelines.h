// Pipeline builders shared by the tensorc driver and tensorc-opt.
#pragma once

#include "mlir/Pass/PassManager.h"

namespace tensorc {

struct PipelineOptions {
  bool report = false; // fusion and memory-plan reports on stdout
  // Index range checks raised after a run (tensorc-run-checks); off:
  // out-of-range indices are clamped silently.
  bool runChecks = true;
  // CUDA codegen: conv2d and its gradients run on a convolution library
  // (cuDNN): the gradients stay whole (not one GEMM per kernel tap) and a
  // conv2d's bias becomes an add that fuses with what follows.
  bool convolutionLibrary = true;
  // CUDA codegen with a convolution library: 16-bit convolutions on NHWC
  // storage (tensorc-channels-last), what cuDNN's tensor cores read.
  bool channelsLast = true;
  // CPU: conv2d's gradients as direct reduction nests instead of per-tap
  // GEMMs (what the GPU falls back on without cuDNN: tests check them here).
  bool directConvolutionGradients = false;
};

// The target-independent cleanup every compile runs: tensorc-simplify (exact
// identities, view canonicalization, the tc folders, dead code) and CSE.
void buildSimplifyPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});

// Everything a backend needs before codegen: simplify, CSE, fusion into
// tc.fused kernels and library calls, then the memory plan.
void buildKernelPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});

// Registers the pipelines above with MLIR's command-line registry.
void registerTensorcPipelines();

} // namespace tensorc
