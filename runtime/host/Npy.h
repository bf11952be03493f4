// NumPy .npy files (format versions 1.0-3.0, little-endian, C order).
//
// dtypes map as f64 <f8, f32 <f4, f16 <f2, i64 <i8, i32 <i4, i1 |b1. NumPy has
// no bfloat16, so bf16 tensors are written as <f4 (exactly) and a bf16 input
// may be read from <f4 or <f8 (rounded to nearest even).
#pragma once

#include "runtime/host/HostTensor.h"

#include <optional>
#include <string>

namespace tensorc {

// Reads `path`; with `expected`, converts <f4/<f8 to bf16 when asked for
// bf16 and otherwise requires that dtype. Throws Error naming the file.
HostTensor readNpy(const std::string &path, std::optional<DType> expected = std::nullopt);
HostTensor parseNpy(const std::string &bytes, const std::string &where,
                    std::optional<DType> expected = std::nullopt);
std::string formatNpy(const HostTensor &tensor);
// Writes atomically (a temporary file renamed into place).
void writeNpy(const std::string &path, const HostTensor &tensor);

} // namespace tensorc
