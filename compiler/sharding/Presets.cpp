#include "compiler/sharding/Presets.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"
#include "ir/core/OpSchema.h"
#include "ir/core/ShapeInference.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace tensorc::sharding {

namespace {

// The trainable input that `name` is the state or gradient of ("w1" for
// "w1.exp_avg", "w1.grad", "grad_w1"), or "".
std::string ownerParameter(const std::set<std::string> &parameters, const std::string &name) {
  if (name.rfind("grad_", 0) == 0 && parameters.count(name.substr(5)))
    return name.substr(5);
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    if (parameters.count(name.substr(0, dot)))
      return name.substr(0, dot);
  return "";
}

// The trainable 2-D weight a matmul's rhs reads, as [in, out] (`w`) or
// [out, in] (`transpose(w)`, PyTorch's nn.Linear layout); "" if neither.
struct LinearWeight {
  std::string name;
  bool transposed = false;
};

// A graph's linear layers and the walk from one to the next (the tp
// preset's view of it).
struct LinearLayers {
  explicit LinearLayers(const Graph &g) {
    for (const Node &n : g.nodes) {
      producers[n.name] = &n;
      for (const Arg &a : n.args)
        if (a.kind == Arg::Kind::Value)
          users[parseValueRef(a.value).producer].push_back(&n);
    }
    for (const GraphInput &in : g.inputs)
      inputs[in.name] = &in;
  }
  // The trainable input `ref` names if it has rank `rank`, else null.
  const GraphInput *trainable(const std::string &ref, int64_t rank) const {
    auto it = inputs.find(ref);
    return it != inputs.end() && it->second->trainable && it->second->spec.rank() == rank ? it->second : nullptr;
  }
  const GraphInput *trainable2d(const std::string &ref) const { return trainable(ref, 2); }
  std::optional<LinearWeight> weightOf(const Node &matmul) const {
    if (matmul.op != "matmul" || matmul.args.size() != 2 || matmul.args[1].kind != Arg::Kind::Value)
      return std::nullopt;
    const std::string &rhs = matmul.args[1].value;
    if (trainable2d(rhs))
      return LinearWeight{rhs, false};
    auto p = producers.find(parseValueRef(rhs).producer);
    if (p != producers.end() && p->second->op == "transpose" && p->second->args[0].kind == Arg::Kind::Value &&
        trainable2d(p->second->args[0].value))
      return LinearWeight{p->second->args[0].value, true};
    return std::nullopt;
  }
  static bool elementwise(const Node &n) {
    const OpSchema *s = findOpSchema(n.op);
    return s && (s->category == "unary" || s->category == "binary" || s->category == "elementwise");
  }
  // Ops that keep each head's features apart: views, and attention's own
  // (a product of two activations over the head batch dims, softmax over
  // the keys, the fused attention op).
  bool perHead(const Node &n) const {
    return n.op == "reshape" || n.op == "transpose" || n.op == "permute" || n.op == "softmax" ||
           n.op == "scaled_dot_product_attention" || (n.op == "matmul" && !weightOf(n));
  }
  // Follows a first layer's result from `value` through elementwise and
  // per-head ops to the matmul of its second layer: each value's first user
  // in node order (a joint graph's forward nodes come before the backward
  // nodes that read the same values); collects the biases on the way.
  const Node *secondLayer(std::string value, std::vector<std::string> &biases) const {
    for (int hops = 0; hops < 16; ++hops) {
      auto u = users.find(value);
      if (u == users.end() || u->second.empty())
        return nullptr;
      const Node &next = *u->second[0];
      if (next.op == "matmul" && weightOf(next))
        return next.args[0].kind == Arg::Kind::Value && parseValueRef(next.args[0].value).producer == value
                   ? &next : nullptr;
      if (!elementwise(next) && !perHead(next))
        return nullptr;
      for (const Arg &a : next.args) // a bias: a trainable vector of the layer's width
        if (a.kind == Arg::Kind::Value && inputs.count(a.value) && inputs.at(a.value)->trainable &&
            inputs.at(a.value)->spec.rank() == 1)
          biases.push_back(a.value);
      value = next.name;
    }
    return nullptr;
  }
  std::map<std::string, const Node *> producers;
  std::map<std::string, std::vector<const Node *>> users;
  std::map<std::string, const GraphInput *> inputs;
};

// A fused projection (GPT-2's c_attn): one linear layer whose output
// columns, after its bias, are split into k equal parts (q, k, v) along the
// last dim, and, in a joint graph, the concat of those parts' cotangents.
struct FusedProjection {
  std::string matmul;              // the layer's matmul node
  std::string weight;              // its trainable weight
  bool transposed = false;         // read through transpose(weight)
  std::vector<std::string> biases; // between the matmul and the split
  std::string firstPart;           // the value that replaced the split's part 0
  int64_t k = 0, D = 0;            // parts of D columns each
};

// Splitting such a layer's columns over `parts` devices must give each
// device its heads of every part (q_r | k_r | v_r), which is no block of
// the weight's columns. So `tp-head-blocked` takes the fused weight (and
// bias, and their gradients and optimizer state, elementwise alike) in the
// **head-blocked** column order: column g*(k*D/G) + j*(D/G) + e holds the
// original column j*D + g*(D/G) + e (G = parts, j the part, g the device's
// block of heads, e the feature in it), i.e. device r's contiguous block is
// [q_r | k_r | v_r], as Megatron stores its fused QKV. The split (and the
// concat of its cotangents) become reshapes, a transpose and a split that
// restore the parts from that order, so the program equals the original
// one on head-blocked weights, and every step is one propagation splits by
// heads. Returns the layers rewritten; a layer whose values other ops read
// in column order (anything but the chain, the dx and weight-gradient
// matmuls, sums and row reshapes of the cotangents, elementwise updates)
// is left as it was.
std::vector<FusedProjection> headBlockFusedProjections(Graph &g, int64_t parts,
                                                       const std::set<std::string> *onlyMatmuls) {
  std::vector<FusedProjection> done;
  GraphAnalysis analysis = analyzeGraph(g, "--preset tp");
  const LinearLayers layers(g);
  const auto &producers = layers.producers;
  std::set<std::string> returned; // read as they are, by the graph's outputs
  for (const std::string &out : g.outputs)
    returned.insert(parseValueRef(out).producer);
  auto usersOf = [&](const std::string &producer) {
    auto u = layers.users.find(producer);
    return u != layers.users.end() ? u->second : std::vector<const Node *>{};
  };
  // The one reader of `producer`'s values (none of them an output), or null.
  auto only = [&](const std::string &producer) -> const Node * {
    std::vector<const Node *> u = usersOf(producer);
    return u.size() == 1 && !returned.count(producer) ? u[0] : nullptr;
  };
  struct Plan {
    FusedProjection layer;
    std::string split, splitInput, concat; // concat: "" where the graph has none
    std::vector<std::string> concatArgs;
    int64_t k = 0, D = 0;
    Shape lead;
  };
  std::vector<Plan> plans;
  for (const Node &split : g.nodes) {
    if (split.op != "split" || split.args.size() != 1 || split.args[0].kind != Arg::Kind::Value)
      continue;
    const TensorSpec &in = analysis.values.at(split.args[0].value);
    const std::vector<int64_t> &sizes = getInts(split.attrs, "sizes");
    const int64_t axis = split.attrs.count("axis") ? getInt(split.attrs, "axis") : 0;
    if (in.rank() < 2 || normalizeAxis(axis, in.rank()) != in.rank() - 1 || sizes.size() < 2 ||
        std::any_of(sizes.begin(), sizes.end(), [&](int64_t n) { return n != sizes[0]; }) ||
        sizes[0] % parts != 0)
      continue;
    Plan plan;
    plan.k = int64_t(sizes.size());
    plan.D = sizes[0];
    plan.split = split.name;
    plan.splitInput = split.args[0].value;
    plan.lead.assign(in.shape.begin(), in.shape.end() - 1);
    // Back through the bias (elementwise adds of a trainable vector) to the matmul.
    std::string value = parseValueRef(split.args[0].value).producer;
    bool ok = false;
    for (int hops = 0; hops < 4 && producers.count(value); ++hops) {
      const Node &n = *producers.at(value);
      if (only(n.name) == nullptr)
        break; // another op reads the columns in their order
      if (n.op == "matmul") {
        std::optional<LinearWeight> w = layers.weightOf(n);
        // A transposed weight's transpose read by this layer alone.
        if (!w || (w->transposed && only(parseValueRef(n.args[1].value).producer) != &n))
          break;
        plan.layer.weight = w->name;
        plan.layer.transposed = w->transposed;
        plan.layer.matmul = n.name;
        ok = layers.inputs.at(w->name)->spec.shape[w->transposed ? 0 : 1] == Dim::of(plan.k * plan.D);
        break;
      }
      if (n.op != "add" || n.args.size() != 2)
        break;
      std::string next;
      for (const Arg &a : n.args)
        if (a.kind == Arg::Kind::Value && layers.trainable(a.value, 1))
          plan.layer.biases.push_back(a.value);
        else if (a.kind == Arg::Kind::Value && producers.count(parseValueRef(a.value).producer))
          next = parseValueRef(a.value).producer;
      value = next;
    }
    if (!ok)
      continue;
    // The weight's other readers: the dx matmul of a joint graph (through a
    // transpose) and elementwise updates; the concat of the parts'
    // cotangents feeds the dx and weight-gradient matmuls and the bias's sum.
    for (const Node &c : g.nodes) {
      if (c.op != "concat" || c.args.size() != size_t(plan.k) ||
          analysis.values.at(c.name) != in)
        continue;
      bool readsWeight = false, orderFree = !returned.count(c.name);
      for (const Node *u : usersOf(c.name)) {
        const TensorSpec &r = analysis.values.at(u->name);
        if (u->op == "matmul") {
          for (const Arg &a : u->args)
            if (a.kind == Arg::Kind::Value && producers.count(a.value) && producers.at(a.value)->op == "transpose" &&
                producers.at(a.value)->args[0].value == plan.layer.weight)
              readsWeight = true;
        } else if (u->op == "sum" || (u->op == "reshape" && r.rank() >= 1 && r.shape.back() == in.shape.back())) {
        } else {
          orderFree = false;
        }
      }
      if (readsWeight && orderFree) {
        plan.concat = c.name;
        for (const Arg &a : c.args)
          plan.concatArgs.push_back(a.value);
      }
    }
    for (const Node *u : usersOf(plan.layer.weight)) {
      if (u->name == plan.layer.matmul)
        continue;
      bool elementwise = LinearLayers::elementwise(*u);
      bool dx = u->op == "transpose" && !plan.concat.empty() && only(u->name) &&
                only(u->name)->args[0].value == plan.concat;
      bool own = u->op == "transpose" && plan.layer.transposed && only(u->name) &&
                 only(u->name)->name == plan.layer.matmul;
      if (!elementwise && !dx && !own)
        ok = false;
    }
    if (ok && (!onlyMatmuls || onlyMatmuls->count(plan.layer.matmul)))
      plans.push_back(plan);
  }
  // Rewrite: the split and the concat in place, keeping names readers use.
  const Dim G = Dim::of(parts);
  for (Plan &plan : plans) {
    const Dim kDim = Dim::of(plan.k), blockDim = Dim::of(plan.D / parts), DDim = Dim::of(plan.D);
    const int64_t rank = int64_t(plan.lead.size()) + 3; // lead, G or k, k or G, D / G
    auto shapeOf = [&](std::initializer_list<Dim> tail) {
      Shape s = plan.lead;
      s.insert(s.end(), tail);
      return s;
    };
    auto node = [](std::string name, std::string op, std::vector<std::string> args, AttrMap attrs) {
      Node n;
      n.name = std::move(name);
      n.op = std::move(op);
      for (std::string &a : args)
        n.args.push_back(Arg::ref(std::move(a)));
      n.attrs = std::move(attrs);
      return n;
    };
    const std::string S = plan.split, y = plan.splitInput;
    std::vector<Node> forward = {
        node(S + ".head_blocks", "reshape", {y}, {{"shape", shapeOf({G, kDim, blockDim})}}),
        node(S + ".parts_major", "transpose", {S + ".head_blocks"}, {{"dim0", rank - 3}, {"dim1", rank - 2}}),
        node(S + ".parts", "split", {S + ".parts_major"},
             {{"sizes", std::vector<int64_t>(size_t(plan.k), 1)}, {"axis", rank - 3}})};
    std::map<std::string, std::string> renamed; // "S:j" -> its new value
    for (int64_t j = 0; j < plan.k; ++j) {
      std::string part = S + ".part" + std::to_string(j);
      forward.push_back(node(part + ".blocks", "squeeze", {S + ".parts:" + std::to_string(j)},
                             {{"axes", std::vector<int64_t>{rank - 3}}}));
      forward.push_back(node(part, "reshape", {part + ".blocks"}, {{"shape", shapeOf({DDim})}}));
      renamed[S + ":" + std::to_string(j)] = part;
      if (j == 0)
        renamed[S] = part;
    }
    plan.layer.firstPart = S + ".part0";
    plan.layer.k = plan.k;
    plan.layer.D = plan.D;
    std::vector<Node> backward;
    if (!plan.concat.empty()) {
      const std::string C = plan.concat;
      std::vector<std::string> blocks;
      for (size_t j = 0; j < plan.concatArgs.size(); ++j) {
        std::string b = C + ".part" + std::to_string(j);
        backward.push_back(node(b + ".blocks", "reshape", {plan.concatArgs[j]}, {{"shape", shapeOf({G, blockDim})}}));
        backward.push_back(node(b, "unsqueeze", {b + ".blocks"}, {{"axis", rank - 3}}));
        blocks.push_back(b);
      }
      backward.push_back(node(C + ".parts_major", "concat", blocks, {{"axis", rank - 3}}));
      backward.push_back(
          node(C + ".head_blocks", "transpose", {C + ".parts_major"}, {{"dim0", rank - 3}, {"dim1", rank - 2}}));
      backward.push_back(node(C, "reshape", {C + ".head_blocks"}, {{"shape", shapeOf({Dim::of(plan.k * plan.D)})}}));
    }
    std::vector<Node> nodes;
    for (Node &n : g.nodes) {
      if (n.name == S) {
        nodes.insert(nodes.end(), forward.begin(), forward.end());
        continue;
      }
      if (!plan.concat.empty() && n.name == plan.concat) {
        nodes.insert(nodes.end(), backward.begin(), backward.end());
        continue;
      }
      for (Arg &a : n.args)
        if (a.kind == Arg::Kind::Value && renamed.count(a.value))
          a.value = renamed[a.value];
      nodes.push_back(std::move(n));
    }
    for (std::string &out : g.outputs)
      if (renamed.count(out))
        out = renamed[out];
    g.nodes = std::move(nodes);
    done.push_back(plan.layer);
  }
  return done;
}

} // namespace

