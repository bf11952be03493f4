#include "compiler/transforms/RecognizeAttention.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

#include <cmath>
#include <map>
#include <set>

namespace tensorc::transforms {

namespace {

struct Index {
  std::map<std::string, const Node *> byName;
  std::map<std::string, int> uses; // value key -> number of uses (outputs count)
  std::map<std::string, const TypedNode *> typed;

  static std::string key(const std::string &ref) {
    ValueRef v = parseValueRef(ref);
    return v.producer + ":" + std::to_string(v.index);
  }
  // The node producing `ref` when it is its only result used exactly once.
  const Node *singleUse(const std::string &ref, const std::string &op) const {
    auto it = byName.find(parseValueRef(ref).producer);
    if (it == byName.end() || it->second->op != op)
      return nullptr;
    auto u = uses.find(key(ref));
    return u != uses.end() && u->second == 1 ? it->second : nullptr;
  }
  const Node *producer(const std::string &ref) const {
    auto it = byName.find(parseValueRef(ref).producer);
    return it == byName.end() ? nullptr : it->second;
  }
};

std::optional<double> literalOf(const Arg &a) {
  if (a.kind != Arg::Kind::Literal)
    return std::nullopt;
  return a.literal.kind == Literal::Kind::Float ? a.literal.floatValue : double(a.literal.intValue);
}

bool isLastTwoSwap(const Node &n, int64_t rank) {
  auto norm = [rank](int64_t a) { return a < 0 ? a + rank : a; };
  if (n.op == "transpose") {
    std::set<int64_t> d{norm(getInt(n.attrs, "dim0")), norm(getInt(n.attrs, "dim1"))};
    return d == std::set<int64_t>{rank - 2, rank - 1};
  }
  return false;
}

// iota(0..n) reshaped to a column or a row.
bool isIotaAlong(const Index &ix, const std::string &ref, bool column) {
  const Node *r = ix.producer(ref);
  if (!r || r->op != "reshape")
    return false;
  const Shape &shape = getDims(r->attrs, "shape");
  if (shape.size() != 2 || (column ? shape[1] : shape[0]) != Dim::of(1))
    return false;
  const Node *i = ix.producer(r->args[0].value);
  return i && i->op == "iota" && (!hasAttr(i->attrs, "start") || getInt(i->attrs, "start") == 0) &&
         (!hasAttr(i->attrs, "step") || getInt(i->attrs, "step") == 1);
}

} // namespace

Graph recognizeAttention(const Graph &graph, int *matches) {
  GraphAnalysis analysis = analyzeGraph(graph, "recognize-attention " + graph.name);
  Index ix;
  for (const TypedNode &n : analysis.nodes) {
    ix.byName[n.node->name] = n.node;
    ix.typed[n.node->name] = &n;
    for (const Arg &a : n.node->args)
      if (a.kind == Arg::Kind::Value)
        ix.uses[Index::key(a.value)]++;
  }
  for (const std::string &o : graph.outputs)
    ix.uses[Index::key(o)]++;
  std::map<std::string, std::vector<Node>> replacement;
  int found = 0;
  for (const TypedNode &tn : analysis.nodes) {
    const Node &out = *tn.node;
    if (out.op != "matmul" || out.args.size() != 2 || out.args[0].kind != Arg::Kind::Value ||
        out.args[1].kind != Arg::Kind::Value)
      continue;
    // PyTorch's safe softmax (its SDPA's math path, Dynamo's decomposition
    // of _safe_softmax): where(max(s) == -inf, 0, softmax(s)), a row with
    // every key masked 0 -- what scaled_dot_product_attention computes.
    const Node *softmax = ix.singleUse(out.args[0].value, "softmax");
    const Node *safeMax = nullptr;
    if (const Node *w = ix.singleUse(out.args[0].value, "where"); w && !softmax)
      if (auto zero = literalOf(w->args[1]); zero && *zero == 0 && w->args[0].kind == Arg::Kind::Value &&
                                             w->args[2].kind == Arg::Kind::Value)
        if (const Node *hidden = ix.singleUse(w->args[0].value, "eq"); hidden && hidden->args[0].kind == Arg::Kind::Value)
          if (auto inf = literalOf(hidden->args[1]); inf && std::isinf(*inf) && *inf < 0)
            if (const Node *m = ix.singleUse(hidden->args[0].value, "max"))
              if (const Node *sm = ix.singleUse(w->args[2].value, "softmax");
                  sm && sm->args[0].kind == Arg::Kind::Value && m->args[0].kind == Arg::Kind::Value &&
                  m->args[0].value == sm->args[0].value) {
                const TypedNode &mt = *ix.typed.at(m->name);
                int64_t r = ix.typed.at(sm->name)->results[0].rank();
                std::vector<int64_t> axes = getInts(mt.attrs, "axes");
                if (axes.size() == 1 && (axes[0] == -1 || axes[0] == r - 1) && getBool(mt.attrs, "keepdim")) {
                  softmax = sm;
                  safeMax = m;
                }
              }
    if (!softmax || softmax->args[0].kind != Arg::Kind::Value)
      continue;
    // The masked scores feed the max too: one use fewer once it goes.
    struct SafeUse {
      Index &ix;
      std::string key;
      bool active;
      SafeUse(Index &i, const Node *m, const Node *sm)
          : ix(i), key(m ? Index::key(sm->args[0].value) : ""), active(m != nullptr) {
        if (active)
          ix.uses[key]--;
      }
      ~SafeUse() {
        if (active)
          ix.uses[key]++;
      }
    } safeUse(ix, safeMax, softmax);
    int64_t rank = ix.typed.at(softmax->name)->results[0].rank();
    int64_t axis = getInt(ix.typed.at(softmax->name)->attrs, "axis");
    if (rank < 2 || (axis != -1 && axis != rank - 1))
      continue;
    std::string s = softmax->args[0].value;
    std::optional<Arg> mask;
    bool causal = false;
    if (const Node *w = ix.singleUse(s, "where")) {
      // where(keep, scores, -inf), or masked_fill's where(masked, -inf, scores).
      auto minusInf = [](const Arg &a) {
        std::optional<double> v = literalOf(a);
        return v && std::isinf(*v) && *v < 0;
      };
      bool keepForm = minusInf(w->args[2]) && w->args[1].kind == Arg::Kind::Value;
      bool maskedForm = !keepForm && minusInf(w->args[1]) && w->args[2].kind == Arg::Kind::Value;
      if ((!keepForm && !maskedForm) || w->args[0].kind != Arg::Kind::Value)
        continue;
      // Causal (j <= i kept, top-left aligned as is_causal): rows >= columns
      // kept, or rows < columns masked, either operand order.
      auto compares = [&](const Node *cmp, const char *op, const char *swapped) {
        if (!cmp || cmp->args.size() != 2 || cmp->args[0].kind != Arg::Kind::Value ||
            cmp->args[1].kind != Arg::Kind::Value)
          return false;
        const std::string &a = cmp->args[0].value, &b = cmp->args[1].value;
        return (cmp->op == op && isIotaAlong(ix, a, true) && isIotaAlong(ix, b, false)) ||
               (cmp->op == swapped && isIotaAlong(ix, a, false) && isIotaAlong(ix, b, true));
      };
      const Node *cmp = ix.producer(w->args[0].value);
      causal = keepForm ? compares(cmp, "ge", "le") : compares(cmp, "lt", "gt");
      if (!causal) {
        if (keepForm)
          mask = w->args[0];
        else if (cmp && cmp->op == "logical_not" && cmp->args[0].kind == Arg::Kind::Value)
          mask = cmp->args[0]; // masked where not kept
        else
          continue;
      }
      s = (keepForm ? w->args[1] : w->args[2]).value;
    } else if (const Node *a = ix.singleUse(s, "add")) {
      if (a->args[0].kind != Arg::Kind::Value || a->args[1].kind != Arg::Kind::Value)
        continue;
      mask = a->args[1];
      s = a->args[0].value;
    }
    double scale = 1.0;
    if (const Node *m = ix.singleUse(s, "mul")) {
      std::optional<double> c = literalOf(m->args[1]);
      if (!c)
        continue;
      scale = *c;
      s = m->args[0].value;
    } else if (const Node *d = ix.singleUse(s, "div")) {
      std::optional<double> c = literalOf(d->args[1]);
      if (!c || *c == 0)
        continue;
      scale = 1.0 / *c;
      s = d->args[0].value;
    }
    const Node *qk = ix.singleUse(s, "matmul");
    if (!qk || qk->args[0].kind != Arg::Kind::Value || qk->args[1].kind != Arg::Kind::Value)
      continue;
    // The transpose is a view: other users may keep it.
    const Node *kt = ix.producer(qk->args[1].value);
    if (!kt)
      continue;
    int64_t krank = ix.typed.at(kt->name)->results[0].rank();
    if (krank < 2 || !isLastTwoSwap(*kt, krank))
      continue;
    Node sdpa;
    sdpa.name = out.name;
    sdpa.op = "scaled_dot_product_attention";
    sdpa.args = {qk->args[0], kt->args[0], out.args[1]};
    if (mask)
      sdpa.args.push_back(*mask);
    sdpa.attrs["scale"] = scale;
    if (causal)
      sdpa.attrs["is_causal"] = true;
    sdpa.sharding = out.sharding;
    // Check the types on their own before committing to the rewrite.
    try {
      std::map<std::string, TensorSpec> values;
      for (const Arg &a : sdpa.args)
        values[a.value] = analysis.values.at(a.value);
      if (typeNode(sdpa, values).results[0] != tn.results[0])
        continue;
    } catch (const Error &) {
      continue;
    }
    std::vector<Node> nodes{sdpa};
    if (mask && !safeMax) {
      // softmax over a row with every key masked is nan where the attention
      // op gives 0 (PyTorch's SDPA): those rows are made nan again, from the
      // mask alone (a row of `false`, or of -inf added), so the program
      // computes what was written.
      auto name = [&](const char *suffix) {
        std::string n = out.name + suffix;
        while (ix.byName.count(n))
          n += "_";
        return n;
      };
      bool boolMask = isBool(analysis.values.at(mask->value).dtype);
      Literal negInf{Literal::Kind::Float, -INFINITY, 0, std::nullopt},
          zero{Literal::Kind::Float, 0.0, 0, std::nullopt}, nan{Literal::Kind::Float, NAN, 0, std::nullopt};
      Node level{name("_mask_level"), "cast", {*mask}, {{"to", DType::F32}}, std::nullopt};
      Node top{name("_mask_top"), "max", {Arg::ref(boolMask ? level.name : mask->value)},
               {{"axes", std::vector<int64_t>{-1}}, {"keepdim", true}}, std::nullopt};
      Node hidden{name("_every_key_masked"), "eq", {Arg::ref(top.name), Arg::lit(boolMask ? zero : negInf)}, {},
                  std::nullopt};
      nodes[0].name = name("_attention");
      Node result{out.name, "where", {Arg::ref(hidden.name), Arg::lit(nan), Arg::ref(nodes[0].name)}, {},
                  out.sharding};
      if (boolMask)
        nodes.push_back(level);
      nodes.push_back(top);
      nodes.push_back(hidden);
      nodes.push_back(result);
    }
    replacement[out.name] = nodes;
    ++found;
  }
  Graph result = graph;
  result.nodes.clear();
  for (const Node &n : graph.nodes) {
    if (auto it = replacement.find(n.name); it != replacement.end())
      result.nodes.insert(result.nodes.end(), it->second.begin(), it->second.end());
    else
      result.nodes.push_back(n);
  }
  // Drop the nodes nothing reads any more.
  bool changed = true;
  while (changed) {
    changed = false;
    std::set<std::string> read;
    for (const Node &n : result.nodes)
      for (const Arg &a : n.args)
        if (a.kind == Arg::Kind::Value)
          read.insert(parseValueRef(a.value).producer);
    for (const std::string &o : result.outputs)
      read.insert(parseValueRef(o).producer);
    std::vector<Node> kept;
    for (const Node &n : result.nodes) {
      if (read.count(n.name) || !found)
        kept.push_back(n);
      else
        changed = true;
    }
    result.nodes = kept;
  }
  if (matches)
    *matches = found;
  return result;
}

} // namespace tensorc::transforms
