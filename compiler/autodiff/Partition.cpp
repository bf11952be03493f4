#include "compiler/autodiff/Partition.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <queue>
#include <set>

namespace tensorc::autodiff {

namespace {

constexpr int64_t kInf = int64_t(1) << 60;

// Dinic's maximum flow; small graphs (one node pair per forward value).
class MaxFlow {
public:
  explicit MaxFlow(int n) : adj_(n), level_(n), next_(n) {}
  void addEdge(int from, int to, int64_t capacity) {
    adj_[from].push_back({to, capacity, int(adj_[to].size())});
    adj_[to].push_back({from, 0, int(adj_[from].size()) - 1});
  }
  int64_t run(int s, int t) {
    int64_t flow = 0;
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (int64_t f = dfs(s, t, kInf))
        flow += f;
    }
    return flow;
  }
  // Nodes that reach `t` in the residual graph: the sink side of the
  // minimum cut nearest the sink.
  std::vector<bool> sinkSide(int t) {
    std::vector<bool> seen(adj_.size());
    std::queue<int> q;
    q.push(t);
    seen[t] = true;
    while (!q.empty()) {
      int v = q.front();
      q.pop();
      for (const Edge &e : adj_[v]) // e.to -> v has the reverse edge's capacity
        if (adj_[e.to][e.reverse].capacity > 0 && !seen[e.to]) {
          seen[e.to] = true;
          q.push(e.to);
        }
    }
    return seen;
  }

private:
  struct Edge {
    int to;
    int64_t capacity;
    int reverse;
  };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    q.push(s);
    level_[s] = 0;
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (const Edge &e : adj_[u])
        if (e.capacity > 0 && level_[e.to] < 0) {
          level_[e.to] = level_[u] + 1;
          q.push(e.to);
        }
    }
    return level_[t] >= 0;
  }
  int64_t dfs(int u, int t, int64_t pushed) {
    if (u == t)
      return pushed;
    for (int &i = next_[u]; i < int(adj_[u].size()); ++i) {
      Edge &e = adj_[u][i];
      if (e.capacity <= 0 || level_[e.to] != level_[u] + 1)
        continue;
      if (int64_t f = dfs(e.to, t, std::min(pushed, e.capacity))) {
        e.capacity -= f;
        adj_[e.to][e.reverse].capacity += f;
        return f;
      }
    }
    return 0;
  }
  std::vector<std::vector<Edge>> adj_;
  std::vector<int> level_, next_;
};

int64_t evaluate(const Dim &d, const std::map<std::string, int64_t> &dims) {
  std::optional<int64_t> v = d.evaluate(dims);
  check(v.has_value(), "partition: no representative size for " + d.str());
  return *v;
}

int64_t numelAt(const TensorSpec &s, const std::map<std::string, int64_t> &dims) {
  return evaluate(numElements(s.shape), dims);
}

// How expensive recomputing an op is: 0 for ops the backward may always
// compute again, more for those it recomputes only to meet a memory budget.
int recomputeCost(const std::string &op) {
  static const std::set<std::string> level2 = {"matmul", "conv2d", "scaled_dot_product_attention",
                                               "scaled_dot_product_attention_with_lse"};
  static const std::set<std::string> level1 = {
      "sum",        "mean",         "max",        "min",           "prod",
      "logsumexp",  "var",        "argmax",       "argmin",     "softmax",       "log_softmax",
      "layer_norm", "rms_norm",     "batch_norm", "cross_entropy", "embedding",
      "embedding_backward",
      "gather",     "index_select", "max_pool2d", "avg_pool2d", "max_pool2d_backward", "max_pool2d_taps"};
  if (level2.count(op))
    return 2;
  if (level1.count(op))
    return 1;
  return 0; // elementwise, views, creation, dropout (deterministic from its seed)
}

// A cheap op is recomputed only while recomputing it reads at most this
// many full-size tensors from memory (saved values or inputs, at least a
// quarter of its result's size). Bytes alone made the cut save each layer's
// 16-bit block outputs and recompute the f32 residual stream from all of
// them in every layer's backward: DistilGPT-2's layer-norm backward kernels
// read 8 to 16 tensors each and its backward source was 5.1 MB of CUDA
// (quadratic in the layers), as Inductor's partitioner bans recomputing long
// fusible chains.
constexpr size_t kMaxRecomputeReads = 4;

std::string valueKey(const std::string &ref) {
  ValueRef v = parseValueRef(ref);
  return v.producer + ":" + std::to_string(v.index);
}