// Megatron tensor parallelism for pairs of linear layers joined by
// elementwise ops (an MLP: fc, bias, activation, proj) or by attention's
// per-head ops (q, k and v projections, each to the output projection:
// heads split out of the features and merged back by reshapes and
// transposes, scores and their softmax, the attention op): the first
// splits its output columns (and its bias), the second its input rows, over
// `model`; the second's partial sums are all-reduced once. Several firsts
// may share one second (q, k and v share the output projection). Other
// layers are left as they are. Where a guess does not fit (heads that do
// not divide, a reshape mixing features with other dims), propagation
// reshards: the program stays right, at the cost of communication.

// `mesh` by value: g, and the mesh in it, may be replaced below.
// `headBlocked`: fused projections split by heads, their weights taken in
// head-blocked order (else they stay whole). Returns what the caller must
// know about the inputs' layout.
std::vector<std::string> tensorParallel(Graph &g, const Mesh mesh, bool headBlocked) {
  std::vector<std::string> notes;
  const int64_t parts = mesh.sizes[size_t(std::find(mesh.axes.begin(), mesh.axes.end(), "model") - mesh.axes.begin())];
  // Fused projections: rewritten on a copy first, kept only where their
  // parts reach an output projection (else the weight's order would change
  // for nothing).
  Graph trial = g;
  std::vector<FusedProjection> fused;
  if (headBlocked)
    fused = headBlockFusedProjections(trial, parts, nullptr);
  if (!fused.empty()) {
    LinearLayers layers(trial);
    std::set<std::string> reaching;
    for (const FusedProjection &f : fused) {
      std::vector<std::string> biases;
      if (layers.secondLayer(f.firstPart, biases))
        reaching.insert(f.matmul);
    }
    if (reaching.size() == fused.size())
      g = std::move(trial);
    else
      fused = headBlockFusedProjections(g, parts, &reaching);
  }
  const LinearLayers layers(g);
  auto shardDim = [&](const std::string &name, int64_t rank, int64_t dim) {
    for (GraphInput &in : g.inputs)
      if (in.name == name && !in.sharding) {
        in.sharding = Sharding{mesh.name, std::vector<std::vector<std::string>>(size_t(rank))};
        in.sharding->dims[size_t(dim)] = {"model"};
      }
  };
  std::set<std::string> firsts, seconds;
  // Fused projections in head-blocked order: their parts walk to the
  // output projection like separate q, k and v layers.
  for (const FusedProjection &f : fused) {
    std::vector<std::string> biases = f.biases;
    const Node *second = layers.secondLayer(f.firstPart, biases);
    if (!second || firsts.count(second->name))
      continue;
    firsts.insert(f.matmul);
    seconds.insert(second->name);
    shardDim(f.weight, 2, f.transposed ? 0 : 1);
    for (const std::string &b : biases)
      shardDim(b, 1, 0);
    std::optional<LinearWeight> w2 = layers.weightOf(*second);
    shardDim(w2->name, 2, w2->transposed ? 1 : 0);
    std::string names = f.weight;
    for (const std::string &b : f.biases)
      names += ", " + b;
    const int64_t block = f.D / parts;
    notes.push_back(names + " (and their gradients and optimizer state): columns in head-blocked order for " +
                    std::to_string(parts) + "-way tensor parallelism: column g*" + std::to_string(f.k * block) +
                    " + j*" + std::to_string(block) + " + e holds the original column j*" + std::to_string(f.D) +
                    " + g*" + std::to_string(block) + " + e (" + std::to_string(f.k) +
                    " parts j of " + std::to_string(f.D) + "), so device r's block of " +
                    std::to_string(f.k * block) + " columns is its heads of every part (docs/sharding.md, "
                    "\"Fused projections\")");
  }
  for (const Node &first : g.nodes) {
    std::optional<LinearWeight> w1 = layers.weightOf(first);
    if (!w1 || firsts.count(first.name) || seconds.count(first.name))
      continue;
    std::vector<std::string> biases;
    const Node *second = layers.secondLayer(first.name, biases);
    if (!second || firsts.count(second->name))
      continue;
    std::optional<LinearWeight> w2 = layers.weightOf(*second);
    firsts.insert(first.name);
    seconds.insert(second->name);
    shardDim(w1->name, 2, w1->transposed ? 0 : 1); // columns: the output features
    for (const std::string &b : biases)
      shardDim(b, 1, 0);
    shardDim(w2->name, 2, w2->transposed ? 1 : 0); // rows: the input features
  }
  // Vocab-parallel heads: a linear layer (not one of a pair above) whose
  // output columns, through elementwise ops (its bias), are a
  // cross_entropy's classes splits them where the axis divides their
  // (static) count: the partition completes the loss with all_reduces of
  // per-row statistics and never gathers the logits (Megatron).
  for (const Node &ce : g.nodes) {
    if (ce.op != "cross_entropy" || ce.args.empty() || ce.args[0].kind != Arg::Kind::Value)
      continue;
    std::string value = parseValueRef(ce.args[0].value).producer;
    std::vector<std::string> biases;
    for (int hops = 0; hops < 8; ++hops) {
      auto p = layers.producers.find(value);
      if (p == layers.producers.end())
        break;
      const Node &n = *p->second;
      if (std::optional<LinearWeight> w = layers.weightOf(n)) {
        const Dim &classes = layers.inputs.at(w->name)->spec.shape[w->transposed ? 0 : 1];
        if (!firsts.count(n.name) && !seconds.count(n.name) && classes.isStatic() && classes.value() % parts == 0) {
          shardDim(w->name, 2, w->transposed ? 0 : 1);
          for (const std::string &b : biases)
            shardDim(b, 1, 0);
        }
        break;
      }
      if (!LinearLayers::elementwise(n))
        break;
      std::string next;
      for (const Arg &a : n.args) {
        if (a.kind != Arg::Kind::Value)
          continue;
        if (layers.inputs.count(a.value) && layers.inputs.at(a.value)->trainable &&
            layers.inputs.at(a.value)->spec.rank() == 1)
          biases.push_back(a.value);
        else if (layers.producers.count(parseValueRef(a.value).producer) && next.empty())
          next = parseValueRef(a.value).producer;
      }
      value = next;
    }
  }
  // Vocab-parallel embeddings: a table's rows split where the axis divides
  // their (static) count, and a joint graph's gradient of it likewise (the
  // partition looks each index up among a device's own rows).
  std::set<std::string> tables;
  for (const Node &n : g.nodes) {
    if (n.op != "embedding" || n.args.size() < 2 || n.args[1].kind != Arg::Kind::Value)
      continue;
    const GraphInput *table = layers.trainable2d(n.args[1].value);
    if (!table || !table->spec.shape[0].isStatic() || table->spec.shape[0].value() % parts != 0)
      continue;
    shardDim(table->name, 2, 0);
    tables.insert(table->name);
  }
  for (Node &n : g.nodes)
    if (!n.sharding && n.name.rfind("grad_", 0) == 0 && tables.count(n.name.substr(5)) &&
        std::find(g.outputs.begin(), g.outputs.end(), n.name) != g.outputs.end()) {
      n.sharding = Sharding{mesh.name, std::vector<std::vector<std::string>>(2)};
      n.sharding->dims[0] = {"model"};
    }
  return notes;
}

