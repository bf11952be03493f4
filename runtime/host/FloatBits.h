// Conversions between double and the 16-bit float formats (IEEE binary16 and
// bfloat16), with round-to-nearest-even, subnormals, infinities and nan.
#pragma once

#include <cstdint>
#include <cstring>

namespace tensorc {

uint16_t doubleToHalfBits(double v);
double halfBitsToDouble(uint16_t bits);
uint16_t doubleToBFloat16Bits(double v);
// bfloat16 is the top half of an f32, so widening is exact; inline because
// the autotuner's output checks widen tens of millions of elements.
inline double bfloat16BitsToDouble(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

} // namespace tensorc
