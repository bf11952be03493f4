// tensorc run FILE: runs a graph file or .mlir module on the reference
// interpreter (or, with --target cpu, compiled in memory), or a compiled
// artifact (.tcx) through the runtime library; --bench times repeated runs.
#include "tools/tensorc/Commands.h"

#include "codegen/cpu/CpuProgram.h"
#include "compiler/driver/Model.h"
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

struct RunArgs {
  std::string file, outputDir;
  std::vector<std::string> inputs, dims;
  std::string target;
  uint64_t seed = 0;
  int showValues = 6;
  int bench = 0;
  unsigned threads = 0;
};

bool isArtifactFile(const std::string &path) {
  char magic[8] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(magic, 8);
  return in.gcount() == 8 && std::memcmp(magic, artifact::kMagic, 8) == 0;
}

// Graph-file semantics for a compiled artifact's inputs: the same seeds and
// streams as the interpreter path, so both see identical inputs.
std::map<std::string, HostTensor> artifactInputs(const runtime::Executable &exe,
                                                 std::map<std::string, HostTensor> given,
                                                 uint64_t seed,
                                                 const std::map<std::string, int64_t> &dims) {
  Graph g;
  for (const runtime::SymbolInfo &s : exe.symbols())
    g.dims[s.name] = DimBound{s.min, s.max < 0 ? std::nullopt : std::optional<int64_t>(s.max)};
  for (const runtime::TensorInfo &t : exe.inputs()) {
    Shape shape;
    for (const std::string &d : t.shape)
      shape.push_back(*Dim::parse(d));
    g.inputs.push_back({t.name, {DType(int(t.dtype)), shape}, false, std::nullopt});
  }
  return completeSignatureInputs(g, std::move(given), seed, dims);
}

runtime::TensorView viewOf(HostTensor &t) {
  return {runtime::ElementType(int(t.dtype())), t.shape(), t.data()};
}

// Compiles a model for the CPU in memory (the `tensorc compile --target cpu` path).
std::string compileForCpu(Model &model, const std::string &file) {
  mlir::PassManager pm(model.context.get());
  buildCpuPipeline(pm, PipelineOptions{});
  std::string message;
  mlir::ScopedDiagnosticHandler handler(model.context.get(), [&](mlir::Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return mlir::success();
  });
  check(mlir::succeeded(pm.run(*model.module)),
        file + ": the compile pipeline failed" + (message.empty() ? "" : ": " + message));
  codegen::cpu::CpuCompileOptions options;
  try {
    artifact::Artifact art = codegen::cpu::compileCpuArtifact(*model.module, options);
    art.tensorcVersion = TENSORC_VERSION;
    return artifact::serialize(art);
  } catch (const Error &e) {
    fail(file + ": " + e.what());
  }
}

