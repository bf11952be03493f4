// `tensorc run` for compiled artifacts, MLIR-free: shared by the full
// tensorc and the runtime-only tensorc of the GPU deployment bundle
// (tools/tensorc-run), which links only the runtime library.
#pragma once

#include "runtime/host/HostTensor.h"
#include "tensorc/Runtime.h"

#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tensorc::cli {

struct RunArgs {
  std::string file, outputDir;
  std::vector<std::string> inputs, dims, weights;
  std::string target;
  uint64_t seed = 0;
  int showValues = 6;
  int bench = 0;
  unsigned threads = 0;
  int variant = -1;
  std::string expectSha256;
  std::string mode; // "": the artifact's
  std::string autotune, tuneDb;
};

// The options every `run` takes (FILE, --input, --weights, --dim, --seed, --output-dir,
// --show, --bench, --threads, --variant, --expect-sha256, --mode,
// --autotune, --tune-db).
void addRunOptions(CLI::App &cmd, RunArgs &args);

// Whether `path` starts with the artifact magic.
bool isArtifactFile(const std::string &path);

// --input NAME=PATH.npy options read with the declared dtypes, then every
// declared input not given there that a --weights FILE.safetensors has
// (the first file that has it); throws Error for unknown or repeated
// names and for a weights tensor of another dtype.
std::map<std::string, HostTensor>
readGivenInputs(const RunArgs &args, const std::vector<std::pair<std::string, DType>> &declared);

// Runs `exe` on `inputs` (by name); with bench > 0 also times `bench` runs
// after warm-up and prints the median and spread (and, for GPU artifacts,
// the device time of the launch sequence from CUDA events). A run-time
// error exits naming `device` (one device of an SPMD run) when it is >= 0.
std::vector<HostTensor> runExecutable(const std::shared_ptr<runtime::Executable> &exe,
                                      std::map<std::string, HostTensor> &inputs, int bench,
                                      std::map<std::string, int64_t> &bindings, int64_t device = -1);

// Prints bindings and each output (shape, dtype, first values, mean,
// checksum); with --output-dir writes OUTPUT.npy files.
void printOutputs(const std::vector<std::string> &names, const std::vector<HostTensor> &outputs,
                  const std::map<std::string, int64_t> &bindings, const RunArgs &args);

// The whole `tensorc run MODEL.tcx` command.
void runArtifact(const RunArgs &args);

// Parses and runs a tensorc command line; errors become one "tensorc: ..."
// line on stderr and exit status 1 (2 for internal errors). Both CLIs' main.
int runCommandLine(CLI::App &app, int argc, char **argv);

} // namespace tensorc::cli
