// tensorc grad FILE: the joint forward+backward graph of a model.
#include "tools/tensorc/Commands.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/Partition.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/transforms/RecognizeAttention.h"
#include "ir/core/Error.h"

#include <cstdlib>
#include <iostream>

namespace tensorc::cli {

using autodiff::partitionJointGraph;
using autodiff::PartitionOptions;
using autodiff::partitionReport;
using autodiff::PartitionResult;

namespace {
struct GradArgs {
  std::string file, output = "-", emit = "mlir";
  std::vector<std::string> wrt, of, dims;
  bool partition = false, report = false, saveAll = false;
  std::optional<int64_t> budget;
};

} // namespace

void addGradCommand(CLI::App &app) {
  auto *cmd =
      app.add_subcommand("grad", "Derive the joint forward+backward graph (reverse-mode autodiff)");
  auto args = std::make_shared<GradArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--wrt", args->wrt,
                  "inputs to differentiate with respect to (default: the trainable ones)")
      ->delimiter(',');
  cmd->add_option("--of", args->of,
                  "outputs to differentiate (default: the only scalar float output, else all float "
                  "outputs); "
                  "a scalar is seeded with 1, others get a cotangent input")
      ->delimiter(',');
  cmd->add_option("--emit", args->emit, "mlir (tc IR) or json (a graph file)")
      ->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option(
      "-o,--output", args->output,
      "output path, - for stdout (the default); with --partition, a prefix for PREFIX.forward.EXT "
      "and PREFIX.backward.EXT");
  cmd->add_flag("--partition", args->partition,
                "split into forward and backward graphs with a min-cut choice of saved tensors");
  cmd->add_option("--memory-budget", args->budget,
                  "with --partition: saved bytes allowed (at --dim sizes); recomputes more to fit");
  cmd->add_flag("--save-all", args->saveAll,
                "with --partition: save every value the backward reads, recompute nothing");
  cmd->add_option("--dim", args->dims,
                  "SYMBOL=SIZE used to measure bytes and FLOPs (default: min(bound, 64))");
  cmd->add_flag("--report", args->report,
                "with --partition: print the saved tensors, bytes and recompute FLOPs");
  cmd->callback([args] {
    noteInputFile(args->file);
    std::unique_ptr<Model> model = loadModel(args->file);
    autodiff::AutodiffOptions options;
    options.wrt = args->wrt;
    options.of = args->of;
    options.separateBackward = args->partition;
    autodiff::JointGraph joint;
    try {
      // Hand-written attention becomes one op first, so its backward is
      // attention's (docs/fusion.md).
      model->graph = transforms::recognizeAttention(model->graph);
      model->analysis = analyzeGraph(model->graph, args->file);
      joint = autodiff::buildJointGraph(model->graph, options);
    } catch (const Error &e) {
      fail(args->file + ": " + e.what());
    }
    auto render = [&](const Graph &g) {
      if (args->emit == "json")
        return writeGraphJson(g);
      GraphAnalysis analysis = analyzeGraph(g, args->file);
      return printModule(*importGraph(*model->context, g, analysis, args->file));
    };
    if (!args->partition) {
      check(!args->report && !args->budget && !args->saveAll,
            "--report, --memory-budget and --save-all need --partition");
      writeOutputFile(args->output, render(joint.graph));
      return;
    }
    PartitionOptions options2;
    options2.memoryBudget = args->budget;
    options2.saveAll = args->saveAll;
    options2.dims = parseDimAssignments(args->dims);
    PartitionResult parts;
    try {
      parts = partitionJointGraph(model->graph, joint, options2);
    } catch (const Error &e) {
      fail(args->file + ": " + e.what());
    }
    std::string forward = render(parts.forward), backward = render(parts.backward);
    if (args->report)
      std::cout << partitionReport(parts);
    if (args->output == "-") {
      if (!args->report)
        std::cout << forward << backward;
    } else {
      std::string ext = args->emit == "json" ? ".json" : ".mlir";
      writeOutputFile(args->output + ".forward" + ext, forward);
      writeOutputFile(args->output + ".backward" + ext, backward);
    }
  });
}

} // namespace tensorc::cli
