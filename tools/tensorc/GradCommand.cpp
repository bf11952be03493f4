// tensorc grad FILE: the joint forward+backward graph of a model.
#include "tools/tensorc/Commands.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include <iostream>

namespace tensorc::cli {

namespace {
struct GradArgs {
  std::string file, output = "-", emit = "mlir";
  std::vector<std::string> wrt, of;
};
} // namespace

void addGradCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("grad", "Derive the joint forward+backward graph (reverse-mode autodiff)");
  auto args = std::make_shared<GradArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--wrt", args->wrt, "inputs to differentiate with respect to (default: the trainable ones)")
      ->delimiter(',');
  cmd->add_option("--of", args->of,
                  "outputs to differentiate (default: the only scalar float output, else all float outputs); "
                  "a scalar is seeded with 1, others get a cotangent input")
      ->delimiter(',');
  cmd->add_option("--emit", args->emit, "mlir (tc IR) or json (a graph file)")->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option("-o,--output", args->output, "output path, - for stdout (the default)");
  cmd->callback([args] {
    std::unique_ptr<Model> model = loadModel(args->file);
    autodiff::AutodiffOptions options;
    options.wrt = args->wrt;
    options.of = args->of;
    autodiff::JointGraph joint;
    try {
      joint = autodiff::buildJointGraph(model->graph, options);
    } catch (const Error &e) {
      fail(args->file + ": " + e.what());
    }
    std::string text;
    if (args->emit == "json") {
      text = writeGraphJson(joint.graph);
    } else {
      GraphAnalysis analysis = analyzeGraph(joint.graph, args->file);
      text = printModule(*importGraph(*model->context, joint.graph, analysis, args->file));
    }
    writeOutputFile(args->output, text);
  });
}

} // namespace tensorc::cli
