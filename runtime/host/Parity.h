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

// The rule between two implementations of one launch (an autotuning
// candidate against the default candidate's outputs): each float element
// within the dtype's tolerance of the tensor's largest magnitude (at least
// 1), not of its own. Implementations that sum in another order (split-K
// GEMMs, reductions over other lanes, attention's blocks) differ by rounding
// relative to the terms they add, which an element that cancels to near 0
// no longer shows: element-wise, cuDNN's and the generated attention's bf16
// dq differed by 3.7% of an element (2.19 against 2.11) while both were
// within 0.4% of the largest value of an f64 reference.
// `largest`: largestMagnitude(want), given when one reference is compared
// with many candidates; < 0: computed here.
std::string candidateMismatch(const HostTensor &got, const HostTensor &want, double largest = -1);
// The largest finite magnitude of a float tensor's elements, at least 1.
double largestMagnitude(const HostTensor &t);

} // namespace tensorc
