// tensorc run FILE: runs a model on the reference interpreter.
#include "tools/tensorc/Commands.h"

#include "compiler/driver/Model.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"
#include "runtime/host/Npy.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace tensorc::cli {

namespace {

struct RunArgs {
  std::string file, outputDir;
  std::vector<std::string> inputs, dims;
  uint64_t seed = 0;
  int showValues = 6;
};

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
      app.add_subcommand("run", "Run a graph file or .mlir module on the reference interpreter");
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
  cmd->callback([args] {
    std::unique_ptr<Model> model = loadModel(args->file);
    const Graph &g = model->graph;
    std::map<std::string, HostTensor> given;
    for (const std::string &s : args->inputs) {
      auto [name, path] = splitAssignment(s, "--input");
      const GraphInput *in = nullptr;
      for (const GraphInput &i : g.inputs)
        if (i.name == name)
          in = &i;
      check(in != nullptr, "--input " + name + ": the graph has no input named \"" + name + "\"");
      check(!given.count(name), "--input " + name + " is given twice");
      given.emplace(name, readNpy(path, in->spec.dtype));
    }
    std::map<std::string, int64_t> dims = parseDimAssignments(args->dims);
    std::map<std::string, HostTensor> inputs =
        completeInputs(g, model->analysis, given, args->seed, dims);
    InterpreterResult result;
    try {
      result = interpret(g, model->analysis, inputs);
    } catch (const Error &e) {
      fail(args->file + ": " + e.what());
    }
    if (!args->outputDir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(args->outputDir, ec);
      check(!ec, args->outputDir + ": cannot create the directory: " + ec.message());
    }
    for (const auto &[symbol, value] : result.bindings)
      std::cout << symbol << " = " << value << "\n";
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const HostTensor &t = result.outputs[i];
      std::cout << g.outputs[i] << ": " << t.shapeStr() << " " << dtypeName(t.dtype()) << " [";
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
        writeNpy((std::filesystem::path(args->outputDir) / fileNameFor(g.outputs[i])).string(), t);
    }
  });
}

} // namespace tensorc::cli
