// The default pipelines of the backends (they use graph-level passes, so they
// live beside them rather than in passes/). CPU: every composite decomposed
// (the LLVM backend generates loops for primitives). CUDA: composites with
// dedicated kernels (softmax, log_softmax, layer_norm, rms_norm,
// cross_entropy, attention, batch_norm) stay whole, the others are
// decomposed. Both end with fusion and the memory plan.
#pragma once

#include "passes/Pipelines.h"

namespace tensorc {

void buildCpuPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});
void buildCudaPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});
// What `--target cuda` compiles with until the CUDA kernels have
// normalization/attention emitters: the CPU pipeline's decomposition except
// gelu (matmul epilogues absorb it).
void buildCudaCodegenPipeline(mlir::OpPassManager &pm, const PipelineOptions &options = {});
// Registers tensorc-cpu-pipeline, tensorc-cuda-pipeline and
// tensorc-cuda-codegen-pipeline (what --target cuda runs).
void registerBackendPipelines();

} // namespace tensorc
