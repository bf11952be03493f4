#include "compiler/transforms/PadMatmuls.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/DType.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

namespace tensorc::transforms {

namespace {

class Padder {
public:
  Padder(const Graph &graph, const GraphAnalysis &analysis) : shapes_() {
    for (const auto &[ref, spec] : analysis.values)
      shapes_[ref] = spec.shape;
    for (const Node &n : graph.nodes) {
      byName_[n.name] = &n;
      taken_.insert(n.name);
    }
    for (const GraphInput &in : graph.inputs)
      taken_.insert(in.name);
  }

  // Whether `ref` is a transpose of its producer's operand's last two dims
  // (what the runtime hands cuBLASLt as a transpose flag, not a copy).
  const Node *storedTranspose(const std::string &ref) const {
    auto it = byName_.find(parseValueRef(ref).producer);
    if (it == byName_.end() || it->second->op != "transpose" || it->second->args.size() != 1 ||
        it->second->args[0].kind != Arg::Kind::Value)
      return nullptr;
    const Node &t = *it->second;
    int64_t rank = int64_t(shapes_.at(ref).size());
    auto norm = [rank](int64_t d) { return d < 0 ? d + rank : d; };
    std::set<int64_t> dims{norm(getInt(t.attrs, "dim0")), norm(getInt(t.attrs, "dim1"))};
    return rank >= 2 && dims == std::set<int64_t>{rank - 2, rank - 1} ? &t : nullptr;
  }

  // `ref` zero-extended along its dim `dim` (-1 or -2) to `size`: through a
  // stored transpose, its operand is padded along the other dim and
  // transposed again (the GEMM keeps its transpose flag; one padded tensor
  // serves the GEMMs that read it either way).
  std::string padded(const std::string &ref, int dim, int64_t size, std::vector<Node> &out) {
    std::string key = ref + "|" + std::to_string(dim) + "|" + std::to_string(size);
    if (auto it = memo_.find(key); it != memo_.end())
      return it->second;
    Shape shape = shapes_.at(ref);
    Node n;
    n.name = fresh(parseValueRef(ref).producer + "_aligned");
    if (const Node *t = storedTranspose(ref)) {
      std::string inner = padded(t->args[0].value, dim == -1 ? -2 : -1, size, out);
      n.op = t->op;
      n.attrs = t->attrs;
      n.args = {Arg::ref(inner)};
    } else {
      int64_t extra = size - shape[shape.size() + size_t(dim)].value();
      n.op = "pad";
      n.args = {Arg::ref(ref)};
      n.attrs["pads"] = dim == -1 ? std::vector<int64_t>{0, extra} : std::vector<int64_t>{0, 0, 0, extra};
    }
    shape[shape.size() + size_t(dim)] = Dim::of(size);
    shapes_[n.name] = shape;
    created_.push_back(n);
    byName_[n.name] = &created_.back();
    out.push_back(n);
    memo_[key] = n.name;
    return n.name;
  }

  std::string fresh(const std::string &base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

private:
  std::map<std::string, Shape> shapes_; // every value's, the created ones' too
  std::deque<Node> created_;            // stable addresses for byName_
  std::map<std::string, const Node *> byName_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> memo_;
};

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Whether every use of node `name`'s value leads, through elementwise ops
// and views alone, to graph outputs (a model's logits: bias, reshape, cast).
// Such a product padded along N would be sliced and copied into the output
// (ELECTRA's [8192, 30522] bf16 logits: 0.57 ms on an H200, three times the
// GEMM), where an unpadded GEMM writes the output itself.
bool onlyFeedsOutputs(const std::string &name, const Graph &graph) {
  static const std::set<std::string> passing = {"add", "sub", "mul", "div", "cast", "reshape", "neg"};
  std::map<std::string, std::vector<const Node *>> users;
  for (const Node &n : graph.nodes)
    for (const Arg &a : n.args)
      if (a.kind == Arg::Kind::Value)
        users[parseValueRef(a.value).producer].push_back(&n);
  std::set<std::string> outputs;
  for (const std::string &o : graph.outputs)
    outputs.insert(parseValueRef(o).producer);
  std::vector<std::string> work = {name};
  std::set<std::string> seen;
  bool reachesOutput = false;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!seen.insert(v).second)
      continue;
    reachesOutput = reachesOutput || outputs.count(v);
    for (const Node *u : users[v]) {
      if (!passing.count(u->op))
        return false;
      work.push_back(u->name);
    }
  }
  return reachesOutput;
}

} // namespace

