// Shape ops: every one copies elements by explicit index arithmetic.
#include "compiler/interpreter/Kernels.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <limits>
#include <numeric>

namespace tensorc::interp {
namespace {

void copyElement(HostTensor &dst, int64_t di, const HostTensor &src, int64_t si) {
  isFloat(src.dtype()) ? dst.setF(di, src.getF(si)) : dst.setI(di, src.getI(si));
}

// reshape, squeeze, unsqueeze, flatten: same row-major elements.
std::vector<HostTensor> sameElements(const OpCall &c) {
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i)
    copyElement(out, i, c.arg(0), i);
  return {std::move(out)};
}

std::vector<HostTensor> permuteBy(const OpCall &c, const std::vector<int64_t> &perm) {
  const HostTensor &x = c.arg(0);
  HostTensor out = c.result();
  std::vector<int64_t> strides = rowMajorStrides(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += coords[d] * strides[perm[d]];
    copyElement(out, i, x, src);
  }
  return {std::move(out)};
}

std::vector<HostTensor> permute(const OpCall &c) {
  std::vector<int64_t> perm;
  for (int64_t d : getInts(c.attrs(), "dims"))
    perm.push_back(normalizeAxis(d, c.arg(0).rank()));
  return permuteBy(c, perm);
}

std::vector<HostTensor> transpose(const OpCall &c) {
  int64_t r = c.arg(0).rank();
  std::vector<int64_t> perm(r);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normalizeAxis(getInt(c.attrs(), "dim0"), r)],
            perm[normalizeAxis(getInt(c.attrs(), "dim1"), r)]);
  return permuteBy(c, perm);
}

std::vector<HostTensor> broadcastTo(const OpCall &c) {
  HostTensor out = c.result();
  for (int64_t i = 0; i < out.numel(); ++i)
    copyElement(out, i, c.arg(0), broadcastOffset(unravel(i, out.shape()), c.arg(0).shape()));
  return {std::move(out)};
}

std::vector<HostTensor> slice(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  const AttrMap &a = c.attrs();
  int64_t r = x.rank();
  std::vector<int64_t> start(r, 0), step(r, 1);
  const auto &[axes, starts, ends, steps] = sliceAttrs(a);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = normalizeAxis(axes[i], r);
    SliceRange range = sliceRange(x.shape()[axis], starts[i], ends[i], steps[i]);
    start[axis] = range.start;
    step[axis] = range.step;
  }
  HostTensor out = c.result();
  std::vector<int64_t> strides = rowMajorStrides(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    int64_t src = 0;
    for (int64_t d = 0; d < r; ++d)
      src += (start[d] + coords[d] * step[d]) * strides[d];
    copyElement(out, i, x, src);
  }
  return {std::move(out)};
}

std::vector<HostTensor> concat(const OpCall &c) {
  HostTensor out = c.result();
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), out.rank());
  int64_t outer = product(out.shape(), 0, axis), inner = product(out.shape(), axis + 1, out.rank());
  int64_t offset = 0;
  for (const HostTensor *in : c.args) {
    int64_t n = in->shape()[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < inner; ++i)
          copyElement(out, (o * out.shape()[axis] + offset + k) * inner + i, *in,
                      (o * n + k) * inner + i);
    offset += n;
  }
  return {std::move(out)};
}

std::vector<HostTensor> split(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  int64_t outer = product(x.shape(), 0, axis), inner = product(x.shape(), axis + 1, x.rank());
  std::vector<HostTensor> outs;
  int64_t offset = 0;
  for (size_t p = 0; p < c.resultShapes.size(); ++p) {
    HostTensor out = c.result(p);
    int64_t n = out.shape()[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < inner; ++i)
          copyElement(out, (o * n + k) * inner + i, x,
                      (o * x.shape()[axis] + offset + k) * inner + i);
    offset += n;
    outs.push_back(std::move(out));
  }
  return outs;
}

// Copies x along `axis` at the positions an index tensor names: indexOf
// gives, for output element i at coordinates coords, where in `index` its
// position is read. Out-of-range indices are an error, as in PyTorch.
template <typename IndexOf> HostTensor selectAlongAxis(const OpCall &c, IndexOf indexOf) {
  const HostTensor &x = c.arg(0), &index = c.arg(1);
  int64_t axis = normalizeAxis(getInt(c.attrs(), "axis"), x.rank());
  HostTensor out = c.result();
  std::vector<int64_t> strides = rowMajorStrides(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    int64_t k = index.getI(indexOf(i, coords, axis));
    check(k >= 0 && k < x.shape()[axis], "index " + std::to_string(k) + " is out of range [0, " +
                                             std::to_string(x.shape()[axis]) + ")");
    coords[axis] = k;
    int64_t src = 0;
    for (int64_t d = 0; d < x.rank(); ++d)
      src += coords[d] * strides[d];
    copyElement(out, i, x, src);
  }
  return out;
}

// gather: the index has the output's shape; element i reads index[i].
std::vector<HostTensor> gather(const OpCall &c) {
  return {selectAlongAxis(c, [](int64_t i, const std::vector<int64_t> &, int64_t) { return i; })};
}

// index_select: a 1-D index along `axis`.
std::vector<HostTensor> indexSelect(const OpCall &c) {
  return {selectAlongAxis(c, [](int64_t, const std::vector<int64_t> &coords, int64_t axis) {
    return coords[axis];
  })};
}

std::vector<HostTensor> pad(const OpCall &c) {
  const HostTensor &x = c.arg(0);
  const std::vector<int64_t> &pads = getInts(c.attrs(), "pads");
  double value = getFloat(c.attrs(), "value");
  std::vector<int64_t> before(x.rank(), 0);
  for (size_t i = 0; i < pads.size() / 2; ++i)
    before[x.rank() - 1 - i] = pads[2 * i];
  HostTensor out = c.result();
  std::vector<int64_t> strides = rowMajorStrides(x.shape());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> coords = unravel(i, out.shape());
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < x.rank(); ++d) {
      int64_t s = coords[d] - before[d];
      inside &= s >= 0 && s < x.shape()[d];
      src += s * strides[d];
    }
    if (inside)
      copyElement(out, i, x, src);
    else
      out.setF(i, value);
  }
  return {std::move(out)};
}

} // namespace

void addShapeKernels(KernelTable &t) {
  t["reshape"] = t["squeeze"] = t["unsqueeze"] = t["flatten"] = sameElements;
  t["permute"] = permute;
  t["transpose"] = transpose;
  t["broadcast_to"] = broadcastTo;
  t["slice"] = slice;
  t["concat"] = concat;
  t["split"] = split;
  t["gather"] = gather;
  t["index_select"] = indexSelect;
  t["pad"] = pad;
}

} // namespace tensorc::interp
