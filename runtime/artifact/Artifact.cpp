#include "runtime/artifact/Artifact.h"
#include "runtime/host/ReadFile.h"

#include "ir/core/Error.h"
#include "ir/core/FusedAttention.h"
#include "ir/core/Mesh.h"
#include "ir/core/ShapeInference.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <optional>
#include <fstream>
#include <set>
#include <sstream>

namespace tensorc::artifact {
namespace {

using json = nlohmann::json;

// Header: magic, version, header size, then the sizes of the three sections
// and the checksum of everything after the header; little-endian.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t headerBytes;
  uint64_t manifestBytes;
  uint64_t codeBytes;
  uint64_t dataBytes;
  uint64_t checksum;
};
static_assert(sizeof(Header) == 48, "the header layout is part of the format");

const char *storageName(Storage::Kind k) {
  switch (k) {
  case Storage::Kind::Input:
    return "input";
  case Storage::Kind::Output:
    return "output";
  case Storage::Kind::Buffer:
    return "buffer";
  case Storage::Kind::Constant:
    return "constant";
  case Storage::Kind::Alias:
    return "alias";
  }
  return "?";
}

const char *stepName(Step::Kind k) {
  switch (k) {
  case Step::Kind::Loop:
    return "loop";
  case Step::Kind::Matmul:
    return "matmul";
  case Step::Kind::Copy:
    return "copy";
  case Step::Kind::Attention:
    return "attention";
  case Step::Kind::Collective:
    return "collective";
  case Step::Kind::Convolution:
    return "convolution";
  case Step::Kind::ScatterAdd:
    return "scatter_add";
  }
  return "?";
}

json shapeJson(const Shape &shape) {
  json a = json::array();
  for (const Dim &d : shape)
    a.push_back(d.isStatic() ? json(d.value()) : json(d.str()));
  return a;
}

json dimJson(const Dim &d) { return d.isStatic() ? json(d.value()) : json(d.str()); }

Dim parseDimJson(const json &j, const std::string &what) {
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    check(v >= 0, what + ": negative size " + std::to_string(v));
    return Dim::of(v);
  }
  check(j.is_string(), what + ": a size must be an integer or a symbol expression");
  std::optional<Dim> d = Dim::parse(j.get<std::string>());
  check(d.has_value(), what + ": malformed size '" + j.get<std::string>() + "'");
  return *d;
}

Shape parseShapeJson(const json &j, const std::string &what) {
  check(j.is_array(), what + ": shape must be an array");
  Shape s;
  for (const json &d : j)
    s.push_back(parseDimJson(d, what));
  return s;
}

DType parseDTypeJson(const json &j, const std::string &what) {
  std::optional<DType> d = parseDType(j.get<std::string>());
  check(d.has_value(), what + ": unknown dtype '" + j.get<std::string>() + "'");
  return *d;
}

json variantsJson(const std::vector<KernelVariant> &variants) {
  json arr = json::array();
  for (const KernelVariant &v : variants) {
    json j = {{"block", v.block}};
    if (!v.row)
      j[v.lanes > 1 ? "lanes" : "items"] = v.lanes > 1 ? v.lanes : v.items;
    if (v.cacheBytes)
      j["cache_bytes"] = v.cacheBytes;
    if (v.vector > 1)
      j["vector"] = v.vector;
    if (v.cluster > 1)
      j["cluster"] = v.cluster;
    arr.push_back(j);
  }
  return arr;
}

// A variant from {"block": B, "items": I[, "vector": 4]} / {"block": B,
// "lanes": L}, or a chain kernel's {"block": B} / {"block": B,
// "cache_bytes": N[, "cluster": C]}.
std::vector<KernelVariant> parseVariants(const json &arr, bool row) {
  std::vector<KernelVariant> variants;
  for (const json &j : arr) {
    check(j.is_object(), "a kernel variant is not an object");
    for (const auto &[key, value] : j.items())
      check(key == "block" || (!row && (key == "items" || key == "lanes" || key == "vector")) || (row && (key == "cache_bytes" || key == "cluster")),
            "unknown kernel variant field '" + key + "'");
    KernelVariant v;
    v.row = row;
    v.block = j.at("block").get<int>();
    v.items = j.value("items", 1);
    v.lanes = j.value("lanes", 1);
    v.cacheBytes = j.value("cache_bytes", int64_t(0));
    v.vector = j.value("vector", 1);
    v.cluster = j.value("cluster", 1);
    check(!(j.contains("items") && j.contains("lanes")), "a kernel variant has both items and lanes");
    variants.push_back(v);
  }
  return variants;
}

const char *activationName(MatmulEpilogue::Activation a) {
  switch (a) {
  case MatmulEpilogue::Activation::None:
    return "none";
  case MatmulEpilogue::Activation::Relu:
    return "relu";
  case MatmulEpilogue::Activation::GeluTanh:
    return "gelu_tanh";
  }
  return "?";
}

json epilogueJson(const MatmulEpilogue &e) {
  json j = json::object();
  if (e.activation != MatmulEpilogue::Activation::None)
    j["activation"] = activationName(e.activation);
  if (e.bias)
    j["bias"] = true;
  if (e.biasGradient)
    j["bias_gradient"] = e.biasGradientOfA ? json("a") : json(true);
  return j;
}

MatmulEpilogue parseEpilogue(const json &j) {
  check(j.is_object(), "a matmul epilogue is not an object");
  MatmulEpilogue e;
  for (const auto &[key, value] : j.items()) {
    if (key == "activation") {
      std::string a = value.get<std::string>();
      if (a == "relu")
        e.activation = MatmulEpilogue::Activation::Relu;
      else if (a == "gelu_tanh")
        e.activation = MatmulEpilogue::Activation::GeluTanh;
      else
        fail("unknown matmul epilogue activation '" + a + "'");
    } else if (key == "bias") {
      e.bias = value.get<bool>();
    } else if (key == "bias_gradient") {
      // true: the column sums of b; "a": of a.
      check(value.is_boolean() || value == "a", "a matmul epilogue's bias_gradient is not true, false or \"a\"");
      e.biasGradient = value.is_boolean() ? value.get<bool>() : true;
      e.biasGradientOfA = value.is_string();
    } else {
      fail("unknown matmul epilogue field '" + key + "'");
    }
  }
  return e;
}

