// .npy files: round trips per dtype, and clear errors for bad files.
#include "TestUtil.h"
#include "runtime/host/Npy.h"
#include "ir/core/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tensorc;
using tensorc::testing::freshSeed;

namespace {

std::string errorOf(const std::string &bytes, std::optional<DType> expected = std::nullopt) {
  try {
    parseNpy(bytes, "t.npy", expected);
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType d : kAllDTypes) {
    HostTensor t(d, {2, 3});
    for (int64_t i = 0; i < t.numel(); ++i)
      isFloat(d) ? t.setF(i, i * 0.5 - 1) : t.setI(i, i % 2 ? i : -i);
    HostTensor back = parseNpy(formatNpy(t), "t.npy", d);
    ASSERT_EQ(back.dtype(), d);
    ASSERT_EQ(back.shape(), t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      EXPECT_EQ(back.getF(i), t.getF(i)) << dtypeName(d) << " " << i;
  }
}

TEST(Npy, HeaderIsNumPyCompatible) {
  HostTensor t(DType::F32, {5});
  std::string bytes = formatNpy(t);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"),
            std::string::npos);
  EXPECT_EQ((bytes.size() - 5 * 4) % 64, 0u);
  HostTensor scalar(DType::I1, {});
  EXPECT_NE(formatNpy(scalar).find("'shape': ()"), std::string::npos);
}

TEST(Npy, BadFilesGiveErrors) {
  HostTensor t(DType::F32, {4});
  std::string good = formatNpy(t);
  EXPECT_EQ(errorOf("hello"), "t.npy: not a .npy file (bad magic)");
  EXPECT_EQ(errorOf(good.substr(0, good.size() - 3)),
            "t.npy: holds 13 data bytes; shape (4) needs 16 (truncated?)");
  EXPECT_EQ(errorOf(good.substr(0, 20)), "t.npy: truncated .npy header");
  EXPECT_EQ(errorOf(good, DType::I64), "t.npy: holds f32 ('<f4') but i64 is expected");
  std::string bigEndian = good;
  bigEndian.replace(bigEndian.find("<f4"), 3, ">f4");
  EXPECT_EQ(errorOf(bigEndian),
            "t.npy: unsupported dtype '>f4' (supported: <f8 <f4 <f2 <i8 <i4 |b1)");
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_EQ(errorOf(fortran),
            "t.npy: Fortran-order arrays are not supported; save with np.ascontiguousarray");
  // bf16 inputs read from f32 files, rounded.
  HostTensor f(DType::F32, {1});
  f.setF(0, 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(parseNpy(formatNpy(f), "t.npy", DType::BF16).getF(0), 1.0);
}

} // namespace

namespace {

TEST(Npy, CorruptedFilesFailCleanly) {
  HostTensor t(DType::F32, {3, 5});
  std::string good = formatNpy(t);
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    for (int e = 0; e < 1 + int(rng() % 3) && !bytes.empty(); ++e) {
      size_t at = rng() % bytes.size();
      if (rng() % 3 == 0)
        bytes = bytes.substr(0, at);
      else
        bytes[at] = char(rng() % 256);
    }
    try {
      parseNpy(bytes, "fuzz.npy");
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()).rfind("fuzz.npy", 0), 0u) << e.what();
    } catch (const std::exception &e) {
      ADD_FAILURE() << "unexpected exception: " << e.what();
    }
  }
}

} // namespace
