// Conversions between double and the 16-bit float formats (IEEE binary16 and
// bfloat16), with round-to-nearest-even, subnormals, infinities and nan.
#pragma once

#include <cstdint>

namespace tensorc {

uint16_t doubleToHalfBits(double v);
double halfBitsToDouble(uint16_t bits);
uint16_t doubleToBFloat16Bits(double v);
double bfloat16BitsToDouble(uint16_t bits);

} // namespace tensorc
