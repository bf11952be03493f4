// Runs a Graph-level transformation on a tc module in place: the module is
// exported to a graph, transformed, and imported back into the same module.
// MLIR passes built on graph-level stages (autodiff, decomposition, autocast)
// share this.
#pragma once

#include "compiler/graph/Graph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <functional>

namespace tensorc {

// On an Error, emits it on the module and returns failure.
mlir::LogicalResult transformModuleAsGraph(mlir::ModuleOp module, const std::string &passName,
                                           const std::function<Graph(const Graph &)> &transform);

} // namespace tensorc
