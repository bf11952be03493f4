#include "runtime/core/ScatterAdd.h"

#include "ir/core/Error.h"
#include "runtime/host/FloatBits.h"

#include <cstring>
#include <vector>

namespace tensorc::runtime {
namespace {

template <typename Acc>
void sumRows(Acc *out, const ScatterAddOperands &op, const std::string &label) {
  std::memset(out, 0, size_t(op.numWeights * op.width) * sizeof(Acc));
  std::vector<Acc> row(size_t(op.width));
  for (int64_t r = 0; r < op.rows; ++r) {
    int64_t v = op.indexDtype == DType::I64 ? static_cast<const int64_t *>(op.indices)[r]
                                            : static_cast<const int32_t *>(op.indices)[r];
    check(v >= 0 && v < op.numWeights, "step '" + label + "': index " + std::to_string(v) + " (position " +
                                           std::to_string(r) + ") is outside the table's rows [0, " +
                                           std::to_string(op.numWeights) + ")");
    if (v == op.skipIndex)
      continue;
    Acc *dst = out + v * op.width;
    int64_t base = r * op.width;
    switch (op.gradDtype) {
    case DType::F32:
      for (int64_t c = 0; c < op.width; ++c)
        dst[c] += Acc(static_cast<const float *>(op.grad)[base + c]);
      break;
    case DType::F64:
      for (int64_t c = 0; c < op.width; ++c)
        dst[c] += Acc(static_cast<const double *>(op.grad)[base + c]);
      break;
    case DType::F16:
      for (int64_t c = 0; c < op.width; ++c)
        dst[c] += Acc(halfBitsToDouble(static_cast<const uint16_t *>(op.grad)[base + c]));
      break;
    case DType::BF16:
      for (int64_t c = 0; c < op.width; ++c)
        dst[c] += Acc(bfloat16BitsToDouble(static_cast<const uint16_t *>(op.grad)[base + c]));
      break;
    default:
      fail("step '" + label + "': a scatter-add of a non-float tensor");
    }
  }
}

} // namespace

void scatterAdd(const ScatterAddOperands &op, const std::string &label) {
  check(op.indexDtype == DType::I64 || op.indexDtype == DType::I32,
        "step '" + label + "': scatter-add indices are not i32/i64");
  if (op.outDtype == DType::F64)
    sumRows(static_cast<double *>(op.out), op, label);
  else if (op.outDtype == DType::F32)
    sumRows(static_cast<float *>(op.out), op, label);
  else
    fail("step '" + label + "': a scatter-add into " + std::string(dtypeName(op.outDtype)) + " (f32/f64 only)");
}

} // namespace tensorc::runtime