std::string savedName(const std::string &key, size_t resultCount) {
  ValueRef v = parseValueRef(key);
  return resultCount == 1 ? v.producer : v.producer + "_" + std::to_string(v.index);
}

// `extra`: forward nodes the backward may recompute beyond the cheap ops.
PartitionResult partitionWith(const Graph &forwardGraph, const JointGraph &joint,
                              const GraphAnalysis &analysis, const std::set<std::string> &extra,
                              bool saveAll, const std::map<std::string, int64_t> &dims) {
  const Graph &g = joint.graph;
  std::map<std::string, const TypedNode *> byName;
  for (const TypedNode &n : analysis.nodes)
    byName[n.node->name] = &n;
  std::set<std::string> inputNames;
  for (const GraphInput &in : g.inputs)
    inputNames.insert(in.name);
  std::set<std::string> cotangents(joint.cotangentInputs.begin(), joint.cotangentInputs.end());

  auto ancestors = [&](const std::vector<std::string> &refs) {
    std::set<std::string> seen;
    std::vector<std::string> stack;
    for (const std::string &r : refs)
      stack.push_back(parseValueRef(r).producer);
    while (!stack.empty()) {
      std::string n = stack.back();
      stack.pop_back();
      auto it = byName.find(n);
      if (it == byName.end() || !seen.insert(n).second)
        continue;
      for (const Arg &a : it->second->node->args)
        if (a.kind == Arg::Kind::Value)
          stack.push_back(parseValueRef(a.value).producer);
    }
    return seen;
  };
  std::set<std::string> forwardNodes = ancestors(forwardGraph.outputs);
  std::set<std::string> backwardNeeds = ancestors(joint.gradientOutputs);
  std::set<std::string> backwardNodes;
  for (const std::string &n : backwardNeeds)
    if (!forwardNodes.count(n))
      backwardNodes.insert(n);

  // Flow network: one (in, out) pair per forward value and per input.
  std::map<std::string, int> index; // value key or input name -> pair index
  auto pairOf = [&](const std::string &key) {
    auto [it, inserted] = index.emplace(key, int(index.size()));
    return it->second;
  };
  for (const GraphInput &in : g.inputs)
    if (!cotangents.count(in.name))
      pairOf(in.name);
  for (const TypedNode &n : analysis.nodes)
    if (forwardNodes.count(n.node->name))
      for (size_t r = 0; r < n.results.size(); ++r)
        pairOf(n.node->name + ":" + std::to_string(r));
  const int source = 0, sink = 1;
  auto inNode = [&](int p) { return 2 + 2 * p; };
  auto outNode = [&](int p) { return 3 + 2 * p; };
  MaxFlow flow(2 + 2 * int(index.size()));
  auto operandPair = [&](const Arg &a) -> int {
    if (a.kind != Arg::Kind::Value)
      return -1;
    if (inputNames.count(a.value))
      return cotangents.count(a.value) ? -1 : index.at(a.value);
    auto it = index.find(valueKey(a.value));
    return it == index.end() ? -1 : it->second;
  };
  // Inputs get no edge from the source: the backward may read them for free,
  // so a value computed from inputs by recomputable ops costs nothing to
  // recompute. Ops that may not be recomputed are tied to the source, which
  // forces the cut (a saved value) at or after them.
  // Per forward value: the full-size tensors recomputing it reads (capped
  // one past the limit; empty for values that are saved whatever happens).
  std::map<std::string, std::set<std::string>> reads;
  auto bytesOf = [&](const TensorSpec &t) { return numelAt(t, dims) * int64_t(dtypeSize(t.dtype)); };
  for (const TypedNode &n : analysis.nodes) {
    const std::string &name = n.node->name;
    if (!forwardNodes.count(name) || n.results.size() != 1 || recomputeCost(n.node->op) > 0)
      continue;
    std::set<std::string> &mine = reads[name + ":0"];
    const int64_t size = bytesOf(n.results[0]);
    for (size_t i = 0; i < n.node->args.size() && mine.size() <= kMaxRecomputeReads; ++i) {
      const Arg &a = n.node->args[i];
      if (a.kind != Arg::Kind::Value || !n.argTypes[i] || 4 * bytesOf(*n.argTypes[i]) < size)
        continue;
      auto it = inputNames.count(a.value) ? reads.end() : reads.find(valueKey(a.value));
      if (it == reads.end() || it->second.empty()) {
        mine.insert(inputNames.count(a.value) ? a.value : valueKey(a.value));
        continue;
      }
      for (const std::string &r : it->second) {
        mine.insert(r);
        if (mine.size() > kMaxRecomputeReads)
          break;
      }
    }
  }
  for (const TypedNode &n : analysis.nodes) {
    const std::string &name = n.node->name;
    if (forwardNodes.count(name)) {
      auto fanIn = reads.find(name + ":0");
      bool banned = saveAll || (recomputeCost(n.node->op) > 0 && !extra.count(name)) ||
                    (fanIn != reads.end() && fanIn->second.size() > kMaxRecomputeReads);
      for (size_t r = 0; r < n.results.size(); ++r) {
        int p = index.at(name + ":" + std::to_string(r));
        int64_t bytes = numelAt(n.results[r], dims) * int64_t(dtypeSize(n.results[r].dtype));
        flow.addEdge(inNode(p), outNode(p), std::max<int64_t>(bytes, 1));
        if (banned)
          flow.addEdge(source, inNode(p), kInf);
        for (const Arg &a : n.node->args)
          if (int q = operandPair(a); q >= 0)
            flow.addEdge(outNode(q), inNode(p), kInf);
      }
    } else if (backwardNodes.count(name)) {
      for (const Arg &a : n.node->args)
        if (int q = operandPair(a); q >= 0)
          flow.addEdge(outNode(q), sink, kInf);
    }
  }
  flow.run(source, sink);
  // Of the minimum cuts, the one nearest the sink: among saved sets of
  // equal bytes, the latest values, so the backward recomputes the least
  // and the forward keeps its fusions. The cut nearest the source saved a
  // linear layer's product before its bias (x W, not x W + b: the same
  // bytes), which took the bias out of the GEMM's epilogue (one more pass,
  // and a second bf16 rounding the output then carried: the GPT-2 block's
  // forward through the PyTorch backend drifted from eager's, a mean error
  // of -4.9e-6 against eager's -6.8e-7 on an H100) and made the backward
  // add the bias again.
  std::vector<bool> sinkSide = flow.sinkSide(sink);

  PartitionResult result;
  result.extraRecomputable.assign(extra.begin(), extra.end());
  result.dims = dims;
  std::set<std::string> savedKeys;
  for (const auto &[key, p] : index) {
    if (inputNames.count(key))
      continue;
    if (!sinkSide[inNode(p)] && sinkSide[outNode(p)])
      savedKeys.insert(key);
  }
  // A saved reshape (reshape, flatten, squeeze, unsqueeze) of a forward
  // value saves that value instead: the same bytes, the backward redoes the
  // view (free), and the forward's program hands out the value where its
  // kernel wrote it, not a copy of the view in an output buffer (DistilGPT-2's
  // forward copied 26 such views, its logits' 412 MB among them). A model
  // output stays as it is (it is an output anyway).
  {
    std::set<std::string> modelOutputs;
    for (const std::string &o : forwardGraph.outputs)
      if (!inputNames.count(o))
        modelOutputs.insert(valueKey(o));
    static const std::set<std::string> reshapes = {"reshape", "flatten", "squeeze", "unsqueeze"};
    std::set<std::string> retargeted;
    for (std::string key : savedKeys) {
      while (!modelOutputs.count(key)) {
        const Node &n = *byName.at(parseValueRef(key).producer)->node;
        if (!reshapes.count(n.op) || n.args.empty() || n.args[0].kind != Arg::Kind::Value ||
            inputNames.count(n.args[0].value) || !forwardNodes.count(parseValueRef(n.args[0].value).producer))
          break;
        key = valueKey(n.args[0].value);
      }
      retargeted.insert(key);
    }
    savedKeys = std::move(retargeted);
  }
  // What the backward computes: its own nodes, plus forward nodes it needs
  // that were not saved (recomputation), found by walking back to saved
  // values and inputs.
  std::set<std::string> recomputed, backwardInputs;
  std::vector<std::string> stack;
  for (const std::string &n : backwardNodes)
    stack.push_back(n);
  std::set<std::string> visited;
  while (!stack.empty()) {
    std::string n = stack.back();
    stack.pop_back();
    if (!visited.insert(n).second)
      continue;
    for (const Arg &a : byName.at(n)->node->args) {
      if (a.kind != Arg::Kind::Value)
        continue;
      if (inputNames.count(a.value)) {
        backwardInputs.insert(a.value);
        continue;
      }
      std::string key = valueKey(a.value);
      std::string producer = parseValueRef(a.value).producer;
      if (savedKeys.count(key) || !forwardNodes.count(producer)) {
        if (!forwardNodes.count(producer))
          stack.push_back(producer);
        continue;
      }
      recomputed.insert(producer);
      stack.push_back(producer);
    }
  }
  for (const std::string &out : joint.gradientOutputs) {
    if (inputNames.count(out))
      backwardInputs.insert(out);
    else if (forwardNodes.count(parseValueRef(out).producer) &&
             !backwardNodes.count(parseValueRef(out).producer))
      savedKeys.insert(valueKey(out)); // a gradient that is a forward value
  }

  // The forward graph.
  Graph &fwd = result.forward;
  fwd.name = forwardGraph.name + "_forward";
  fwd.dims = g.dims;
  fwd.meshes = g.meshes;
  for (const GraphInput &in : g.inputs)
    if (!cotangents.count(in.name))
      fwd.inputs.push_back(in);
  for (const TypedNode &n : analysis.nodes)
    if (forwardNodes.count(n.node->name))
      fwd.nodes.push_back(*n.node);
  fwd.outputs = forwardGraph.outputs;
  std::map<std::string, std::string> savedRename; // key -> name in the backward graph
  for (const std::string &key : savedKeys) {
    ValueRef v = parseValueRef(key);
    const TypedNode &n = *byName.at(v.producer);
    SavedTensor s;
    s.ref = n.results.size() == 1 ? v.producer : key;
    s.name = savedName(key, n.results.size());
    s.spec = n.results[v.index];
    s.bytes = numElements(s.spec.shape) * Dim::of(int64_t(dtypeSize(s.spec.dtype)));
    s.bytesAt = evaluate(s.bytes, dims);
    result.savedBytes += s.bytesAt;
    savedRename[key] = s.name;
    fwd.outputs.push_back(s.ref);
    result.saved.push_back(s);
  }

  // The backward graph.
  Graph &bwd = result.backward;
  bwd.name = forwardGraph.name + "_backward";
  bwd.dims = g.dims;
  bwd.meshes = g.meshes;
  for (const GraphInput &in : g.inputs)
    if (backwardInputs.count(in.name) && !cotangents.count(in.name))
      bwd.inputs.push_back(in);
  for (const SavedTensor &s : result.saved)
    bwd.inputs.push_back(GraphInput{s.name, s.spec, false, std::nullopt});
  for (const GraphInput &in : g.inputs)
    if (cotangents.count(in.name))
      bwd.inputs.push_back(in);
  auto rewrite = [&](const std::string &ref) {
    if (inputNames.count(ref))
      return ref;
    auto it = savedRename.find(valueKey(ref));
    return it == savedRename.end() ? ref : it->second;
  };
  for (const TypedNode &n : analysis.nodes) {
    const std::string &name = n.node->name;
    if (!(recomputed.count(name) || backwardNodes.count(name)))
      continue;
    Node copy = *n.node;
    for (Arg &a : copy.args)
      if (a.kind == Arg::Kind::Value)
        a.value = rewrite(a.value);
    bwd.nodes.push_back(copy);
    if (recomputed.count(name)) {
      result.recomputed.push_back(name);
      result.recomputeFlops += estimateFlops(n, dims);
    }
  }
  for (const std::string &out : joint.gradientOutputs)
    bwd.outputs.push_back(rewrite(out));
  return result;
}

} // namespace

