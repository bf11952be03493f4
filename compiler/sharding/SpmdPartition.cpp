#include "compiler/sharding/SpmdPartition.h"

#include "compiler/trace/Tracer.h"
#include "ir/core/Error.h"
#include "runtime/host/HostTensor.h"

#include <algorithm>
#include <set>

namespace tensorc::sharding {

using trace::Operand;
using trace::Tensor;
using trace::Tracer;

namespace {

int64_t axesSize(const Mesh &mesh, const std::vector<std::string> &axes) {
  int64_t size = 1;
  for (const std::string &a : axes)
    size *= mesh.sizes[size_t(std::find(mesh.axes.begin(), mesh.axes.end(), a) - mesh.axes.begin())];
  return size;
}

// The mesh's axes in `axes`, in the mesh's order (collectives over several
// partial axes list them so).
std::vector<std::string> inMeshOrder(const Mesh &mesh, const std::set<std::string> &axes) {
  std::vector<std::string> out;
  for (const std::string &a : mesh.axes)
    if (axes.count(a))
      out.push_back(a);
  return out;
}

Shape localShape(const Shape &global, const DimAxes &dims, const Mesh &mesh, const std::string &what) {
  Shape local = global;
  for (size_t d = 0; d < global.size() && d < dims.size(); ++d) {
    int64_t parts = axesSize(mesh, dims[d]);
    if (parts == 1)
      continue;
    std::optional<Dim> q = global[d].dividedBy(Dim::of(parts));
    check(q.has_value(), "sharding: " + what + " dim " + std::to_string(d) + " (" + global[d].str() +
                             ") cannot be split " + std::to_string(parts) + " ways over " +
                             dimAxesStr(dims) + (global[d].isStatic() ? "" : "; write it as " +
                             std::to_string(parts) + "*" + global[d].str() + " with a new symbol"));
    local[d] = *q;
  }
  return local;
}

std::string axesList(const std::vector<std::string> &axes) {
  std::string out = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    out += (i ? ", " : "") + axes[i];
  return out + "]";
}

bool isPrefix(const std::vector<std::string> &a, const std::vector<std::string> &b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// A value of the global program as the device holds it.
struct Local {
  Tensor tensor;
  DimAxes dims;
  std::set<std::string> partial; // axes over which it is a partial value
  std::string partialKind = "sum";
};

class Partitioner {
public:
  Partitioner(const Graph &g, const GraphAnalysis &a, const ShardingPlan &p)
      : global(g), analysis(a), plan(p), t(g.name) {
    t.mesh(plan.mesh.name, plan.mesh.axes, plan.mesh.sizes);
    std::set<std::string> names;
    for (const GraphInput &in : g.inputs)
      names.insert(in.name);
    for (const Node &n : g.nodes)
      names.insert(n.name);
    t.reserveNames(names);
  }

  SpmdProgram run(const PartitionOptions &options) {
    SpmdProgram out;
    for (const GraphInput &in : global.inputs) {
      const DimAxes &dims = plan.of(in.name);
      Shape shape = localShape(in.spec.shape, dims, plan.mesh, "input \"" + in.name + "\"");
      trace::DimSpec spec;
      for (const Dim &d : shape)
        spec.push_back(d.isStatic() ? std::variant<int64_t, std::string>(d.value())
                                    : std::variant<int64_t, std::string>(d.str()));
      Tensor tensor = in.trainable ? t.parameter(in.name, in.spec.dtype, spec)
                                   : t.input(in.name, in.spec.dtype, spec);
      values[in.name] = Local{tensor, dims, {}, "sum"};
      out.inputShardings.push_back(dims);
    }
    for (const TypedNode &n : analysis.nodes)
      partitionNode(n);
    for (size_t o = 0; o < global.outputs.size(); ++o) {
      const std::string &ref = global.outputs[o];
      std::string canonical = canonicalRef(global, ref);
      if (o >= global.resultCount()) {
        // A run-time check is each device's own flag (over its own indices,
        // a partial maximum left incomplete): no collective per step.
        t.output(values.at(canonical).tensor);
        out.outputShardings.push_back(values.at(canonical).dims);
        continue;
      }
      auto atOutput = plan.outputTargets.find(canonical);
      DimAxes target = options.replicateOutputs ? DimAxes(values.at(canonical).dims.size())
                       : atOutput != plan.outputTargets.end() ? atOutput->second
                                                              : plan.of(canonical);
      Tensor local = reshard(canonical, target, "output " + ref);
      t.output(local);
      out.outputShardings.push_back(target);
    }
    out.local = t.graph();
    out.local.dims = global.dims;
    out.local.checks = global.checks;
    keepOutputNames(out.local);
    out.communication = std::move(communication);
    return out;
  }

private:
  // An output resharded at the end is a collective's result: it takes the
  // output's global name (the local node that had it becomes NAME_local), so
  // the per-device program's outputs read as the global program's.
  void keepOutputNames(Graph &local) {
    for (size_t o = 0; o < global.outputs.size(); ++o) {
      std::string wanted = parseValueRef(global.outputs[o]).producer;
      ValueRef got = parseValueRef(local.outputs[o]);
      bool isInput = std::any_of(global.inputs.begin(), global.inputs.end(),
                                 [&](const GraphInput &in) { return in.name == wanted; });
      if (isInput || got.producer == wanted || got.index != 0)
        continue;
      renameNode(local, wanted, t.freshName(wanted + "_local"));
      renameNode(local, got.producer, wanted);
    }
  }

  static void renameNode(Graph &g, const std::string &from, const std::string &to) {
    auto rename = [&](std::string &ref) {
      ValueRef v = parseValueRef(ref);
      if (v.producer == from)
        ref = ref.find(':') == std::string::npos ? to : to + ":" + std::to_string(v.index);
    };
    for (Node &n : g.nodes) {
      if (n.name == from)
        n.name = to;
      for (Arg &a : n.args)
        if (a.kind == Arg::Kind::Value)
          rename(a.value);
    }
    for (std::string &out : g.outputs)
      rename(out);
  }

  void note(const std::string &node, const std::string &value, const std::string &what,
            const Tensor &result) {
    Dim elements = numElements(result.shape());
    int64_t bytes = elements.isStatic() ? elements.value() * int64_t(dtypeSize(result.dtype())) : -1;
    communication.push_back({node, value, what, bytes});
  }

  // `ref`'s local value resharded to `target` (partial values completed).
  Tensor reshard(const std::string &ref, const DimAxes &target, const std::string &forWhat) {
    auto cached = resharded.find({ref, target});
    if (cached != resharded.end())
      return cached->second;
    Tensor result = reshardOnce(ref, target, forWhat);
    resharded.emplace(std::make_pair(ref, target), result);
    return result;
  }

  Tensor reshardOnce(const std::string &ref, const DimAxes &target, const std::string &forWhat) {
    Local v = values.at(ref);
    std::string base = parseValueRef(ref).producer;
    auto over = [&](std::vector<std::string> axes) { return trace::MeshAxes{plan.mesh.name, axes}; };
    if (!v.partial.empty()) {
      // A partial sum over exactly the axis a target dim adds: reduce_scatter.
      std::set<std::string> rest = v.partial;
      if (v.partialKind == "sum")
        for (size_t d = 0; d < target.size(); ++d) {
          if (target[d].size() != v.dims[d].size() + 1 || !isPrefix(v.dims[d], target[d]))
            continue;
          const std::string &axis = target[d].back();
          if (!rest.count(axis) || !v.tensor.shape()[d].dividedBy(Dim::of(axesSize(plan.mesh, {axis}))))
            continue;
          v.tensor = reduce_scatter(v.tensor, over({axis}), int64_t(d), "sum")
                         .named(t.freshName(base + "_reduce_scatter"));
          note(forWhat, ref, "reduce_scatter over [" + axis + "] along dim " + std::to_string(d), v.tensor);
          v.dims[d] = target[d];
          rest.erase(axis);
        }
      if (!rest.empty()) {
        std::vector<std::string> axes = inMeshOrder(plan.mesh, rest);
        v.tensor = all_reduce(v.tensor, over(axes), v.partialKind).named(t.freshName(base + "_all_reduce"));
        note(forWhat, ref, "all_reduce (" + v.partialKind + ") over " + axesList(axes), v.tensor);
      }
      v.partial.clear();
    }
    for (size_t d = 0; d < target.size(); ++d) {
      if (isPrefix(v.dims[d], target[d]))
        continue;
      std::vector<std::string> keep = isPrefix(target[d], v.dims[d]) ? target[d] : std::vector<std::string>{};
      std::vector<std::string> gone(v.dims[d].begin() + long(keep.size()), v.dims[d].end());
      v.tensor = all_gather(v.tensor, over(gone), int64_t(d)).named(t.freshName(base + "_all_gather"));
      note(forWhat, ref, "all_gather over " + axesList(gone) + " along dim " + std::to_string(d), v.tensor);
      v.dims[d] = keep;
    }
    for (size_t d = 0; d < target.size(); ++d) {
      if (v.dims[d] == target[d])
        continue;
      std::vector<std::string> extra(target[d].begin() + long(v.dims[d].size()), target[d].end());
      Shape check = localShape({v.tensor.shape()[d]}, {extra}, plan.mesh, "value \"" + ref + "\"");
      (void)check;
      v.tensor = all_slice(v.tensor, over(extra), int64_t(d)).named(t.freshName(base + "_all_slice"));
      v.dims[d] = target[d];
    }
    return v.tensor;
  }

  // A sum or difference of two partial sums over the same axes, laid out
  // alike, stays a partial sum: added as they are, completed once where a
  // consumer needs the whole value. (The input gradient of column-parallel
  // q, k and v projections: one all_reduce instead of three, as Megatron.)
  bool addPartialSums(const TypedNode &n, const std::vector<std::string> &operandRefs) {
    const Node &node = *n.node;
    if ((node.op != "add" && node.op != "sub") || operandRefs.size() != 2 || node.args.size() != 2 ||
        operandRefs[0].empty() || operandRefs[1].empty() || n.results.size() != 1)
      return false;
    const Local &a = values.at(operandRefs[0]), &b = values.at(operandRefs[1]);
    if (a.partial.empty() || a.partial != b.partial || a.partialKind != "sum" || b.partialKind != "sum" ||
        a.dims != b.dims || a.tensor.shape() != b.tensor.shape() || a.tensor.dtype() != b.tensor.dtype() ||
        plan.gatheredAtUse.count(operandRefs[0]) || plan.gatheredAtUse.count(operandRefs[1]))
      return false;
    std::vector<Tensor> results;
    try {
      results = t.call(node.op, {Operand(a.tensor), Operand(b.tensor)}, canonicalAttrs(*n.schema, n.attrs), node.name);
    } catch (const Error &e) {
      fail("sharding: node \"" + node.name + "\" (" + node.op + "): the local op does not type-check: " + e.what());
    }
    values[node.name + ":0"] = Local{results[0], a.dims, a.partial, "sum"};
    return true;
  }

  // An embedding or its table's gradient on this device's block of the
  // table's rows, [rank * rows, (rank + 1) * rows) of the whole (`rank`
  // over `rowAxes`, as all_slice splits): an index outside the block reads
  // a zero row (the partial sum's other terms hold it) or adds nothing.
  // The gradient leaves padding rows out by index (the attribute names a
  // global row).
  Tensor vocabParallel(const Node &node, const AttrMap &attrs, const std::vector<Operand> &args,
                       const std::vector<std::string> &rowAxes, const std::string &label) {
    const bool forward = node.op == "embedding";
    const Tensor &indices = std::get<Tensor>(args[forward ? 0 : 1]);
    Dim globalRows = forward ? std::get<Tensor>(args[1]).shape()[0] : Dim::of(getInt(attrs, "num_weights"));
    if (forward) { // the table's local rows
      check(globalRows.isStatic(), "sharding: " + label + ": a vocab-parallel table needs a static row count");
      globalRows = Dim::of(globalRows.value() * axesSize(plan.mesh, rowAxes));
    }
    auto [start, rows] = blockStart(globalRows, rowAxes, indices.dtype(), label);
    Tensor local = indices - start;
    Tensor inBlock = logical_and(ge(local, int64_t(0)), lt(local, rows));
    if (!forward && hasAttr(attrs, "padding_idx")) // no gradient for it (the lookup is unchanged)
      inBlock = logical_and(inBlock, ne(indices, getInt(attrs, "padding_idx")));
    Tensor safe = where(inBlock, local, int64_t(0));
    Tensor keep = unsqueeze(inBlock, -1);
    if (forward)
      return where(keep, embedding(safe, std::get<Tensor>(args[1])), 0.0).named(node.name);
    Tensor grad = where(keep, std::get<Tensor>(args[0]), 0.0);
    return embeddingBackward(grad, safe, rows).named(node.name);
  }

  // The first index of this device's block of a dim `global` long split
  // over `axes` (as all_slice splits), in `dtype`, and the block's length.
  std::pair<Tensor, int64_t> blockStart(const Dim &global, const std::vector<std::string> &axes, DType dtype,
                                        const std::string &label) {
    check(global.isStatic(), "sharding: " + label + ": a split gathered axis needs a static size");
    const int64_t block = global.value() / axesSize(plan.mesh, axes);
    Tensor rank = axis_index(t, trace::MeshAxes{plan.mesh.name, axes});
    return {cast(rank * block, dtype), block};
  }

  // gather along an axis split over `axes`: each device gathers the indices
  // that fall in its block and zero elsewhere (a partial sum: one device
  // holds each element).
  Tensor blockGather(const Node &node, const TypedNode &n, const std::vector<Operand> &args,
                     const std::vector<std::string> &axes, const std::string &label) {
    const Tensor &x = std::get<Tensor>(args[0]), &index = std::get<Tensor>(args[1]);
    int64_t axis = normalizeAxis(getInt(n.attrs, "axis"), x.rank());
    auto [start, block] = blockStart(n.argTypes[0]->shape[size_t(axis)], axes, index.dtype(), label);
    Tensor local = index - start;
    Tensor inBlock = logical_and(ge(local, int64_t(0)), lt(local, block));
    return where(inBlock, gather(x, where(inBlock, local, int64_t(0)), axis), 0.0).named(node.name);
  }

  // iota split over `axes`: this device's block of the sequence.
  Tensor blockIota(const Node &node, const TypedNode &n, const std::vector<std::string> &axes,
                   const std::string &label) {
    DType dtype = n.results[0].dtype;
    auto [start, block] = blockStart(n.results[0].shape[0], axes, dtype, label);
    int64_t first = getInt(n.attrs, "start"), step = getInt(n.attrs, "step");
    return (iota_length(t, block, first, step, dtype) + start * step).named(node.name);
  }

  // A row statistic along `axis` split over `axes`: the maximum and the sum
  // of exponentials shifted by it, completed by all_reduces (softmax's and
  // cross-entropy's log-sum-exp over split classes).
  std::pair<Tensor, Tensor> splitRowMaxAndExpSum(const Tensor &x, int64_t axis, const std::vector<std::string> &axes,
                                                 const std::string &label, const std::string &ref) {
    trace::MeshAxes over{plan.mesh.name, axes};
    const std::string list = axesList(axes);
    Tensor m = all_reduce(max(x, {axis}, true), over, "max");
    note(label, ref, "all_reduce (max) over " + list + " (the rows' maximum)", m);
    Tensor s = all_reduce(sum(exp(x - m), {axis}, true), over, "sum");
    note(label, ref, "all_reduce (sum) over " + list + " (the rows' sum of exponentials)", s);
    return {m, s};
  }

  // softmax or log_softmax along an axis split over `axes`.
  Tensor splitSoftmax(const TypedNode &n, const std::vector<Operand> &args, const std::vector<std::string> &axes,
                      const std::string &label) {
    const Tensor &x = std::get<Tensor>(args[0]);
    int64_t axis = normalizeAxis(getInt(n.attrs, "axis"), x.rank());
    auto [m, s] = splitRowMaxAndExpSum(x, axis, axes, label, n.node->name + ":0");
    Tensor shifted = x - m;
    return (n.node->op == "softmax" ? exp(shifted) / s : shifted - log(s)).named(n.node->name);
  }

  // Vocab-parallel cross-entropy (Megatron): the logits' classes split over
  // `axes`. Each row's maximum, sum of exponentials and target logit (and
  // for label smoothing the sum of its logits) are completed by all_reduces,
  // so every device computes the whole loss: no logits are gathered.
  Tensor vocabParallelCrossEntropy(const TypedNode &n, const AttrMap &attrs, const std::vector<Operand> &args,
                                   const std::vector<std::string> &axes, const std::string &label,
                                   const std::string &name) {
    const Tensor &logits = std::get<Tensor>(args[0]), &target = std::get<Tensor>(args[1]);
    const Dim &classes = n.argTypes[0]->shape[1];
    auto [start, block] = blockStart(classes, axes, target.dtype(), label);
    trace::MeshAxes over{plan.mesh.name, axes};
    const std::string ref = n.node->name + ":0", list = axesList(axes);
    auto complete = [&](const Tensor &x, const std::string &reduction, const std::string &what) {
      Tensor r = all_reduce(x, over, reduction);
      note(label, ref, "all_reduce (" + reduction + ") over " + list + " (" + what + ")", r);
      return r;
    };
    auto [m, expSum] = splitRowMaxAndExpSum(logits, 1, axes, label, ref);
    Tensor lse = log(expSum) + m;
    Tensor local = target - start;
    Tensor inBlock = logical_and(ge(local, int64_t(0)), lt(local, block));
    Tensor picked = where(unsqueeze(inBlock, 1),
                          gather(logits, unsqueeze(where(inBlock, local, int64_t(0)), 1), 1), 0.0);
    picked = complete(picked, "sum", "the target's logit");
    Tensor perRow = lse - picked; // -log_softmax at the target
    const double smoothing = getFloat(attrs, "label_smoothing");
    if (smoothing != 0.0) {
      // -(s/C) sum_c logp[c] = (s/C) (C lse - sum_c logits[c])
      const double C = double(classes.value());
      Tensor logitSum = complete(sum(logits, {1}, true), "sum", "the rows' sum of logits");
      perRow = perRow * (1.0 - smoothing) + (lse * C - logitSum) * (smoothing / C);
    }
    Tensor valid = ne(target, getInt(attrs, "ignore_index"));
    perRow = where(valid, squeeze(perRow, {1}), 0.0);
    const std::string &reduction = getEnum(attrs, "reduction");
    if (reduction == "none")
      return perRow.named(name);
    if (reduction == "sum")
      return sum(perRow).named(name);
    return (sum(perRow) / sum(cast(valid, perRow.dtype()))).named(name);
  }

  void partitionNode(const TypedNode &n) {
    const Node &node = *n.node;
    std::optional<FactorRule> rule = factorRule(n);
    std::vector<std::string> operandRefs(n.argTypes.size());
    for (size_t i = 0; i < n.argTypes.size() && i < node.args.size(); ++i)
      if (node.args[i].kind == Arg::Kind::Value)
        operandRefs[i] = canonicalRef(global, node.args[i].value);
    if (addPartialSums(n, operandRefs))
      return;
    std::vector<std::string> resultRefs;
    for (size_t r = 0; r < n.results.size(); ++r)
      resultRefs.push_back(node.name + ":" + std::to_string(r));

    std::vector<std::vector<std::string>> assignment;
    if (rule) {
      std::vector<const DimAxes *> results, operands;
      for (const std::string &r : resultRefs)
        results.push_back(&plan.of(r));
      std::vector<DimAxes> whole(operandRefs.size());
      for (size_t i = 0; i < operandRefs.size(); ++i) {
        const std::string &o = operandRefs[i];
        // A gathered-at-use input is read as if it were replicated: the
        // reshard below gathers it (once: reshards are cached).
        if (o.empty()) {
          operands.push_back(nullptr);
        } else if (plan.gatheredAtUse.count(o)) {
          whole[i] = DimAxes(values.at(o).dims.size());
          operands.push_back(&whole[i]);
        } else {
          operands.push_back(&values.at(o).dims);
        }
      }
      assignment = assignFactors(*rule, results, operands);
    }
    auto dimsOf = [&](const std::vector<int> &factors, int64_t rank) {
      DimAxes dims(static_cast<size_t>(rank));
      if (rule)
        for (size_t d = 0; d < factors.size(); ++d)
          if (factors[d] != kNoFactor)
            dims[d] = assignment[size_t(factors[d])];
      return dims;
    };
    std::vector<Operand> args;
    std::string label = "node \"" + node.name + "\" (" + node.op + ")";
    for (size_t i = 0; i < n.argTypes.size(); ++i) {
      const Arg a = i < node.args.size() ? node.args[i] : Arg::absent();
      if (a.kind == Arg::Kind::Value) {
        DimAxes needed = dimsOf(rule ? rule->operandDims[i] : std::vector<int>{}, n.argTypes[i]->rank());
        args.push_back(reshard(operandRefs[i], needed, label));
      } else if (a.kind == Arg::Kind::Literal) {
        args.push_back(a.literal.kind == Literal::Kind::Float ? Operand(a.literal.floatValue)
                                                              : Operand(a.literal.intValue));
      } else {
        args.push_back(std::monostate{});
      }
    }
    std::vector<DimAxes> resultDims;
    for (size_t r = 0; r < n.results.size(); ++r)
      resultDims.push_back(dimsOf(rule ? rule->resultDims[r] : std::vector<int>{}, n.results[r].rank()));
    AttrMap attrs = n.attrs;
    if (node.op == "broadcast_to" || node.op == "reshape") {
      Shape shape = localShape(n.results[0].shape, resultDims[0], plan.mesh, label + " result");
      attrs["shape"] = shape;
    }
    // Factors only the operands have: the results are partial over their axes.
    std::set<std::string> partial;
    if (rule) {
      std::set<int> inResults;
      for (const auto &dims : rule->resultDims)
        inResults.insert(dims.begin(), dims.end());
      for (int f = 0; f < rule->numFactors; ++f)
        if (!inResults.count(f))
          partial.insert(assignment[size_t(f)].begin(), assignment[size_t(f)].end());
    }
    // Split axes a node's partition consumes itself: cross-entropy's classes
    // (its results complete), gather's gathered axis, iota's sequence,
    // softmax's axis.
    std::vector<std::string> classAxes, gatherAxes, iotaAxes, softmaxAxes;
    if (rule && node.op == "cross_entropy") {
      classAxes = dimsOf(rule->operandDims[0], n.argTypes[0]->rank())[1];
      for (const std::string &axis : classAxes)
        partial.erase(axis);
    }
    if (rule && node.op == "gather")
      gatherAxes = dimsOf(rule->operandDims[0], n.argTypes[0]->rank())[size_t(
          normalizeAxis(getInt(n.attrs, "axis"), n.argTypes[0]->rank()))];
    if (rule && node.op == "iota")
      iotaAxes = resultDims[0][0];
    if (rule && (node.op == "softmax" || node.op == "log_softmax"))
      softmaxAxes = resultDims[0][size_t(normalizeAxis(getInt(n.attrs, "axis"), n.results[0].rank()))];
    // cross_entropy's mean over split rows: the local sum over the global
    // count of counted rows (rows ignored differ per device).
    bool meanOverSplitRows = node.op == "cross_entropy" && !partial.empty() &&
                             getEnum(n.attrs, "reduction") == "mean";
    if (meanOverSplitRows)
      attrs["reduction"] = std::string("sum");
    // Vocab-parallel embeddings: the table's rows split over these axes.
    const std::vector<std::string> rowAxes =
        node.op == "embedding" && rule ? dimsOf(rule->operandDims[1], 2)[0]
        : node.op == "embedding_backward" ? resultDims[0][0]
                                          : std::vector<std::string>{};
    std::vector<Tensor> results;
    try {
      const std::string name = meanOverSplitRows ? t.freshName(node.name + "_local_sum") : node.name;
      if (!rowAxes.empty())
        results = {vocabParallel(node, n.attrs, args, rowAxes, label)};
      else if (!classAxes.empty())
        results = {vocabParallelCrossEntropy(n, attrs, args, classAxes, label, name)};
      else if (!gatherAxes.empty())
        results = {blockGather(node, n, args, gatherAxes, label)};
      else if (!iotaAxes.empty())
        results = {blockIota(node, n, iotaAxes, label)};
      else if (!softmaxAxes.empty())
        results = {splitSoftmax(n, args, softmaxAxes, label)};
      else
        results = t.call(node.op, args, canonicalAttrs(*n.schema, attrs), name);
    } catch (const Error &e) {
      fail("sharding: " + label + ": the local op does not type-check: " + e.what());
    }
    std::string kind = rule ? rule->partial : "sum";
    if (meanOverSplitRows) {
      const Tensor &target = std::get<Tensor>(args[1]);
      Tensor counted = sum(cast(ne(target, getInt(n.attrs, "ignore_index")), results[0].dtype()));
      std::vector<std::string> axes = inMeshOrder(plan.mesh, partial);
      trace::MeshAxes over{plan.mesh.name, axes};
      Tensor total = all_reduce(results[0], over, "sum");
      note(label, node.name + ":0", "all_reduce (sum) over " + axesList(axes), total);
      Tensor count = all_reduce(counted, over, "sum");
      note(label, node.name + ":0", "all_reduce (sum) over " + axesList(axes) + " (counted rows)", count);
      results[0] = div(total, count).named(node.name);
      partial.clear();
    }
    if (!partial.empty() && node.op == "mean") {
      // The mean of the local rows is the global mean times G: a partial sum
      // once divided by G (chunks are equal).
      double G = double(axesSize(plan.mesh, std::vector<std::string>(partial.begin(), partial.end())));
      results[0] = results[0] / G;
      kind = "sum";
    }
    for (size_t r = 0; r < results.size(); ++r)
      values[resultRefs[r]] = Local{results[r], resultDims[r], partial, kind};
  }

  const Graph &global;
  const GraphAnalysis &analysis;
  const ShardingPlan &plan;
  Tracer t;
  std::map<std::string, Local> values;
  // Each value resharded once per target, whichever consumers need it.
  std::map<std::pair<std::string, DimAxes>, Tensor> resharded;
  std::vector<Communication> communication;
};

Dim scaleSymbol(const Dim &d, const std::string &symbol, int64_t factor) {
  Dim out = Dim::of(d.coefficient());
  for (const std::string &s : d.symbols())
    out = out * Dim::symbol(s) * Dim::of(s == symbol ? factor : 1);
  return out;
}

// A symbolic dim split G ways that G does not divide (a batch `B`) means
// each device's size: the global program is rewritten with G*B for B
// everywhere, so the per-device program keeps the symbol B. A symbol split
// two different ways is an error.
Graph scaleSplitSymbols(const Graph &global, const ShardingPlan &plan) {
  std::map<std::string, int64_t> factors;
  for (const GraphInput &in : global.inputs) {
    const DimAxes &dims = plan.of(in.name);
    for (size_t d = 0; d < dims.size() && d < in.spec.shape.size(); ++d) {
      int64_t parts = axesSize(plan.mesh, dims[d]);
      const Dim &dim = in.spec.shape[d];
      if (parts == 1 || dim.dividedBy(Dim::of(parts)) || !dim.isPlainSymbol())
        continue;
      const std::string &symbol = dim.symbols()[0];
      auto [it, fresh] = factors.emplace(symbol, parts);
      check(fresh || it->second == parts, "sharding: symbol " + symbol + " is split " +
                                              std::to_string(it->second) + " ways and " +
                                              std::to_string(parts) + " ways");
    }
  }
  if (factors.empty())
    return global;
  Graph g = global;
  auto scale = [&](Shape &shape) {
    for (Dim &d : shape)
      for (const auto &[symbol, factor] : factors)
        d = scaleSymbol(d, symbol, factor);
  };
  for (GraphInput &in : g.inputs)
    scale(in.spec.shape);
  for (Node &n : g.nodes)
    for (auto &[name, value] : n.attrs)
      if (Shape *shape = std::get_if<Shape>(&value))
        scale(*shape);
  return g;
}

} // namespace

SpmdProgram partitionSpmd(const Graph &global, const GraphAnalysis &analysis,
                          const ShardingPlan &plan, const PartitionOptions &options) {
  Graph scaled = scaleSplitSymbols(global, plan);
  if (scaled == global)
    return Partitioner(global, analysis, plan).run(options);
  GraphAnalysis scaledAnalysis = analyzeGraph(scaled, "sharding " + global.name);
  return Partitioner(scaled, scaledAnalysis, plan).run(options);
}

HostTensor shardOf(const HostTensor &global, const DimAxes &dims, const Mesh &mesh, int64_t device) {
  std::vector<int64_t> shape = global.shape(), offset(shape.size(), 0);
  for (size_t d = 0; d < shape.size() && d < dims.size(); ++d) {
    if (dims[d].empty())
      continue;
    DeviceGroups groups(mesh, dims[d]);
    check(shape[d] % groups.groupSize() == 0, "sharding: dim " + std::to_string(d) + " of size " +
                                                  std::to_string(shape[d]) + " does not split " +
                                                  std::to_string(groups.groupSize()) + " ways");
    shape[d] /= groups.groupSize();
    offset[d] = groups.rankOf(device) * shape[d];
  }
  HostTensor out(global.dtype(), shape);
  std::vector<int64_t> coords(shape.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, src = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      coords[d] = rest % shape[d];
      rest /= shape[d];
    }
    for (size_t d = 0; d < shape.size(); ++d)
      src = src * global.shape()[d] + coords[d] + offset[d];
    isFloat(global.dtype()) ? out.setF(i, global.getF(src)) : out.setI(i, global.getI(src));
  }
  return out;
}

} // namespace tensorc::sharding
