// tensorc: the command-line driver.
#include "tools/tensorc/Commands.h"
#include "tools/tensorc/Launch.h"
#include "tools/tensorc/RunArtifact.h"

#include "compiler/graph/Graph.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/ReadFile.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc::cli {

namespace {

// The files this run read, by device and inode (a path spelled another
// way, or a link to it, is the same file).
std::vector<std::pair<std::string, std::pair<dev_t, ino_t>>> &inputFiles() {
  static std::vector<std::pair<std::string, std::pair<dev_t, ino_t>>> files;
  return files;
}

} // namespace

void noteInputFile(const std::string &path) {
  // A FIFO or device named as the input would block the read or never end.
  if (std::string problem = fileKindProblem(path); !problem.empty())
    fail(path + ": " + problem);
  struct stat st;
  if (path != "-" && ::stat(path.c_str(), &st) == 0)
    inputFiles().push_back({path, {st.st_dev, st.st_ino}});
}

void writeOutputFile(const std::string &path, const std::string &text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0)
    for (const auto &[input, id] : inputFiles())
      check(id != std::make_pair(st.st_dev, st.st_ino),
            path + ": the output would replace the input " + input + "; give another output path (-o)");
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
