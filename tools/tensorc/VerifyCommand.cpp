// tensorc verify FILE: parse, verify, infer; print the typed signature.
#include "tools/tensorc/Commands.h"

#include "compiler/driver/Model.h"

#include <iostream>

namespace tensorc::cli {

void addVerifyCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("verify", "Parse and verify a graph file or .mlir module and "
                                           "print its typed signature");
  auto file = std::make_shared<std::string>();
  cmd->add_option("FILE", *file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->callback([file] {
    noteInputFile(*file);
    std::unique_ptr<Model> model = loadModel(*file);
    const Graph &g = model->graph;
    std::cout << "graph " << g.name << ": " << g.inputs.size() << " inputs, " << g.nodes.size()
              << " nodes, " << g.outputs.size() << " outputs\n";
    for (const auto &[symbol, bound] : g.dims)
      std::cout << "  dim " << symbol << " in [" << bound.min << ", "
                << (bound.max ? std::to_string(*bound.max) : "inf") << "]\n";
    for (const GraphInput &in : g.inputs)
      std::cout << "  input  " << in.name << ": " << in.spec.str()
                << (in.trainable ? "  trainable" : "") << "\n";
    for (size_t i = 0; i < g.outputs.size(); ++i)
      std::cout << "  output " << g.outputs[i] << ": " << model->analysis.outputs[i].str() << "\n";
  });
}

} // namespace tensorc::cli
