#include "compiler/transforms/NarrowAttention.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/DType.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace tensorc::transforms {

namespace {

// An f32 operand traced back to the 16-bit value it converts: `source`,
// then `views` (source outward) and a literal `factor` it was scaled by.
struct Upcast {
  std::string source;
  DType dtype = DType::F32;
  std::vector<const Node *> views;
  double factor = 1;
};

class Narrower {
public:
  Narrower(const Graph &graph, const GraphAnalysis &analysis) : values_(analysis.values) {
    for (const Node &n : graph.nodes) {
      byName_[n.name] = &n;
      taken_.insert(n.name);
    }
    for (const GraphInput &in : graph.inputs)
      taken_.insert(in.name);
  }

  // What `ref` (f32) converts, through views and literal scalings; nullopt
  // for anything else (an f32 computation, a view of several results).
  std::optional<Upcast> trace(const std::string &ref) const {
    Upcast u;
    std::string cur = ref;
    for (int depth = 0; depth < 16; ++depth) {
      ValueRef v = parseValueRef(cur);
      auto it = byName_.find(v.producer);
      if (it == byName_.end() || v.index != 0)
        return std::nullopt;
      const Node &n = *it->second;
      auto value = [&](size_t i) { return i < n.args.size() && n.args[i].kind == Arg::Kind::Value; };
      if (n.op == "cast" && n.args.size() == 1 && value(0)) {
        DType from = values_.at(n.args[0].value).dtype;
        if ((from != DType::BF16 && from != DType::F16) || values_.at(cur).dtype != DType::F32)
          return std::nullopt;
        u.source = n.args[0].value;
        u.dtype = from;
        std::reverse(u.views.begin(), u.views.end());
        return u;
      }
      if ((n.op == "reshape" || n.op == "transpose" || n.op == "permute") && n.args.size() == 1 && value(0)) {
        u.views.push_back(&n);
        cur = n.args[0].value;
        continue;
      }
      // A scaling by a literal: x * c, c * x, x / c.
      if ((n.op == "mul" || n.op == "div") && n.args.size() == 2) {
        int x = value(0) && n.args[1].kind == Arg::Kind::Literal   ? 0
                : value(1) && n.args[0].kind == Arg::Kind::Literal && n.op == "mul" ? 1
                                                                                     : -1;
        if (x < 0 || values_.at(n.args[size_t(x)].value).shape != values_.at(cur).shape)
          return std::nullopt;
        const Literal &l = n.args[size_t(1 - x)].literal;
        double c = l.kind == Literal::Kind::Float ? l.floatValue : double(l.intValue);
        u.factor = n.op == "mul" ? u.factor * c : u.factor / c;
        if (!std::isfinite(u.factor) || u.factor == 0)
          return std::nullopt;
        cur = n.args[size_t(x)].value;
        continue;
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

  // The 16-bit counterpart of the traced operand `ref`: its views replayed
  // on the source (appended to `out`; one set per operand however many
  // attention ops read it).
  std::string narrowed(const std::string &ref, const Upcast &u, std::vector<Node> &out) {
    if (auto it = memo_.find(ref); it != memo_.end())
      return it->second;
    std::string cur = u.source;
    for (const Node *view : u.views) {
      Node n = *view;
      n.name = fresh(view->name + "_narrow");
      n.args = {Arg::ref(cur)};
      n.sharding.reset();
      out.push_back(n);
      cur = n.name;
    }
    memo_[ref] = cur;
    return cur;
  }

private:
  std::string fresh(const std::string &base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  const std::map<std::string, TensorSpec> &values_;
  std::map<std::string, const Node *> byName_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> memo_;
};

} // namespace

Graph narrowAttention(const Graph &graph, int *count) {
  GraphAnalysis analysis = analyzeGraph(graph, "narrow-attention " + graph.name);
  Narrower narrower(graph, analysis);
  Graph result = graph;
  result.nodes.clear();
  int found = 0;
  for (const TypedNode &tn : analysis.nodes) {
    const Node &n = *tn.node;
    result.nodes.push_back(n);
    if (n.op != "scaled_dot_product_attention" || hasAttr(n.attrs, "out_dtype") || tn.results[0].dtype != DType::F32)
      continue;
    const size_t operands = n.args.size();
    bool plain = operands >= 3 && operands <= 4;
    for (const Arg &a : n.args)
      plain = plain && a.kind == Arg::Kind::Value;
    if (!plain)
      continue;
    std::vector<std::optional<Upcast>> traced;
    for (size_t i = 0; i < 3; ++i)
      traced.push_back(narrower.trace(n.args[i].value));
    bool ok = traced[0] && traced[1] && traced[2] && traced[1]->dtype == traced[0]->dtype &&
              traced[2]->dtype == traced[0]->dtype && traced[2]->factor == 1;
    // The mask: bool as it is, an additive one converted from the same
    // 16-bit dtype (the kernels read it in the operands' dtype).
    std::optional<Upcast> mask;
    bool boolMask = operands == 4 && tn.argTypes[3]->dtype == DType::I1;
    if (ok && operands == 4 && !boolMask) {
      mask = narrower.trace(n.args[3].value);
      ok = mask && mask->dtype == traced[0]->dtype && mask->factor == 1;
    }
    const Dim &E = tn.argTypes[0]->shape.back();
    if (!ok || (!hasAttr(n.attrs, "scale") && !E.isStatic()))
      continue;
    result.nodes.pop_back();
    Node wide = n;
    for (size_t i = 0; i < 3; ++i)
      wide.args[i] = Arg::ref(narrower.narrowed(n.args[i].value, *traced[i], result.nodes));
    if (mask)
      wide.args[3] = Arg::ref(narrower.narrowed(n.args[3].value, *mask, result.nodes));
    double scale = hasAttr(n.attrs, "scale") ? getFloat(n.attrs, "scale") : 1.0 / std::sqrt(double(E.value()));
    wide.attrs["scale"] = scale * traced[0]->factor * traced[1]->factor;
    wide.attrs["out_dtype"] = DType::F32;
    result.nodes.push_back(wide);
    ++found;
  }
  if (count)
    *count = found;
  return result;
}

} // namespace tensorc::transforms
