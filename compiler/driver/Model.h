// Loading a model from a graph file (.json) or tc IR (.mlir) into both forms
// the compiler works with: the verified module and the analyzed graph.
#pragma once

#include "compiler/graph/GraphAnalysis.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>

namespace tensorc {

struct Model {
  std::string path;
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  Graph graph;
  GraphAnalysis analysis;
};

// Throws Error with one line naming the file (and node) at fault.
std::unique_ptr<Model> loadModel(const std::string &path);
// Re-derives graph and analysis from the (possibly transformed) module.
void refreshGraph(Model &model);

std::string printModule(mlir::ModuleOp module, bool debugInfo = false);

} // namespace tensorc
