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
    // Batched matmuls over flattened batch dims ([B*H, L, S] @ [B*H, S, Ev],
    // PyTorch's bmm as SDPA's math path runs it): the probabilities are a
    // reshape of [B, H, L, S] ones; the attention op runs on [B, H, ...]
    // views and its result is flattened back.
    std::string probabilities = out.args[0].value;
    std::optional<Shape> batch; // the unflattened batch dims
    if (const Node *flat = ix.singleUse(probabilities, "reshape"); flat && flat->args[0].kind == Arg::Kind::Value) {
      const Shape &wide = analysis.values.at(flat->args[0].value).shape, &narrow = tn.argTypes[0]->shape;
      bool ok = wide.size() >= 3 && narrow.size() == 3 && wide[wide.size() - 1] == narrow[2] &&
                wide[wide.size() - 2] == narrow[1] && narrow[0].isStatic();
      int64_t product = 1;
      for (size_t d = 0; ok && d + 2 < wide.size(); ++d) {
        ok = wide[d].isStatic();
        product *= ok ? wide[d].value() : 1;
      }
      if (ok && product == narrow[0].value()) {
        batch = Shape(wide.begin(), wide.end() - 2);
        probabilities = flat->args[0].value;
      }
    }
    // Dropout on the probabilities (a training step's eager attention:
    // softmax -> nn.Dropout -> @ v): the attention op's own dropout, the
    // same draws (its mask is the dropout op's over the probabilities'
    // [batch..., L, S] elements, row-major: flattening the batch dims, or
    // not, keeps every element's index).
    const Node *dropout = nullptr;
    if (const Node *d = ix.singleUse(probabilities, "dropout");
        d && d->args.size() == 2 && d->args[0].kind == Arg::Kind::Value && d->args[1].kind == Arg::Kind::Value) {
      const TypedNode &dt = *ix.typed.at(d->name);
      double p = getFloat(dt.attrs, "p");
      if (!(p > 0 && p < 1))
        continue;
      dropout = d;
      probabilities = d->args[0].value;
    }
    // Eager attention's softmax (transformers' eager_attention_forward):
    // 16-bit scores cast to f32, softmax, cast back to the scores' dtype.
    // The fused kernels keep the scores in f32 (no rounding to 16 bits
    // before the softmax: closer to the exact result, as PyTorch's fused SDPA).
    const Node *widened = nullptr;
    if (const Node *back = ix.singleUse(probabilities, "cast"); back && back->args[0].kind == Arg::Kind::Value)
      if (const Node *sm = ix.singleUse(back->args[0].value, "softmax"); sm && sm->args[0].kind == Arg::Kind::Value)
        if (const Node *up = ix.singleUse(sm->args[0].value, "cast");
            up && up->args[0].kind == Arg::Kind::Value &&
            analysis.values.at(up->args[0].value).dtype == analysis.values.at(probabilities).dtype &&
            isFloat(analysis.values.at(probabilities).dtype)) {
          widened = up;
          probabilities = back->args[0].value;
        }
    const Node *softmax = ix.singleUse(probabilities, "softmax");
    const Node *safeMax = nullptr;
    if (const Node *w = ix.singleUse(probabilities, "where"); w && !softmax)
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
    std::string s = widened ? widened->args[0].value : softmax->args[0].value;
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
    if (batch) {
      const Node *flatScores = ix.singleUse(s, "reshape");
      if (!flatScores || flatScores->args[0].kind != Arg::Kind::Value)
        continue;
      s = flatScores->args[0].value;
    }
    const Node *qk = ix.singleUse(s, "matmul");
    if (!qk || qk->args[0].kind != Arg::Kind::Value || qk->args[1].kind != Arg::Kind::Value)
      continue;
    auto name = [&](const char *suffix) {
      std::string n = out.name + suffix;
      while (ix.byName.count(n))
        n += "_";
      return n;
    };
    std::vector<Node> nodes;
    // K: beneath k^T where that is a transpose (a view: other users may keep
    // it), else k^T transposed back (the math path scales k^T by sqrt(scale)).
    std::string key;
    if (const Node *kt = ix.producer(qk->args[1].value);
        kt && isLastTwoSwap(*kt, ix.typed.at(kt->name)->results[0].rank()))
      key = kt->args[0].value;
    else if (batch) {
      key = name("_key");
      nodes.push_back(Node{key, "transpose", {qk->args[1]}, {{"dim0", int64_t(-1)}, {"dim1", int64_t(-2)}}, std::nullopt});
    } else
      continue;
    std::string query = qk->args[0].value, value = out.args[1].value;
    if (batch) { // [B*H, n, d] operands as [B, H, n, d] views
      auto unflatten = [&](std::string &ref, const char *suffix, const std::string &of) {
        const Shape &three = of.empty() ? analysis.values.at(ref).shape : Shape{};
        Shape shape = *batch;
        if (!of.empty()) { // a transposed k^T: its last two dims swapped
          const Shape &kt = analysis.values.at(of).shape;
          shape.push_back(kt[2]);
          shape.push_back(kt[1]);
        } else {
          shape.push_back(three[1]);
          shape.push_back(three[2]);
        }
        std::string n = name(suffix);
        nodes.push_back(Node{n, "reshape", {Arg::ref(ref)}, {{"shape", shape}}, std::nullopt});
        ref = n;
      };
      bool keyCreated = !nodes.empty();
      if (analysis.values.at(query).rank() != 3 || analysis.values.at(value).rank() != 3 ||
          (!keyCreated && analysis.values.at(key).rank() != 3))
        continue;
      unflatten(query, "_query_heads", "");
      unflatten(key, "_key_heads", keyCreated ? qk->args[1].value : "");
      unflatten(value, "_value_heads", "");
    }
    Node sdpa;
    sdpa.name = batch ? name("_heads") : out.name;
    sdpa.op = "scaled_dot_product_attention";
    sdpa.args = {Arg::ref(query), Arg::ref(key), Arg::ref(value)};
    if (mask || dropout)
      sdpa.args.push_back(mask ? *mask : Arg::absent());
    if (dropout) {
      const TypedNode &dt = *ix.typed.at(dropout->name);
      sdpa.args.push_back(dropout->args[1]);
      sdpa.attrs["dropout_p"] = getFloat(dt.attrs, "p");
      sdpa.attrs["dropout_stream"] = getInt(dt.attrs, "stream");
    }
    sdpa.attrs["scale"] = scale;
    if (causal)
      sdpa.attrs["is_causal"] = true;
    sdpa.sharding = batch ? std::nullopt : out.sharding;
    nodes.push_back(sdpa);
    std::string attended = sdpa.name;
    if (mask && !safeMax) {
      // softmax over a row with every key masked is nan where the attention
      // op gives 0 (PyTorch's SDPA): those rows are made nan again, from the
      // mask alone (a row of `false`, or of -inf added), so the program
      // computes what was written.
      bool boolMask = isBool(analysis.values.at(mask->value).dtype);
      Literal negInf{Literal::Kind::Float, -INFINITY, 0, std::nullopt},
          zero{Literal::Kind::Float, 0.0, 0, std::nullopt}, nan{Literal::Kind::Float, NAN, 0, std::nullopt};
      Node level{name("_mask_level"), "cast", {*mask}, {{"to", DType::F32}}, std::nullopt};
      Node top{name("_mask_top"), "max", {Arg::ref(boolMask ? level.name : mask->value)},
               {{"axes", std::vector<int64_t>{-1}}, {"keepdim", true}}, std::nullopt};
      Node hidden{name("_every_key_masked"), "eq", {Arg::ref(top.name), Arg::lit(boolMask ? zero : negInf)}, {},
                  std::nullopt};
      if (!batch)
        nodes.back().name = attended = name("_attention");
      Node result{batch ? name("_heads_nan") : out.name, "where",
                  {Arg::ref(hidden.name), Arg::lit(nan), Arg::ref(attended)}, {}, std::nullopt};
      if (boolMask)
        nodes.push_back(level);
      nodes.push_back(top);
      nodes.push_back(hidden);
      nodes.push_back(result);
      attended = result.name;
    }
    if (batch)
      nodes.push_back(Node{out.name, "reshape", {Arg::ref(attended)}, {{"shape", tn.results[0].shape}}, std::nullopt});
    nodes.back().sharding = out.sharding;
    // Check the types on their own before committing to the rewrite.
    try {
      std::map<std::string, TensorSpec> values = analysis.values;
      TensorSpec last;
      for (const Node &n : nodes) {
        last = typeNode(n, values).results[0];
        values[n.name] = last;
      }
      if (last != tn.results[0])
        continue;
    } catch (const Error &) {
      continue;
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
