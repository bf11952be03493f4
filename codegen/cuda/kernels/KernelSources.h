// The CUDA device code kept in real .cuh files under codegen/cuda/kernels/
// (compiled by NVRTC in the tests as well), embedded into the compiler at
// build time (codegen/CMakeLists.txt) and pasted into artifacts' sources.
#pragma once

namespace tensorc::codegen::cuda {

// codegen/cuda/kernels/Prelude.cuh: headers and helpers of every kernel.
const char *preludeSource();
// codegen/cuda/kernels/ColumnSums.cuh: the bias-gradient fallback kernel.
const char *columnSumsSource();
// codegen/cuda/kernels/ScatterAdd.cuh: embedding_backward's scatter-add.
const char *scatterAddSource();
// codegen/cuda/kernels/Attention.cuh: fused attention, forward and backward.
const char *attentionKernelSource();
// codegen/cuda/kernels/AttentionF32.cuh: its f32 counterpart on CUDA cores
// (pasted after Attention.cuh, whose helpers it uses).
const char *attentionF32KernelSource();

} // namespace tensorc::codegen::cuda
