#include "runtime/host/Parity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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

std::string parityMismatch(const HostTensor &got, const HostTensor &want, double tolerance) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtypeName(got.dtype())) + " vs " + std::string(dtypeName(want.dtype()));
  if (got.shape() != want.shape())
    return "shape " + got.shapeStr() + " vs " + want.shapeStr();
  double tol = tolerance >= 0 ? tolerance : parityTolerance(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (!isFloat(want.dtype())) {
      ok = got.getI(i) == want.getI(i);
    } else {
      double x = got.getF(i), y = want.getF(i);
      ok = std::isnan(y)   ? std::isnan(x)
           : std::isinf(y) ? x == y
                           : std::fabs(x - y) <= tol * std::max(1.0, std::fabs(y));
    }
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %lld: got %.9g, want %.9g", (long long)i, got.getF(i),
                    want.getF(i));
      return buf;
    }
  }
  return "";
}

} // namespace tensorc