json manifestJson(const Artifact &a) {
  json m;
  m["format"] = "tensorc-artifact";
  m["version"] = kFormatVersion;
  m["tensorc_version"] = a.tensorcVersion;
  m["function"] = a.function;
  m["target"] = {{"kind", a.target.kind},
                 {"triple", a.target.triple},
                 {"cpu", a.target.cpu},
                 {"features", a.target.features}};
  m["options"] = a.options;
  json symbols = json::array();
  for (const SymbolDecl &s : a.symbols) {
    json j = {{"name", s.name}, {"min", s.min}};
    if (s.max)
      j["max"] = *s.max;
    symbols.push_back(j);
  }
  m["symbols"] = symbols;
  auto tensors = [](const std::vector<TensorDecl> &ts) {
    json arr = json::array();
    for (const TensorDecl &t : ts)
      arr.push_back({{"name", t.name},
                     {"dtype", std::string(dtypeName(t.dtype))},
                     {"shape", shapeJson(t.shape)},
                     {"value", t.value}});
    return arr;
  };
  m["inputs"] = tensors(a.inputs);
  m["outputs"] = tensors(a.outputs);
  json values = json::array();
  for (const ValueDecl &v : a.values)
    values.push_back({{"dtype", std::string(dtypeName(v.dtype))},
                      {"shape", shapeJson(v.shape)},
                      {"storage", storageName(v.storage.kind)},
                      {"index", v.storage.index}});
  m["values"] = values;
  json buffers = json::array();
  for (const BufferDecl &b : a.buffers)
    buffers.push_back({{"bytes", dimJson(b.bytes)}, {"first", b.first}, {"last", b.last}});
  m["buffers"] = buffers;
  json constants = json::array();
  for (const ConstantDecl &c : a.constants)
    constants.push_back({{"offset", c.offset}, {"bytes", c.bytes}});
  m["constants"] = constants;
  if (!a.binaries.empty()) {
    json binaries = json::object();
    for (const auto &[arch, range] : a.binaries)
      binaries[arch] = {{"offset", range.first}, {"bytes", range.second}};
    m["binaries"] = binaries;
  }
  json steps = json::array();
  for (const Step &s : a.steps) {
    json j = {{"kind", stepName(s.kind)}, {"label", s.label}, {"operands", s.operands}};
    if (s.kind == Step::Kind::Loop || s.kind == Step::Kind::Convolution) {
      j["symbol"] = s.symbol;
      j["parallel"] = s.parallel;
      j["extent"] = dimJson(s.extent);
      j["work"] = dimJson(s.work);
      j["threads"] = dimJson(s.threads);
      if (s.reduced != Dim::of(1))
        j["reduced"] = dimJson(s.reduced);
      if (!s.variants.empty())
        j["variants"] = variantsJson(s.variants);
      if (s.chainNext)
        j["chain_next"] = true;
      if (!s.chainKernel.empty()) {
        j["chain_kernel"] = s.chainKernel;
        j["chain_variants"] = variantsJson(s.chainVariants);
      }
    }
    if (s.kind == Step::Kind::Convolution)
      j["convolution"] = {{"direction", s.convolution.directionName()},
                          {"stride", s.convolution.stride},
                          {"padding", s.convolution.padding},
                          {"dilation", s.convolution.dilation},
                          {"groups", s.convolution.groups},
                          {"channels_last", s.convolution.channelsLast}};
    if (s.kind == Step::Kind::Attention) {
      j["symbol"] = s.symbol;
      j["backward"] = s.attention.backward;
      j["causal"] = s.attention.causal;
      j["scale"] = s.attention.scale;
      j["padded_head_dim"] = s.attention.paddedHeadDim;
      if (s.attention.saveLse)
        j["save_lse"] = true;
      if (s.attention.savedForward)
        j["saved_forward"] = true;
      if (s.attention.mask != AttentionStep::Mask::None)
        j["mask"] = s.attention.mask == AttentionStep::Mask::Bool ? "bool" : "additive";
      if (s.attention.dropout()) {
        j["dropout_p"] = s.attention.dropoutP;
        j["dropout_stream"] = s.attention.dropoutStream;
      }
    }
    if (s.kind == Step::Kind::Collective) {
      const CollectiveStep &c = s.collective;
      j["collective"] = {{"op", CollectiveStep::opName(c.op)},
                         {"reduction", CollectiveStep::reductionName(c.reduction)},
                         {"mesh", c.mesh},
                         {"mesh_axes", c.meshAxes},
                         {"mesh_sizes", c.meshSizes},
                         {"axes", c.axes},
                         {"root", c.root}};
    }
    if (s.kind == Step::Kind::ScatterAdd && s.skipIndex >= 0)
      j["skip_index"] = s.skipIndex;
    if (s.kind == Step::Kind::Copy && s.copyOffset != Dim::of(0))
      j["offset"] = dimJson(s.copyOffset);
    if (s.kind == Step::Kind::Matmul) {
      j["transpose_a"] = s.transposeA;
      j["transpose_b"] = s.transposeB;
      if (!s.epilogue.empty())
        j["epilogue"] = epilogueJson(s.epilogue);
    }
    steps.push_back(j);
  }
  m["steps"] = steps;
  if (!a.checks.empty()) {
    json checks = json::array();
    for (const RunCheck &c : a.checks)
      checks.push_back({{"value", c.value}, {"message", c.message}});
    m["checks"] = checks;
  }
  return m;
}

// cuDNN reads and writes whole NCHW tensors of these shapes: they must be
// one convolution's (the batch may be symbolic; the rest is static).
void validateConvolution(const Artifact &a, const Step &s, const std::string &what) {
  const ConvolutionStep &c = s.convolution;
  check(s.operands.size() == 3 && !s.chainNext && s.chainKernel.empty(),
        what + ": a convolution has 3 operands and is not chained");
  auto pair = [&](const std::vector<int64_t> &v, int64_t min, const char *name) {
    check(v.size() == 2 && v[0] >= min && v[1] >= min && v[0] <= (1 << 20) && v[1] <= (1 << 20),
          what + ": bad convolution " + name);
  };
  pair(c.stride, 1, "stride");
  pair(c.padding, 0, "padding");
  pair(c.dilation, 1, "dilation");
  check(c.groups >= 1 && c.groups <= (1 << 20), what + ": bad convolution groups");
  const ConvolutionOperands o = convolutionOperands(s);
  ValueDecl y = a.values[size_t(o.y)], x = a.values[size_t(o.x)], w = a.values[size_t(o.w)];
  check(isFloat(y.dtype) && y.dtype == x.dtype && y.dtype == w.dtype && y.dtype != DType::F64 &&
            y.shape.size() == 4 && x.shape.size() == 4 && w.shape.size() == 4,
        what + ": convolution operands must be 4-D f32, f16 or bf16 of one dtype");
  if (c.channelsLast) // checked as their NCHW views
    for (ValueDecl *v : {&y, &x, &w})
      v->shape = {v->shape[0], v->shape[3], v->shape[1], v->shape[2]};
  for (const Shape *shape : {&y.shape, &x.shape, &w.shape})
    for (size_t d = shape == &w.shape ? 0 : 1; d < 4; ++d)
      check((*shape)[d].isStatic() && (*shape)[d].value() >= 1, what + ": convolution sizes must be static");
  check(y.shape[0] == x.shape[0], what + ": convolution batch sizes differ");
  const int64_t C = x.shape[1].value(), K = w.shape[0].value();
  check(C % c.groups == 0 && K % c.groups == 0 && w.shape[1].value() * c.groups == C && y.shape[1].value() == K,
        what + ": convolution channels do not match");
  for (size_t k = 0; k < 2; ++k) {
    int64_t in = x.shape[2 + k].value(), kernel = w.shape[2 + k].value();
    int64_t span = c.dilation[k] * (kernel - 1) + 1, padded = in + 2 * c.padding[k];
    check(padded >= span && (padded - span) / c.stride[k] + 1 == y.shape[2 + k].value(),
          what + ": convolution output size does not match");
  }
}

