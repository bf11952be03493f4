// A generated translation unit split into parts that compile in parallel
// (runtime/cuda/TranslationUnits.h): every part keeps the shared text and
// the source's line numbers, every kernel is instantiated in exactly one
// part, and the parts compile with NVRTC into cubins that together define
// every kernel (skipped where NVRTC is absent).
#include "runtime/artifact/CudaSource.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/TranslationUnits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tensorc;

namespace {

std::string kernelName(int k) {
  std::string name = "k";
  name.append(std::to_string(k));
  name.append("_b128");
  return name;
}

// A source shaped like codegen/cuda's: helpers, a template, one-line kernel
// instantiations, a cluster variant, and macro calls that instantiate.
std::string generated(int kernels) {
  std::string s = "#include <cuda_fp16.h>\n"
                  "template <int B> __device__ __forceinline__ void body(float *o) { o[threadIdx.x] = B; }\n"
                  "#define TC_TWICE(NAME, T) \\\n"
                  "  extern \"C\" __global__ void NAME(T *o) { o[threadIdx.x] *= 2; }\n";
  for (int k = 0; k < kernels; ++k)
    s += "extern \"C\" __global__ void __launch_bounds__(128) " + kernelName(k) + "(float *o) { body<128>(o); }\n";
  s += "#if __CUDA_ARCH__ >= 900\n"
       "extern \"C\" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128) kc(float *o) { body<2>(o); }\n"
       "#endif\n";
  s += "TC_TWICE(twice_f32, float)\n";
  s += "TC_TWICE(twice_f16, __half)\n";
  return s;
}

std::vector<std::string> kernelNames(int kernels) {
  std::vector<std::string> names;
  for (int k = 0; k < kernels; ++k)
    names.push_back(kernelName(k));
  names.insert(names.end(), {"kc", "twice_f32", "twice_f16"});
  return names;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST(TranslationUnits, EveryKernelInExactlyOnePartSharedTextInEvery) {
  std::string source = generated(10);
  std::vector<std::string> parts = cuda::splitTranslationUnit(source, 3);
  ASSERT_EQ(parts.size(), 3u);
  size_t lines = size_t(std::count(source.begin(), source.end(), '\n'));
  for (const std::string &p : parts) {
    EXPECT_EQ(size_t(std::count(p.begin(), p.end(), '\n')), lines) << "line numbers kept";
    EXPECT_NE(p.find("template <int B>"), std::string::npos);
    EXPECT_NE(p.find("#define TC_TWICE"), std::string::npos) << "a macro's definition is shared";
  }
  for (const std::string &name : kernelNames(10)) {
    size_t in = 0;
    for (const std::string &p : parts) {
      bool macro = name.rfind("twice", 0) == 0;
      std::string call = macro ? "TC_TWICE(" : " ";
      call.append(name);
      if (!macro)
        call.push_back('(');
      in += count(p, call);
    }
    EXPECT_EQ(in, 1u) << name;
  }
  // The cluster variant moves with its #if/#endif.
  for (const std::string &p : parts)
    EXPECT_EQ(count(p, "#if __CUDA_ARCH__ >= 900"), count(p, " kc("));
}

// Kernels compiled at load and later (CudaProgram's later tier): the kernels
// a run is expected to launch, every macro call and the shared text in
// `now`; the other kernels with the shared text in `later`; line numbers
// kept in both, each kernel in exactly one.
TEST(TranslationUnits, KernelTiersSplitByTheKernelsExpected) {
  EXPECT_EQ(cuda::kernelDefinedBy("extern \"C\" __global__ void __launch_bounds__(128) k3_b128(float *o) { }"),
            "k3_b128");
  EXPECT_EQ(cuda::kernelDefinedBy("extern \"C\" __global__ void __cluster_dims__(2, 1, 1) "
                                  "__launch_bounds__(128) kc(float *o) { body<2>(o); }"),
            "kc");
  EXPECT_EQ(cuda::kernelDefinedBy("extern \"C\" __global__ void k(float *o) { }"), "") << "no launch bounds";
  EXPECT_EQ(cuda::kernelDefinedBy("TC_TWICE(twice_f32, float)"), "");
  std::string source = generated(10);
  cuda::KernelTiers tiers = cuda::splitKernelTiers(source, [](const std::string &name) {
    return name == "k1_b128" || name == "k7_b128";
  });
  EXPECT_EQ(tiers.laterKernels, 9u); // 8 loop kernels and the cluster variant
  size_t lines = size_t(std::count(source.begin(), source.end(), '\n'));
  for (const std::string *unit : {&tiers.now, &tiers.later}) {
    EXPECT_EQ(size_t(std::count(unit->begin(), unit->end(), '\n')), lines);
    EXPECT_NE(unit->find("template <int B>"), std::string::npos);
  }
  for (const std::string &name : kernelNames(10)) {
    bool macro = name.rfind("twice", 0) == 0;
    std::string call = macro ? "TC_TWICE(" + name : " " + name + "(";
    bool now = macro || name == "k1_b128" || name == "k7_b128";
    EXPECT_EQ(count(tiers.now, call), now ? 1u : 0u) << name;
    EXPECT_EQ(count(tiers.later, call), now ? 0u : 1u) << name;
  }
  EXPECT_EQ(count(tiers.later, "#if __CUDA_ARCH__ >= 900"), 1u) << "the cluster variant moves with its #if";
  EXPECT_EQ(count(tiers.now, "#if __CUDA_ARCH__ >= 900"), 0u);
  // Everything expected: no later tier.
  cuda::KernelTiers all = cuda::splitKernelTiers(source, [](const std::string &) { return true; });
  EXPECT_EQ(all.now, source);
  EXPECT_EQ(all.laterKernels, 0u);
  EXPECT_EQ(all.later, "");
}

// A chain kernel's variants weigh as many kernels as the chain has nests
// (codegen/cuda's comment says how many): three 4-nest chain variants are
// worth three parts and land in different ones.
TEST(TranslationUnits, ChainVariantsCountTheirNests) {
  std::string s = "template <int B> __device__ __forceinline__ void chain_body(float *o) { o[threadIdx.x] = B; }\n"
                  "// tc_f_k7_chain: one row per block through 4 nests (or with 2 operand rows, 4096 bytes, in "
                  "shared memory)\n";
  for (const char *v : {"b64_r1", "b256_r1", "b64_r1c"})
    s += std::string("extern \"C\" __global__ void __launch_bounds__(64) tc_f_k7_chain_") + v +
         "(float *o) { chain_body<64>(o); }\n";
  EXPECT_EQ(cuda::translationUnitParts(s, 16), 3u);
  std::vector<std::string> parts = cuda::splitTranslationUnit(s, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (const std::string &p : parts)
    EXPECT_EQ(count(p, "extern \"C\""), 1u) << p;
  // Sibling chains say "N sibling elementwise nests"; an unknown chain, or
  // none, counts 1 a variant.
  std::string siblings = "// tc_g_k2_chain: 40 sibling elementwise nests\n";
  for (const char *v : {"b64_r1", "b256_r1"})
    siblings += std::string("extern \"C\" __global__ void __launch_bounds__(64) tc_g_k2_chain_") + v +
                "(float *o) { chain_body<64>(o); }\n";
  EXPECT_EQ(cuda::translationUnitParts(siblings, 64), 20u); // 80 / 4
  EXPECT_EQ(cuda::translationUnitParts(siblings + siblings + siblings, 64), 60u); // 240 / 4
  EXPECT_EQ(cuda::translationUnitParts(s.substr(s.find("extern")), 16), 1u); // no comment: 3 kernels
}

// After codegen's marker line, each part keeps only the generated functions
// its kernels use, directly or through another; what comes before the
// marker is shared; a source without the marker keeps everything.
TEST(TranslationUnits, PartsKeepOnlyTheGeneratedFunctionsTheirKernelsUse) {
  std::string s = std::string("#include <cuda_fp16.h>\n"
                              "__device__ __forceinline__ float tc_shared(float x) { return x; }\n") +
                  artifact::kGeneratedKernelsMarker +
                  "\n"
                  "// tc_m_k1: a kernel's point\n"
                  "__device__ __forceinline__ float tc_m_k1_point(long long i, const float *a) {\n"
                  "  return tc_shared(a[i]) * 2.0f;\n"
                  "}\n"
                  "template <int B>\n"
                  "__device__ __forceinline__ void tc_m_k1_body(float *o, const float *a) {\n"
                  "  const long long i = blockIdx.x * (long long)B + threadIdx.x;\n"
                  "  if (i < 256) { o[i] = tc_m_k1_point(i, a); }\n"
                  "}\n"
                  "__device__ __forceinline__ float tc_m_k2_point(long long i, const float *a) { return a[i] + 1.0f; }\n"
                  "template <int B>\n"
                  "__device__ __forceinline__ void tc_m_k2_row(float *o, const float *a) {\n"
                  "  o[threadIdx.x] = tc_m_k2_point(threadIdx.x, a);\n"
                  "}\n"
                  "template <int B>\n"
                  "__device__ __forceinline__ void tc_m_k3_chain_body(float *o, const float *a) {\n"
                  "  tc_m_k2_row<B>(o, a);\n"
                  "}\n"
                  "__device__ __forceinline__ float tc_m_unused(float x) { return x; }\n"
                  "extern \"C\" __global__ void __launch_bounds__(128) tc_m_k1_b128(float *o, const float *a) { "
                  "tc_m_k1_body<128>(o, a); }\n"
                  "extern \"C\" __global__ void __launch_bounds__(64) tc_m_k3_chain_b64_r1(float *o, const float *a) { "
                  "tc_m_k3_chain_body<64>(o, a); }\n";
  std::vector<std::string> parts = cuda::splitTranslationUnit(s, 2);
  ASSERT_EQ(parts.size(), 2u);
  size_t lines = size_t(std::count(s.begin(), s.end(), '\n'));
  const std::string &first = count(parts[0], " tc_m_k1_b128(") ? parts[0] : parts[1];
  const std::string &second = &first == &parts[0] ? parts[1] : parts[0];
  for (const std::string *p : {&first, &second}) {
    EXPECT_EQ(size_t(std::count(p->begin(), p->end(), '\n')), lines) << "line numbers kept";
    EXPECT_EQ(count(*p, "float tc_shared("), 1u) << "before the marker: shared";
    EXPECT_EQ(count(*p, "tc_m_unused"), 0u) << "used by no kernel";
  }
  EXPECT_EQ(count(first, "float tc_m_k1_point("), 1u);
  EXPECT_EQ(count(first, "void tc_m_k1_body("), 1u);
  EXPECT_EQ(count(first, "tc_m_k2_"), 0u);
  EXPECT_EQ(count(first, "tc_m_k3_"), 0u);
  EXPECT_EQ(count(second, "float tc_m_k2_point("), 1u) << "through the chain body and the row";
  EXPECT_EQ(count(second, "void tc_m_k2_row("), 1u);
  EXPECT_EQ(count(second, "void tc_m_k3_chain_body("), 1u);
  EXPECT_EQ(count(second, "tc_m_k1_"), 0u);
  // One part: the source without the unused function.
  std::vector<std::string> one = cuda::splitTranslationUnit(s, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(count(one[0], "tc_m_unused"), 0u);
  EXPECT_EQ(count(one[0], "tc_m_k2_point("), 2u);
  // Without the marker, nothing is pruned.
  std::string unmarked = s;
  unmarked.erase(unmarked.find(artifact::kGeneratedKernelsMarker), std::string(artifact::kGeneratedKernelsMarker).size());
  for (const std::string &p : cuda::splitTranslationUnit(unmarked, 2))
    EXPECT_EQ(count(p, "tc_m_unused"), 1u);
  if (cuda::Nvrtc::available()) {
    for (const std::string &p : parts)
      EXPECT_NO_THROW(cuda::Nvrtc::get().compile(p, "part.cu", "sm_90", {}, 1)) << p;
  }
}

// The variants of one kernel (entry points calling one generated body)
// land in one part, so no two parts parse and optimize that body; a group
// worth more than a part's share of the whole is cut so the parts stay even.
TEST(TranslationUnits, AKernelsVariantsShareOnePart) {
  std::string s = std::string("#include <cuda_fp16.h>\n") + artifact::kGeneratedKernelsMarker + "\n";
  for (int k = 0; k < 4; ++k)
    s += "template <int B, int I>\n__device__ __forceinline__ void tc_v_k" + std::to_string(k) +
         "_body(float *o) { o[threadIdx.x] = B * I; }\n";
  for (int k = 0; k < 4; ++k)
    for (const char *v : {"b256_i1", "b128_i1", "b512_i2", "b256_i4"})
      s += "extern \"C\" __global__ void __launch_bounds__(128) tc_v_k" + std::to_string(k) + "_" + v +
           "(float *o) { tc_v_k" + std::to_string(k) + "_body<128, 1>(o); }\n";
  std::vector<std::string> parts = cuda::splitTranslationUnit(s, 4);
  ASSERT_EQ(parts.size(), 4u);
  for (const std::string &p : parts) {
    EXPECT_EQ(count(p, "extern \"C\""), 4u) << p;
    EXPECT_EQ(count(p, "void tc_v_k"), 1u) << "one body a part:\n" << p;
  }
  // One part per variant: each kernel's group is cut to the share (1).
  std::vector<std::string> many = cuda::splitTranslationUnit(s, 16);
  ASSERT_EQ(many.size(), 16u);
  for (const std::string &p : many)
    EXPECT_EQ(count(p, "extern \"C\""), 1u) << p;
}

TEST(TranslationUnits, FewKernelsOrOnePartIsTheSourceItself) {
  std::string source = generated(10);
  EXPECT_EQ(cuda::splitTranslationUnit(source, 1), std::vector<std::string>{source});
  EXPECT_EQ(cuda::splitTranslationUnit("int x;\n", 8), std::vector<std::string>{"int x;\n"});
  EXPECT_EQ(cuda::splitTranslationUnit(source, 1000).size(), 13u) << "at most one part per instantiation";
  // About one part per 4 instantiations, bounded by the threads.
  EXPECT_EQ(cuda::translationUnitParts(generated(2), 16), 1u);   // 5 statements
  EXPECT_EQ(cuda::translationUnitParts(generated(100), 64), 25u); // 103
  EXPECT_EQ(cuda::translationUnitParts(generated(500), 16), 16u);
  EXPECT_EQ(cuda::translationUnitParts(generated(500), 4), 4u);
  EXPECT_EQ(cuda::translationUnitParts(generated(500), 0), 1u);
}

TEST(TranslationUnits, PartsCompileWithNvrtcAndDefineEveryKernel) {
  if (!cuda::Nvrtc::available())
    GTEST_SKIP() << "NVRTC is not available";
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  std::vector<std::string> parts = cuda::splitTranslationUnit(generated(6), 2);
  ASSERT_EQ(parts.size(), 2u);
  std::vector<std::string> cubins;
  for (size_t i = 0; i < parts.size(); ++i)
    cubins.push_back(nvrtc.compile(parts[i], "part" + std::to_string(i) + ".cu", "sm_90", {}, 1).cubin);
  // A kernel's name is in the symbol table of exactly one part's cubin.
  for (const std::string &name : kernelNames(6)) {
    size_t in = 0;
    for (const std::string &c : cubins)
      in += c.find(std::string(name) + '\0') != std::string::npos;
    EXPECT_EQ(in, 1u) << name;
  }
}
