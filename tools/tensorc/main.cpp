// tensorc: the command-line driver.
#include "tools/tensorc/Commands.h"

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

std::map<std::string, int64_t> parseDimAssignments(const std::vector<std::string> &assignments) {
  std::map<std::string, int64_t> dims;
  for (const std::string &s : assignments) {
    size_t eq = s.find('=');
    check(eq != std::string::npos && eq > 0 && eq + 1 < s.size(),
          "--dim \"" + s + "\" must look like SYMBOL=SIZE");
    char *end = nullptr;
    long long v = std::strtoll(s.c_str() + eq + 1, &end, 10);
    check(*end == '\0' && v >= 1 && v <= (1ll << 40),
          "--dim " + s + ": the size must be a positive integer");
    dims[s.substr(0, eq)] = v;
  }
  return dims;
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
  tensorc::cli::addRunCommand(app);
  tensorc::cli::addOpsCommand(app);
  bool knownCommand = false;
  for (const CLI::App *sub : app.get_subcommands({}))
    knownCommand |= argc > 1 && sub->get_name() == argv[1];
  if (argc > 1 && argv[1][0] != '-' && !knownCommand) {
    std::cerr << "tensorc: unknown command '" << argv[1]
              << "' (expected verify, compile, grad, run or ops; see tensorc --help)\n";
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  } catch (const tensorc::Error &e) {
    std::cerr << "tensorc: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "tensorc: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