// A collective moves whole chunks between contiguous values: its operands'
// sizes must be the flat form's, its group a real one of a real mesh.
void validateCollective(const Artifact &a, const Step &s, const std::string &what) {
  const CollectiveStep &c = s.collective;
  Mesh mesh{c.mesh, c.meshAxes, c.meshSizes};
  checkMesh(mesh);
  DeviceGroups groups(mesh, c.axes);
  Dim G = Dim::of(groups.groupSize());
  using Op = CollectiveStep::Op;
  bool axisIndex = c.op == Op::AxisIndex;
  check(s.operands.size() == (axisIndex ? 1u : 2u), what + ": a collective has result[, x] operands");
  const ValueDecl &out = a.values[size_t(s.operands[0])];
  if (axisIndex) {
    check(out.dtype == DType::I64 && out.shape.empty(), what + ": axis_index writes an i64 scalar");
    return;
  }
  const ValueDecl &x = a.values[size_t(s.operands[1])];
  check(out.dtype == x.dtype, what + ": a collective's result and operand differ in dtype");
  Dim n = numElements(x.shape), m = numElements(out.shape);
  bool sizes = c.op == Op::AllGather                              ? m == n * G
               : c.op == Op::ReduceScatter || c.op == Op::AllSlice ? n == m * G
                                                                   : m == n;
  check(sizes, what + ": a collective's operand sizes do not match its group of " +
                   std::to_string(groups.groupSize()));
  check(c.root >= 0 && c.root < groups.groupSize(), what + ": broadcast root out of range");
  bool reduces = c.op == Op::AllReduce || c.op == Op::ReduceScatter;
  check(!reduces || (isNumeric(x.dtype) && (c.reduction != CollectiveStep::Reduction::Mean || isFloat(x.dtype))),
        what + ": a reduction of a dtype it does not take");
}

// The runtimes index grad and the result from these shapes alone.
std::string shapeText(const Shape &shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + shape[i].str();
  return out + ")";
}

// A matmul's operands as the backends run it: one dtype (the CPU's GEMM reads
// all three in a's), the result shaped as torch.matmul's product of a and b
// (read transposed where the step says), a bias or bias gradient of one
// value per result column: a crafted manifest must not make the GEMM or its
// epilogue write past the result or the sums.
void validateMatmul(const Artifact &a, const Step &s, const std::string &what) {
  const ValueDecl &c = a.values[size_t(s.operands[0])], &l = a.values[size_t(s.operands[1])],
                  &r = a.values[size_t(s.operands[2])];
  check(l.dtype == r.dtype && c.dtype == l.dtype,
        what + ": a matmul of " + std::string(dtypeName(l.dtype)) + " and " + std::string(dtypeName(r.dtype)) +
            " into " + std::string(dtypeName(c.dtype)) + " (one dtype)");
  Shape as = l.shape, bs = r.shape;
  check(!as.empty() && !bs.empty(), what + ": a matmul of a scalar");
  if (s.transposeA && as.size() >= 2)
    std::swap(as[as.size() - 1], as[as.size() - 2]);
  if (s.transposeB && bs.size() >= 2)
    std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  const Dim &inner = bs.size() == 1 ? bs[0] : bs[bs.size() - 2];
  check(as.back() == inner, what + ": a matmul of " + shapeText(as) + " and " + shapeText(bs) + ": inner dims differ");
  Shape want;
  if (as.size() == 1 && bs.size() > 1) {
    want.assign(bs.begin(), bs.end() - 2);
    want.push_back(bs.back());
  } else if (bs.size() == 1) {
    want.assign(as.begin(), as.end() - 1);
  } else {
    try {
      want = broadcastShapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2), "a", "b");
    } catch (const Error &e) {
      fail(what + ": a matmul whose batch dims do not broadcast: " + e.what());
    }
    want.push_back(as[as.size() - 2]);
    want.push_back(bs.back());
  }
  check(c.shape == want, what + ": a matmul of " + shapeText(as) + " and " + shapeText(bs) + " into " +
                             shapeText(c.shape) + " (the product is " + shapeText(want) + ")");
  if (s.operands.size() > 3) {
    const ValueDecl &extra = a.values[size_t(s.operands[3])];
    Dim columns = s.epilogue.biasGradient ? (biasGradientSource(s) == 1 ? l.shape : r.shape).back()
                                          : (c.shape.empty() ? Dim::of(1) : c.shape.back());
    check(extra.dtype == c.dtype && numElements(extra.shape) == columns,
          what + ": a bias" + std::string(s.epilogue.biasGradient ? " gradient" : "") + " of " +
              shapeText(extra.shape) + " " + std::string(dtypeName(extra.dtype)) + " for " + columns.str() + " " +
              std::string(dtypeName(c.dtype)) + " columns");
  }
}

void validateScatterAdd(const Artifact &a, const Step &s, const std::string &what) {
  const ValueDecl &out = a.values[size_t(s.operands[0])], &grad = a.values[size_t(s.operands[1])],
                  &indices = a.values[size_t(s.operands[2])];
  check(isFloat(grad.dtype) && out.dtype == (grad.dtype == DType::F64 ? DType::F64 : DType::F32),
        what + ": a scatter-add sums a float tensor into f32 (f64 for f64)");
  check(indices.dtype == DType::I32 || indices.dtype == DType::I64, what + ": scatter-add indices are not i32/i64");
  check(out.shape.size() == 2 && out.shape[0].isStatic() && grad.shape.size() == indices.shape.size() + 1 &&
            std::equal(indices.shape.begin(), indices.shape.end(), grad.shape.begin()) &&
            grad.shape.back() == out.shape[1],
        what + ": scatter-add shapes do not match (result (V, D), grad (N..., D), indices (N...))");
  check(s.skipIndex >= -1 && s.skipIndex < out.shape[0].value(), what + ": skip_index outside the result's rows");
}

