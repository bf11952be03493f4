// Element types of tc tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tensorc {

enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I1 };

inline constexpr DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                                       DType::I64, DType::I32, DType::I1};

std::string_view dtypeName(DType dtype);
// The machine epsilon of a float dtype (the distance from 1 to the next value).
double dtypeEpsilon(DType dtype);
std::optional<DType> parseDType(std::string_view name);
size_t dtypeSize(DType dtype);

inline bool isFloat(DType d) {
  return d == DType::F64 || d == DType::F32 || d == DType::F16 || d == DType::BF16;
}
inline bool isInteger(DType d) { return d == DType::I64 || d == DType::I32; }
inline bool isBool(DType d) { return d == DType::I1; }
// Integer or float: everything arithmetic applies to (not i1).
inline bool isNumeric(DType d) { return !isBool(d); }

} // namespace tensorc
