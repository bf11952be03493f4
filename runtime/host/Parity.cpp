#include "runtime/host/Parity.h"

#include "runtime/host/FloatBits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace tensorc {

double parityTolerance(DType d) {
  switch (d) {
  case DType::F64:
    return 1e-9;
  case DType::F32:
    return 2e-4;
  case DType::F16:
    return 4e-3;
  case DType::BF16:
    return 2e-2;
  default:
    return 0;
  }
}

namespace {

// Element i of a float tensor of dtype `d` at `p`, as a double.
template <DType d> double floatAt(const uint8_t *p, int64_t i) {
  if constexpr (d == DType::F64) {
    double v;
    std::memcpy(&v, p + i * 8, 8);
    return v;
  } else if constexpr (d == DType::F32) {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  } else {
    uint16_t bits;
    std::memcpy(&bits, p + i * 2, 2);
    return d == DType::BF16 ? bfloat16BitsToDouble(bits) : halfBitsToDouble(bits);
  }
}

// The first element of float tensors that breaks |got - want| <= tolerance *
// max(floor, |want|) (nan where nan, infinities exact), or -1. One loop per
// dtype: the autotuner compares outputs of tens of millions of elements.
template <DType d>
int64_t firstBadFloat(const HostTensor &got, const HostTensor &want, double tolerance, double floor) {
  const uint8_t *g = got.data(), *w = want.data();
  for (int64_t i = 0, n = want.numel(); i < n; ++i) {
    const double x = floatAt<d>(g, i), y = floatAt<d>(w, i);
    const bool ok = std::isnan(y)   ? std::isnan(x)
                    : std::isinf(y) ? x == y
                                    : std::fabs(x - y) <= tolerance * std::max(floor, std::fabs(y));
    if (!ok)
      return i;
  }
  return -1;
}

// Calls `f.template operator()<d>()` for a float dtype `d`; false for others.
template <typename F> bool withFloatType(DType dtype, F &&f) {
  switch (dtype) {
  case DType::F64:
    f.template operator()<DType::F64>();
    return true;
  case DType::F32:
    f.template operator()<DType::F32>();
    return true;
  case DType::F16:
    f.template operator()<DType::F16>();
    return true;
  case DType::BF16:
    f.template operator()<DType::BF16>();
    return true;
  default:
    return false;
  }
}

int64_t firstBad(const HostTensor &got, const HostTensor &want, double tolerance, double floor) {
  int64_t bad = -1;
  if (withFloatType(want.dtype(), [&]<DType d>() { bad = firstBadFloat<d>(got, want, tolerance, floor); }))
    return bad;
  for (int64_t i = 0, n = want.numel(); i < n; ++i)
    if (got.getI(i) != want.getI(i))
      return i;
  return -1;
}

// "" or the first difference, in words (after the same dtype and shape).
std::string firstMismatch(const HostTensor &got, const HostTensor &want, double tolerance, double floor) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtypeName(got.dtype())) + " vs " + std::string(dtypeName(want.dtype()));
  if (got.shape() != want.shape())
    return "shape " + got.shapeStr() + " vs " + want.shapeStr();
  const int64_t i = firstBad(got, want, tolerance, floor);
  if (i < 0)
    return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "element %lld: got %.9g, want %.9g", (long long)i, got.getF(i), want.getF(i));
  return buf;
}

} // namespace

std::string parityMismatch(const HostTensor &got, const HostTensor &want, double tolerance) {
  return firstMismatch(got, want, tolerance >= 0 ? tolerance : parityTolerance(want.dtype()), 1.0);
}

double largestMagnitude(const HostTensor &t) {
  double largest = 1.0;
  withFloatType(t.dtype(), [&]<DType d>() {
    const uint8_t *p = t.data();
    for (int64_t i = 0, n = t.numel(); i < n; ++i)
      if (double y = std::fabs(floatAt<d>(p, i)); std::isfinite(y))
        largest = std::max(largest, y);
  });
  return largest;
}

std::string candidateMismatch(const HostTensor &got, const HostTensor &want, double largest) {
  if (largest < 0)
    largest = largestMagnitude(want);
  std::string why = firstMismatch(got, want, parityTolerance(want.dtype()), largest);
  if (!why.empty() && isFloat(want.dtype())) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (tolerance %g of the largest magnitude, %.9g)", parityTolerance(want.dtype()),
                  largest);
    why += buf;
  }
  return why;
}

} // namespace tensorc
