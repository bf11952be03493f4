// A dense row-major tensor in host memory: what the interpreter computes on
// and what .npy files hold. Element access goes through double (floats) or
// int64 (integers and bools) so that code can be written once for every dtype.
#pragma once

#include "ir/core/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tensorc {

class HostTensor {
public:
  // The largest tensor the host path allocates; larger requests are errors.
  static constexpr uint64_t kMaxBytes = uint64_t(16) << 30;

  HostTensor() = default;
  // Zero-filled; throws Error if the size is invalid or too large.
  HostTensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return int64_t(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return bytes_.size(); }
  uint8_t *data() { return bytes_.data(); }
  const uint8_t *data() const { return bytes_.data(); }

  // Element `i` (row-major) as double: exact for every float dtype and for
  // integers up to 2^53.
  double getF(int64_t i) const;
  // Element `i` as int64: integers and bools exactly, floats truncated.
  int64_t getI(int64_t i) const;
  // Stores `v` rounded to the dtype (nearest even; to i1 as v != 0; to
  // integers truncated toward zero and saturated, nan as 0).
  void setF(int64_t i, double v);
  // Stores `v` (wrapping to i32, as C++ conversion does; to i1 as v != 0).
  void setI(int64_t i, int64_t v);

  // Fills every element with `pattern` bytes (poisoning before a run).
  void fillBytes(uint8_t pattern);
  std::string shapeStr() const; // "(2, 3)"

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

} // namespace tensorc
