// The runtime-only tensorc of the GPU deployment bundle: `tensorc run
// MODEL.tcx` through the runtime library alone (no MLIR/LLVM; the bundle's
// bin/tensorc). Compiling needs the full tensorc.
#include "ir/core/Error.h"
#include "tools/tensorc/Launch.h"
#include "tools/tensorc/RunArtifact.h"
#include "runtime/host/ReadFile.h"

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"tensorc (runtime-only build): runs compiled models (.tcx)"};
  app.set_version_flag("--version", "tensorc " TENSORC_VERSION " (runtime only)");
  app.require_subcommand(1);
  auto *cmd = app.add_subcommand("run", "Run a compiled model (.tcx)");
  tensorc::cli::RunArgs args;
  tensorc::cli::addRunOptions(*cmd, args);
  cmd->callback([&] {
    if (std::string problem = tensorc::fileKindProblem(args.file); !problem.empty())
      tensorc::fail(args.file + ": " + problem);
    tensorc::check(tensorc::cli::isArtifactFile(args.file),
                   args.file + ": not a compiled model (.tcx); this runtime-only tensorc runs "
                               "artifacts; compile graph files with the full tensorc");
    tensorc::cli::runArtifact(args);
  });
  tensorc::cli::addLaunchCommand(app);
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "run" && std::string(argv[1]) != "launch") {
    std::cerr << "tensorc: '" << argv[1]
              << "' is not available in this runtime-only build (deployment bundle): only "
                 "`tensorc run MODEL.tcx` and `tensorc launch`; use the full tensorc to compile\n";
    return 1;
  }
  return tensorc::cli::runCommandLine(app, argc, argv);
}
