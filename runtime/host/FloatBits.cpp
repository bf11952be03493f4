#include "runtime/host/FloatBits.h"

#include <cmath>

namespace tensorc {
namespace {

// An IEEE-style binary format with `E` exponent bits and `M` mantissa bits.
// Rounding is done once, from double, with nearbyint (ties to even).
template <int E, int M> uint16_t encode(double v) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr int minNormalExp = 1 - bias;
  constexpr uint32_t expMask = ((1u << E) - 1) << M;
  uint32_t sign = std::signbit(v) ? 1u << (E + M) : 0;
  if (std::isnan(v))
    return uint16_t(sign | expMask | (1u << (M - 1)));
  double a = std::fabs(v);
  if (std::isinf(a))
    return uint16_t(sign | expMask);
  if (a == 0)
    return uint16_t(sign);
  int ex;
  std::frexp(a, &ex);
  int exponent = ex - 1; // a = 1.f * 2^exponent
  if (exponent < minNormalExp) {
    // Subnormal: units of 2^(minNormalExp - M). q == 2^M becomes the smallest
    // normal number, whose encoding is exactly q.
    double q = std::nearbyint(std::ldexp(a, M - minNormalExp));
    return uint16_t(sign | uint32_t(q));
  }
  double q = std::nearbyint(std::ldexp(a, M - exponent)); // in [2^M, 2^(M+1)]
  if (q >= double(1u << (M + 1))) {
    q /= 2;
    ++exponent;
  }
  if (exponent > bias)
    return uint16_t(sign | expMask);
  return uint16_t(sign | (uint32_t(exponent + bias) << M) | (uint32_t(q) - (1u << M)));
}

template <int E, int M> double decode(uint16_t bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  uint32_t mant = bits & ((1u << M) - 1);
  uint32_t exp = (bits >> M) & ((1u << E) - 1);
  double sign = (bits >> (E + M)) & 1 ? -1.0 : 1.0;
  if (exp == (1u << E) - 1)
    return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0)
    return sign * std::ldexp(double(mant), 1 - bias - M);
  return sign * std::ldexp(double(mant + (1u << M)), int(exp) - bias - M);
}

} // namespace

uint16_t doubleToHalfBits(double v) { return encode<5, 10>(v); }
double halfBitsToDouble(uint16_t bits) { return decode<5, 10>(bits); }
uint16_t doubleToBFloat16Bits(double v) { return encode<8, 7>(v); }

} // namespace tensorc
