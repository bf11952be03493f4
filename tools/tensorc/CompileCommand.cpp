// tensorc compile FILE --emit=mlir|json -o OUT: runs the compile pipeline and
// writes the result.
#include "tools/tensorc/Commands.h"

#include "compiler/driver/Model.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/frontend/GraphImport.h"
#include "ir/core/Error.h"
#include "passes/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <iostream>

namespace tensorc::cli {

namespace {
struct CompileArgs {
  std::string file, output = "-", emit = "mlir";
  bool printIrAfterAll = false, debugInfo = false;
};
} // namespace

void addCompileCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("compile", "Compile a graph file or .mlir module");
  auto args = std::make_shared<CompileArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--emit", args->emit, "what to write: mlir (tc IR) or json (a graph file)")
      ->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option("-o,--output", args->output, "output path, - for stdout (the default)");
  cmd->add_flag("--print-ir-after-all", args->printIrAfterAll,
                "print the IR to stderr after every pass");
  cmd->add_flag("--debug-info", args->debugInfo, "keep locations (node names) in emitted MLIR");
  cmd->callback([args] {
    std::unique_ptr<Model> model = loadModel(args->file);
    mlir::PassManager pm(model->context.get());
    buildSimplifyPipeline(pm);
    if (args->printIrAfterAll)
      pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                          [](mlir::Pass *, mlir::Operation *) { return true; },
                          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                          /*printAfterOnlyOnFailure=*/false, llvm::errs());
    std::string message;
    mlir::ScopedDiagnosticHandler handler(model->context.get(), [&](mlir::Diagnostic &d) {
      if (message.empty())
        message = d.str();
      return mlir::success();
    });
    check(mlir::succeeded(pm.run(*model->module)),
          args->file + ": the compile pipeline failed" + (message.empty() ? "" : ": " + message));
    std::string text = args->emit == "json" ? writeGraphJson(exportGraph(*model->module))
                                            : printModule(*model->module, args->debugInfo);
    writeOutputFile(args->output, text);
  });
}

} // namespace tensorc::cli
