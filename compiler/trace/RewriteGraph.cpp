#include "compiler/trace/RewriteGraph.h"

#include "ir/core/Error.h"

#include <map>
#include <set>

namespace tensorc::trace {

Graph rewriteGraph(const Graph &graph, const std::string &where, const NodeRewrite &rewrite,
                   bool sameTypes) {
  GraphAnalysis analysis = analyzeGraph(graph, where + " " + graph.name);
  Graph empty = graph;
  empty.nodes.clear();
  empty.outputs.clear();
  Tracer t(empty);
  std::set<std::string> names;
  for (const Node &n : graph.nodes)
    names.insert(n.name);
  t.reserveNames(names);
  std::map<std::string, std::string> renamed; // old reference -> new reference
  auto ref = [&](const std::string &r) {
    auto it = renamed.find(r);
    if (it != renamed.end())
      return it->second;
    ValueRef v = parseValueRef(r);
    auto it0 = renamed.find(v.producer + ":" + std::to_string(v.index));
    return it0 != renamed.end() ? it0->second : r;
  };
  for (const TypedNode &n : analysis.nodes) {
    std::vector<Operand> args;
    for (size_t i = 0; i < n.argTypes.size(); ++i) {
      const Arg a = i < n.node->args.size() ? n.node->args[i] : Arg::absent();
      if (a.kind == Arg::Kind::Value)
        args.push_back(t.value(ref(a.value)));
      else if (a.kind == Arg::Kind::Literal)
        args.push_back(a.literal.kind == Literal::Kind::Float ? Operand(a.literal.floatValue)
                                                              : Operand(a.literal.intValue));
      else
        args.push_back(std::monostate{});
    }
    std::optional<std::vector<Tensor>> replaced;
    try {
      replaced = rewrite(t, n, args);
    } catch (const Error &e) {
      fail(where + ": node \"" + n.node->name + "\" (" + n.node->op + "): " + e.what());
    }
    std::vector<Tensor> results;
    if (replaced) {
      results = std::move(*replaced);
      check(results.size() == n.results.size(),
            where + ": node \"" + n.node->name + "\": replacement has " +
                std::to_string(results.size()) + " results for " +
                std::to_string(n.results.size()));
      // Literal-typed args: the tracer gave literals their dtype; make sure
      // every result has the original node's type.
      for (size_t r = 0; r < results.size(); ++r) {
        check(!sameTypes || results[r].spec() == n.results[r],
              where + ": node \"" + n.node->name + "\": replacement gave " +
                  results[r].spec().str() + " for " + n.results[r].str());
        // The last node of a single-result replacement takes the name.
        if (n.results.size() == 1) {
          try {
            results[r].named(n.node->name);
          } catch (const Error &) {
          }
        }
      }
    } else {
      Node copy = *n.node;
      for (Arg &a : copy.args)
        if (a.kind == Arg::Kind::Value)
          a.value = ref(a.value);
      results = t.addNode(copy);
    }
    for (size_t r = 0; r < results.size(); ++r) {
      renamed[n.node->name + ":" + std::to_string(r)] = results[r].ref();
      if (r == 0)
        renamed[n.node->name] = results[r].ref();
    }
  }
  Graph out = t.graph();
  out.outputs.clear();
  for (const std::string &o : graph.outputs)
    out.outputs.push_back(ref(o));
  return out;
}

} // namespace tensorc::trace
