// The rule every compiled backend is held to against the reference
// interpreter: same shape and dtype, integers exact, floats within a
// relative tolerance by dtype (a few hundred ulps: compiled code accumulates
// in f32 in any order and uses polynomial math), nan where nan, infinities
// exact. Shared by the unit tests and the GPU bundle's checker.
#pragma once

#include "runtime/host/HostTensor.h"

#include <string>

namespace tensorc {

// f64 1e-9, f32 2e-4, f16 4e-3, bf16 2e-2, integers 0.
double parityTolerance(DType dtype);
// "" when `got` matches `want`, else the first difference, in words.
// `tolerance` < 0: parityTolerance(want's dtype). A caller that knows the
// value went through a less precise dtype passes that dtype's tolerance.
std::string parityMismatch(const HostTensor &got, const HostTensor &want, double tolerance = -1);

} // namespace tensorc
