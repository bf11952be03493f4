// f16/bf16 conversions: exact encodings of known values and rounding rules.
#include "runtime/host/FloatBits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tensorc;

TEST(FloatBits, HalfKnownValues) {
  EXPECT_EQ(doubleToHalfBits(1.0), 0x3c00);
  EXPECT_EQ(doubleToHalfBits(-2.0), 0xc000);
  EXPECT_EQ(doubleToHalfBits(65504.0), 0x7bff);                    // largest finite
  EXPECT_EQ(doubleToHalfBits(65519.99), 0x7bff);                   // rounds down to it
  EXPECT_EQ(doubleToHalfBits(65520.0), 0x7c00);                    // the tie rounds to inf
  EXPECT_EQ(doubleToHalfBits(std::ldexp(1.0, -24)), 0x0001);       // smallest subnormal
  EXPECT_EQ(doubleToHalfBits(std::ldexp(1.0, -25)), 0x0000);       // tie to even: 0
  EXPECT_EQ(doubleToHalfBits(std::ldexp(3.0, -25)), 0x0002);       // 1.5 ulp: tie to even: 2
  EXPECT_EQ(doubleToHalfBits(std::ldexp(1.0, -14)), 0x0400);       // smallest normal
  EXPECT_EQ(doubleToHalfBits(1.0 + std::ldexp(1.0, -11)), 0x3c00); // tie to even
  EXPECT_EQ(doubleToHalfBits(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);
  EXPECT_EQ(doubleToHalfBits(-0.0), 0x8000);
  EXPECT_EQ(doubleToHalfBits(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(halfBitsToDouble(doubleToHalfBits(NAN))));
  EXPECT_EQ(halfBitsToDouble(0x3555), 0.333251953125);
  EXPECT_EQ(halfBitsToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(halfBitsToDouble(0xfbff), -65504.0);
}

TEST(FloatBits, BFloat16KnownValues) {
  EXPECT_EQ(doubleToBFloat16Bits(1.0), 0x3f80);
  EXPECT_EQ(doubleToBFloat16Bits(-1.5), 0xbfc0);
  EXPECT_EQ(doubleToBFloat16Bits(1.0 + std::ldexp(1.0, -8)), 0x3f80); // tie to even
  EXPECT_EQ(doubleToBFloat16Bits(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82);
  EXPECT_EQ(doubleToBFloat16Bits(3.0e38), 0x7f62);
  EXPECT_EQ(doubleToBFloat16Bits(3.5e38), 0x7f80); // overflow to inf
  EXPECT_EQ(bfloat16BitsToDouble(0x4049), 3.140625);
}

TEST(FloatBits, AgreesWithFloatTruncationForBFloat16) {
  // bf16 is the top half of an f32: every f32 whose low half is zero converts exactly.
  for (uint32_t top : {0x0001u, 0x0080u, 0x3f80u, 0x4049u, 0x7f7fu, 0x8001u, 0xc2f7u}) {
    uint32_t bits = top << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(doubleToBFloat16Bits(f), top);
    EXPECT_EQ(bfloat16BitsToDouble(uint16_t(top)), double(f));
  }
}

TEST(FloatBits, RoundTripsEveryHalf) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    double v = halfBitsToDouble(uint16_t(b));
    if (std::isnan(v))
      continue;
    ASSERT_EQ(doubleToHalfBits(v), b) << std::hex << b;
  }
}
