#include "compiler/frontend/GraphTransform.h"

#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tensorc {

mlir::LogicalResult transformModuleAsGraph(mlir::ModuleOp module, const std::string &passName,
                                           const std::function<Graph(const Graph &)> &transform) {
  // Output names are the API, but a graph names an output by the value it
  // returns: once a pass folds a returned view into its operand (or two
  // outputs return one value) the exported graph would rename it. The
  // transforms keep the outputs' number and order (tensorc-run-checks
  // appends), so the names are put back, with every other result attribute
  // but tc.check: the graph carries its checks (Graph::checks), which
  // import marks, and a transform may drop them (autodiff).
  std::vector<mlir::DictionaryAttr> outputAttrs;
  module.walk([&](mlir::func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      outputAttrs.push_back(fn.getResultAttrDict(i));
  });
  try {
    Graph before = exportGraph(module);
    Graph after = transform(before);
    after.name = before.name; // the function keeps its name
    GraphAnalysis analysis = analyzeGraph(after, passName);
    mlir::OwningOpRef<mlir::ModuleOp> result =
        importGraph(*module.getContext(), after, analysis, passName);
    module.getBody()->clear();
    module.getBody()->getOperations().splice(module.getBody()->end(),
                                             result->getBody()->getOperations());
    size_t next = 0;
    module.walk([&](mlir::func::FuncOp fn) {
      for (unsigned i = 0; i < fn.getNumResults() && next < outputAttrs.size(); ++i, ++next)
        if (outputAttrs[next])
          for (mlir::NamedAttribute attr : outputAttrs[next])
            if (attr.getName() != "tc.check")
              fn.setResultAttr(i, attr.getName(), attr.getValue());
    });
    return mlir::success();
  } catch (const Error &e) {
    module.emitError() << e.what();
    return mlir::failure();
  }
}

} // namespace tensorc
