// tensorc: the command-line driver.
#include "tools/tensorc/Commands.h"
#include "tools/tensorc/Launch.h"
#include "tools/tensorc/RunArtifact.h"

#include "compiler/graph/Graph.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace tensorc::cli {

void writeOutputFile(const std::string &path, const std::string &text) {
  if (path == "-")
    std::cout << text;
  else
    writeFileAtomically(path, text);
}

} // namespace tensorc::cli

int main(int argc, char **argv) {
  CLI::App app{"tensorc: a compiler for deep-learning graphs"};
  app.set_version_flag("--version", std::string("tensorc 0.1.0 (graph format ") +
                                        std::to_string(tensorc::kGraphFormatVersion) +
                                        ", LLVM/MLIR 19)");
  app.require_subcommand(1);
  tensorc::cli::addVerifyCommand(app);
  tensorc::cli::addCompileCommand(app);
  tensorc::cli::addGradCommand(app);
  tensorc::cli::addShardCommand(app);
  tensorc::cli::addLaunchCommand(app);
  tensorc::cli::addRunCommand(app);
  tensorc::cli::addOpsCommand(app);
  bool knownCommand = false;
  for (const CLI::App *sub : app.get_subcommands({}))
    knownCommand |= argc > 1 && sub->get_name() == argv[1];
  if (argc > 1 && argv[1][0] != '-' && !knownCommand) {
    std::cerr << "tensorc: unknown command '" << argv[1]
              << "' (expected verify, compile, grad, shard, run, launch or ops; see tensorc --help)\n";
    return 1;
  }
  return tensorc::cli::runCommandLine(app, argc, argv);
}