std::vector<std::string> applyPreset(Graph &g, const std::string &preset) {
  check(preset == "ddp" || preset == "fsdp" || preset == "tp" || preset == "tp-head-blocked",
        "unknown sharding preset \"" + preset + "\" (expected ddp, fsdp, tp or tp-head-blocked)");
  if (preset == "tp" || preset == "tp-head-blocked") {
    check(g.meshes.size() == 1, "--preset " + preset + " needs exactly one mesh (--mesh model=N)");
    const Mesh &mesh = g.meshes[0];
    check(std::find(mesh.axes.begin(), mesh.axes.end(), "model") != mesh.axes.end(),
          "--preset " + preset + " splits over a mesh axis named \"model\"; mesh \"" + mesh.name + "\" has none");
    return tensorParallel(g, mesh, preset == "tp-head-blocked");
  }
  check(g.meshes.size() == 1, "--preset " + preset + " needs exactly one mesh (--mesh data=N)");
  const Mesh &mesh = g.meshes[0];
  auto axis = std::find(mesh.axes.begin(), mesh.axes.end(), "data");
  check(axis != mesh.axes.end(), "--preset " + preset + " splits over a mesh axis named \"data\"; mesh \"" +
                                     mesh.name + "\" has none");
  int64_t parts = mesh.sizes[size_t(axis - mesh.axes.begin())];
  // A plain symbol (a batch B) splits: each device then has B rows.
  auto firstDimSplits = [&](const TensorSpec &spec) {
    return spec.rank() >= 1 &&
           (spec.shape[0].dividedBy(Dim::of(parts)).has_value() || spec.shape[0].isPlainSymbol());
  };
  auto splitFirst = [&](int64_t rank) {
    Sharding s{mesh.name, std::vector<std::vector<std::string>>(size_t(rank))};
    s.dims[0] = {"data"};
    return s;
  };
  std::set<std::string> parameters;
  for (const GraphInput &in : g.inputs)
    if (in.trainable)
      parameters.insert(in.name);
  std::set<std::string> splitParameters;
  for (GraphInput &in : g.inputs) {
    if (in.sharding)
      continue;
    bool isData = !in.trainable && ownerParameter(parameters, in.name).empty();
    bool isParameterOrState = !isData;
    if ((isData || (preset == "fsdp" && isParameterOrState)) && firstDimSplits(in.spec)) {
      in.sharding = splitFirst(in.spec.rank());
      // FSDP computes with whole parameters (gathered before use) on split
      // data; optimizer state is elementwise and stays split.
      in.sharding->gatheredAtUse = in.trainable;
      if (in.trainable)
        splitParameters.insert(in.name);
    }
  }
  if (preset != "fsdp")
    return {};
  // A joint graph's gradient outputs lie like their parameters.
  for (Node &n : g.nodes) {
    std::string owner = ownerParameter(parameters, n.name);
    if (n.sharding || owner.empty() || !splitParameters.count(owner))
      continue;
    for (const GraphInput &in : g.inputs)
      if (in.name == owner && std::find(g.outputs.begin(), g.outputs.end(), n.name) != g.outputs.end()) {
        n.sharding = splitFirst(in.spec.rank());
        n.sharding->atOutput = true; // computed as the data lies, reduce-scattered at the end
      }
  }
  return {};
}

} // namespace tensorc::sharding
