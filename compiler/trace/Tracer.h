// The tracing frontend: ordinary C++ on symbolic tensors records a graph.
//
//   Tracer t("mlp");
//   Tensor x = t.input("x", DType::F32, {"B", 784});
//   Tensor w = t.parameter("w", DType::F32, {784, 128});
//   Tensor b = t.parameter("b", DType::F32, {128});
//   t.output(relu(matmul(x, w) + b));
//   t.save("mlp.json");
//
// Every call infers its result type with the same rules as graph files, so a
// mistake throws tensorc::Error at the traced call ("trace mlp: node "matmul0"
// (matmul): inner dims differ: ..."). The graph is exactly what the
// equivalent graph file holds, so both import to the same IR.
#pragma once

#include "compiler/graph/Graph.h"

#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace tensorc::trace {

class Tracer;

// A value being traced: a graph input or a node result.
class Tensor {
public:
  Tensor() = default;
  const TensorSpec &spec() const;
  DType dtype() const { return spec().dtype; }
  const Shape &shape() const { return spec().shape; }
  int64_t rank() const { return spec().rank(); }
  Tracer *tracer() const { return tracer_; }
  // The graph reference ("x", "h", "h:1").
  std::string ref() const;
  // Renames the node that produced this value (inputs keep their names).
  Tensor &named(const std::string &name);

private:
  friend class Tracer;
  Tensor(Tracer *t, int node, int result) : tracer_(t), node_(node), result_(result) {}
  Tracer *tracer_ = nullptr;
  int node_ = -1;  // -1: an input
  int result_ = 0; // input index for inputs, result index for nodes
};

// An argument of a traced call: a tensor, a scalar literal, or absent.
struct Operand : std::variant<std::monostate, Tensor, double, int64_t, bool> {
  using variant::variant;
  Operand(int v) : variant(int64_t(v)) {} // `x + 1` is an integer literal
};

class Tracer {
public:
  explicit Tracer(std::string graphName = "main");
  // Continues an existing graph: its inputs and nodes (in topological order)
  // become traced values reachable through value(). Throws Error if `graph`
  // does not type-check.
  explicit Tracer(const Graph &graph);
  // The traced value of an existing reference ("x", "h", "h:1").
  Tensor value(const std::string &ref);

  Tensor input(const std::string &name, DType dtype,
               const std::vector<std::variant<int64_t, std::string>> &shape);
  Tensor parameter(const std::string &name, DType dtype,
                   const std::vector<std::variant<int64_t, std::string>> &shape);
  void bound(const std::string &symbol, int64_t min, std::optional<int64_t> max = std::nullopt);
  void output(const Tensor &t);
  // Declares a device mesh that shardings and collectives may name.
  void mesh(const std::string &name, const std::vector<std::string> &axes,
            const std::vector<int64_t> &sizes);
  // Attaches a sharding to the node that produced `t` (inputs: to the input).
  void shard(const Tensor &t, const Sharding &sharding);

  // Records one node; the generic entry point every op function uses.
  std::vector<Tensor> call(const std::string &op, const std::vector<Operand> &args,
                           AttrMap attrs = {}, const std::string &name = "");

  // Appends a node as it is (literal dtypes and sharding kept); its name
  // must be fresh and its references must name existing values.
  std::vector<Tensor> addNode(const Node &node);
  // Names generated for calls without a name skip these (a rewrite keeps
  // the original graph's names free for the nodes it copies or replaces);
  // an explicit name, addNode or Tensor::named may still take them.
  void reserveNames(const std::set<std::string> &names) { reserved_.insert(names.begin(), names.end()); }
  // `base`, or `base_1`, `base_2`, ...: the first that is neither taken nor
  // reserved.
  std::string freshName(const std::string &base) const;
  // Whether an input or node already has `name`.
  bool isNameTaken(const std::string &name) const { return names_.count(name) != 0; }

  const Graph &graph() const { return graph_; }
  void save(const std::string &path) const;

private:
  friend class Tensor;
  Tensor addInput(const std::string &name, DType dtype,
                  const std::vector<std::variant<int64_t, std::string>> &shape, bool trainable);
  void checkFreshName(const std::string &name) const;
  Graph graph_;
  std::vector<std::vector<TensorSpec>> nodeResults_;
  std::set<std::string> names_; // every input and node name, for uniqueness
  std::set<std::string> reserved_; // see reserveNames
  int counter_ = 0;
};

