#include "compiler/sharding/Presets.h"

#include "ir/core/Error.h"
#include "ir/core/OpSchema.h"

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

} // namespace

// The trainable 2-D weight a matmul's rhs reads, as [in, out] (`w`) or
// [out, in] (`transpose(w)`, PyTorch's nn.Linear layout); "" if neither.
struct LinearWeight {
  std::string name;
  bool transposed = false;
};

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
void tensorParallel(Graph &g, const Mesh &mesh) {
  std::map<std::string, const Node *> producers;
  std::map<std::string, std::vector<const Node *>> users;
  for (const Node &n : g.nodes) {
    producers[n.name] = &n;
    for (const Arg &a : n.args)
      if (a.kind == Arg::Kind::Value)
        users[parseValueRef(a.value).producer].push_back(&n);
  }
  std::map<std::string, const GraphInput *> inputs;
  for (const GraphInput &in : g.inputs)
    inputs[in.name] = &in;
  auto trainable2d = [&](const std::string &ref) -> const GraphInput * {
    auto it = inputs.find(ref);
    return it != inputs.end() && it->second->trainable && it->second->spec.rank() == 2 ? it->second : nullptr;
  };
  auto weightOf = [&](const Node &matmul) -> std::optional<LinearWeight> {
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
  };
  auto elementwise = [](const Node &n) {
    const OpSchema *s = findOpSchema(n.op);
    return s && (s->category == "unary" || s->category == "binary" || s->category == "elementwise");
  };
  // Ops that keep each head's features apart: views, and attention's own
  // (a product of two activations over the head batch dims, softmax over
  // the keys, the fused attention op).
  auto perHead = [&](const Node &n) {
    return n.op == "reshape" || n.op == "transpose" || n.op == "softmax" ||
           n.op == "scaled_dot_product_attention" || (n.op == "matmul" && !weightOf(n));
  };
  auto shardDim = [&](const std::string &name, int64_t rank, int64_t dim) {
    for (GraphInput &in : g.inputs)
      if (in.name == name && !in.sharding) {
        in.sharding = Sharding{mesh.name, std::vector<std::vector<std::string>>(size_t(rank))};
        in.sharding->dims[size_t(dim)] = {"model"};
      }
  };
  std::set<std::string> firsts, seconds;
  for (const Node &first : g.nodes) {
    std::optional<LinearWeight> w1 = weightOf(first);
    if (!w1 || firsts.count(first.name) || seconds.count(first.name))
      continue;
    // Follow the first layer's result through elementwise ops to a matmul:
    // each value's first user in node order (a joint graph's forward nodes
    // come before the backward nodes that read the same values).
    std::string value = first.name;
    std::vector<std::string> biases;
    const Node *second = nullptr;
    for (int hops = 0; hops < 16 && !second; ++hops) {
      auto u = users.find(value);
      if (u == users.end() || u->second.empty())
        break;
      const Node &next = *u->second[0];
      if (next.op == "matmul" && weightOf(next)) {
        if (next.args[0].kind == Arg::Kind::Value && parseValueRef(next.args[0].value).producer == value)
          second = &next;
        break;
      }
      if (!elementwise(next) && !perHead(next))
        break;
      for (const Arg &a : next.args) // a bias: a trainable vector of the layer's width
        if (a.kind == Arg::Kind::Value && inputs.count(a.value) && inputs[a.value]->trainable &&
            inputs[a.value]->spec.rank() == 1)
          biases.push_back(a.value);
      value = next.name;
    }
    if (!second || firsts.count(second->name))
      continue;
    std::optional<LinearWeight> w2 = weightOf(*second);
    firsts.insert(first.name);
    seconds.insert(second->name);
    shardDim(w1->name, 2, w1->transposed ? 0 : 1); // columns: the output features
    for (const std::string &b : biases)
      shardDim(b, 1, 0);
    shardDim(w2->name, 2, w2->transposed ? 1 : 0); // rows: the input features
  }
  const int64_t parts = mesh.sizes[size_t(std::find(mesh.axes.begin(), mesh.axes.end(), "model") - mesh.axes.begin())];
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
      auto p = producers.find(value);
      if (p == producers.end())
        break;
      const Node &n = *p->second;
      if (std::optional<LinearWeight> w = weightOf(n)) {
        const Dim &classes = inputs.at(w->name)->spec.shape[w->transposed ? 0 : 1];
        if (!firsts.count(n.name) && !seconds.count(n.name) && classes.isStatic() && classes.value() % parts == 0) {
          shardDim(w->name, 2, w->transposed ? 0 : 1);
          for (const std::string &b : biases)
            shardDim(b, 1, 0);
        }
        break;
      }
      if (!elementwise(n))
        break;
      std::string next;
      for (const Arg &a : n.args) {
        if (a.kind != Arg::Kind::Value)
          continue;
        if (inputs.count(a.value) && inputs[a.value]->trainable && inputs[a.value]->spec.rank() == 1)
          biases.push_back(a.value);
        else if (producers.count(parseValueRef(a.value).producer) && next.empty())
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
    const GraphInput *table = trainable2d(n.args[1].value);
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
}

void applyPreset(Graph &g, const std::string &preset) {
  check(preset == "ddp" || preset == "fsdp" || preset == "tp",
        "unknown sharding preset \"" + preset + "\" (expected ddp, fsdp or tp)");
  if (preset == "tp") {
    check(g.meshes.size() == 1, "--preset tp needs exactly one mesh (--mesh model=N)");
    const Mesh &mesh = g.meshes[0];
    check(std::find(mesh.axes.begin(), mesh.axes.end(), "model") != mesh.axes.end(),
          "--preset tp splits over a mesh axis named \"model\"; mesh \"" + mesh.name + "\" has none");
    tensorParallel(g, mesh);
    return;
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
    return;
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
}

} // namespace tensorc::sharding
