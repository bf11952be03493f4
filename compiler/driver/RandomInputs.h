// Inputs drawn from a seed for `tensorc run` and the tests: floats uniform in
// [-1, 1), integers in [0, bound) where bound is the smallest valid range of
// any index use (embedding rows, cross_entropy classes, gather/index_select
// extents; 10 when unused as an index), bools uniform.
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "runtime/host/HostTensor.h"

#include <map>
#include <string>

namespace tensorc {

// Sizes for symbols no given input binds: `dims` first, then the symbol's
// lower bound if above 4, else 4.
std::map<std::string, int64_t> defaultBindings(const Graph &graph,
                                               const std::map<std::string, int64_t> &dims);

HostTensor randomTensor(DType dtype, const std::vector<int64_t> &shape, uint64_t seed,
                        int64_t intBound = 10);

// Fills in every input not in `given`, each from its own stream of `seed`.
std::map<std::string, HostTensor> completeInputs(const Graph &graph, const GraphAnalysis &analysis,
                                                 std::map<std::string, HostTensor> given,
                                                 uint64_t seed,
                                                 const std::map<std::string, int64_t> &dims = {});

// The same for a signature alone (inputs and dim bounds, no nodes: a
// compiled artifact's): the same seeds and streams, integers in [0, 10).
std::map<std::string, HostTensor> completeSignatureInputs(const Graph &signature,
                                                          std::map<std::string, HostTensor> given,
                                                          uint64_t seed,
                                                          const std::map<std::string, int64_t> &dims = {});

// A size given for a symbol that no input of `g` has (and `g` does not
// declare) would be ignored: an error naming the symbols it has. For what
// a user typed (`tensorc run --dim`).
void checkDimSymbols(const Graph &g, const std::map<std::string, int64_t> &dims);

} // namespace tensorc
