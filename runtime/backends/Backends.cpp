// The one place that knows every backend: an artifact's target picks it.
#include "runtime/core/Backend.h"

#include "ir/core/Error.h"
#include "runtime/cuda/CudaBackend.h"

namespace tensorc::runtime {

std::unique_ptr<Backend> makeBackend(const artifact::Artifact &a, const std::string &where,
                                     const LoadOptions &options) {
  if (a.target.kind == "cpu")
    return makeCpuBackend(a, where, options);
  if (a.target.kind == "cuda")
    return makeCudaBackend(a, where, options);
  fail(where + ": compiled for target '" + a.target.kind +
       "', but this runtime runs only 'cpu' and 'cuda' artifacts");
}

} // namespace tensorc::runtime
