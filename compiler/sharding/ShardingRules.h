// How each op's dims may be split over mesh axes, as factors (Shardy's
// OpShardingRule): every dim of every operand and result is one factor or
// none, and a dim split over some axes splits its factor the same way in
// every tensor that has it. A factor only operands have (matmul's inner dim,
// a reduced axis) makes the result a partial value over its axes, completed
// by an all_reduce or reduce_scatter; a factor that must not be split (a
// softmax's axis) gathers its operands first. An op without a rule runs
// replicated: correct for every op, with communication instead of
// parallelism.
#pragma once

#include "compiler/graph/GraphAnalysis.h"

#include <optional>
#include <string>
#include <vector>

namespace tensorc::sharding {

inline constexpr int kNoFactor = -1;

struct FactorRule {
  int numFactors = 0;
  // Per value operand (absent and literal operands get an empty list), per
  // dim: the factor or kNoFactor (a broadcast dim of size 1: never split).
  std::vector<std::vector<int>> operandDims;
  std::vector<std::vector<int>> resultDims;
  std::vector<bool> replicated; // per factor: must not be split
  // What an operand-only factor leaves in the result when split: "sum",
  // "max" or "min" partial values; "" where such factors must not be split.
  std::string partial = "sum";
};

// nullopt: the op runs replicated (no rule yet, or a form the rule does not
// cover, such as a reshape that merges a split dim).
std::optional<FactorRule> factorRule(const TypedNode &node);

} // namespace tensorc::sharding
