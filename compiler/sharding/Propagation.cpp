#include "compiler/sharding/Propagation.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <set>

namespace tensorc::sharding {

const DimAxes &ShardingPlan::of(const std::string &ref) const {
  auto it = values.find(ref);
  check(it != values.end(), "sharding: no sharding for value \"" + ref + "\"");
  return it->second;
}

std::string canonicalRef(const Graph &g, const std::string &ref) {
  for (const GraphInput &in : g.inputs)
    if (in.name == ref)
      return ref;
  ValueRef v = parseValueRef(ref);
  return v.producer + ":" + std::to_string(v.index);
}

std::string dimAxesStr(const DimAxes &dims) {
  std::string out = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    out += d ? ", " : "";
    if (dims[d].empty())
      out += "_";
    else if (dims[d].size() == 1)
      out += dims[d][0];
    else {
      out += "{";
      for (size_t a = 0; a < dims[d].size(); ++a)
        out += (a ? ", " : "") + dims[d][a];
      out += "}";
    }
  }
  return out + "]";
}

std::vector<std::vector<std::string>> assignFactors(const FactorRule &rule,
                                                    const std::vector<const DimAxes *> &results,
                                                    const std::vector<const DimAxes *> &operands) {
  std::vector<std::optional<std::vector<std::string>>> chosen(size_t(rule.numFactors));
  std::set<std::string> used;
  auto consider = [&](const std::vector<int> &factors, const DimAxes *dims) {
    if (!dims)
      return;
    for (size_t d = 0; d < factors.size() && d < dims->size(); ++d) {
      int f = factors[d];
      const std::vector<std::string> &axes = (*dims)[d];
      if (f == kNoFactor || axes.empty() || chosen[size_t(f)] || rule.replicated[size_t(f)])
        continue;
      if (std::any_of(axes.begin(), axes.end(), [&](const std::string &a) { return used.count(a); }))
        continue;
      chosen[size_t(f)] = axes;
      used.insert(axes.begin(), axes.end());
    }
  };
  for (size_t i = 0; i < operands.size(); ++i)
    consider(rule.operandDims[i], operands[i]);
  for (size_t r = 0; r < results.size(); ++r)
    consider(rule.resultDims[r], results[r]);
  // Operand-only factors whose result would be partial: allowed only for
  // partial-capable ops.
  std::vector<std::vector<std::string>> out(size_t(rule.numFactors));
  for (int f = 0; f < rule.numFactors; ++f)
    if (chosen[size_t(f)])
      out[size_t(f)] = *chosen[size_t(f)];
  if (rule.partial.empty()) {
    std::set<int> inResults;
    for (const auto &dims : rule.resultDims)
      inResults.insert(dims.begin(), dims.end());
    for (int f = 0; f < rule.numFactors; ++f)
      if (!inResults.count(f))
        out[size_t(f)].clear();
  }
  return out;
}

static DimAxes dimsFromFactors(const std::vector<int> &factors,
                               const std::vector<std::vector<std::string>> &assignment) {
  DimAxes dims;
  for (int f : factors)
    dims.push_back(f == kNoFactor ? std::vector<std::string>{} : assignment[size_t(f)]);
  return dims;
}

