#include "ir/core/OpSchema.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <unordered_map>

namespace tensorc {
namespace {

OperandDef in(std::string name) { return {std::move(name), Arity::One}; }
OperandDef opt(std::string name) { return {std::move(name), Arity::Optional}; }
OperandDef many(std::string name) { return {std::move(name), Arity::Variadic}; }

AttrDef req(std::string name, AttrKind kind) { return {std::move(name), kind, true, {}, {}}; }
AttrDef optional(std::string name, AttrKind kind) { return {std::move(name), kind, false, {}, {}}; }
AttrDef dflt(std::string name, Attr value) {
  AttrKind kind = kindOf(value);
  return {std::move(name), kind, false, std::move(value), {}};
}
AttrDef choice(std::string name, std::string value, std::vector<std::string> choices) {
  return {std::move(name), AttrKind::Enum, false, Attr(std::move(value)), std::move(choices)};
}

Attr i(int64_t v) { return Attr(v); }
Attr f(double v) { return Attr(v); }
Attr b(bool v) { return Attr(v); }
Attr ints(std::vector<int64_t> v) { return Attr(std::move(v)); }

std::vector<OpSchema> buildTable() {
  std::vector<OpSchema> t;
  auto add = [&](std::string name, std::string category, std::vector<OperandDef> operands,
                 std::vector<AttrDef> attrs = {}, bool differentiable = true, int results = 1) {
    t.push_back({std::move(name), std::move(category), std::move(operands), std::move(attrs),
                 results, differentiable});
  };

  // Unary elementwise.
  for (const char *n : {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
                        "sigmoid", "relu", "silu", "sin", "cos", "erf"})
    add(n, "unary", {in("x")});
  add("gelu", "unary", {in("x")}, {choice("approximate", "none", {"none", "tanh"})});
  for (const char *n : {"floor", "ceil", "sign", "logical_not"})
    add(n, "unary", {in("x")}, {}, /*differentiable=*/false);

  // Binary elementwise with broadcasting.
  for (const char *n : {"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
    add(n, "binary", {in("lhs"), in("rhs")});
  for (const char *n : {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"})
    add(n, "binary", {in("lhs"), in("rhs")}, {}, false);

  add("where", "elementwise", {in("condition"), in("x"), in("y")});
  add("cast", "elementwise", {in("x")}, {req("to", AttrKind::DType)});
  add("clamp", "elementwise", {in("x")},
      {optional("min", AttrKind::Float), optional("max", AttrKind::Float)});

  // Reductions.
  for (const char *n : {"sum", "mean", "max", "min", "prod"})
    add(n, "reduction", {in("x")}, {optional("axes", AttrKind::Ints), dflt("keepdim", b(false))});
  for (const char *n : {"argmax", "argmin"})
    add(n, "reduction", {in("x")}, {optional("axis", AttrKind::Int), dflt("keepdim", b(false))},
        false);
  add("logsumexp", "reduction", {in("x")}, {optional("axes", AttrKind::Ints), dflt("keepdim", b(false))});
  add("var", "reduction", {in("x")},
      {optional("axes", AttrKind::Ints), dflt("keepdim", b(false)), dflt("correction", i(1))});

  add("matmul", "linalg", {in("lhs"), in("rhs")});

  // Neural-network ops.
  add("softmax", "nn", {in("x")}, {dflt("axis", i(-1))});
  add("log_softmax", "nn", {in("x")}, {dflt("axis", i(-1))});
  add("layer_norm", "nn", {in("x"), opt("weight"), opt("bias")},
      {dflt("axis", i(-1)), dflt("eps", f(1e-5))});
  add("rms_norm", "nn", {in("x"), opt("weight")},
      {dflt("axis", i(-1)), optional("eps", AttrKind::Float)});
  add("cross_entropy", "nn", {in("logits"), in("target")},
      {choice("reduction", "mean", {"mean", "sum", "none"}), dflt("ignore_index", i(-100)),
       dflt("label_smoothing", f(0.0))});
  add("embedding", "nn", {in("indices"), in("weight")}, {optional("padding_idx", AttrKind::Int)});
  // The gradient of embedding's table (autodiff's; not differentiable).
  add("embedding_backward", "nn", {in("grad"), in("indices")},       {req("num_weights", AttrKind::Int), optional("padding_idx", AttrKind::Int)}, false);
  add("dropout", "nn", {in("x"), in("seed")}, {dflt("p", f(0.5)), dflt("stream", i(0))});
  // channels_last: x (N, H, W, C), weight (O, kH, kW, C / groups), output
  // (N, Ho, Wo, O) -- the CUDA pipeline's layout for 16-bit convolutions
  // (tensorc-channels-last), the same arithmetic.
  add("conv2d", "nn", {in("x"), in("weight"), opt("bias")},
      {dflt("stride", ints({1, 1})), dflt("padding", ints({0, 0})), dflt("dilation", ints({1, 1})),
       dflt("groups", i(1)), dflt("channels_last", b(false))});
  // The gradients of conv2d's input and weight (autodiff's; not
  // differentiable themselves): what cuDNN's backward-data and
  // backward-filter convolutions compute.
  add("conv2d_backward_input", "nn", {in("grad"), in("weight")},
      {req("input_size", AttrKind::Ints), dflt("stride", ints({1, 1})), dflt("padding", ints({0, 0})),
       dflt("dilation", ints({1, 1})), dflt("groups", i(1)), dflt("channels_last", b(false))},
      false);
  add("conv2d_backward_weight", "nn", {in("grad"), in("x")},
      {req("kernel_size", AttrKind::Ints), dflt("stride", ints({1, 1})), dflt("padding", ints({0, 0})),
       dflt("dilation", ints({1, 1})), dflt("groups", i(1)), dflt("channels_last", b(false))},
      false);
  add("max_pool2d", "nn", {in("x")},
      {req("kernel_size", AttrKind::Ints), optional("stride", AttrKind::Ints),
       dflt("padding", ints({0, 0})), dflt("dilation", ints({1, 1})), dflt("ceil_mode", b(false))});
  // Each max_pool2d window's winning tap, kh * kernel_w + kw (i64): the first
  // maximum, a nan beating every number (PyTorch's saved indices, per window).
  add("max_pool2d_taps", "nn", {in("x")},
      {req("kernel_size", AttrKind::Ints), optional("stride", AttrKind::Ints),
       dflt("padding", ints({0, 0})), dflt("dilation", ints({1, 1})), dflt("ceil_mode", b(false))},
      false);
  // max_pool2d's input gradient: each window's cotangent goes to the input
  // element at its winning tap (`tap`: ki * kernel_w + kj per window, the
  // first maximum as PyTorch's; -1 none) -- the gather form, one nest.
  add("max_pool2d_backward", "nn", {in("grad"), in("tap")},
      {req("kernel_size", AttrKind::Ints), req("input_size", AttrKind::Ints), optional("stride", AttrKind::Ints),
       dflt("padding", ints({0, 0})), dflt("dilation", ints({1, 1}))},
      false);
  add("avg_pool2d", "nn", {in("x")},
      {req("kernel_size", AttrKind::Ints), optional("stride", AttrKind::Ints),
       dflt("padding", ints({0, 0})), dflt("ceil_mode", b(false)),
       dflt("count_include_pad", b(true))});
  add("batch_norm", "nn",
      {in("x"), in("running_mean"), in("running_var"), opt("weight"), opt("bias")},
      {dflt("training", b(false)), dflt("momentum", f(0.1)), dflt("eps", f(1e-5))}, true, 3);
  // Attention with dropout on its probabilities: `seed` (i64 scalar) and
  // `dropout_p` > 0 draw the dropout op's mask, stream `dropout_stream`, over
  // the probabilities' [batch..., L, S] elements.
  add("scaled_dot_product_attention", "nn", {in("query"), in("key"), in("value"), opt("mask"), opt("seed")},
      {dflt("is_causal", b(false)), optional("scale", AttrKind::Float), optional("out_dtype", AttrKind::DType),
       dflt("dropout_p", f(0.0)), dflt("dropout_stream", i(0))});
  add("scaled_dot_product_attention_with_lse", "nn",
      {in("query"), in("key"), in("value"), opt("mask"), opt("seed")},
      {dflt("is_causal", b(false)), optional("scale", AttrKind::Float), optional("out_dtype", AttrKind::DType),
       dflt("dropout_p", f(0.0)), dflt("dropout_stream", i(0))},
      true, 2);
  add("scaled_dot_product_attention_backward", "nn",
      {in("grad"), in("query"), in("key"), in("value"), opt("mask"), opt("out"), opt("lse"), opt("seed")},
      {dflt("is_causal", b(false)), optional("scale", AttrKind::Float), optional("out_dtype", AttrKind::DType),
       dflt("dropout_p", f(0.0)), dflt("dropout_stream", i(0))},
      false, 3);

  // Shape ops.
  add("reshape", "shape", {in("x")}, {req("shape", AttrKind::Dims)});
  add("permute", "shape", {in("x")}, {req("dims", AttrKind::Ints)});
  add("transpose", "shape", {in("x")}, {req("dim0", AttrKind::Int), req("dim1", AttrKind::Int)});
  add("broadcast_to", "shape", {in("x")}, {req("shape", AttrKind::Dims)});
  add("slice", "shape", {in("x")},
      {optional("axes", AttrKind::Ints), req("starts", AttrKind::Ints), req("ends", AttrKind::Ints),
       optional("steps", AttrKind::Ints)});
  add("concat", "shape", {many("inputs")}, {dflt("axis", i(0))});
  add("split", "shape", {in("x")}, {req("sizes", AttrKind::Ints), dflt("axis", i(0))}, true, -1);
  add("squeeze", "shape", {in("x")}, {optional("axes", AttrKind::Ints)});
  add("unsqueeze", "shape", {in("x")}, {req("axis", AttrKind::Int)});
  add("flatten", "shape", {in("x")}, {dflt("start_axis", i(0)), dflt("end_axis", i(-1))});
  add("gather", "shape", {in("x"), in("index")}, {req("axis", AttrKind::Int)});
  add("index_select", "shape", {in("x"), in("index")}, {req("axis", AttrKind::Int)});
  add("pad", "shape", {in("x")}, {req("pads", AttrKind::Ints), dflt("value", f(0.0))});

  // Collectives over the axes of a device mesh (docs/sharding.md): every
  // device runs the same program; these are where its devices communicate.
  auto group = [](std::vector<AttrDef> more) {
    std::vector<AttrDef> attrs{req("mesh", AttrKind::Enum), req("axes", AttrKind::Strings)};
    attrs.insert(attrs.end(), more.begin(), more.end());
    return attrs;
  };
  auto reduction = [] { return choice("reduction", "sum", {"sum", "mean", "max", "min"}); };
  add("all_reduce", "collective", {in("x")}, group({reduction()}));
  add("all_gather", "collective", {in("x")}, group({dflt("axis", i(0))}));
  add("reduce_scatter", "collective", {in("x")}, group({dflt("axis", i(0)), reduction()}));
  add("all_to_all", "collective", {in("x")},
      group({req("split_axis", AttrKind::Int), req("concat_axis", AttrKind::Int)}));
  add("all_slice", "collective", {in("x")}, group({dflt("axis", i(0))}));
  add("collective_broadcast", "collective", {in("x")}, group({dflt("root", i(0))}));
  add("axis_index", "collective", {}, group({}), false);

  // Creation ops.
  add("constant", "creation", {}, {req("value", AttrKind::Dense)}, false);
  add("full", "creation", {},
      {req("shape", AttrKind::Dims), req("value", AttrKind::Float),
       dflt("dtype", Attr(DType::F32))},
      false);
  add("zeros", "creation", {}, {req("shape", AttrKind::Dims), dflt("dtype", Attr(DType::F32))},
      false);
  add("ones", "creation", {}, {req("shape", AttrKind::Dims), dflt("dtype", Attr(DType::F32))},
      false);
  add("iota", "creation", {},
      {dflt("start", i(0)), optional("end", AttrKind::Int), optional("length", AttrKind::Dims),
       dflt("step", i(1)), dflt("dtype", Attr(DType::I64))},
      false);
  return t;
}

} // namespace

const AttrDef *OpSchema::findAttr(std::string_view attrName) const {
  for (const AttrDef &a : attrs)
    if (a.name == attrName)
      return &a;
  return nullptr;
}

bool OpSchema::hasOptionalOperands() const {
  return std::any_of(operands.begin(), operands.end(),
                     [](const OperandDef &o) { return o.arity == Arity::Optional; });
}

bool OpSchema::hasVariadicOperands() const {
  return std::any_of(operands.begin(), operands.end(),
                     [](const OperandDef &o) { return o.arity == Arity::Variadic; });
}

const std::vector<OpSchema> &allOpSchemas() {
  static const std::vector<OpSchema> table = buildTable();
  return table;
}

const OpSchema *findOpSchema(std::string_view name) {
  static const std::unordered_map<std::string_view, const OpSchema *> index = [] {
    std::unordered_map<std::string_view, const OpSchema *> m;
    for (const OpSchema &op : allOpSchemas())
      m.emplace(op.name, &op);
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

AttrMap completeAttrs(const OpSchema &op, const AttrMap &attrs) {
  for (const auto &[name, value] : attrs) {
    const AttrDef *def = op.findAttr(name);
    check(def != nullptr, "unknown attribute '" + name + "'");
    check(kindOf(value) == def->kind, "attribute '" + name + "' must be a " +
                                          attrKindName(def->kind) + ", got " +
                                          attrKindName(kindOf(value)));
    if (def->kind == AttrKind::Enum && !def->choices.empty()) {
      const std::string &s = std::get<std::string>(value);
      if (std::find(def->choices.begin(), def->choices.end(), s) == def->choices.end()) {
        std::string options;
        for (const std::string &c : def->choices)
          options += (options.empty() ? "" : ", ") + ("\"" + c + "\"");
        fail("attribute '" + name + "' is \"" + s + "\"; expected one of " + options);
      }
    }
  }
  AttrMap complete = attrs;
  for (const AttrDef &def : op.attrs) {
    if (complete.count(def.name))
      continue;
    check(!def.required, "missing required attribute '" + def.name + "'");
    if (def.defaultValue)
      complete.emplace(def.name, *def.defaultValue);
  }
  return complete;
}

AttrMap canonicalAttrs(const OpSchema &op, const AttrMap &attrs) {
  AttrMap canonical;
  for (const auto &[name, value] : attrs) {
    const AttrDef *def = op.findAttr(name);
    if (def && def->defaultValue && *def->defaultValue == value)
      continue;
    canonical.emplace(name, value);
  }
  return canonical;
}

} // namespace tensorc
