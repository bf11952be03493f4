// constant, full, zeros, ones, iota.
#include "compiler/interpreter/Kernels.h"

namespace tensorc::interp {
namespace {

std::vector<HostTensor> constant(const OpCall &c) {
  const DenseValue &v = getDense(c.attrs(), "value");
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i) {
    size_t j = v.size() == 1 ? 0 : size_t(i);
    isFloat(v.dtype) ? out.setF(i, v.floats[j]) : out.setI(i, v.ints[j]);
  }
  return {std::move(out)};
}

std::vector<HostTensor> filled(const OpCall &c) {
  const std::string &op = c.node.node->op;
  double value = op == "full" ? getFloat(c.attrs(), "value") : op == "ones" ? 1.0 : 0.0;
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i)
    out.setF(i, value);
  return {std::move(out)};
}

std::vector<HostTensor> iota(const OpCall &c) {
  int64_t start = getInt(c.attrs(), "start"), step = getInt(c.attrs(), "step");
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i)
    out.setI(i, start + i * step);
  return {std::move(out)};
}

} // namespace

void addCreationKernels(KernelTable &t) {
  t["constant"] = constant;
  t["full"] = t["zeros"] = t["ones"] = filled;
  t["iota"] = iota;
}

} // namespace tensorc::interp
