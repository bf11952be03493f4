// The CUDA backend of the runtime (runtime/core/Backend.h).
#pragma once

#include "runtime/core/Backend.h"

namespace tensorc::runtime {

// Throws Error (no driver, NVRTC missing or failing, ...) naming `where`.
std::unique_ptr<Backend> makeCudaBackend(const artifact::Artifact &a, const std::string &where,
                                         const LoadOptions &options);

} // namespace tensorc::runtime
