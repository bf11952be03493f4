// Rebuilds a graph node by node through a tracer, replacing some nodes by
// traced subgraphs: the shared mechanics of decomposition and of autodiff's
// preparation (references renamed, result types checked, names kept).
#pragma once

#include "compiler/graph/GraphAnalysis.h"
#include "compiler/trace/Tracer.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tensorc::trace {

// The replacement of `node`, traced on `t` from its operands (rewritten
// references; literals as literals, absent operands as monostate), or
// nullopt to copy the node as it is. The replacement's results must have
// the node's result types unless the caller says they may change (autocast).
using NodeRewrite = std::function<std::optional<std::vector<Tensor>>(
    Tracer &t, const TypedNode &node, const std::vector<Operand> &args)>;

// `where` prefixes errors ("decompose"). Copied nodes keep their names and
// a single-result replacement's last node takes the replaced node's (the
// nodes a replacement adds get names the graph does not use), so references
// from outside (the graph's outputs, autodiff's `of`, a partition's forward
// outputs) stay valid. A multi-result replacement's references are renamed
// inside the graph only.
Graph rewriteGraph(const Graph &graph, const std::string &where, const NodeRewrite &rewrite,
                   bool sameTypes = true);

} // namespace tensorc::trace