// The kernels index q, k, v (and the gradients, the scratch) from the
// shapes of q and k alone: every operand must agree with them.
void validateAttention(const Artifact &a, const Step &s, const std::string &what) {
  const AttentionStep &at = s.attention;
  size_t first = at.backward ? 6 : at.saveLse ? 2 : 1; // q's operand
  check(!(at.backward ? at.saveLse : at.savedForward), what + ": attention flags of the other direction");
  const ValueDecl &q = a.values[size_t(s.operands[first])], &k = a.values[size_t(s.operands[first + 1])],
                  &v = a.values[size_t(s.operands[first + 2])];
  check(!s.symbol.empty(), what + ": no kernel symbol");
  check((q.dtype == DType::F16 || q.dtype == DType::BF16 || q.dtype == DType::F32) && k.dtype == q.dtype &&
            v.dtype == q.dtype,
        what + ": attention operands must be f16, bf16 or f32, one dtype");
  size_t r = q.shape.size();
  check(r >= 2 && k.shape.size() == r && v.shape.size() == r, what + ": attention operands of different ranks");
  for (size_t d = 0; d + 2 < r; ++d)
    check(k.shape[d] == q.shape[d] && v.shape[d] == q.shape[d], what + ": attention batch dims differ");
  const Dim &e = q.shape[r - 1];
  check(e.isStatic() && e.value() >= 1 && e.value() <= 128 && k.shape[r - 1] == e && v.shape[r - 1] == e &&
            v.shape[r - 2] == k.shape[r - 2],
        what + ": attention head dims differ or exceed 128");
  check(at.paddedHeadDim % 16 == 0 && at.paddedHeadDim >= e.value() && at.paddedHeadDim < e.value() + 16,
        what + ": bad padded head dim");
  check(std::isfinite(at.scale), what + ": attention scale is not finite");
  auto same = [&](size_t operand, const ValueDecl &like, const char *name) {
    const ValueDecl &x = a.values[size_t(s.operands[operand])];
    check(x.dtype == like.dtype && x.shape == like.shape, what + ": attention " + name + " differs from its operand");
  };
  ValueDecl rows{DType::F32, Shape(q.shape.begin(), q.shape.end() - 1), {}};
  if (at.mask != AttentionStep::Mask::None) {
    const ValueDecl &mask = a.values[size_t(s.operands[attentionMaskOperand(s)])];
    check(mask.dtype == (at.mask == AttentionStep::Mask::Bool ? DType::I1 : q.dtype),
          what + ": attention mask of dtype " + std::string(dtypeName(mask.dtype)) + " for a " +
              (at.mask == AttentionStep::Mask::Bool ? "bool" : "additive") + " mask");
    Shape scores = rows.shape;
    scores.push_back(k.shape[r - 2]);
    const std::string why = attentionMaskLayoutRefusal(mask.shape, scores);
    check(why.empty(), what + ": attention " + why);
  }
  if (at.dropout()) {
    const ValueDecl &seed = a.values[size_t(s.operands[attentionSeedOperand(s)])];
    check(seed.dtype == DType::I64 && seed.shape.empty(), what + ": attention dropout seed is not an i64 scalar");
    check(q.dtype != DType::F32, what + ": attention dropout on f32 operands (the kernels take 16-bit ones)");
  }
  if (!at.backward) {
    // f32 of 16-bit operands (the kernels' f32-output forward, out_dtype).
    const ValueDecl &out = a.values[size_t(s.operands[0])];
    const bool wide = out.dtype == DType::F32 && q.dtype != DType::F32;
    same(0, wide ? ValueDecl{DType::F32, q.shape, {}} : q, "output");
    if (at.saveLse)
      same(1, rows, "lse");
    return;
  }
  if (at.savedForward)
    same(9, q, "saved output");
  // f32 gradients of 16-bit operands (the f32-output forward's backward,
  // which recomputes that forward: no saved output).
  const bool wide = a.values[size_t(s.operands[0])].dtype == DType::F32 && q.dtype != DType::F32 && !at.savedForward;
  auto widened = [&](const ValueDecl &x) { return wide ? ValueDecl{DType::F32, x.shape, {}} : x; };
  same(0, widened(q), "dq");
  same(1, widened(k), "dk");
  same(2, widened(v), "dv");
  same(3, rows, "lse scratch");
  same(4, rows, "delta scratch");
  const ValueDecl &dout = a.values[size_t(s.operands[first - 1])];
  check(dout.dtype == q.dtype && dout.shape == q.shape, what + ": attention cotangent differs from q");
}

