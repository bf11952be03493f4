// The fused attention kernels' configurations (kernels/Attention.cuh,
// kernels/AttentionF32.cuh): which
// instantiations of its macros a program's source holds.
#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/PointPrinter.h"

#include "ir/core/Error.h"

namespace tensorc::codegen::cuda {

std::string CudaSourceBuilder::addAttention(const std::string &prefix, DType dtype, DType out, int paddedHeadDim,
                                            bool causal, artifact::AttentionStep::Mask mask, bool dropout) {
  using Mask = artifact::AttentionStep::Mask;
  check(dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32,
        "cuda codegen: fused attention takes f16, bf16 or f32");
  const bool wide = out != dtype;
  check(!wide || (out == DType::F32 && dtype != DType::F32),
        "cuda codegen: fused attention's output is its operands' dtype or f32 of 16-bit ones");
  check(!dropout || dtype != DType::F32, "cuda codegen: fused attention applies dropout to 16-bit operands only");
  check(paddedHeadDim % 16 == 0 && paddedHeadDim >= 16 && paddedHeadDim <= 128,
        "cuda codegen: fused attention head dim out of range");
  std::string name = prefix + "_attention_" + std::string(dtypeName(dtype)) + (wide ? "_f32_out" : "") + "_d" +
                     std::to_string(paddedHeadDim) + (causal ? "_causal" : "") +
                     (mask == Mask::Bool ? "_bool_mask" : mask == Mask::Additive ? "_additive_mask" : "") +
                     (dropout ? "_dropout" : "");
  AttentionConfig &config = attention_[name];
  config.f32 = dtype == DType::F32;
  config.wide = wide;
  config.paddedHeadDim = paddedHeadDim;
  // Attention.cuh's kNoMask, kBoolMask, kAdditiveMask.
  const char *maskKind = mask == Mask::Bool ? "1" : mask == Mask::Additive ? "2" : "0";
  config.arguments = (config.f32 ? "" : storageCType(dtype) + ", ") + std::to_string(paddedHeadDim) + ", " +
                     (causal ? "true" : "false") + ", " + maskKind + (config.f32 ? "" : dropout ? ", true" : ", false");
  return name;
}

void CudaSourceBuilder::requireAttentionKernel(const std::string &name, const std::string &kernel) {
  static const std::set<std::string> kinds = {"FWD", "BWD_Q", "BWD_Q_SAVED", "BWD_KV"};
  auto found = attention_.find(name);
  if (found == attention_.end() || !kinds.count(kernel))
    fail(std::string("cuda codegen: unknown attention kernel ").append(name).append(" ").append(kernel));
  AttentionConfig &config = found->second;
  // The f32-output backward recomputes the forward (its saved output is f32).
  if (config.wide && kernel == "BWD_Q_SAVED")
    fail("cuda codegen: the f32-output attention " + name + " has no saved-forward backward");
  config.kernels.insert(kernel);
  // The register-capped dK/dV kernel beside it (the runtime picks by grid
  // size; kernels/Attention.cuh): only where it does not spill much. The
  // runtime expects it by the same rule (runtime/cuda/CudaProgram.cpp).
  static const std::string keys = "BWD_KV", denseKeys = "BWD_KV_DENSE";
  if (kernel == keys && !config.f32 && !config.wide && config.paddedHeadDim <= 64)
    config.kernels.insert(denseKeys);
}

} // namespace tensorc::codegen::cuda
