// Shape and dtype inference for every op of v1, on MLIR-free types.
//
// The MLIR verifier, the graph-file importer, the tracing API and the
// interpreter all call this, so each op's typing rule exists exactly once.
// Errors are thrown as tensorc::Error with a message that names the operands
// by the names the caller passed ("inner dims differ: x is (B, 784), w1 is
// (512, 256)"); the caller adds the file, node and op.
#pragma once

#include "ir/core/Mesh.h"
#include "ir/core/OpSchema.h"

#include <optional>
#include <string>
#include <vector>

namespace tensorc {

struct OperandRef {
  std::optional<TensorSpec> spec; // nullopt: an absent optional operand
  std::string name;               // for messages
};

// `operands` follows the schema's operand order, with a variadic operand
// expanded in place; `attrs` must come from completeAttrs(). `meshes` are
// the module's: a collective's result shape depends on its group's size.
std::vector<TensorSpec> inferResultTypes(const OpSchema &op, const std::vector<OperandRef> &operands,
                                         const AttrMap &attrs, const std::vector<Mesh> &meshes = {});

// Helpers shared with the interpreter, which applies the same rules to
// concrete sizes.
int64_t normalizeAxis(int64_t axis, int64_t rank, const char *what = "axis");
// Sorted, deduplicated-or-rejected axes; all axes when `axes` is absent.
std::vector<int64_t> normalizeAxes(const AttrMap &attrs, const char *key, int64_t rank);
Shape broadcastShapes(const Shape &a, const Shape &b, const std::string &aName,
                      const std::string &bName);

struct SliceRange {
  int64_t start, step, length;
};
// Python/PyTorch slice semantics on a dim of `size`: negative indices count
// from the end, out-of-range bounds clamp, step must be positive.
SliceRange sliceRange(int64_t size, int64_t start, int64_t end, int64_t step);
// slice's attributes with the defaults filled in (axes 0..n-1, steps 1);
// lengths are checked by shape inference, not here.
struct SliceAttrs {
  std::vector<int64_t> axes, starts, ends, steps;
};
SliceAttrs sliceAttrs(const AttrMap &attrs);
// Output size of a pooling/convolution window sweep.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                         bool ceilMode);
// The stride of max/avg_pool2d: the attribute, or the kernel size when absent.
std::vector<int64_t> poolStride(const AttrMap &attrs);

} // namespace tensorc