int64_t estimateFlops(const TypedNode &n, const std::map<std::string, int64_t> &dims) {
  const std::string &op = n.node->op;
  int64_t out = 0;
  for (const TensorSpec &r : n.results)
    out += numelAt(r, dims);
  auto arg = [&](size_t i) -> const TensorSpec & { return *n.argTypes.at(i); };
  if (op == "matmul") {
    const Shape &a = arg(0).shape;
    return 2 * out * evaluate(a.back(), dims);
  }
  if (op == "conv2d") {
    const Shape &w = arg(1).shape;
    return 2 * out * evaluate(w[1], dims) * evaluate(w[2], dims) * evaluate(w[3], dims);
  }
  if (op == "scaled_dot_product_attention" || op == "scaled_dot_product_attention_with_lse") {
    const Shape &k = arg(1).shape, &q = arg(0).shape;
    int64_t s = evaluate(k[k.size() - 2], dims), e = evaluate(q.back(), dims);
    int64_t rows = numelAt(n.results[0], dims) / std::max<int64_t>(evaluate(arg(2).shape.back(), dims), 1);
    return 4 * rows * s * e;
  }
  int64_t in = 0;
  for (const auto &t : n.argTypes)
    if (t)
      in += numelAt(*t, dims);
  return std::max(in, out);
}

