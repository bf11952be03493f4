// A generated CUDA translation unit split into several that NVRTC compiles
// in parallel (issue 57). NVRTC's time on a model is almost all per kernel
// instantiation (the LLaMA-4 backward: 1376 kernels, 113 s serially; its
// helpers and templates alone, no kernel, 6.7 s): each part keeps the
// shared text (headers, helpers, the attention templates), a share of the
// statements that instantiate kernels, and the generated functions those
// use, so the parts together define every kernel once. Kernels are looked
// up by name in every part's module.
//
// The statements recognized (what codegen/cuda writes; anything else is
// shared text):
//   extern "C" __global__ ... { ... }          one line (nest and chain variants)
//   #if __CUDA_ARCH__ >= 900 / extern "C" ... / #endif   (cluster variants)
//   TC_NAME(...)                               a top-level macro call that
//                                              instantiates kernels (attention,
//                                              column sums, scatter-add)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tensorc::cuda {

// How many parts `source` is worth splitting into with `threads` compiler
// threads: about one per 4 kernel instantiations (a part's fixed cost, the
// shared text, is small beside its kernels'; a chain kernel's variant
// counts one per nest, as its comment line "// NAME: ... through N nests"
// says), at most `threads`, at least 1.
size_t translationUnitParts(const std::string &source, unsigned threads);

// `source` as `parts` translation units (one where it has too few kernels
// or parts <= 1). Instantiations are dealt out by their expected cost (a
// fused attention kernel counts as many loop kernels); those that call one
// generated function directly (a kernel's variants, one body) stay in one
// part unless they outweigh a part's share. Each part keeps, of the
// generated functions (those after artifact::kGeneratedKernelsMarker),
// only those its own statements use, directly or through another: NVRTC
// parses and optimizes no other part's functions (BERT-base's backward:
// about a second per part went to its 1.4 MB of shared text).
std::vector<std::string> splitTranslationUnit(const std::string &source, size_t parts);

// The name of the kernel an `extern "C" __global__` line defines, or "".
std::string kernelDefinedBy(const std::string &line);

// `source` as two translation units by the kernels a run is expected to
// launch (`wanted`, by name): `now` holds those, every macro call and the
// shared text; `later` the other kernels with the shared text (compiled
// only if a launch needs one of them: another variant the autotuner picks,
// or other sizes). A kernel whose name cannot be read stays in `now`.
// Lines keep their numbers (another tier's statement is an empty line).
struct KernelTiers {
  std::string now, later;
  size_t laterKernels = 0;
};
KernelTiers splitKernelTiers(const std::string &source, const std::function<bool(const std::string &)> &wanted);

} // namespace tensorc::cuda
