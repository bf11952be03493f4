#include "compiler/frontend/GraphTransform.h"

#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphAnalysis.h"
#include "ir/core/Error.h"

namespace tensorc {

mlir::LogicalResult transformModuleAsGraph(mlir::ModuleOp module, const std::string &passName,
                                           const std::function<Graph(const Graph &)> &transform) {
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
    return mlir::success();
  } catch (const Error &e) {
    module.emitError() << e.what();
    return mlir::failure();
  }
}

} // namespace tensorc
