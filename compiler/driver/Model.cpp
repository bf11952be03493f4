#include "compiler/driver/Model.h"

#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace tensorc {

static bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Model> loadModel(const std::string &path) {
  auto model = std::make_unique<Model>();
  model->path = path;
  model->context = std::make_unique<mlir::MLIRContext>();
  model->context->disableMultithreading();
  loadTensorcDialects(*model->context);
  if (endsWith(path, ".mlir")) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    check(bool(buffer), path + ": cannot open the file");
    llvm::SourceMgr sources;
    sources.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
    std::string message;
    mlir::ScopedDiagnosticHandler handler(model->context.get(), [&](mlir::Diagnostic &d) {
      if (message.empty() && d.getSeverity() == mlir::DiagnosticSeverity::Error) {
        llvm::raw_string_ostream os(message);
        if (auto loc = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
          os << loc.getFilename().getValue() << ":" << loc.getLine() << ":" << loc.getColumn()
             << ": ";
        else
          os << path << ": ";
        os << d.str();
      }
      return mlir::success();
    });
    model->module = mlir::parseSourceFile<mlir::ModuleOp>(sources, model->context.get());
    check(bool(model->module), message.empty() ? path + ": cannot parse the module" : message);
    try {
      refreshGraph(*model);
    } catch (const Error &e) {
      fail(path + ": " + e.what());
    }
    return model;
  }
  model->graph = readGraphFile(path);
  model->analysis = analyzeGraph(model->graph, path);
  model->module = importGraph(*model->context, model->graph, model->analysis, path);
  return model;
}

void refreshGraph(Model &model) {
  model.graph = exportGraph(*model.module);
  model.analysis = analyzeGraph(model.graph, model.path);
}

std::string printModule(mlir::ModuleOp module, bool debugInfo) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (debugInfo)
    flags.enableDebugInfo(true, /*prettyForm=*/false);
  module.print(os, flags);
  return text;
}

} // namespace tensorc
