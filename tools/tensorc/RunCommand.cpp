// tensorc run FILE: runs a graph file or .mlir module on the reference
// interpreter (or, with --target cpu, compiled in memory), or a compiled
// artifact (.tcx) through the runtime library; --bench times repeated runs.
#include "tools/tensorc/Commands.h"
#include "tools/tensorc/RunArtifact.h"

#include "compiler/driver/Compile.h"
#include "compiler/driver/Model.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/host/Npy.h"
#include "tensorc/Runtime.h"


#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace tensorc::cli {

namespace {

// Compiles a model for the CPU in memory (the `tensorc compile --target cpu` path).
std::string compileForCpu(Model &model) {
  driver::CompileOptions options;
  options.target = driver::Target::Cpu;
  return artifact::serialize(*driver::compile(model, options).artifact);
}

// The outputs that are results, not run-time checks.
std::vector<std::string> resultNames(const Graph &graph) {
  return {graph.outputs.begin(), graph.outputs.begin() + std::ptrdiff_t(graph.resultCount())};
}

// `--devices N`: every device's inputs, the SPMD interpreter, then each
// device's outputs (under OUTPUT_DIR/deviceD with --output-dir).
void runSpmd(Model &model, const std::map<std::string, HostTensor> &given, const RunArgs &args,
             int64_t devices) {
  int64_t meshDevices = spmdDevices(model.graph);
  check(meshDevices == devices, args.file + ": --devices " + std::to_string(devices) +
                                    " but the graph's meshes have " + std::to_string(meshDevices) +
                                    " devices");
  std::vector<std::map<std::string, HostTensor>> inputs;
  checkDimSymbols(model.graph, parseDimAssignments(args.dims));
  for (int64_t d = 0; d < devices; ++d)
    inputs.push_back(completeInputs(model.graph, model.analysis, given, args.seed + uint64_t(d),
                                    parseDimAssignments(args.dims)));
  std::vector<InterpreterResult> results;
  try {
    results = interpretSpmd(model.graph, model.analysis, inputs);
  } catch (const Error &e) {
    fail(args.file + ": " + e.what());
  }
  for (int64_t d = 0; d < devices; ++d) {
    std::cout << "device " << d << ":\n";
    RunArgs perDevice = args;
    if (!args.outputDir.empty())
      perDevice.outputDir =
          (std::filesystem::path(args.outputDir) / ("device" + std::to_string(d))).string();
    printOutputs(resultNames(model.graph), results[size_t(d)].outputs, results[size_t(d)].bindings,
                 perDevice);
  }
}

} // namespace

void addRunCommand(CLI::App &app) {
  auto *cmd =
      app.add_subcommand("run", "Run a compiled model (.tcx), or a graph file or .mlir module on the reference interpreter");
  auto args = std::make_shared<RunArgs>();
  addRunOptions(*cmd, *args);
  cmd->add_option("--target", args->target,
                  "cpu: compile a graph file or module for the CPU in memory and run that "
                  "(artifacts always run on their own target)")
      ->check(CLI::IsMember({"cpu"}));
  auto devices = std::make_shared<int64_t>(1);
  cmd->add_option("--devices", *devices,
                  "run a graph that uses collectives as an SPMD program on N simulated devices "
                  "(the interpreter; N = its mesh's device count); inputs not given by --input "
                  "are drawn per device from --seed + device")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 12));
  cmd->callback([args, devices] {
    noteInputFile(args->file);
    if (isArtifactFile(args->file)) {
      check(args->target.empty(), "--target does not apply to an artifact: it runs on its own target");
      runArtifact(*args);
      return;
    }
    check(!args->target.empty() || (args->bench == 0 && args->threads == 0 && args->variant < 0),
          "--bench, --threads and --variant need a compiled model (a .tcx artifact or --target cpu)");
    check(*devices == 1 || args->target.empty(),
          "--devices runs the interpreter; it does not combine with --target");
    std::unique_ptr<Model> model = loadModel(args->file);
    std::vector<std::pair<std::string, DType>> declared;
    for (const GraphInput &i : model->graph.inputs)
      declared.emplace_back(i.name, i.spec.dtype);
    std::map<std::string, HostTensor> given = readGivenInputs(*args, declared);
    if (*devices > 1) {
      runSpmd(*model, given, *args, *devices);
      return;
    }
    checkDimSymbols(model->graph, parseDimAssignments(args->dims));
    std::map<std::string, HostTensor> inputs =
        completeInputs(model->graph, model->analysis, given, args->seed,
                       parseDimAssignments(args->dims));
    InterpreterResult result;
    if (!args->target.empty()) {
      std::shared_ptr<runtime::Executable> exe;
      runtime::LoadOptions load;
      load.threads = args->threads;
      try {
        exe = runtime::Executable::loadFromMemory(compileForCpu(*model), args->file, load);
      } catch (const runtime::Error &e) {
        fail(e.what());
      }
      result.outputs = runExecutable(exe, inputs, args->bench, result.bindings);
    } else {
      try {
        result = interpret(model->graph, model->analysis, inputs);
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
    }
    printOutputs(resultNames(model->graph), result.outputs, result.bindings, *args);
  });
}

} // namespace tensorc::cli
