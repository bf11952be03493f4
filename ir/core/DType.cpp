#include "ir/core/DType.h"

namespace tensorc {

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return "f64";
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I1:
    return "i1";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtypeName(d) == name)
      return d;
  return std::nullopt;
}

double dtypeEpsilon(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return 2.220446049250313e-16; // 2^-52
  case DType::F16:
    return 0.0009765625; // 2^-10
  case DType::BF16:
    return 0.0078125; // 2^-7
  default:
    return 1.1920928955078125e-07; // 2^-23 (f32)
  }
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I1:
    return 1;
  }
  return 0;
}

} // namespace tensorc
