// Graph <-> tc IR. Importing then exporting a canonical graph gives it back
// exactly; exporting then importing a module gives the same module.
#pragma once

#include "compiler/graph/Graph.h"
#include "compiler/graph/GraphAnalysis.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace tensorc {

// Loads the dialects tensorc's IR uses into `ctx`.
void loadTensorcDialects(mlir::MLIRContext &ctx);

// Builds and verifies the module of an analyzed graph. `where` names the file
// in locations and errors. Throws Error.
mlir::OwningOpRef<mlir::ModuleOp> importGraph(mlir::MLIRContext &ctx, const Graph &graph,
                                              const GraphAnalysis &analysis,
                                              const std::string &where);
// Converts a verified tc module (one func.func) back to a graph. Throws Error.
Graph exportGraph(mlir::ModuleOp module);

// Verifies a module, turning the first diagnostic into an Error that names
// the node ("where: node "h3" (tc.matmul): ...").
void verifyModule(mlir::ModuleOp module, const std::string &where);

} // namespace tensorc
