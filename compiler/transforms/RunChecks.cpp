#include "compiler/transforms/RunChecks.h"

#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"

#include <set>

namespace tensorc::transforms {
namespace {

class CheckBuilder {
public:
  CheckBuilder(Graph &g) : g_(g) {
    for (const GraphInput &in : g.inputs)
      taken_.insert(in.name);
    for (const Node &n : g.nodes)
      taken_.insert(n.name);
  }

  // Appends nodes computing "some element of `index` lies outside [0, size)
  // and is not `ignore`" as an i32 scalar; returns its reference.
  std::string outOfRange(const std::string &owner, const std::string &index, const TensorSpec &spec,
                         const Dim &size, std::optional<int64_t> ignore) {
    std::string bad = add(owner, "lt", {Arg::ref(index), intLit(0)});
    if (size.isStatic())
      bad = add(owner, "logical_or", {Arg::ref(bad), Arg::ref(add(owner, "ge", {Arg::ref(index), intLit(size.value())}))});
    if (ignore)
      bad = add(owner, "logical_and",
                {Arg::ref(bad), Arg::ref(add(owner, "ne", {Arg::ref(index), intLit(*ignore)}))});
    std::string flag = add(owner, "cast", {Arg::ref(bad)}, {{"to", DType::I32}});
    return spec.rank() == 0 ? flag : add(owner, "max", {Arg::ref(flag)});
  }

private:
  static Arg intLit(int64_t v) {
    Literal l;
    l.kind = Literal::Kind::Int;
    l.intValue = v;
    return Arg::lit(l);
  }

  std::string add(const std::string &owner, const std::string &op, std::vector<Arg> args,
                  AttrMap attrs = {}) {
    std::string base = "check_" + owner + "_" + op, name = base;
    for (int k = 1; taken_.count(name); ++k)
      name = base + std::to_string(k);
    taken_.insert(name);
    Node n;
    n.name = name;
    n.op = op;
    n.args = std::move(args);
    n.attrs = std::move(attrs);
    g_.nodes.push_back(std::move(n));
    return name;
  }

  Graph &g_;
  std::set<std::string> taken_;
};

} // namespace

Graph addRunChecks(const Graph &graph, const std::string &where) {
  if (!graph.checks.empty())
    return graph;
  GraphAnalysis a = analyzeGraph(graph, where);
  Graph out = graph;
  CheckBuilder builder(out);
  for (const TypedNode &t : a.nodes) {
    const Node &n = *t.node;
    std::string what = "node \"" + n.name + "\" (" + n.op + ")";
    static const std::set<std::string> extrema = {"max", "min", "argmax", "argmin"};
    if (extrema.count(n.op)) {
      const TensorSpec &x = *t.argTypes[0];
      std::vector<int64_t> axes;
      if (n.op[0] == 'a' ? hasAttr(t.attrs, "axis") : hasAttr(t.attrs, "axes")) {
        if (n.op[0] == 'a')
          axes.push_back(normalizeAxis(getInt(t.attrs, "axis"), x.rank()));
        else
          for (int64_t ax : getInts(t.attrs, "axes"))
            axes.push_back(normalizeAxis(ax, x.rank()));
      } else {
        for (int64_t d = 0; d < x.rank(); ++d)
          axes.push_back(d);
      }
      for (int64_t ax : axes)
        check(!(x.shape[size_t(ax)].isStatic() && x.shape[size_t(ax)].value() == 0),
              where + ": " + what + " reduces over an empty range (dim " + std::to_string(ax) +
                  " of " + x.str() + " has size 0)");
      continue;
    }
    auto checkIndex = [&](size_t arg, const Dim &size, std::optional<int64_t> ignore,
                          const std::string &message) {
      if (n.args[arg].kind != Arg::Kind::Value || !isInteger(t.argTypes[arg]->dtype))
        return;
      out.outputs.push_back(builder.outOfRange(n.name, n.args[arg].value, *t.argTypes[arg], size, ignore));
      out.checks.push_back(what + ": " + message);
    };
    if (n.op == "cross_entropy") {
      const TensorSpec &logits = *t.argTypes[0];
      const Dim &classes = logits.shape[logits.rank() == 1 ? 0 : 1];
      int64_t ignore = getInt(t.attrs, "ignore_index");
      checkIndex(1, classes, ignore,
                 "a target is outside the classes [0, " + classes.str() + ") and is not ignore_index " +
                     std::to_string(ignore));
    } else if (n.op == "embedding") {
      const Dim &rows = t.argTypes[1]->shape[0];
      checkIndex(0, rows, std::nullopt, "an index is outside the table's rows [0, " + rows.str() + ")");
    } else if (n.op == "embedding_backward") {
      Dim rows = Dim::of(getInt(t.attrs, "num_weights"));
      checkIndex(1, rows, std::nullopt, "an index is outside the table's rows [0, " + rows.str() + ")");
    } else if (n.op == "gather" || n.op == "index_select") {
      const TensorSpec &x = *t.argTypes[0];
      int64_t axis = normalizeAxis(getInt(t.attrs, "axis"), x.rank());
      const Dim &len = x.shape[size_t(axis)];
      checkIndex(1, len, std::nullopt,
                 "an index is outside [0, " + len.str() + ") along axis " + std::to_string(axis));
    }
  }
  return out;
}

} // namespace tensorc::transforms
