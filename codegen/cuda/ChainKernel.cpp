// Chain kernels of the CUDA backend: a chain of nests over the same rows
// (softmax's max, sum and normalize; a layer norm's passes) runs as one
// kernel, one row per block, each nest's row template in turn.
#include "codegen/cuda/CudaKernel.h"
#include "codegen/cuda/PointPrinter.h"

#include <sstream>

namespace tensorc::codegen::cuda {

// Chain kernels' pointers are not __restrict__: later nests read what
// earlier ones wrote (see the row template).
std::vector<KernelVariant> CudaSourceBuilder::addChain(const std::string &name,
                                                     const std::vector<ChainedNest> &nests,
                                                     const std::vector<std::string> &symbols,
                                                     const Dim &rows) {
  std::ostringstream os;
  std::string params, body;
  size_t k = 0;
  for (size_t n = 0; n < nests.size(); ++n) {
    std::string args;
    for (size_t o = 0; o < nests[n].operands.size(); ++o, ++k) {
      params += (params.empty() ? "" : ", ") + std::string(o ? "const " : "") +
                storageCType(nests[n].operands[o]) + " *p" + std::to_string(k);
      args += ", p" + std::to_string(k);
    }
    for (size_t i = 0; i < symbols.size(); ++i)
      args += ", s" + std::to_string(i);
    if (n)
      body += "  __syncthreads(); // the next nest reads this row's results\n";
    body += "  " + nests[n].symbol + "_row<BLOCK>(i0" + args + ");\n";
  }
  for (size_t i = 0; i < symbols.size(); ++i)
    params += ", long long s" + std::to_string(i);
  os << "// " << name << ": one row per block through " << nests.size() << " nests\n";
  os << "template <int BLOCK>\n__device__ __forceinline__ void " << name << "_body(" << params << ") {\n";
  os << "  const long long i0 = blockIdx.x;\n";
  os << "  if (i0 >= " << dimExpr(rows, symbols) << ") return;\n";
  os << body << "}\n";
  std::string callArgs;
  for (size_t i = 0; i < k; ++i)
    callArgs += (i ? ", p" : "p") + std::to_string(i);
  for (size_t i = 0; i < symbols.size(); ++i)
    callArgs += ", s" + std::to_string(i);
  for (const KernelVariant &v : chainVariants())
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << name << "_" << v.name() << "("
       << params << ") { " << name << "_body<" << v.block << ">(" << callArgs << "); }\n";
  os << "\n";
  kernels_ += os.str();
  return chainVariants();
}

} // namespace tensorc::codegen::cuda
