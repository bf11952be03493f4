// Gradient rules of the collectives. An SPMD program's gradient is that of
// the sum over devices of each device's objective (docs/sharding.md), so a
// collective's adjoint is the collective that sends each cotangent back to
// where its value came from: all_reduce <-> all_reduce, all_gather <->
// reduce_scatter, all_to_all <-> all_to_all with the axes swapped. all_slice
// and collective_broadcast move no data to a member that keeps no value, so
// their adjoints mask with the member's rank.
#include "compiler/autodiff/GradRules.h"

#include "ir/core/Error.h"

namespace tensorc::autodiff {
namespace {

using Grads = std::vector<std::optional<Tensor>>;
using trace::MeshAxes;

MeshAxes groupOf(const GradContext &c) {
  return {getEnum(c.attrs(), "mesh"), getStrings(c.attrs(), "axes")};
}

int64_t groupSize(const GradContext &c) {
  MeshAxes over = groupOf(c);
  return DeviceGroups(findMesh(c.tracer.graph().meshes, over.mesh), over.axes).groupSize();
}

// Where x held the extremum y: the members' ties share the cotangent evenly
// (the amax/amin convention of the reductions' rule). `total` is the sum of
// the cotangents that reach x, `y` the extremum in x's shape.
Tensor extremumShare(const GradContext &c, const Tensor &x, const Tensor &y, const Tensor &total) {
  Tensor hit = cast(eq(x, y), x.dtype());
  Tensor ties = all_reduce(hit, groupOf(c), "sum");
  return total * hit / ties;
}

Grads allReduceRule(const GradContext &c) {
  const std::string &reduction = getEnum(c.attrs(), "reduction");
  if (reduction == "sum" || reduction == "mean")
    return {all_reduce(c.grad(), groupOf(c), reduction)};
  return {extremumShare(c, c.in(0), c.outputs[0], all_reduce(c.grad(), groupOf(c), "sum"))};
}

Grads reduceScatterRule(const GradContext &c) {
  const std::string &reduction = getEnum(c.attrs(), "reduction");
  int64_t axis = getInt(c.attrs(), "axis");
  Tensor g = all_gather(c.grad(), groupOf(c), axis);
  if (reduction == "sum")
    return {g};
  if (reduction == "mean")
    return {g / double(groupSize(c))};
  return {extremumShare(c, c.in(0), all_gather(c.outputs[0], groupOf(c), axis), g)};
}

Grads allGatherRule(const GradContext &c) {
  return {reduce_scatter(c.grad(), groupOf(c), getInt(c.attrs(), "axis"), "sum")};
}

Grads allToAllRule(const GradContext &c) {
  return {all_to_all(c.grad(), groupOf(c), getInt(c.attrs(), "concat_axis"),
                     getInt(c.attrs(), "split_axis"))};
}

// This member's chunk of x got g; the other chunks were dropped here.
Grads allSliceRule(const GradContext &c) {
  const Tensor &x = c.in(0);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  Tensor g = c.grad();
  const Dim &chunk = g.shape()[axis];
  int64_t G = groupSize(c);
  // G copies of g along the axis, then zero all but this member's chunk.
  trace::DimSpec copies = dimSpec(g.shape());
  copies.insert(copies.begin() + axis, G);
  Tensor tiled = reshape(broadcast_to(unsqueeze(g, axis), copies), dimSpec(x.shape()));
  trace::DimSpec along(x.rank(), int64_t(1));
  along[axis] = dimSpec(x.shape())[axis];
  Tensor position = reshape(iota_length(c.tracer, along[axis]), along);
  Operand chunkLength = chunk.isStatic()
                            ? Operand(chunk.value())
                            : Operand(sum(ones(c.tracer, dimSpec({chunk}), DType::I64)));
  Tensor start = axis_index(c.tracer, groupOf(c)) * chunkLength;
  Tensor mine = logical_and(ge(position, start), lt(position, start + chunkLength));
  return {where(mine, tiled, 0.0)};
}

Grads collectiveBroadcastRule(const GradContext &c) {
  Tensor total = all_reduce(c.grad(), groupOf(c), "sum");
  Tensor isRoot = eq(axis_index(c.tracer, groupOf(c)), getInt(c.attrs(), "root"));
  return {where(isRoot, total, 0.0)};
}

} // namespace

const std::unordered_map<std::string, GradRule> &collectiveGradRules() {
  static const std::unordered_map<std::string, GradRule> rules = {
      {"all_reduce", allReduceRule},
      {"reduce_scatter", reduceScatterRule},
      {"all_gather", allGatherRule},
      {"all_to_all", allToAllRule},
      {"all_slice", allSliceRule},
      {"collective_broadcast", collectiveBroadcastRule},
  };
  return rules;
}

} // namespace tensorc::autodiff
