// The CUDA device code kept in real .cuh files under codegen/cuda/kernels/
// (compiled by nvcc in the tests as well), embedded into the compiler at
// build time (codegen/CMakeLists.txt) and pasted into artifacts' sources.
#pragma once

namespace tensorc::codegen::cuda {

// codegen/cuda/kernels/Attention.cuh: fused attention, forward and backward.
const char *attentionKernelSource();

} // namespace tensorc::codegen::cuda
