#include "compiler/driver/RunPipeline.h"

#include "ir/core/Error.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"

namespace tensorc {
namespace {

// Remembers the first pass that failed (a failed verifier after a pass counts
// as that pass failing: MLIR reports it through runAfterPassFailed too).
struct FailedPassRecorder : mlir::PassInstrumentation {
  explicit FailedPassRecorder(std::string *name) : name_(name) {}
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *) override {
    if (name_->empty())
      *name_ = pass->getArgument().empty() ? pass->getName().str() : pass->getArgument().str();
  }
  std::string *name_;
};

} // namespace

void runPipeline(mlir::PassManager &pm, mlir::ModuleOp module, const std::string &where) {
  std::string failedPass, diagnostics;
  pm.addInstrumentation(std::make_unique<FailedPassRecorder>(&failedPass));
  mlir::ScopedDiagnosticHandler handler(module.getContext(), [&](mlir::Diagnostic &d) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error)
      return mlir::success();
    if (!diagnostics.empty())
      diagnostics += "; ";
    std::string text = d.str();
    if (auto loc = llvm::dyn_cast<mlir::NameLoc>(d.getLocation()))
      text = "node \"" + loc.getName().str() + "\": " + text;
    diagnostics += text;
    return mlir::success();
  });
  if (mlir::succeeded(pm.run(module)))
    return;
  fail(where + ": the compile pipeline failed" +
       (failedPass.empty() ? std::string() : " in pass " + failedPass) +
       (diagnostics.empty() ? std::string(" (no diagnostic)") : ": " + diagnostics));
}

} // namespace tensorc
