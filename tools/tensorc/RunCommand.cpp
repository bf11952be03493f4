// tensorc run FILE: runs a graph file or .mlir module on the reference
// interpreter (or, with --target cpu, compiled in memory), or a compiled
// artifact (.tcx) through the runtime library; --bench times repeated runs.
#include "tools/tensorc/Commands.h"
#include "tools/tensorc/RunArtifact.h"

#include "codegen/cpu/CpuProgram.h"
#include "compiler/driver/Model.h"
#include "compiler/driver/RunPipeline.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"
#include "compiler/transforms/BackendPipelines.h"
#include "passes/Pipelines.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/host/Npy.h"
#include "tensorc/Runtime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

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
std::string compileForCpu(Model &model, const std::string &file) {
  mlir::PassManager pm(model.context.get());
  buildCpuPipeline(pm, PipelineOptions{});
  runPipeline(pm, *model.module, file);
  codegen::cpu::CpuCompileOptions options;
  try {
    artifact::Artifact art = codegen::cpu::compileCpuArtifact(*model.module, options);
    art.tensorcVersion = TENSORC_VERSION;
    return artifact::serialize(art);
  } catch (const Error &e) {
    fail(file + ": " + e.what());
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
  cmd->callback([args] {
    if (isArtifactFile(args->file)) {
      check(args->target.empty(), "--target does not apply to an artifact: it runs on its own target");
      runArtifact(*args);
      return;
    }
    check(!args->target.empty() || (args->bench == 0 && args->threads == 0 && args->variant < 0),
          "--bench, --threads and --variant need a compiled model (a .tcx artifact or --target cpu)");
    std::unique_ptr<Model> model = loadModel(args->file);
    std::vector<std::pair<std::string, DType>> declared;
    for (const GraphInput &i : model->graph.inputs)
      declared.emplace_back(i.name, i.spec.dtype);
    std::map<std::string, HostTensor> inputs =
        completeInputs(model->graph, model->analysis, readGivenInputs(*args, declared), args->seed,
                       parseDimAssignments(args->dims));
    InterpreterResult result;
    if (!args->target.empty()) {
      std::shared_ptr<runtime::Executable> exe;
      runtime::LoadOptions load;
      load.threads = args->threads;
      try {
        exe = runtime::Executable::loadFromMemory(compileForCpu(*model, args->file), args->file, load);
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
    printOutputs(model->graph.outputs, result.outputs, result.bindings, *args);
  });
}

} // namespace tensorc::cli
