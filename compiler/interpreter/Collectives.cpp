// Collectives on N simulated devices: each gets every device's operand and
// returns every device's result, following docs/sharding.md exactly.
#include "compiler/interpreter/Collectives.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <cmath>

namespace tensorc::interp {
namespace {

void copyElement(HostTensor &dst, int64_t di, const HostTensor &src, int64_t si) {
  isFloat(src.dtype()) ? dst.setF(di, src.getF(si)) : dst.setI(di, src.getI(si));
}

int64_t offsetOf(const std::vector<int64_t> &coords, const std::vector<int64_t> &shape) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + coords[d];
  return offset;
}

// Chunk `index` of `parts` equal chunks of `x` along `axis`.
HostTensor chunk(const HostTensor &x, int64_t axis, int64_t parts, int64_t index) {
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= parts;
  HostTensor out(x.dtype(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, shape);
    coords[axis] += index * shape[axis];
    copyElement(out, i, x, offsetOf(coords, x.shape()));
  }
  return out;
}

// The members' tensors (all of one shape) concatenated along `axis`.
HostTensor concatenate(const std::vector<const HostTensor *> &parts, int64_t axis) {
  std::vector<int64_t> partShape = parts[0]->shape(), shape = partShape;
  shape[axis] *= int64_t(parts.size());
  HostTensor out(parts[0]->dtype(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, shape);
    int64_t member = coords[axis] / partShape[axis];
    coords[axis] %= partShape[axis];
    copyElement(out, i, *parts[size_t(member)], offsetOf(coords, partShape));
  }
  return out;
}

// The elementwise reduction of the members' tensors, accumulated in f64
// (i64 for integers) in rank order and rounded once.
HostTensor reduce(const std::vector<const HostTensor *> &members, const std::string &reduction) {
  HostTensor out(members[0]->dtype(), members[0]->shape());
  bool floating = isFloat(out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (floating) {
      double acc = members[0]->getF(i);
      for (size_t m = 1; m < members.size(); ++m) {
        double v = members[m]->getF(i);
        if (reduction == "sum" || reduction == "mean")
          acc += v;
        else if (std::isnan(acc) || std::isnan(v))
          acc = NAN; // max/min propagate NaN, as torch's do
        else
          acc = reduction == "max" ? std::max(acc, v) : std::min(acc, v);
      }
      out.setF(i, reduction == "mean" ? acc / double(members.size()) : acc);
    } else {
      int64_t acc = members[0]->getI(i);
      for (size_t m = 1; m < members.size(); ++m) {
        int64_t v = members[m]->getI(i);
        acc = reduction == "sum" ? int64_t(uint64_t(acc) + uint64_t(v)) // wraps, like the backends
              : reduction == "max" ? std::max(acc, v)
                                   : std::min(acc, v);
      }
      out.setI(i, acc);
    }
  }
  return out;
}

} // namespace

std::vector<HostTensor> runCollective(const CollectiveCall &c) {
  const std::string &op = c.node.node->op;
  const AttrMap &attrs = c.node.attrs;
  DeviceGroups groups(c.mesh, getStrings(attrs, "axes"));
  int64_t devices = c.mesh.numDevices(), G = groups.groupSize();
  std::vector<HostTensor> results;
  results.reserve(size_t(devices));
  for (int64_t d = 0; d < devices; ++d) {
    int64_t rank = groups.rankOf(d);
    if (op == "axis_index") {
      HostTensor r(DType::I64, {});
      r.setI(0, rank);
      results.push_back(std::move(r));
      continue;
    }
    const HostTensor &own = *c.x[size_t(d)];
    std::vector<const HostTensor *> members;
    for (int64_t device : groups.groupOf(d))
      members.push_back(c.x[size_t(device)]);
    auto axis = [&](const char *key) { return normalizeAxis(getInt(attrs, key), own.rank(), key); };
    if (op == "all_reduce") {
      results.push_back(reduce(members, getEnum(attrs, "reduction")));
    } else if (op == "reduce_scatter") {
      results.push_back(chunk(reduce(members, getEnum(attrs, "reduction")), axis("axis"), G, rank));
    } else if (op == "all_gather") {
      results.push_back(concatenate(members, axis("axis")));
    } else if (op == "all_slice") {
      results.push_back(chunk(own, axis("axis"), G, rank));
    } else if (op == "all_to_all") {
      std::vector<HostTensor> received;
      for (const HostTensor *m : members)
        received.push_back(chunk(*m, axis("split_axis"), G, rank));
      std::vector<const HostTensor *> parts;
      for (const HostTensor &r : received)
        parts.push_back(&r);
      results.push_back(concatenate(parts, axis("concat_axis")));
    } else if (op == "collective_broadcast") {
      results.push_back(*members[size_t(getInt(attrs, "root"))]);
    } else {
      fail("the interpreter has no collective '" + op + "'");
    }
    check(results.back().shape() == c.resultShape && results.back().dtype() == c.resultDType,
          "collective result has the wrong type");
  }
  return results;
}

} // namespace tensorc::interp