// Everything a loader relies on: indices in range, operand counts, the
// signature pointing at input/output storage.
void validate(const Artifact &a) {
  std::set<std::string> symbolNames;
  for (const SymbolDecl &s : a.symbols) {
    check(Dim::isValidSymbolName(s.name), "bad symbol name '" + s.name + "'");
    check(symbolNames.insert(s.name).second, "symbol '" + s.name + "' declared twice");
    check(s.min >= 0 && (!s.max || *s.max >= s.min), "symbol '" + s.name + "': bad bounds");
  }
  auto checkShape = [&](const Shape &shape, const std::string &what) {
    for (const Dim &d : shape)
      for (const std::string &sym : d.symbols())
        check(symbolNames.count(sym), what + ": undeclared symbol '" + sym + "'");
  };
  int nv = int(a.values.size());
  for (int i = 0; i < nv; ++i) {
    const ValueDecl &v = a.values[i];
    std::string what = "value " + std::to_string(i);
    checkShape(v.shape, what);
    int idx = v.storage.index;
    switch (v.storage.kind) {
    case Storage::Kind::Input:
      check(idx >= 0 && idx < int(a.inputs.size()) && a.inputs[idx].value == i,
            what + ": bad input index");
      break;
    case Storage::Kind::Output:
      check(idx >= 0 && idx < int(a.outputs.size()) && a.outputs[idx].value == i,
            what + ": bad output index");
      break;
    case Storage::Kind::Buffer:
      check(idx >= 0 && idx < int(a.buffers.size()), what + ": bad buffer index");
      break;
    case Storage::Kind::Constant:
      check(idx >= 0 && idx < int(a.constants.size()), what + ": bad constant index");
      break;
    case Storage::Kind::Alias:
      // Aliases point backwards, so chains end.
      check(idx >= 0 && idx < i, what + ": bad alias");
      break;
    }
  }
  auto checkTensors = [&](const std::vector<TensorDecl> &ts, Storage::Kind kind, const char *what) {
    for (size_t i = 0; i < ts.size(); ++i) {
      const TensorDecl &t = ts[i];
      check(t.value >= 0 && t.value < nv, std::string(what) + " '" + t.name + "': bad value");
      const ValueDecl &v = a.values[t.value];
      check(v.storage.kind == kind && v.storage.index == int(i) && v.dtype == t.dtype &&
                v.shape == t.shape,
            std::string(what) + " '" + t.name + "' does not match its value");
    }
  };
  checkTensors(a.inputs, Storage::Kind::Input, "input");
  checkTensors(a.outputs, Storage::Kind::Output, "output");
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const BufferDecl &b = a.buffers[i];
    checkShape({b.bytes}, "buffer " + std::to_string(i));
    check(b.first >= 0 && b.last >= b.first && b.last < int(std::max<size_t>(a.steps.size(), 1)),
          "buffer " + std::to_string(i) + ": bad live range");
  }
  for (size_t i = 0; i < a.constants.size(); ++i)
    check(a.constants[i].offset <= a.data.size() &&
              a.constants[i].bytes <= a.data.size() - a.constants[i].offset,
          "constant " + std::to_string(i) + " lies outside the data section");
  for (const auto &[arch, range] : a.binaries)
    check(a.target.kind == "cuda" && range.first <= a.data.size() && range.second > 0 &&
              range.second <= a.data.size() - range.first,
          "GPU binary for " + arch + " lies outside the data section");
  // Sizes: every dim within 2^40, and every value's bytes fit the storage it
  // is read from (a crafted manifest must not make a kernel or a copy run
  // past a buffer). Bytes are monomials in the symbols: comparable when they
  // have the same symbols, else the buffer must be static and the value's
  // largest size (at the symbols' bounds) fit it.
  auto valueBytes = [&](const ValueDecl &v) {
    for (const Dim &d : v.shape)
      check(d.coefficient() >= 0 && d.coefficient() <= kMaxElements, "a dim is out of range");
    return numElements(v.shape) * Dim::of(int64_t(dtypeSize(v.dtype)));
  };
  auto maxOf = [&](const Dim &d) -> std::optional<int64_t> {
    int64_t v = d.coefficient();
    for (const std::string &sym : d.symbols()) {
      auto it = std::find_if(a.symbols.begin(), a.symbols.end(),
                             [&](const SymbolDecl &s) { return s.name == sym; });
      if (it == a.symbols.end() || !it->max || __builtin_mul_overflow(v, *it->max, &v))
        return std::nullopt;
    }
    return v;
  };
  auto fits = [&](const Dim &need, const Dim &have) {
    if (need.symbols() == have.symbols())
      return need.coefficient() <= have.coefficient();
    std::optional<int64_t> n = maxOf(need);
    return have.isStatic() && n && *n <= have.value();
  };
  for (size_t i = 0; i < a.buffers.size(); ++i)
    check(a.buffers[i].bytes.coefficient() >= 0 &&
              a.buffers[i].bytes.coefficient() <= (kMaxElements << 3),
          "buffer " + std::to_string(i) + ": size out of range");
  for (int i = 0; i < nv; ++i) {
    const ValueDecl &v = a.values[i];
    Dim need = valueBytes(v);
    std::string what = "value " + std::to_string(i);
    if (v.storage.kind == Storage::Kind::Buffer)
      check(fits(need, a.buffers[v.storage.index].bytes),
            what + ": needs " + need.str() + " bytes, its buffer has " +
                a.buffers[v.storage.index].bytes.str());
    else if (v.storage.kind == Storage::Kind::Constant)
      check(need.isStatic() && uint64_t(need.value()) <= a.constants[v.storage.index].bytes,
            what + ": larger than its constant's bytes");
    else if (v.storage.kind == Storage::Kind::Alias)
      check(fits(need, valueBytes(a.values[v.storage.index])),
            what + ": an alias larger than the value it aliases");
  }
  // The runtime reads each check's 4 bytes after the run: an i32 scalar in
  // a buffer nothing else may reuse before the end.
  for (size_t i = 0; i < a.checks.size(); ++i) {
    const RunCheck &c = a.checks[i];
    std::string what = "check " + std::to_string(i);
    check(c.value >= 0 && c.value < nv, what + ": bad value");
    const ValueDecl &v = a.values[c.value];
    check(v.dtype == DType::I32 && v.shape.empty() && v.storage.kind == Storage::Kind::Buffer,
          what + ": not an i32 scalar in a buffer");
    check(a.buffers[v.storage.index].last + 1 == int(std::max<size_t>(a.steps.size(), 1)),
          what + ": its buffer is not live to the last step");
  }
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step &s = a.steps[i];
    std::string what = "step " + std::to_string(i) + " (" + s.label + ")";
    for (int o : s.operands)
      check(o >= 0 && o < nv, what + ": bad operand");
    // A copy moves the source's bytes into the destination.
    // A copy moves the source's bytes into the destination at copyOffset
    // elements: offset and source together must fit the destination (both
    // whole multiples of the destination's row, so as monomials they add).
    if (s.kind == Step::Kind::Copy && s.operands.size() == 2) {
      const ValueDecl &dst = a.values[s.operands[0]], &src = a.values[s.operands[1]];
      check(s.copyOffset.coefficient() >= 0 && s.copyOffset.coefficient() <= kMaxElements,
            what + ": copy offset out of range");
      Dim offsetBytes = s.copyOffset * Dim::of(int64_t(dtypeSize(dst.dtype))), srcBytes = valueBytes(src);
      bool fitsAfterOffset = false;
      if (s.copyOffset == Dim::of(0)) {
        fitsAfterOffset = fits(srcBytes, valueBytes(dst));
      } else if (src.dtype == dst.dtype && offsetBytes.symbols() == srcBytes.symbols()) {
        Dim end = Dim::of(offsetBytes.coefficient() + srcBytes.coefficient()); // offset + source, as a monomial
        for (const std::string &symbol : srcBytes.symbols())
          end = end * Dim::symbol(symbol);
        fitsAfterOffset = fits(end, valueBytes(dst));
      }
      check(fitsAfterOffset, what + ": copies more bytes than its destination holds" +
                                 (s.copyOffset == Dim::of(0) ? "" : " after offset " + s.copyOffset.str()));
    }
    bool bias = s.epilogue.bias || s.epilogue.biasGradient;
    size_t want = s.kind == Step::Kind::Matmul      ? (bias ? 4 : 3)
                  : s.kind == Step::Kind::Copy      ? 2
                  : s.kind == Step::Kind::ScatterAdd ? 3
                  : s.kind == Step::Kind::Attention
                      ? (s.attention.backward ? (s.attention.savedForward ? 10 : 9) : (s.attention.saveLse ? 5 : 4)) +
                            (s.attention.mask != AttentionStep::Mask::None ? 1 : 0) + (s.attention.dropout() ? 1 : 0)
                                                    : 0;
    check(s.epilogue.empty() || s.kind == Step::Kind::Matmul, what + ": an epilogue on a step that is not a matmul");
    check(!s.epilogue.biasGradient || (!s.epilogue.bias && s.epilogue.activation == MatmulEpilogue::Activation::None),
          what + ": a bias-gradient epilogue with a bias or an activation");
    check(!s.epilogue.biasGradientOfA || (s.transposeA && !s.transposeB),
          what + ": a bias gradient of a with a not read transposed or b transposed");
    for (const KernelVariant &v : s.variants) {
      std::string problem = v.row ? "a chain kernel's variant among the step's own" : variantProblem(v);
      check(problem.empty(), what + ": bad kernel variant " + v.name() + ": " + problem);
    }
    for (const KernelVariant &v : s.chainVariants) {
      std::string problem = !v.row ? "not a chain kernel's variant" : variantProblem(v);
      check(problem.empty(), what + ": bad chain kernel variant " + v.name() + ": " + problem);
    }
    check(s.chainKernel.empty() == s.chainVariants.empty() && (s.chainKernel.empty() || s.chainNext),
          what + ": a chain kernel belongs to the first step of a chain, with its variants");
    check(want == 0 ? !s.operands.empty() : s.operands.size() == want,
          what + ": wrong number of operands");
    if (s.kind == Step::Kind::Attention && s.operands.size() == want)
      validateAttention(a, s, what);
    if (s.kind == Step::Kind::Collective)
      validateCollective(a, s, what);
    if (s.kind == Step::Kind::ScatterAdd && s.operands.size() == want)
      validateScatterAdd(a, s, what);
    if (s.kind == Step::Kind::Matmul && s.operands.size() == want)
      validateMatmul(a, s, what);
    if (s.kind == Step::Kind::Loop || s.kind == Step::Kind::Convolution) {
      check(!s.symbol.empty(), what + ": no kernel symbol");
      checkShape({s.extent, s.work, s.threads, s.reduced}, what);
    }
    if (s.kind == Step::Kind::Convolution)
      validateConvolution(a, s, what);
    if (s.chainNext) {
      const Step *next = i + 1 < a.steps.size() ? &a.steps[i + 1] : nullptr;
      check(s.kind == Step::Kind::Loop && s.parallel && next && next->kind == Step::Kind::Loop &&
                next->parallel && next->extent == s.extent,
            what + ": chained to a step that is not a parallel loop of the same extent");
    }
  }
}

} // namespace