ShardingPlan propagateShardings(const Graph &g, const GraphAnalysis &analysis) {
  check(g.meshes.size() == 1, "sharding: the graph declares " + std::to_string(g.meshes.size()) +
                                  " meshes; SPMD partitioning takes exactly one");
  ShardingPlan plan;
  plan.mesh = g.meshes[0];
  auto checkMeshName = [&](const Sharding &s, const std::string &what) {
    check(s.mesh == plan.mesh.name, "sharding: " + what + " names mesh \"" + s.mesh +
                                        "\"; the graph's mesh is \"" + plan.mesh.name + "\"");
  };
  std::map<std::string, DimAxes> readWhole; // gathered-at-use inputs as their readers see them
  for (const GraphInput &in : g.inputs)
    if (in.sharding) {
      checkMeshName(*in.sharding, "input \"" + in.name + "\"");
      plan.values[in.name] = in.sharding->dims;
      if (in.sharding->gatheredAtUse) {
        plan.gatheredAtUse.insert(in.name);
        readWhole[in.name] = DimAxes(size_t(in.spec.rank()));
      }
    }
  for (const TypedNode &n : analysis.nodes) {
    check(n.schema->category != "collective",
          "sharding: node \"" + n.node->name + "\" (" + n.node->op +
              ") is a collective: the partitioner takes a global program, without collectives");
    if (n.node->sharding) {
      checkMeshName(*n.node->sharding, "node \"" + n.node->name + "\"");
      (n.node->sharding->atOutput ? plan.outputTargets : plan.values)[n.node->name + ":0"] = n.node->sharding->dims;
    }
  }
  std::set<std::string> annotated;
  for (const auto &[ref, dims] : plan.values)
    annotated.insert(ref);
  auto find = [&](const std::string &ref) -> const DimAxes * {
    auto it = plan.values.find(ref);
    return it == plan.values.end() ? nullptr : &it->second;
  };
  auto replicated = [](int64_t rank) { return DimAxes(size_t(rank)); };
  // `derived` splits every dim at least as `current` does, and one more.
  auto refines = [](const DimAxes &current, const DimAxes &derived) {
    bool more = false;
    for (size_t d = 0; d < current.size() && d < derived.size(); ++d) {
      if (current[d].size() > derived[d].size() ||
          !std::equal(current[d].begin(), current[d].end(), derived[d].begin()))
        return false;
      more |= derived[d].size() > current[d].size();
    }
    return more;
  };
  bool changed = false;
  auto offer = [&](const std::string &ref, const DimAxes &derived) {
    const DimAxes *current = find(ref);
    if (!current || (!annotated.count(ref) && refines(*current, derived))) {
      plan.values[ref] = derived;
      changed = true;
    }
  };
  auto visit = [&](const TypedNode &n) {
    std::vector<std::string> operandRefs(n.argTypes.size()), resultRefs;
    for (size_t i = 0; i < n.argTypes.size() && i < n.node->args.size(); ++i)
      if (n.node->args[i].kind == Arg::Kind::Value)
        operandRefs[i] = canonicalRef(g, n.node->args[i].value);
    for (size_t r = 0; r < n.results.size(); ++r)
      resultRefs.push_back(n.node->name + ":" + std::to_string(r));
    std::optional<FactorRule> rule = factorRule(n);
    if (!rule) {
      for (size_t i = 0; i < operandRefs.size(); ++i)
        if (!operandRefs[i].empty() && !find(operandRefs[i]))
          offer(operandRefs[i], replicated(n.argTypes[i]->rank()));
      for (size_t r = 0; r < resultRefs.size(); ++r)
        if (!find(resultRefs[r]))
          offer(resultRefs[r], replicated(n.results[r].rank()));
      return;
    }
    std::vector<const DimAxes *> results, operands;
    for (const std::string &r : resultRefs)
      results.push_back(find(r));
    for (const std::string &o : operandRefs)
      operands.push_back(o.empty() ? nullptr : readWhole.count(o) ? &readWhole[o] : find(o));
    std::vector<std::vector<std::string>> assignment = assignFactors(*rule, results, operands);
    for (size_t i = 0; i < operandRefs.size(); ++i)
      if (!operandRefs[i].empty())
        offer(operandRefs[i], dimsFromFactors(rule->operandDims[i], assignment));
    for (size_t r = 0; r < resultRefs.size(); ++r)
      offer(resultRefs[r], dimsFromFactors(rule->resultDims[r], assignment));
  };
  // Sweeps forward and backward until nothing changes (each change adds an
  // axis to a value's sharding, so this ends).
  for (int sweep = 0; sweep < 64; ++sweep) {
    changed = false;
    if (sweep % 2 == 0)
      for (const TypedNode &n : analysis.nodes)
        visit(n);
    else
      for (auto it = analysis.nodes.rbegin(); it != analysis.nodes.rend(); ++it)
        visit(*it);
    if (!changed && sweep > 0)
      break;
  }
  for (const GraphInput &in : g.inputs) // inputs no node reads
    if (!find(in.name))
      plan.values[in.name] = replicated(in.spec.rank());
  return plan;
}

} // namespace tensorc::sharding