// Ops. Optional tensor operands are `std::optional<Tensor>`; attributes take
// the defaults documented in docs/ops.md.
// The elementwise ops the tracer exposes as plain functions, listed once for
// the declarations here and the definitions in Tracer.cpp.
#define TC_TRACE_UNARY_OPS(X) \
  X(neg) \
  X(abs) \
  X(exp) \
  X(log) \
  X(sqrt) \
  X(rsqrt) \
  X(reciprocal) \
  X(tanh) \
  X(sigmoid) \
  X(relu) \
  X(silu) \
  X(sin) \
  X(cos) \
  X(erf) \
  X(floor) \
  X(ceil) \
  X(sign) \
  X(logical_not)
#define TC_TRACE_UNARY(fn) Tensor fn(const Tensor &x);
TC_TRACE_UNARY_OPS(TC_TRACE_UNARY)
#undef TC_TRACE_UNARY
Tensor gelu(const Tensor &x, const std::string &approximate = "none");

#define TC_TRACE_BINARY_OPS(X) \
  X(add) \
  X(sub) \
  X(mul) \
  X(div) \
  X(pow) \
  X(maximum) \
  X(minimum) \
  X(eq) \
  X(ne) \
  X(lt) \
  X(le) \
  X(gt) \
  X(ge) \
  X(logical_and) \
  X(logical_or)
#define TC_TRACE_BINARY(fn) Tensor fn(const Operand &lhs, const Operand &rhs);
TC_TRACE_BINARY_OPS(TC_TRACE_BINARY)
#undef TC_TRACE_BINARY

Tensor operator+(const Tensor &a, const Operand &b);
Tensor operator-(const Tensor &a, const Operand &b);
Tensor operator*(const Tensor &a, const Operand &b);
Tensor operator/(const Tensor &a, const Operand &b);
Tensor operator-(const Tensor &a);

Tensor where(const Tensor &condition, const Operand &x, const Operand &y);
Tensor cast(const Tensor &x, DType to);
Tensor clamp(const Tensor &x, std::optional<double> min, std::optional<double> max);