Graph padMatmuls(const Graph &graph, int *count, int64_t minimumWork) {
  GraphAnalysis analysis = analyzeGraph(graph, "pad-matmuls " + graph.name);
  Padder padder(graph, analysis);
  Graph result = graph;
  result.nodes.clear();
  int found = 0;
  // Products padded along N alone: the padded product's name, N and N'.
  struct SlicedColumns {
    std::string product;
    int64_t columns, padded;
  };
  std::map<std::string, SlicedColumns> sliced;
  for (const TypedNode &tn : analysis.nodes) {
    const Node &n = *tn.node;
    auto keep = [&] { result.nodes.push_back(n); };
    // A reshape of such a product that keeps its rows' length (a linear
    // layer's [B*T, V] logits as [B, T, V]) reshapes the padded product and
    // slices that: the reshape stays a view, and a model output made of it is
    // the slice, which its kernel writes into the output (a reshape of the
    // slice was materialized and then copied: the logits twice).
    if (n.op == "reshape" && n.args.size() == 1 && n.args[0].kind == Arg::Kind::Value) {
      auto it = sliced.find(n.args[0].value);
      const Shape &out = tn.results[0].shape;
      bool staticOut = std::all_of(out.begin(), out.end(), [](const Dim &d) { return d.isStatic(); });
      if (it != sliced.end() && staticOut && !out.empty() && out.back().value() == it->second.columns) {
        Node wide = n;
        wide.name = padder.fresh(n.name + "_aligned");
        Shape shape = out;
        shape.back() = Dim::of(it->second.padded);
        wide.attrs["shape"] = shape;
        wide.args = {Arg::ref(it->second.product)};
        wide.sharding.reset();
        Node back{n.name, "slice", {Arg::ref(wide.name)},
                  {{"axes", std::vector<int64_t>{int64_t(out.size()) - 1}},
                   {"starts", std::vector<int64_t>{0}},
                   {"ends", std::vector<int64_t>{it->second.columns}}},
                  n.sharding};
        result.nodes.push_back(wide);
        result.nodes.push_back(back);
        continue;
      }
    }
    if (n.op != "matmul" || n.args.size() != 2 || n.args[0].kind != Arg::Kind::Value ||
        n.args[1].kind != Arg::Kind::Value) {
      keep();
      continue;
    }
    const TensorSpec &a = analysis.values.at(n.args[0].value), &b = analysis.values.at(n.args[1].value);
    const TensorSpec &c = tn.results[0];
    DType dtype = c.dtype;
    bool floating = dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
    bool staticSizes = true;
    for (const TensorSpec *s : {&a, &b, &c})
      for (const Dim &d : s->shape)
        staticSizes = staticSizes && d.isStatic();
    if (!floating || !staticSizes || a.rank() < 2 || b.rank() < 2 || a.dtype != dtype || b.dtype != dtype) {
      keep();
      continue;
    }
    int64_t M = a.shape[a.rank() - 2].value(), K = a.shape[a.rank() - 1].value(), N = b.shape[b.rank() - 1].value();
    int64_t work = 1;
    for (const Dim &d : c.shape)
      work *= d.value();
    work *= K;
    // Elements per 16 bytes: the alignment cuBLASLt's fast kernels need of
    // every leading dimension (and of every matrix's start).
    int64_t m = 16 / int64_t(dtypeSize(dtype));
    bool aTransposed = padder.storedTranspose(n.args[0].value) != nullptr;
    bool bTransposed = padder.storedTranspose(n.args[1].value) != nullptr;
    // A dim under 64 would grow by more than an eighth: left alone.
    auto needs = [&](int64_t v) { return v % m != 0 && v >= 64; };
    bool padN = needs(N), padK = needs(K) && (!aTransposed || bTransposed), padM = needs(M) && aTransposed;
    // A product that is only a model output keeps N where its rows are
    // 4-byte aligned: cuBLASLt's fast kernels take that (Inductor's
    // unpadded bf16 LM head ran on them, 0.18 ms), and the slice would be
    // a copy of the whole output. Odd 16-bit widths still pad: their align1
    // kernels were 3-8x slower (GPT-2's 50257).
    if (padN && (N * int64_t(dtypeSize(dtype))) % 4 == 0 && onlyFeedsOutputs(n.name, graph))
      padN = false;
    if (work < minimumWork || !(padN || padK || padM)) {
      keep();
      continue;
    }
    std::string lhs = n.args[0].value, rhs = n.args[1].value;
    if (padK) {
      lhs = padder.padded(lhs, -1, roundUp(K, m), result.nodes);
      rhs = padder.padded(rhs, -2, roundUp(K, m), result.nodes);
    }
    if (padM)
      lhs = padder.padded(lhs, -2, roundUp(M, m), result.nodes);
    if (padN)
      rhs = padder.padded(rhs, -1, roundUp(N, m), result.nodes);
    Node product = n;
    product.args = {Arg::ref(lhs), Arg::ref(rhs)};
    if (!padM && !padN) {
      result.nodes.push_back(product);
    } else {
      product.name = padder.fresh(n.name + "_aligned");
      product.sharding.reset();
      result.nodes.push_back(product);
      Node back;
      back.name = n.name;
      back.op = "slice";
      back.args = {Arg::ref(product.name)};
      int64_t rank = c.rank();
      std::vector<int64_t> axes, starts, ends;
      if (padM) {
        axes.push_back(rank - 2);
        starts.push_back(0);
        ends.push_back(M);
      }
      if (padN) {
        axes.push_back(rank - 1);
        starts.push_back(0);
        ends.push_back(N);
      }
      back.attrs["axes"] = axes;
      back.attrs["starts"] = starts;
      back.attrs["ends"] = ends;
      back.sharding = n.sharding;
      result.nodes.push_back(back);
      if (padN && !padM)
        sliced[n.name] = {product.name, N, roundUp(N, m)};
    }
    ++found;
  }
  if (count)
    *count = found;
  return result;
}

} // namespace tensorc::transforms
