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

  std::string fresh(const std::string &base) {
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i)
      name = base + "_" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

private:

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
  // Results a narrowed backward replaced: (producer, index) -> reference.
  std::map<std::pair<std::string, int>, std::string> renamed;
  auto rename = [&](std::string &ref) {
    ValueRef v = parseValueRef(ref);
    if (auto it = renamed.find({v.producer, v.index}); it != renamed.end())
      ref = it->second;
  };
  for (const TypedNode &tn : analysis.nodes) {
    const Node &n = *tn.node;
    result.nodes.push_back(n);
    for (Arg &a : result.nodes.back().args)
      if (a.kind == Arg::Kind::Value)
        rename(a.value);
    // The forward (q, k, v[, mask][, seed]) and its backward (grad, q, k, v[,
    // mask][, out, lse][, seed]): f32, not yet narrowed.
    const bool backward = n.op == "scaled_dot_product_attention_backward";
    if ((n.op != "scaled_dot_product_attention" && n.op != "scaled_dot_product_attention_with_lse" && !backward) ||
        hasAttr(n.attrs, "out_dtype") ||
        tn.results[0].dtype != DType::F32)
      continue;
    const size_t first = backward ? 1 : 0, maskAt = first + 3, seedAt = backward ? 7 : 4;
    auto present = [&](size_t i) { return i < n.args.size() && n.args[i].kind == Arg::Kind::Value; };
    bool plain = n.args.size() <= seedAt + 1;
    for (size_t i = 0; i < n.args.size(); ++i)
      plain = plain && (n.args[i].kind == Arg::Kind::Value || (i > maskAt && n.args[i].kind == Arg::Kind::Absent) ||
                        (i == maskAt && n.args[i].kind == Arg::Kind::Absent));
    for (size_t i = 0; i < first + 3; ++i)
      plain = plain && present(i);
    if (!plain)
      continue;
    // q, k, v (and the backward's cotangent): upcasts of one 16-bit dtype;
    // v and the cotangent unscaled.
    std::vector<std::optional<Upcast>> traced;
    for (size_t i = 0; i < first + 3; ++i)
      traced.push_back(narrower.trace(n.args[i].value));
    bool ok = true;
    for (size_t i = 0; i < traced.size(); ++i)
      ok = ok && traced[i] && traced[i]->dtype == traced[first]->dtype &&
           (i == first || i == first + 1 || traced[i]->factor == 1);
    // The mask: bool as it is, an additive one converted from the same
    // 16-bit dtype (the kernels read it in the operands' dtype).
    std::optional<Upcast> mask;
    const bool hasMask = present(maskAt);
    if (ok && hasMask && tn.argTypes[maskAt]->dtype != DType::I1) {
      mask = narrower.trace(n.args[maskAt].value);
      ok = mask && mask->dtype == traced[first]->dtype && mask->factor == 1;
    }
    const Dim &E = tn.argTypes[first]->shape.back();
    if (!ok || (!hasAttr(n.attrs, "scale") && !E.isStatic()))
      continue;
    Node wide = result.nodes.back(); // (its references renamed)
    result.nodes.pop_back();
    for (size_t i = 0; i < first + 3; ++i)
      wide.args[i] = Arg::ref(narrower.narrowed(n.args[i].value, *traced[i], result.nodes));
    if (mask)
      wide.args[maskAt] = Arg::ref(narrower.narrowed(n.args[maskAt].value, *mask, result.nodes));
    // The backward recomputes the forward: a saved f32 output is not read.
    if (backward && n.args.size() > 6) {
      wide.args[5] = Arg::absent();
      wide.args[6] = Arg::absent();
    }
    while (!wide.args.empty() && wide.args.back().kind == Arg::Kind::Absent)
      wide.args.pop_back();
    double scale = hasAttr(n.attrs, "scale") ? getFloat(n.attrs, "scale") : 1.0 / std::sqrt(double(E.value()));
    const double qFactor = traced[first]->factor, kFactor = traced[first + 1]->factor;
    wide.attrs["scale"] = scale * qFactor * kFactor;
    wide.attrs["out_dtype"] = DType::F32;
    // The backward's gradients are then of q16 and k16 in the rescaled
    // problem: those of the scaled operands are dq / c_q and dk / c_k.
    if (backward && (qFactor != 1 || kFactor != 1)) {
      wide.name = narrower.fresh(n.name + "_narrow");
      result.nodes.push_back(wide);
      for (int i = 0; i < 3; ++i) {
        std::string ref = wide.name + (i ? ":" + std::to_string(i) : "");
        const double factor = i == 0 ? qFactor : i == 1 ? kFactor : 1.0;
        if (factor != 1) {
          Node unscale;
          unscale.name = narrower.fresh(n.name + (i == 0 ? "_dq" : "_dk"));
          unscale.op = "mul";
          Literal l;
          l.floatValue = 1.0 / factor;
          l.dtype = DType::F32;
          unscale.args = {Arg::ref(ref), Arg::lit(l)};
          result.nodes.push_back(unscale);
          ref = unscale.name;
        }
        renamed[{n.name, i}] = ref;
      }
    } else {
      result.nodes.push_back(wide);
    }
    ++found;
  }
  for (std::string &out : result.outputs)
    rename(out);
  if (count)
    *count = found;
  return result;
}

} // namespace tensorc::transforms