// Runs `exe` on `inputs` (in its input order); with bench > 0 also times
// `bench` runs after warm-up and prints the median and spread.
std::vector<HostTensor> runExecutable(const std::shared_ptr<runtime::Executable> &exe,
                                      std::map<std::string, HostTensor> &inputs, int bench,
                                      std::map<std::string, int64_t> &bindings) {
  runtime::Session session(exe);
  std::vector<runtime::TensorView> in;
  for (const runtime::TensorInfo &i : exe->inputs())
    in.push_back(viewOf(inputs.at(i.name)));
  std::vector<HostTensor> out;
  std::vector<runtime::TensorView> outViews;
  try {
    std::vector<std::vector<int64_t>> shapes = session.outputShapes(in);
    for (size_t i = 0; i < shapes.size(); ++i)
      out.emplace_back(DType(int(exe->outputs()[i].dtype)), shapes[i]);
    for (HostTensor &t : out)
      outViews.push_back(viewOf(t));
    session.run(in, outViews);
    if (bench > 0) {
      int warmup = std::clamp(bench / 10, 1, 10);
      for (int i = 0; i < warmup; ++i)
        session.run(in, outViews);
      std::vector<double> ms;
      for (int i = 0; i < bench; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        session.run(in, outViews);
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      auto pct = [&](double p) { return ms[size_t(p * double(ms.size() - 1) + 0.5)]; };
      std::printf("bench: %d runs after %d warm-up: median %.4f ms (min %.4f, p10 %.4f, p90 "
                  "%.4f, max %.4f); arena %lld bytes\n",
                  bench, warmup, pct(0.5), ms.front(), pct(0.1), pct(0.9), ms.back(),
                  (long long)session.arenaBytes());
    }
  } catch (const runtime::Error &e) {
    fail(e.what());
  }
  bindings = session.bindings();
  return out;
}

std::pair<std::string, std::string> splitAssignment(const std::string &s, const char *what) {
  size_t eq = s.find('=');
  check(eq != std::string::npos && eq > 0 && eq + 1 < s.size(),
        std::string(what) + " \"" + s + "\" must look like NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

uint64_t checksum(const HostTensor &t) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (size_t i = 0; i < t.nbytes(); ++i)
    h = (h ^ t.data()[i]) * 1099511628211ull;
  return h;
}

std::string formatValue(const HostTensor &t, int64_t i) {
  char buf[32];
  if (isFloat(t.dtype()))
    std::snprintf(buf, sizeof buf, "%.6g", t.getF(i));
  else
    std::snprintf(buf, sizeof buf, "%lld", (long long)t.getI(i));
  return buf;
}

// Output references such as "h:1" become file names such as "h_1.npy".
std::string fileNameFor(const std::string &ref) {
  std::string name = ref;
  for (char &c : name)
    if (c == ':' || c == '/' || c == '\\')
      c = '_';
  return name + ".npy";
}

} // namespace

void addRunCommand(CLI::App &app) {
  auto *cmd =
      app.add_subcommand("run", "Run a compiled model (.tcx), or a graph file or .mlir module on the reference interpreter");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--input", args->inputs,
                  "NAME=PATH.npy for an input (repeatable); missing inputs are drawn from --seed");
  cmd->add_option("--dim", args->dims,
                  "SYMBOL=SIZE for a symbolic dim of generated inputs (repeatable; default 4)");
  cmd->add_option("--seed", args->seed, "seed for generated inputs (default 0)");
  cmd->add_option("--output-dir", args->outputDir,
                  "write each output as OUTPUT.npy into this directory");
  cmd->add_option("--show", args->showValues, "values to print per output (default 6)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--target", args->target,
                  "cpu: compile a graph file or module for the CPU in memory and run that "
                  "(artifacts always run on their own target)")
      ->check(CLI::IsMember({"cpu"}));
  cmd->add_option("--bench", args->bench,
                  "compiled models: time N runs after warm-up, print the median and spread")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--threads", args->threads,
                  "compiled models: kernel threads (default: one per hardware thread)");
  cmd->callback([args] {
    bool compiled = isArtifactFile(args->file);
    check(compiled || !args->target.empty() || (args->bench == 0 && args->threads == 0),
          "--bench and --threads need a compiled model (a .tcx artifact or --target cpu)");
    std::unique_ptr<Model> model;
    std::shared_ptr<runtime::Executable> exe;
    runtime::LoadOptions load;
    load.threads = args->threads;
    try {
      if (compiled) {
        exe = runtime::Executable::load(args->file, load);
      } else {
        model = loadModel(args->file);
        if (!args->target.empty())
          exe = runtime::Executable::loadFromMemory(compileForCpu(*model, args->file), args->file,
                                                    load);
      }
    } catch (const runtime::Error &e) {
      fail(e.what());
    }
    // name -> dtype of every input, in order.
    std::vector<std::pair<std::string, DType>> declared;
    if (compiled)
      for (const runtime::TensorInfo &i : exe->inputs())
        declared.emplace_back(i.name, DType(int(i.dtype)));
    else
      for (const GraphInput &i : model->graph.inputs)
        declared.emplace_back(i.name, i.spec.dtype);
    std::map<std::string, HostTensor> given;
    for (const std::string &s : args->inputs) {
      auto [name, path] = splitAssignment(s, "--input");
      auto it = std::find_if(declared.begin(), declared.end(),
                             [&](const auto &d) { return d.first == name; });
      check(it != declared.end(),
            "--input " + name + ": the model has no input named \"" + name + "\"");
      check(!given.count(name), "--input " + name + " is given twice");
      given.emplace(name, readNpy(path, it->second));
    }
    std::map<std::string, int64_t> dims = parseDimAssignments(args->dims);
    std::map<std::string, HostTensor> inputs =
        compiled ? artifactInputs(*exe, given, args->seed, dims)
                 : completeInputs(model->graph, model->analysis, given, args->seed, dims);
    InterpreterResult result;
    std::vector<std::string> outputNames;
    if (exe) {
      result.outputs = runExecutable(exe, inputs, args->bench, result.bindings);
      for (const runtime::TensorInfo &o : exe->outputs())
        outputNames.push_back(o.name);
    } else {
      try {
        result = interpret(model->graph, model->analysis, inputs);
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
      outputNames = model->graph.outputs;
    }
    if (!args->outputDir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(args->outputDir, ec);
      check(!ec, args->outputDir + ": cannot create the directory: " + ec.message());
    }
    for (const auto &[symbol, value] : result.bindings)
      std::cout << symbol << " = " << value << "\n";
    for (size_t i = 0; i < outputNames.size(); ++i) {
      const HostTensor &t = result.outputs[i];
      std::cout << outputNames[i] << ": " << t.shapeStr() << " " << dtypeName(t.dtype()) << " [";
      int64_t shown = std::min<int64_t>(t.numel(), args->showValues);
      for (int64_t k = 0; k < shown; ++k)
        std::cout << (k ? ", " : "") << formatValue(t, k);
      std::cout << (t.numel() > shown ? ", ...]" : "]");
      if (isFloat(t.dtype()) && t.numel() > 0) {
        double sum = 0;
        for (int64_t k = 0; k < t.numel(); ++k)
          sum += t.getF(k);
        std::printf(" mean=%.6g", sum / double(t.numel()));
      }
      std::printf(" checksum=%016llx\n", (unsigned long long)checksum(t));
      if (!args->outputDir.empty())
        writeNpy((std::filesystem::path(args->outputDir) / fileNameFor(outputNames[i])).string(), t);
    }
  });
}

} // namespace tensorc::cli