// Reductions: `axes` empty means every axis.
Tensor sum(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor mean(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor max(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor logsumexp(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor min(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor prod(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false);
Tensor var(const Tensor &x, std::vector<int64_t> axes = {}, bool keepdim = false,
           int64_t correction = 1);
Tensor argmax(const Tensor &x, std::optional<int64_t> axis = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor &x, std::optional<int64_t> axis = std::nullopt, bool keepdim = false);

Tensor matmul(const Tensor &a, const Tensor &b);

Tensor softmax(const Tensor &x, int64_t axis = -1);
Tensor log_softmax(const Tensor &x, int64_t axis = -1);
Tensor layer_norm(const Tensor &x, std::optional<Tensor> weight = std::nullopt,
                  std::optional<Tensor> bias = std::nullopt, int64_t axis = -1, double eps = 1e-5);
Tensor rms_norm(const Tensor &x, std::optional<Tensor> weight = std::nullopt, int64_t axis = -1,
                std::optional<double> eps = std::nullopt);
Tensor cross_entropy(const Tensor &logits, const Tensor &target,
                     const std::string &reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor embedding(const Tensor &indices, const Tensor &weight, std::optional<int64_t> paddingIdx = std::nullopt);
// The gradient of an embedding table of `numWeights` rows: grad's rows summed
// by index (f32 for f16/bf16 grad), rows at `paddingIdx` left out.
Tensor embeddingBackward(const Tensor &grad, const Tensor &indices, int64_t numWeights,
                         std::optional<int64_t> paddingIdx = std::nullopt);
Tensor dropout(const Tensor &x, const Tensor &seed, double p = 0.5, int64_t stream = 0);
Tensor conv2d(const Tensor &x, const Tensor &weight, std::optional<Tensor> bias = std::nullopt,
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor &x, std::vector<int64_t> kernel_size,
                  std::optional<std::vector<int64_t>> stride = std::nullopt,
                  std::vector<int64_t> padding = {0, 0}, std::vector<int64_t> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor &x, std::vector<int64_t> kernel_size,
                  std::optional<std::vector<int64_t>> stride = std::nullopt,
                  std::vector<int64_t> padding = {0, 0}, bool ceil_mode = false,
                  bool count_include_pad = true);
// Returns (y, new_running_mean, new_running_var).
std::vector<Tensor> batch_norm(const Tensor &x, const Tensor &running_mean,
                               const Tensor &running_var,
                               std::optional<Tensor> weight = std::nullopt,
                               std::optional<Tensor> bias = std::nullopt, bool training = false,
                               double momentum = 0.1, double eps = 1e-5);
// Dropout on attention's probabilities: the dropout op's, of `seed` (an
// integer scalar), probability p, stream `stream`.
struct AttentionDropout {
  Tensor seed;
  double p;
  int64_t stream = 0;
};
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k, const Tensor &v,
                                    std::optional<Tensor> mask = std::nullopt,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    std::optional<AttentionDropout> dropout = std::nullopt);

// Collectives (docs/sharding.md): `over` names a declared mesh and the axes
// whose devices communicate.
struct MeshAxes {
  std::string mesh;
  std::vector<std::string> axes;
};
Tensor all_reduce(const Tensor &x, const MeshAxes &over, const std::string &reduction = "sum");
Tensor all_gather(const Tensor &x, const MeshAxes &over, int64_t axis = 0);
Tensor reduce_scatter(const Tensor &x, const MeshAxes &over, int64_t axis = 0,
                      const std::string &reduction = "sum");
Tensor all_to_all(const Tensor &x, const MeshAxes &over, int64_t split_axis, int64_t concat_axis);
Tensor all_slice(const Tensor &x, const MeshAxes &over, int64_t axis = 0);
Tensor collective_broadcast(const Tensor &x, const MeshAxes &over, int64_t root = 0);
// This device's rank in its group (an i64 scalar).
Tensor axis_index(Tracer &t, const MeshAxes &over);

using DimSpec = std::vector<std::variant<int64_t, std::string>>;
Tensor reshape(const Tensor &x, const DimSpec &shape);
Tensor permute(const Tensor &x, std::vector<int64_t> dims);
Tensor transpose(const Tensor &x, int64_t dim0, int64_t dim1);
Tensor broadcast_to(const Tensor &x, const DimSpec &shape);
Tensor slice(const Tensor &x, std::vector<int64_t> axes, std::vector<int64_t> starts,
             std::vector<int64_t> ends, std::vector<int64_t> steps = {});
Tensor concat(const std::vector<Tensor> &inputs, int64_t axis = 0);
std::vector<Tensor> split(const Tensor &x, std::vector<int64_t> sizes, int64_t axis = 0);
Tensor squeeze(const Tensor &x, std::vector<int64_t> axes = {});
Tensor unsqueeze(const Tensor &x, int64_t axis);
Tensor flatten(const Tensor &x, int64_t start_axis = 0, int64_t end_axis = -1);
Tensor gather(const Tensor &x, const Tensor &index, int64_t axis);
Tensor index_select(const Tensor &x, const Tensor &index, int64_t axis);
Tensor pad(const Tensor &x, std::vector<int64_t> pads, double value = 0.0);

Tensor constant(Tracer &t, const DenseValue &value);
Tensor full(Tracer &t, const DimSpec &shape, double value, DType dtype = DType::F32);
Tensor zeros(Tracer &t, const DimSpec &shape, DType dtype = DType::F32);
Tensor ones(Tracer &t, const DimSpec &shape, DType dtype = DType::F32);
Tensor iota(Tracer &t, int64_t end, int64_t start = 0, int64_t step = 1, DType dtype = DType::I64);
// `length` elements start, start + step, ...; the length may be symbolic.
Tensor iota_length(Tracer &t, const std::variant<int64_t, std::string> &length, int64_t start = 0,
                   int64_t step = 1, DType dtype = DType::I64);

} // namespace tensorc::trace