PartitionResult partitionJointGraph(const Graph &given, const JointGraph &joint,
                                    const PartitionOptions &options) {
  const Graph forwardGraph = withoutChecks(given);
  GraphAnalysis analysis = analyzeGraph(joint.graph, "partition " + joint.graph.name);
  std::map<std::string, int64_t> dims = options.dims;
  for (const GraphInput &in : joint.graph.inputs)
    for (const Dim &d : in.spec.shape)
      for (const std::string &s : d.symbols())
        if (!dims.count(s)) {
          int64_t v = 64;
          auto bound = joint.graph.dims.find(s);
          if (bound != joint.graph.dims.end()) {
            if (bound->second.max)
              v = std::min(v, *bound->second.max);
            v = std::max(v, bound->second.min);
          }
          dims[s] = v;
        }
  if (options.saveAll)
    return partitionWith(forwardGraph, joint, analysis, {}, true, dims);
  PartitionResult best = partitionWith(forwardGraph, joint, analysis, {}, false, dims);
  // Over budget: allow recomputing expensive forward nodes one at a time,
  // each time the one that frees the most saved bytes per recomputed FLOP.
  std::set<std::string> extra;
  while (options.memoryBudget && best.savedBytes > *options.memoryBudget) {
    std::optional<PartitionResult> choice;
    std::string chosen;
    double bestScore = 0;
    for (const TypedNode &n : analysis.nodes) {
      const std::string &name = n.node->name;
      if (recomputeCost(n.node->op) == 0 || extra.count(name))
        continue;
      std::set<std::string> trial = extra;
      trial.insert(name);
      PartitionResult r = partitionWith(forwardGraph, joint, analysis, trial, false, dims);
      int64_t freed = best.savedBytes - r.savedBytes;
      if (freed <= 0)
        continue;
      double score = double(freed) / double(1 + r.recomputeFlops - best.recomputeFlops);
      if (!choice || score > bestScore) {
        choice = r;
        chosen = name;
        bestScore = score;
      }
    }
    if (!choice) {
      // No single node helps (freeing a value may need its whole producer
      // chain recomputed): allow every expensive node at once.
      std::set<std::string> everything = extra;
      for (const TypedNode &n : analysis.nodes)
        if (recomputeCost(n.node->op) > 0)
          everything.insert(n.node->name);
      PartitionResult r = partitionWith(forwardGraph, joint, analysis, everything, false, dims);
      if (r.savedBytes < best.savedBytes)
        best = r;
      break;
    }
    extra.insert(chosen);
    best = *choice;
  }
  best.budgetMet = !options.memoryBudget || best.savedBytes <= *options.memoryBudget;
  return best;
}

