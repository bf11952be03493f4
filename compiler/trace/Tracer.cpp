#include "compiler/trace/Tracer.h"

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include <fstream>

namespace tensorc::trace {

namespace {

Shape toShape(const std::vector<std::variant<int64_t, std::string>> &dims, const char *what) {
  Shape shape;
  for (const auto &d : dims) {
    if (const int64_t *v = std::get_if<int64_t>(&d)) {
      shape.push_back(Dim::of(*v));
      continue;
    }
    std::optional<Dim> parsed = Dim::parse(std::get<std::string>(d));
    check(parsed.has_value(),
          std::string(what) + ": malformed dim \"" + std::get<std::string>(d) + "\"");
    shape.push_back(*parsed);
  }
  return shape;
}

Tracer &tracerOf(std::initializer_list<const Operand *> operands) {
  for (const Operand *o : operands)
    if (const Tensor *t = std::get_if<Tensor>(o); t && t->tracer())
      return *t->tracer();
  fail("trace: an op needs at least one traced tensor argument");
}

} // namespace

const TensorSpec &Tensor::spec() const {
  check(tracer_ != nullptr, "trace: use of an empty Tensor");
  if (node_ < 0)
    return tracer_->graph_.inputs[result_].spec;
  return tracer_->nodeResults_[node_][result_];
}

std::string Tensor::ref() const {
  check(tracer_ != nullptr, "trace: use of an empty Tensor");
  if (node_ < 0)
    return tracer_->graph_.inputs[result_].name;
  const Node &n = tracer_->graph_.nodes[node_];
  return tracer_->nodeResults_[node_].size() == 1 ? n.name : n.name + ":" + std::to_string(result_);
}

Tensor &Tensor::named(const std::string &name) {
  check(tracer_ != nullptr && node_ >= 0, "trace: only node results can be renamed");
  Graph &g = tracer_->graph_;
  std::string old = g.nodes[node_].name;
  for (const Node &n : g.nodes)
    for (const Arg &a : n.args)
      check(a.kind != Arg::Kind::Value || parseValueRef(a.value).producer != old,
            "trace: name \"" + old + "\" before it is used; it already feeds node \"" + n.name +
                "\"");
  for (const std::string &out : g.outputs)
    check(parseValueRef(out).producer != old,
          "trace: name \"" + old + "\" before it becomes an output");
  tracer_->checkFreshName(name);
  tracer_->names_.erase(old);
  tracer_->names_.insert(name);
  g.nodes[node_].name = name;
  return *this;
}

Tracer::Tracer(std::string graphName) { graph_.name = std::move(graphName); }

Tracer::Tracer(const Graph &graph) {
  GraphAnalysis analysis = analyzeGraph(graph, "trace " + graph.name, /*requireOutputs=*/false);
  graph_ = graph;
  graph_.nodes.clear();
  for (const TypedNode &typed : analysis.nodes) {
    graph_.nodes.push_back(*typed.node);
    nodeResults_.push_back(typed.results);
  }
  for (const GraphInput &in : graph_.inputs)
    names_.insert(in.name);
  for (const Node &n : graph_.nodes)
    names_.insert(n.name);
}

Tensor Tracer::value(const std::string &ref) {
  for (size_t i = 0; i < graph_.inputs.size(); ++i)
    if (graph_.inputs[i].name == ref)
      return Tensor(this, -1, int(i));
  ValueRef v = parseValueRef(ref);
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    if (graph_.nodes[i].name == v.producer && v.index >= 0 && v.index < int(nodeResults_[i].size()))
      return Tensor(this, int(i), v.index);
  fail("trace " + graph_.name + ": no value \"" + ref + "\"");
}

void Tracer::checkFreshName(const std::string &name) const {
  check(!name.empty() && name.find(':') == std::string::npos,
        "trace " + graph_.name + ": \"" + name + "\" is not a valid name");
  check(!names_.count(name), "trace " + graph_.name + ": the name \"" + name + "\" is taken");
}

Tensor Tracer::addInput(const std::string &name, DType dtype,
                        const std::vector<std::variant<int64_t, std::string>> &shape,
                        bool trainable) {
  checkFreshName(name);
  GraphInput in{name, TensorSpec{dtype, toShape(shape, "trace input")}, trainable, std::nullopt};
  for (const Dim &d : in.spec.shape)
    check(!d.isStatic() || d.value() >= 1, "trace " + graph_.name + ": input \"" + name +
                                               "\": dim " + d.str() + " must be positive");
  graph_.inputs.push_back(in);
  names_.insert(name);
  return Tensor(this, -1, int(graph_.inputs.size() - 1));
}

Tensor Tracer::input(const std::string &name, DType dtype,
                     const std::vector<std::variant<int64_t, std::string>> &shape) {
  return addInput(name, dtype, shape, false);
}

Tensor Tracer::parameter(const std::string &name, DType dtype,
                         const std::vector<std::variant<int64_t, std::string>> &shape) {
  return addInput(name, dtype, shape, true);
}

void Tracer::bound(const std::string &symbol, int64_t min, std::optional<int64_t> max) {
  check(Dim::isValidSymbolName(symbol) && min >= 1 && (!max || *max >= min),
        "trace " + graph_.name + ": bad bound for \"" + symbol + "\"");
  graph_.dims[symbol] = DimBound{min, max};
}

void Tracer::mesh(const std::string &name, const std::vector<std::string> &axes,
                  const std::vector<int64_t> &sizes) {
  Mesh m{name, axes, sizes};
  try {
    checkMesh(m);
  } catch (const Error &e) {
    fail("trace " + graph_.name + ": " + e.what());
  }
  for (const Mesh &existing : graph_.meshes)
    check(existing.name != name, "trace " + graph_.name + ": mesh \"" + name + "\" is declared twice");
  graph_.meshes.push_back(std::move(m));
}

void Tracer::shard(const Tensor &t, const Sharding &sharding) {
  check(t.tracer() == this, "trace " + graph_.name + ": sharding a tensor from another tracer");
  if (t.node_ < 0)
    graph_.inputs[t.result_].sharding = sharding;
  else
    graph_.nodes[t.node_].sharding = sharding;
}

void Tracer::output(const Tensor &t) {
  check(t.tracer() == this, "trace " + graph_.name + ": output from another tracer");
  graph_.outputs.push_back(t.ref());
}

std::string Tracer::freshName(const std::string &base) const {
  std::string name = base;
  for (int k = 1; names_.count(name) || reserved_.count(name); ++k)
    name = base + "_" + std::to_string(k);
  return name;
}

std::vector<Tensor> Tracer::call(const std::string &op, const std::vector<Operand> &args,
                                 AttrMap attrs, const std::string &name) {
  Node node;
  node.op = op;
  if (!name.empty()) {
    checkFreshName(name);
    node.name = name;
  } else {
    do
      node.name = op + std::to_string(counter_++);
    while (names_.count(node.name) || reserved_.count(node.name));
  }
  for (const Operand &a : args) {
    if (const Tensor *t = std::get_if<Tensor>(&a)) {
      check(t->tracer() == this,
            "trace " + graph_.name + ": " + op + ": a tensor from another tracer");
      node.args.push_back(Arg::ref(t->ref()));
    } else if (const double *d = std::get_if<double>(&a)) {
      node.args.push_back(Arg::lit(Literal{Literal::Kind::Float, *d, 0, std::nullopt}));
    } else if (const int64_t *i = std::get_if<int64_t>(&a)) {
      node.args.push_back(Arg::lit(Literal{Literal::Kind::Int, double(*i), *i, std::nullopt}));
    } else if (const bool *b = std::get_if<bool>(&a)) {
      node.args.push_back(Arg::lit(Literal{Literal::Kind::Bool, 0, *b, std::nullopt}));
    } else {
      node.args.push_back(Arg::absent());
    }
  }
  while (!node.args.empty() && node.args.back().kind == Arg::Kind::Absent)
    node.args.pop_back();
  const OpSchema *schema = findOpSchema(op);
  check(schema != nullptr, "trace " + graph_.name + ": unknown op '" + op + "'");
  node.attrs = canonicalAttrs(*schema, attrs);
  // Only the arguments' types are needed to type the node.
  std::map<std::string, TensorSpec> values;
  for (const Operand &a : args)
    if (const Tensor *t = std::get_if<Tensor>(&a))
      values[t->ref()] = t->spec();
  TypedNode typed;
  try {
    typed = typeNode(node, values, graph_.meshes);
  } catch (const Error &e) {
    fail("trace " + graph_.name + ": node \"" + node.name + "\" (" + op + "): " + e.what());
  }
  graph_.nodes.push_back(node);
  names_.insert(node.name);
  nodeResults_.push_back(typed.results);
  std::vector<Tensor> out;
  for (size_t r = 0; r < typed.results.size(); ++r)
    out.push_back(Tensor(this, int(graph_.nodes.size() - 1), int(r)));
  return out;
}

std::vector<Tensor> Tracer::addNode(const Node &node) {
  checkFreshName(node.name);
  std::map<std::string, TensorSpec> values;
  for (const Arg &a : node.args)
    if (a.kind == Arg::Kind::Value)
      values[a.value] = value(a.value).spec();
  TypedNode typed;
  try {
    typed = typeNode(node, values, graph_.meshes);
  } catch (const Error &e) {
    fail("trace " + graph_.name + ": node \"" + node.name + "\" (" + node.op + "): " + e.what());
  }
  Node copy = node;
  copy.attrs = canonicalAttrs(*typed.schema, node.attrs);
  graph_.nodes.push_back(copy);
  names_.insert(copy.name);
  nodeResults_.push_back(typed.results);
  std::vector<Tensor> out;
  for (size_t r = 0; r < typed.results.size(); ++r)
    out.push_back(Tensor(this, int(graph_.nodes.size() - 1), int(r)));
  return out;
}

void Tracer::save(const std::string &path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(bool(out), path + ": cannot write the file");
  out << writeGraphJson(graph_);
  check(bool(out), path + ": writing failed");
}

// ----------------------------------------------------------------- op functions

static Tensor one(Tracer &t, const std::string &op, const std::vector<Operand> &args,
                  AttrMap attrs = {}) {
  return t.call(op, args, std::move(attrs))[0];
}

static Operand opt(const std::optional<Tensor> &t) {
  return t ? Operand(*t) : Operand(std::monostate{});
}

static Shape dims(const DimSpec &d) { return toShape(d, "trace shape"); }

#define TC_TRACE_UNARY(fn) \
  Tensor fn(const Tensor &x) { return one(*x.tracer(), #fn, {x}); }
TC_TRACE_UNARY_OPS(TC_TRACE_UNARY)
#undef TC_TRACE_UNARY

Tensor gelu(const Tensor &x, const std::string &approximate) {
  return one(*x.tracer(), "gelu", {x}, {{"approximate", approximate}});
}

#define TC_TRACE_BINARY(fn) \
  Tensor fn(const Operand &lhs, const Operand &rhs) { \
    return one(tracerOf({&lhs, &rhs}), #fn, {lhs, rhs}); \
  }
TC_TRACE_BINARY_OPS(TC_TRACE_BINARY)
#undef TC_TRACE_BINARY

Tensor operator+(const Tensor &a, const Operand &b) {
  return add(a, b);
}
Tensor operator-(const Tensor &a, const Operand &b) { return sub(a, b); }
Tensor operator*(const Tensor &a, const Operand &b) { return mul(a, b); }
Tensor operator/(const Tensor &a, const Operand &b) { return div(a, b); }
Tensor operator-(const Tensor &a) { return neg(a); }

Tensor where(const Tensor &c, const Operand &x, const Operand &y) {
  return one(*c.tracer(), "where", {c, x, y});
}
Tensor cast(const Tensor &x, DType to) { return one(*x.tracer(), "cast", {x}, {{"to", to}}); }
Tensor clamp(const Tensor &x, std::optional<double> min, std::optional<double> max) {
  AttrMap a;
  if (min)
    a["min"] = *min;
  if (max)
    a["max"] = *max;
  return one(*x.tracer(), "clamp", {x}, a);
}

static Tensor reduction(const char *op, const Tensor &x, std::vector<int64_t> axes, bool keepdim,
                        AttrMap extra = {}) {
  AttrMap a = std::move(extra);
  if (!axes.empty())
    a["axes"] = std::move(axes);
  a["keepdim"] = keepdim;
  return one(*x.tracer(), op, {x}, a);
}
Tensor sum(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("sum", x, axes, k);
}
Tensor mean(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("mean", x, axes, k);
}
Tensor max(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("max", x, axes, k);
}
Tensor logsumexp(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("logsumexp", x, axes, k);
}
Tensor min(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("min", x, axes, k);
}
Tensor prod(const Tensor &x, std::vector<int64_t> axes, bool k) {
  return reduction("prod", x, axes, k);
}
Tensor var(const Tensor &x, std::vector<int64_t> axes, bool k, int64_t correction) {
  return reduction("var", x, axes, k, {{"correction", correction}});
}
static Tensor argReduction(const char *op, const Tensor &x, std::optional<int64_t> axis,
                           bool keepdim) {
  AttrMap a{{"keepdim", keepdim}};
  if (axis)
    a["axis"] = *axis;
  return one(*x.tracer(), op, {x}, a);
}
Tensor argmax(const Tensor &x, std::optional<int64_t> axis, bool k) {
  return argReduction("argmax", x, axis, k);
}
Tensor argmin(const Tensor &x, std::optional<int64_t> axis, bool k) {
  return argReduction("argmin", x, axis, k);
}

Tensor matmul(const Tensor &a, const Tensor &b) { return one(*a.tracer(), "matmul", {a, b}); }

Tensor softmax(const Tensor &x, int64_t axis) {
  return one(*x.tracer(), "softmax", {x}, {{"axis", axis}});
}
Tensor log_softmax(const Tensor &x, int64_t axis) {
  return one(*x.tracer(), "log_softmax", {x}, {{"axis", axis}});
}
Tensor layer_norm(const Tensor &x, std::optional<Tensor> w, std::optional<Tensor> b, int64_t axis,
                  double eps) {
  return one(*x.tracer(), "layer_norm", {x, opt(w), opt(b)}, {{"axis", axis}, {"eps", eps}});
}
Tensor rms_norm(const Tensor &x, std::optional<Tensor> w, int64_t axis, std::optional<double> eps) {
  AttrMap a{{"axis", axis}};
  if (eps)
    a["eps"] = *eps;
  return one(*x.tracer(), "rms_norm", {x, opt(w)}, a);
}
Tensor cross_entropy(const Tensor &logits, const Tensor &target, const std::string &reduction,
                     int64_t ignore_index, double label_smoothing) {
  return one(*logits.tracer(), "cross_entropy", {logits, target},
             {{"reduction", reduction},
              {"ignore_index", ignore_index},
              {"label_smoothing", label_smoothing}});
}
static AttrMap groupAttrs(const MeshAxes &over, AttrMap more = {}) {
  more.emplace("mesh", over.mesh);
  more.emplace("axes", over.axes);
  return more;
}
Tensor all_reduce(const Tensor &x, const MeshAxes &over, const std::string &reduction) {
  return one(*x.tracer(), "all_reduce", {x}, groupAttrs(over, {{"reduction", reduction}}));
}
Tensor all_gather(const Tensor &x, const MeshAxes &over, int64_t axis) {
  return one(*x.tracer(), "all_gather", {x}, groupAttrs(over, {{"axis", axis}}));
}
Tensor reduce_scatter(const Tensor &x, const MeshAxes &over, int64_t axis,
                      const std::string &reduction) {
  return one(*x.tracer(), "reduce_scatter", {x},
             groupAttrs(over, {{"axis", axis}, {"reduction", reduction}}));
}
Tensor all_to_all(const Tensor &x, const MeshAxes &over, int64_t split_axis, int64_t concat_axis) {
  return one(*x.tracer(), "all_to_all", {x},
             groupAttrs(over, {{"split_axis", split_axis}, {"concat_axis", concat_axis}}));
}
Tensor all_slice(const Tensor &x, const MeshAxes &over, int64_t axis) {
  return one(*x.tracer(), "all_slice", {x}, groupAttrs(over, {{"axis", axis}}));
}
Tensor collective_broadcast(const Tensor &x, const MeshAxes &over, int64_t root) {
  return one(*x.tracer(), "collective_broadcast", {x}, groupAttrs(over, {{"root", root}}));
}
Tensor axis_index(Tracer &t, const MeshAxes &over) {
  return one(t, "axis_index", {}, groupAttrs(over));
}

Tensor embedding(const Tensor &indices, const Tensor &weight, std::optional<int64_t> paddingIdx) {
  AttrMap attrs;
  if (paddingIdx)
    attrs["padding_idx"] = *paddingIdx;
  return one(*indices.tracer(), "embedding", {indices, weight}, attrs);
}
Tensor embeddingBackward(const Tensor &grad, const Tensor &indices, int64_t numWeights,
                         std::optional<int64_t> paddingIdx) {
  AttrMap attrs{{"num_weights", numWeights}};
  if (paddingIdx)
    attrs["padding_idx"] = *paddingIdx;
  return one(*grad.tracer(), "embedding_backward", {grad, indices}, attrs);
}
Tensor dropout(const Tensor &x, const Tensor &seed, double p, int64_t stream) {
  return one(*x.tracer(), "dropout", {x, seed}, {{"p", p}, {"stream", stream}});
}
Tensor conv2d(const Tensor &x, const Tensor &w, std::optional<Tensor> b,
              std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups) {
  return one(
      *x.tracer(), "conv2d", {x, w, opt(b)},
      {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}});
}
Tensor max_pool2d(const Tensor &x, std::vector<int64_t> k,
                  std::optional<std::vector<int64_t>> stride, std::vector<int64_t> padding,
                  std::vector<int64_t> dilation, bool ceil_mode) {
  AttrMap a{
      {"kernel_size", k}, {"padding", padding}, {"dilation", dilation}, {"ceil_mode", ceil_mode}};
  if (stride)
    a["stride"] = *stride;
  return one(*x.tracer(), "max_pool2d", {x}, a);
}
Tensor avg_pool2d(const Tensor &x, std::vector<int64_t> k,
                  std::optional<std::vector<int64_t>> stride, std::vector<int64_t> padding,
                  bool ceil_mode, bool count_include_pad) {
  AttrMap a{{"kernel_size", k},
            {"padding", padding},
            {"ceil_mode", ceil_mode},
            {"count_include_pad", count_include_pad}};
  if (stride)
    a["stride"] = *stride;
  return one(*x.tracer(), "avg_pool2d", {x}, a);
}
std::vector<Tensor> batch_norm(const Tensor &x, const Tensor &rm, const Tensor &rv,
                               std::optional<Tensor> w, std::optional<Tensor> b, bool training,
                               double momentum, double eps) {
  return x.tracer()->call("batch_norm", {x, rm, rv, opt(w), opt(b)},
                          {{"training", training}, {"momentum", momentum}, {"eps", eps}});
}
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                    std::optional<Tensor> mask, bool is_causal,
                                    std::optional<double> scale, std::optional<AttentionDropout> dropout) {
  AttrMap a{{"is_causal", is_causal}};
  if (scale)
    a["scale"] = *scale;
  if (!dropout)
    return one(*q.tracer(), "scaled_dot_product_attention", {q, k, v, opt(mask)}, a);
  a["dropout_p"] = dropout->p;
  a["dropout_stream"] = dropout->stream;
  return one(*q.tracer(), "scaled_dot_product_attention", {q, k, v, opt(mask), dropout->seed}, a);
}

Tensor reshape(const Tensor &x, const DimSpec &shape) {
  return one(*x.tracer(), "reshape", {x}, {{"shape", dims(shape)}});
}
Tensor permute(const Tensor &x, std::vector<int64_t> d) {
  return one(*x.tracer(), "permute", {x}, {{"dims", d}});
}
Tensor transpose(const Tensor &x, int64_t dim0, int64_t dim1) {
  return one(*x.tracer(), "transpose", {x}, {{"dim0", dim0}, {"dim1", dim1}});
}
Tensor broadcast_to(const Tensor &x, const DimSpec &shape) {
  return one(*x.tracer(), "broadcast_to", {x}, {{"shape", dims(shape)}});
}
Tensor slice(const Tensor &x, std::vector<int64_t> axes, std::vector<int64_t> starts,
             std::vector<int64_t> ends, std::vector<int64_t> steps) {
  AttrMap a{{"axes", axes}, {"starts", starts}, {"ends", ends}};
  if (!steps.empty())
    a["steps"] = steps;
  return one(*x.tracer(), "slice", {x}, a);
}
Tensor concat(const std::vector<Tensor> &inputs, int64_t axis) {
  check(!inputs.empty(), "trace: concat needs at least one input");
  std::vector<Operand> args(inputs.begin(), inputs.end());
  return one(*inputs[0].tracer(), "concat", args, {{"axis", axis}});
}
std::vector<Tensor> split(const Tensor &x, std::vector<int64_t> sizes, int64_t axis) {
  return x.tracer()->call("split", {x}, {{"sizes", sizes}, {"axis", axis}});
}
Tensor squeeze(const Tensor &x, std::vector<int64_t> axes) {
  AttrMap a;
  if (!axes.empty())
    a["axes"] = axes;
  return one(*x.tracer(), "squeeze", {x}, a);
}
Tensor unsqueeze(const Tensor &x, int64_t axis) {
  return one(*x.tracer(), "unsqueeze", {x}, {{"axis", axis}});
}
Tensor flatten(const Tensor &x, int64_t s, int64_t e) {
  return one(*x.tracer(), "flatten", {x}, {{"start_axis", s}, {"end_axis", e}});
}
Tensor gather(const Tensor &x, const Tensor &index, int64_t axis) {
  return one(*x.tracer(), "gather", {x, index}, {{"axis", axis}});
}
Tensor index_select(const Tensor &x, const Tensor &index, int64_t axis) {
  return one(*x.tracer(), "index_select", {x, index}, {{"axis", axis}});
}
Tensor pad(const Tensor &x, std::vector<int64_t> pads, double value) {
  return one(*x.tracer(), "pad", {x}, {{"pads", pads}, {"value", value}});
}

Tensor constant(Tracer &t, const DenseValue &value) {
  return one(t, "constant", {}, {{"value", value}});
}
Tensor full(Tracer &t, const DimSpec &shape, double value, DType dtype) {
  return one(t, "full", {}, {{"shape", dims(shape)}, {"value", value}, {"dtype", dtype}});
}
Tensor zeros(Tracer &t, const DimSpec &shape, DType dtype) {
  return one(t, "zeros", {}, {{"shape", dims(shape)}, {"dtype", dtype}});
}
Tensor ones(Tracer &t, const DimSpec &shape, DType dtype) {
  return one(t, "ones", {}, {{"shape", dims(shape)}, {"dtype", dtype}});
}
Tensor iota(Tracer &t, int64_t end, int64_t start, int64_t step, DType dtype) {
  return one(t, "iota", {}, {{"start", start}, {"end", end}, {"step", step}, {"dtype", dtype}});
}
Tensor iota_length(Tracer &t, const std::variant<int64_t, std::string> &length, int64_t start,
                   int64_t step, DType dtype) {
  return one(t, "iota", {},
             {{"start", start}, {"length", dims({length})}, {"step", step}, {"dtype", dtype}});
}

} // namespace tensorc::trace