std::string ConvolutionStep::directionName() const {
  switch (direction) {
  case Direction::Forward:
    return "forward";
  case Direction::BackwardInput:
    return "backward_input";
  case Direction::BackwardWeight:
    return "backward_weight";
  }
  return "?";
}

std::string KernelVariant::name() const {
  return "b" + std::to_string(block) +
         (row ? std::string(cacheBytes ? "_r1c" : "_r1") : lanes > 1 ? "_l" + std::to_string(lanes) : "_i" + std::to_string(items)) +
         (vector > 1 ? "_v" + std::to_string(vector) : "") + (cluster > 1 ? "_k" + std::to_string(cluster) : "");
}

int chainRowThreads(int64_t rowWork) {
  return rowWork <= 1024 ? 64 : rowWork < 8192 ? 256 : rowWork < 32768 ? 512 : 1024;
}

int64_t chainRowWork(const std::vector<Step> &steps, size_t first, size_t last,
                     const std::function<std::optional<int64_t>(const Dim &)> &value) {
  std::optional<int64_t> rows = value(steps[first].extent);
  if (!rows || *rows <= 0)
    return -1;
  int64_t work = 0;
  for (size_t k = first; k <= last; ++k) {
    std::optional<int64_t> threads = value(steps[k].threads), reduced = value(steps[k].reduced);
    if (!threads || !reduced)
      return -1;
    work = std::max(work, *threads * *reduced / *rows);
  }
  return work;
}

bool chainIsOneElementwisePass(const std::vector<Step> &steps, size_t first, size_t last) {
  int fullRows = 0;
  for (size_t k = first; k <= last; ++k) {
    if (steps[k].reduced != Dim::of(1))
      return false;
    fullRows += !steps[k].oneOutputPerRow();
  }
  return fullRows <= 1;
}

std::string variantProblem(const KernelVariant &v) {
  if (v.block < 32 || v.block > 1024 || v.block % 32 != 0)
    return "block of " + std::to_string(v.block) + " threads (a multiple of 32 up to 1024)";
  if (v.items < 1 || v.items > 1024)
    return std::to_string(v.items) + " items per thread";
  if (!(v.lanes == 1 || v.lanes == v.block || (v.lanes <= 32 && (v.lanes & (v.lanes - 1)) == 0)))
    return std::to_string(v.lanes) + " lanes (a power of two up to 32, or the whole block)";
  if (v.lanes > 1 && v.items != 1)
    return "both items and lanes";
  if (v.row && (v.items != 1 || v.lanes != 1))
    return "a chain kernel with items or lanes";
  if (v.cacheBytes < 0 || v.cacheBytes > (int64_t(1) << 20) || (v.cacheBytes && !v.row))
    return std::to_string(v.cacheBytes) + " bytes of row cache";
  if (!(v.vector == 1 || (v.vector == 4 && !v.row && v.lanes == 1)))
    return "vectors of " + std::to_string(v.vector) + " (1, or 4 for an elementwise kernel)";
  if (!(v.cluster == 1 || ((v.cluster == 2 || v.cluster == 4 || v.cluster == 8) && v.row)))
    return "a cluster of " + std::to_string(v.cluster) + " blocks (1, or 2, 4 or 8 for a chain kernel)";
  return "";
}

std::string MatmulEpilogue::name() const {
  if (biasGradient)
    return biasGradientOfA ? "bgrad_a" : "bgrad";
  std::string act = activation == Activation::None ? "" : activationName(activation);
  return bias ? (act.empty() ? "bias" : "bias_" + act) : act;
}

