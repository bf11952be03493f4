#include "runtime/host/HostTensor.h"

#include "ir/core/Error.h"
#include "runtime/host/FloatBits.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tensorc {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  uint64_t n = 1;
  for (int64_t d : shape_) {
    check(d >= 0, "tensor dims must be >= 0, got " + std::to_string(d));
    check(!__builtin_mul_overflow(n, uint64_t(d), &n), "tensor size overflows");
  }
  uint64_t bytes;
  check(!__builtin_mul_overflow(n, uint64_t(dtypeSize(dtype)), &bytes) && bytes <= kMaxBytes,
        "a tensor of shape " + shapeStr() + " " + std::string(dtypeName(dtype)) +
            " exceeds the host limit of 16 GiB");
  numel_ = int64_t(n);
  bytes_.assign(bytes, 0);
}

template <typename T> static T load(const std::vector<uint8_t> &b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T> static void store(std::vector<uint8_t> &b, int64_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

double HostTensor::getF(int64_t i) const {
  switch (dtype_) {
  case DType::F64:
    return load<double>(bytes_, i);
  case DType::F32:
    return load<float>(bytes_, i);
  case DType::F16:
    return halfBitsToDouble(load<uint16_t>(bytes_, i));
  case DType::BF16:
    return bfloat16BitsToDouble(load<uint16_t>(bytes_, i));
  case DType::I64:
    return double(load<int64_t>(bytes_, i));
  case DType::I32:
    return double(load<int32_t>(bytes_, i));
  case DType::I1:
    return load<uint8_t>(bytes_, i) ? 1.0 : 0.0;
  }
  return 0;
}

int64_t HostTensor::getI(int64_t i) const {
  switch (dtype_) {
  case DType::I64:
    return load<int64_t>(bytes_, i);
  case DType::I32:
    return load<int32_t>(bytes_, i);
  case DType::I1:
    return load<uint8_t>(bytes_, i) ? 1 : 0;
  default: {
    double v = getF(i);
    if (std::isnan(v))
      return 0;
    if (v >= 9.2233720368547758e18)
      return std::numeric_limits<int64_t>::max();
    if (v <= -9.2233720368547758e18)
      return std::numeric_limits<int64_t>::min();
    return int64_t(v);
  }
  }
}

void HostTensor::setF(int64_t i, double v) {
  switch (dtype_) {
  case DType::F64:
    store<double>(bytes_, i, v);
    return;
  case DType::F32:
    store<float>(bytes_, i, float(v));
    return;
  case DType::F16:
    store<uint16_t>(bytes_, i, doubleToHalfBits(v));
    return;
  case DType::BF16:
    store<uint16_t>(bytes_, i, doubleToBFloat16Bits(v));
    return;
  case DType::I1:
    store<uint8_t>(bytes_, i, v != 0 ? 1 : 0);
    return;
  case DType::I64:
  case DType::I32: {
    int64_t x;
    if (std::isnan(v))
      x = 0;
    else if (v >= 9.2233720368547758e18)
      x = std::numeric_limits<int64_t>::max();
    else if (v <= -9.2233720368547758e18)
      x = std::numeric_limits<int64_t>::min();
    else
      x = int64_t(v);
    if (dtype_ == DType::I32)
      x = std::clamp<int64_t>(x, std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max());
    setI(i, x);
    return;
  }
  }
}

void HostTensor::setI(int64_t i, int64_t v) {
  switch (dtype_) {
  case DType::I64:
    store<int64_t>(bytes_, i, v);
    return;
  case DType::I32:
    store<int32_t>(bytes_, i, int32_t(uint32_t(uint64_t(v))));
    return;
  case DType::I1:
    store<uint8_t>(bytes_, i, v != 0 ? 1 : 0);
    return;
  default:
    setF(i, double(v));
    return;
  }
}

void HostTensor::fillBytes(uint8_t pattern) {
  if (!bytes_.empty()) // an empty vector may have no buffer: memset(nullptr) is undefined
    std::memset(bytes_.data(), pattern, bytes_.size());
}

std::string HostTensor::shapeStr() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + ")";
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

} // namespace tensorc