std::string partitionReport(const PartitionResult &r) {
  std::string out;
  char line[512];
  std::string dims;
  for (const auto &[s, v] : r.dims)
    dims += (dims.empty() ? "" : ", ") + s + "=" + std::to_string(v);
  std::snprintf(line, sizeof line, "saved tensors: %zu, %lld bytes%s%s%s\n", r.saved.size(),
                (long long)r.savedBytes, dims.empty() ? "" : " at ", dims.c_str(), "");
  out += line;
  for (const SavedTensor &s : r.saved) {
    std::snprintf(line, sizeof line, "  saved %-24s %-28s %s bytes (%lld)\n", s.name.c_str(),
                  s.spec.str().c_str(), s.bytes.str().c_str(), (long long)s.bytesAt);
    out += line;
  }
  std::snprintf(line, sizeof line, "recomputed in backward: %zu nodes, %lld FLOPs\n",
                r.recomputed.size(), (long long)r.recomputeFlops);
  out += line;
  for (const std::string &n : r.recomputed)
    out += "  recompute " + n + "\n";
  std::string extra;
  for (const std::string &n : r.extraRecomputable)
    extra += " " + n;
  out += "recomputable: elementwise, view and creation ops" +
         (extra.empty() ? std::string() : ", and (for the budget)" + extra) + "\n";
  if (!r.budgetMet)
    out += "memory budget not met: the smallest saved set found is listed above\n";
  return out;
}

} // namespace tensorc::autodiff