uint64_t checksum(const char *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= uint8_t(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string serialize(const Artifact &a) {
  validate(a);
  std::string manifest = manifestJson(a).dump(1);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kFormatVersion;
  h.headerBytes = sizeof(Header);
  h.manifestBytes = manifest.size();
  h.codeBytes = a.code.size();
  h.dataBytes = a.data.size();
  std::string body = manifest + a.code + a.data;
  h.checksum = checksum(body.data(), body.size());
  return std::string(reinterpret_cast<const char *>(&h), sizeof h) + body;
}

Artifact parse(const std::string &bytes, const std::string &where) {
  auto bad = [&](const std::string &why) { fail(where + ": not a valid tensorc artifact: " + why); };
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    bad("wrong magic bytes (is it a .tcx file written by `tensorc compile --target`?)");
  if (bytes.size() < sizeof(Header))
    bad("truncated header");
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.version != kFormatVersion)
    fail(where + ": artifact format version " + std::to_string(h.version) + " is " +
         (h.version < kFormatVersion ? "older than this runtime's (version " + std::to_string(kFormatVersion) +
                                           "): recompile the model with this tensorc (`tensorc compile`)"
                                     : "newer than this runtime's (version " + std::to_string(kFormatVersion) +
                                           "): use the runtime of the tensorc that compiled it, or recompile "
                                           "the model with this one"));
  if (h.headerBytes != sizeof(Header))
    bad("unexpected header size");
  uint64_t body = bytes.size() - sizeof(Header);
  if (h.manifestBytes > body || h.codeBytes > body - h.manifestBytes ||
      h.dataBytes != body - h.manifestBytes - h.codeBytes)
    bad("section sizes do not add up to the file size (" + std::to_string(bytes.size()) +
        " bytes): truncated or corrupted");
  if (checksum(bytes.data() + sizeof(Header), body) != h.checksum)
    bad("checksum mismatch: the file is corrupted");
  Artifact a;
  const char *p = bytes.data() + sizeof(Header);
  std::string manifestText(p, h.manifestBytes);
  a.code.assign(p + h.manifestBytes, h.codeBytes);
  a.data.assign(p + h.manifestBytes + h.codeBytes, h.dataBytes);
  try {
    json m = json::parse(manifestText);
    if (m.at("format") != "tensorc-artifact" || m.at("version") != kFormatVersion)
      bad("manifest format/version mismatch");
    a.tensorcVersion = m.at("tensorc_version").get<std::string>();
    a.function = m.at("function").get<std::string>();
    const json &t = m.at("target");
    a.target.kind = t.at("kind").get<std::string>();
    a.target.triple = t.at("triple").get<std::string>();
    a.target.cpu = t.at("cpu").get<std::string>();
    a.target.features = t.at("features").get<std::vector<std::string>>();
    a.options = m.at("options").get<std::map<std::string, std::string>>();
    for (const json &s : m.at("symbols")) {
      SymbolDecl d{s.at("name").get<std::string>(), s.at("min").get<int64_t>(), std::nullopt};
      if (s.contains("max"))
        d.max = s.at("max").get<int64_t>();
      a.symbols.push_back(d);
    }
    auto tensors = [&](const json &arr, const char *what) {
      std::vector<TensorDecl> ts;
      for (const json &j : arr)
        ts.push_back({j.at("name").get<std::string>(), parseDTypeJson(j.at("dtype"), what),
                      parseShapeJson(j.at("shape"), what), j.at("value").get<int>()});
      return ts;
    };
    a.inputs = tensors(m.at("inputs"), "input");
    a.outputs = tensors(m.at("outputs"), "output");
    for (const json &j : m.at("values")) {
      ValueDecl v;
      v.dtype = parseDTypeJson(j.at("dtype"), "value");
      v.shape = parseShapeJson(j.at("shape"), "value");
      std::string kind = j.at("storage").get<std::string>();
      static const std::map<std::string, Storage::Kind> kinds = {
          {"input", Storage::Kind::Input},
          {"output", Storage::Kind::Output},
          {"buffer", Storage::Kind::Buffer},
          {"constant", Storage::Kind::Constant},
          {"alias", Storage::Kind::Alias}};
      check(kinds.count(kind), "value: unknown storage '" + kind + "'");
      v.storage = {kinds.at(kind), j.at("index").get<int>()};
      a.values.push_back(v);
    }
    for (const json &j : m.at("buffers"))
      a.buffers.push_back(
          {parseDimJson(j.at("bytes"), "buffer"), j.at("first").get<int>(), j.at("last").get<int>()});
    for (const json &j : m.at("constants"))
      a.constants.push_back({j.at("offset").get<uint64_t>(), j.at("bytes").get<uint64_t>()});
    if (m.contains("binaries"))
      for (const auto &[arch, j] : m.at("binaries").items())
        a.binaries[arch] = {j.at("offset").get<uint64_t>(), j.at("bytes").get<uint64_t>()};
    for (const json &j : m.at("steps")) {
      Step s;
      std::string kind = j.at("kind").get<std::string>();
      s.kind = kind == "loop"     ? Step::Kind::Loop
               : kind == "matmul" ? Step::Kind::Matmul
               : kind == "copy"   ? Step::Kind::Copy
               : kind == "attention" ? Step::Kind::Attention
               : kind == "convolution" ? Step::Kind::Convolution
               : kind == "collective" ? Step::Kind::Collective
               : kind == "scatter_add" ? Step::Kind::ScatterAdd
                                  : (fail("step: unknown kind '" + kind + "'"), Step::Kind::Loop);
      s.label = j.at("label").get<std::string>();
      s.operands = j.at("operands").get<std::vector<int>>();
      if (s.kind == Step::Kind::Convolution) {
        const json &c = j.at("convolution");
        const std::string direction = c.at("direction").get<std::string>();
        using Direction = ConvolutionStep::Direction;
        s.convolution.direction = direction == "forward"           ? Direction::Forward
                                  : direction == "backward_input"  ? Direction::BackwardInput
                                  : direction == "backward_weight" ? Direction::BackwardWeight
                                                                   : (fail("step: unknown convolution direction '" +
                                                                           direction + "'"),
                                                                      Direction::Forward);
        s.convolution.stride = c.at("stride").get<std::vector<int64_t>>();
        s.convolution.padding = c.at("padding").get<std::vector<int64_t>>();
        s.convolution.dilation = c.at("dilation").get<std::vector<int64_t>>();
        s.convolution.groups = c.at("groups").get<int64_t>();
        s.convolution.channelsLast = c.at("channels_last").get<bool>();
      }
      if (s.kind == Step::Kind::Loop || s.kind == Step::Kind::Convolution) {
        s.symbol = j.at("symbol").get<std::string>();
        s.parallel = j.at("parallel").get<bool>();
        s.extent = parseDimJson(j.at("extent"), "step");
        s.work = parseDimJson(j.at("work"), "step");
        if (j.contains("threads"))
          s.threads = parseDimJson(j.at("threads"), "step");
        if (j.contains("reduced"))
          s.reduced = parseDimJson(j.at("reduced"), "step");
        if (j.contains("variants"))
          s.variants = parseVariants(j.at("variants"), false);
        s.chainNext = j.value("chain_next", false);
        s.chainKernel = j.value("chain_kernel", "");
        if (j.contains("chain_variants"))
          s.chainVariants = parseVariants(j.at("chain_variants"), true);
      }
      if (s.kind == Step::Kind::Attention) {
        s.symbol = j.at("symbol").get<std::string>();
        s.attention.backward = j.at("backward").get<bool>();
        s.attention.causal = j.at("causal").get<bool>();
        s.attention.scale = j.at("scale").get<double>();
        s.attention.paddedHeadDim = j.at("padded_head_dim").get<int>();
        s.attention.saveLse = j.value("save_lse", false);
        s.attention.savedForward = j.value("saved_forward", false);
        const std::string mask = j.value("mask", "none");
        check(mask == "none" || mask == "bool" || mask == "additive",
              "artifact: attention mask '" + mask + "' is not none, bool or additive");
        s.attention.mask = mask == "bool"       ? AttentionStep::Mask::Bool
                           : mask == "additive" ? AttentionStep::Mask::Additive
                                                : AttentionStep::Mask::None;
        s.attention.dropoutP = j.value("dropout_p", 0.0);
        check(s.attention.dropoutP >= 0 && s.attention.dropoutP < 1,
              "artifact: attention dropout_p outside [0, 1)");
        const int64_t stream = j.value("dropout_stream", int64_t(0));
        check(stream >= 0 && stream <= int64_t(UINT32_MAX), "artifact: attention dropout_stream outside [0, 2^32)");
        s.attention.dropoutStream = uint32_t(stream);
      }
      if (s.kind == Step::Kind::Collective) {
        const json &c = j.at("collective");
        std::string op = c.at("op").get<std::string>(), reduction = c.at("reduction").get<std::string>();
        using Op = CollectiveStep::Op;
        using Reduction = CollectiveStep::Reduction;
        bool known = false;
        for (Op o : {Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll, Op::AllSlice,
                     Op::Broadcast, Op::AxisIndex})
          if (op == CollectiveStep::opName(o)) {
            s.collective.op = o;
            known = true;
          }
        check(known, "step: unknown collective '" + op + "'");
        known = false;
        for (Reduction r : {Reduction::Sum, Reduction::Mean, Reduction::Max, Reduction::Min})
          if (reduction == CollectiveStep::reductionName(r)) {
            s.collective.reduction = r;
            known = true;
          }
        check(known, "step: unknown collective reduction '" + reduction + "'");
        s.collective.mesh = c.at("mesh").get<std::string>();
        s.collective.meshAxes = c.at("mesh_axes").get<std::vector<std::string>>();
        s.collective.meshSizes = c.at("mesh_sizes").get<std::vector<int64_t>>();
        s.collective.axes = c.at("axes").get<std::vector<std::string>>();
        s.collective.root = c.at("root").get<int64_t>();
      }
      if (s.kind == Step::Kind::ScatterAdd)
        s.skipIndex = j.value("skip_index", int64_t(-1));
      if (s.kind == Step::Kind::Copy && j.contains("offset"))
        s.copyOffset = parseDimJson(j.at("offset"), "step");
      if (s.kind == Step::Kind::Matmul) {
        s.transposeA = j.at("transpose_a").get<bool>();
        s.transposeB = j.at("transpose_b").get<bool>();
        if (j.contains("epilogue"))
          s.epilogue = parseEpilogue(j.at("epilogue"));
      }
      a.steps.push_back(s);
    }
    if (m.contains("checks"))
      for (const json &j : m.at("checks"))
        a.checks.push_back({j.at("value").get<int>(), j.at("message").get<std::string>()});
    validate(a);
  } catch (const json::exception &e) {
    bad(std::string("malformed manifest: ") + e.what());
  } catch (const Error &e) {
    if (std::string(e.what()).rfind(where, 0) == 0)
      throw;
    bad(e.what());
  }
  return a;
}

Artifact readFile(const std::string &path) {
  // A regular file only: a FIFO would block the load forever, a device
  // (/dev/zero) would be read until memory runs out.
  std::string why;
  std::optional<std::string> bytes = readRegularFile(path, UINT64_MAX, &why);
  check(bytes.has_value(), path + ": cannot open artifact (" + why + ")");
  return parse(*bytes, path);
}

std::string collectiveStepName(const Step &step, size_t index) {
  std::string axes;
  for (const std::string &axis : step.collective.axes)
    axes += (axes.empty() ? "" : ", ") + axis;
  return "step " + std::to_string(index) + " '" + step.label + "' (" + CollectiveStep::opName(step.collective.op) +
         " over [" + axes + "])";
}

const char *CollectiveStep::opName(Op op) {
  switch (op) {
  case Op::AllReduce:
    return "all_reduce";
  case Op::AllGather:
    return "all_gather";
  case Op::ReduceScatter:
    return "reduce_scatter";
  case Op::AllToAll:
    return "all_to_all";
  case Op::AllSlice:
    return "all_slice";
  case Op::Broadcast:
    return "broadcast";
  case Op::AxisIndex:
    return "axis_index";
  }
  return "?";
}

const char *CollectiveStep::reductionName(Reduction r) {
  switch (r) {
  case Reduction::Sum:
    return "sum";
  case Reduction::Mean:
    return "mean";
  case Reduction::Max:
    return "max";
  case Reduction::Min:
    return "min";
  }
  return "?";
}

bool writesOperand(const Step &step, size_t operand) {
  if (step.kind == Step::Kind::Attention) {
    const AttentionStep &at = step.attention;
    if (!at.backward)
      return operand < (at.saveLse ? 2u : 1u);
    return at.savedForward ? operand < 3 || operand == 4 : operand < 5;
  }
  return operand == 0 || (step.epilogue.biasGradient && operand == 3);
}

std::string scatterAddKernel(const Artifact &a, const Step &step) {
  auto dtype = [&](size_t i) { return std::string(dtypeName(a.values[size_t(step.operands[i])].dtype)); };
  return "tc_" + a.function + "_scatter_add_" + dtype(0) + "_" + dtype(1) + "_" + dtype(2);
}

ConvolutionOperands convolutionOperands(const Step &step) {
  const std::vector<int> &v = step.operands;
  switch (step.convolution.direction) {
  case ConvolutionStep::Direction::Forward:
    return {v[1], v[2], v[0]};
  case ConvolutionStep::Direction::BackwardInput:
    return {v[0], v[2], v[1]};
  case ConvolutionStep::Direction::BackwardWeight:
    break;
  }
  return {v[2], v[0], v[1]};
}

std::string loopSignature(const Artifact &artifact, const Step &step) {
  std::string out = "symbols";
  for (const SymbolDecl &s : artifact.symbols)
    out += " " + s.name;
  out += "; extent " + step.extent.str() + "; parallel " + std::to_string(int(step.parallel)) + "; operands";
  for (int v : step.operands) {
    if (v < 0 || size_t(v) >= artifact.values.size()) {
      out += " ?";
      continue;
    }
    const ValueDecl &d = artifact.values[size_t(v)];
    out += " " + std::string(dtypeName(d.dtype)) + "[";
    for (size_t i = 0; i < d.shape.size(); ++i)
      out += (i ? "," : "") + d.shape[i].str();
    out += "]";
  }
  return out;
}

int storageValue(const Artifact &artifact, int value) {
  while (artifact.values[size_t(value)].storage.kind == Storage::Kind::Alias)
    value = artifact.values[size_t(value)].storage.index;
  return value;
}

} // namespace tensorc::artifact
