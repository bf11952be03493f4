#include "compiler/autodiff/Autodiff.h"

#include "compiler/autodiff/GradRules.h"
#include "compiler/autodiff/PrepareForward.h"
#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

#include <algorithm>
#include <map>
#include <set>

namespace tensorc::autodiff {

using trace::Tracer;

namespace {

std::string key(const std::string &ref) {
  ValueRef v = parseValueRef(ref);
  return v.producer + ":" + std::to_string(v.index);
}

} // namespace

JointGraph buildJointGraph(const Graph &original, const AutodiffOptions &options) {
  const Graph forward = withoutChecks(options.separateBackward ? prepareForAutodiff(original) : original);
  const std::string where = "autodiff " + forward.name;
  GraphAnalysis analysis = analyzeGraph(forward, where);
  std::set<std::string> inputNames;
  for (const GraphInput &in : forward.inputs)
    inputNames.insert(in.name);

  // What to differentiate.
  std::vector<std::string> wrt = options.wrt;
  if (wrt.empty())
    for (const GraphInput &in : forward.inputs)
      if (in.trainable)
        wrt.push_back(in.name);
  check(!wrt.empty(),
        where + ": no inputs to differentiate: mark parameters \"trainable\" or name them (--wrt)");
  for (const std::string &w : wrt) {
    check(inputNames.count(w),
          where + ": --wrt " + w + ": the graph has no input named \"" + w + "\"");
    for (const GraphInput &in : forward.inputs)
      if (in.name == w)
        check(isFloat(in.spec.dtype), where + ": input \"" + w + "\" is " + in.spec.str() +
                                          "; only float inputs have gradients");
  }
  std::vector<std::string> of = options.of;
  if (of.empty()) {
    std::vector<std::string> scalars, floats;
    for (size_t i = 0; i < forward.outputs.size(); ++i)
      if (isFloat(analysis.outputs[i].dtype)) {
        floats.push_back(forward.outputs[i]);
        if (analysis.outputs[i].rank() == 0)
          scalars.push_back(forward.outputs[i]);
      }
    of = scalars.size() == 1 ? scalars : floats;
  }
  check(!of.empty(), where + ": the graph has no float outputs to differentiate");

  Tracer t(forward);
  // Activity: values that depend on a wrt input (forward) ...
  std::set<std::string> dependsOnWrt;
  for (const std::string &w : wrt)
    dependsOnWrt.insert(key(w));
  for (const TypedNode &n : analysis.nodes) {
    bool active = false;
    for (const Arg &a : n.node->args)
      active |= a.kind == Arg::Kind::Value && dependsOnWrt.count(key(a.value));
    if (active && n.schema->differentiable)
      for (size_t r = 0; r < n.results.size(); ++r)
        if (isFloat(n.results[r].dtype))
          dependsOnWrt.insert(n.node->name + ":" + std::to_string(r));
  }
  // ... and that a differentiated output depends on (backward).
  std::set<std::string> feedsOutput;
  for (const std::string &o : of)
    feedsOutput.insert(key(o));
  for (auto it = analysis.nodes.rbegin(); it != analysis.nodes.rend(); ++it) {
    bool feeds = false;
    for (size_t r = 0; r < it->results.size(); ++r)
      feeds |= feedsOutput.count(it->node->name + ":" + std::to_string(r)) != 0;
    if (feeds)
      for (const Arg &a : it->node->args)
        if (a.kind == Arg::Kind::Value)
          feedsOutput.insert(key(a.value));
  }
  auto active = [&](const std::string &k) { return dependsOnWrt.count(k) && feedsOutput.count(k); };

  // Seeds: 1 for a scalar output, a cotangent input otherwise.
  JointGraph joint;
  std::map<std::string, Tensor> cotangent; // key -> accumulated cotangent
  auto accumulate = [&](const std::string &k, const Tensor &g) {
    auto it = cotangent.find(k);
    if (it == cotangent.end())
      cotangent.emplace(k, g);
    else
      it->second = it->second + g;
  };
  for (const std::string &o : of) {
    Tensor out = t.value(o);
    check(isFloat(out.dtype()), where + ": output \"" + o + "\" is " + out.spec().str() +
                                    "; only float outputs can be differentiated");
    if (!active(key(o)))
      continue;
    // An empty output (a slice or pad that crops a dim to 0) sends nothing
    // back, and graph inputs cannot be empty: no cotangent.
    if (std::any_of(out.shape().begin(), out.shape().end(),
                    [](const Dim &d) { return d.isStatic() && d.value() == 0; }))
      continue;
    if (out.rank() == 0) {
      accumulate(key(o), trace::full(t, {}, 1.0, out.dtype()));
    } else {
      std::string name =
          "cotangent_" + parseValueRef(o).producer +
          (parseValueRef(o).index ? "_" + std::to_string(parseValueRef(o).index) : "");
      Tensor seed = t.input(name, out.dtype(), dimSpec(out.shape()));
      joint.cotangentInputs.push_back(name);
      accumulate(key(o), seed);
    }
  }

  // Reverse sweep over the forward nodes.
  for (auto it = analysis.nodes.rbegin(); it != analysis.nodes.rend(); ++it) {
    const TypedNode &n = *it;
    std::vector<std::optional<Tensor>> gradOutputs;
    bool any = false;
    for (size_t r = 0; r < n.results.size(); ++r) {
      auto g = cotangent.find(n.node->name + ":" + std::to_string(r));
      gradOutputs.push_back(g == cotangent.end() ? std::nullopt : std::optional<Tensor>(g->second));
      any |= g != cotangent.end();
    }
    if (!any)
      continue;
    GradContext ctx{t, n, {}, {}, gradOutputs, {}};
    bool needed = false;
    for (size_t i = 0; i < n.argTypes.size(); ++i) {
      const Arg a = i < n.node->args.size() ? n.node->args[i] : Arg::absent();
      if (a.kind == Arg::Kind::Value) {
        ctx.inputs.push_back(t.value(a.value));
        bool need = active(key(a.value));
        ctx.needsGrad.push_back(need);
        needed |= need;
      } else if (a.kind == Arg::Kind::Literal) {
        ctx.inputs.push_back(a.literal.kind == Literal::Kind::Float
                                 ? trace::Operand(a.literal.floatValue)
                                 : trace::Operand(a.literal.intValue));
        ctx.needsGrad.push_back(false);
      } else {
        ctx.inputs.push_back(std::monostate{});
        ctx.needsGrad.push_back(false);
      }
    }
    if (!needed)
      continue;
    for (size_t r = 0; r < n.results.size(); ++r)
      ctx.outputs.push_back(t.value(n.node->name + ":" + std::to_string(r)));
    const GradRule *rule = findGradRule(n.node->op);
    check(rule != nullptr,
          where + ": node \"" + n.node->name + "\" (" + n.node->op + ") has no gradient rule");
    std::vector<std::optional<Tensor>> grads;
    try {
      grads = (*rule)(ctx);
    } catch (const Error &e) {
      fail(where + ": node \"" + n.node->name + "\" (" + n.node->op + "): gradient: " + e.what());
    }
    for (size_t i = 0; i < grads.size() && i < ctx.inputs.size(); ++i) {
      if (!grads[i] || !ctx.needsGrad[i])
        continue;
      const Tensor &input = std::get<Tensor>(ctx.inputs[i]);
      check(grads[i]->spec() == input.spec(),
            where + ": node \"" + n.node->name + "\" (" + n.node->op + "): gradient rule gave " +
                grads[i]->spec().str() + " for operand " + std::to_string(i) + " of type " +
                input.spec().str());
      accumulate(key(std::get<Tensor>(ctx.inputs[i]).ref()), *grads[i]);
    }
  }

  // Outputs: the forward outputs, then one gradient per wrt input.
  std::vector<std::string> outputs =
      options.keepForwardOutputs ? forward.outputs : std::vector<std::string>{};
  for (const std::string &w : wrt) {
    auto found = cotangent.find(key(w));
    Tensor grad = found != cotangent.end() ? found->second : zerosLike(t, t.value(w).spec());
    // A gradient that is an input or forward value passes through a named copy.
    // One result of a multi-result node (attention's dq/dk/dv, a concat's
    // split) cannot take a name of its own by renaming the node: copy it.
    bool fresh = grad.ref() != w && grad.ref().find(':') == std::string::npos &&
                 std::none_of(forward.nodes.begin(), forward.nodes.end(), [&](const Node &n) {
                   return parseValueRef(grad.ref()).producer == n.name;
                 });
    bool free = fresh && std::none_of(joint.cotangentInputs.begin(), joint.cotangentInputs.end(),
                                      [&](const std::string &c) { return c == grad.ref(); });
    std::string name = "grad_" + w;
    // Two inputs whose gradients are one value (both operands of an add)
    // must still give two named outputs: callers read gradients by name,
    // and a shared name lost one of them (tensorc.torch dropped a branch's
    // gradient). A value already named for an earlier input gets a copy.
    bool named = std::find(joint.gradientOutputs.begin(), joint.gradientOutputs.end(), grad.ref()) !=
                 joint.gradientOutputs.end();
    try {
      if (free && !named)
        grad.named(name);
      else
        grad = t.call("mul", {grad, 1.0}, {}, name)[0];
    } catch (const Error &) {
      // The name is taken by another value: keep the generated name.
    }
    t.output(grad);
    joint.gradientOutputs.push_back(grad.ref());
  }
  for (const std::string &o : outputs)
    t.output(t.value(o));
  Graph result = t.graph();
  // Forward outputs first, as the graph had them.
  std::vector<std::string> ordered = outputs;
  ordered.insert(ordered.end(), joint.gradientOutputs.begin(), joint.gradientOutputs.end());
  result.outputs = ordered;
  result.name = forward.name + "_joint";
  joint.graph = result;
  joint.wrt = wrt;
  return joint;
}

} // namespace tensorc::autodiff
