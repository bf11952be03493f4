// tensorc shard FILE: the per-device (SPMD) program of a global graph under
// a sharding: a preset (ddp, fsdp) and/or --shard annotations, propagated
// to every value, the communication made explicit as collectives
// (docs/sharding.md).
#include "tools/tensorc/Commands.h"
#include "compiler/driver/ShardOptions.h"

#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/sharding/SpmdPartition.h"
#include "ir/core/Error.h"

#include <cstdio>
#include <iostream>

namespace tensorc::cli {

namespace {

struct ShardArgs {
  std::string file, output = "-", emit = "json", mesh, preset;
  std::vector<std::string> shardings;
  bool report = false, noRunChecks = false;
};

std::string bytesStr(int64_t bytes) {
  if (bytes < 0)
    return "symbolic size";
  char buf[64];
  if (bytes >= (int64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

} // namespace

void addShardCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand(
      "shard", "Partition a global graph into the program each device runs (SPMD), with collectives");
  auto args = std::make_shared<ShardArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--mesh", args->mesh,
                  "the device mesh, AXIS=SIZE,... (e.g. data=2,model=2); default: the graph's one mesh");
  cmd->add_option("--preset", args->preset,
                  "ddp: data inputs split along dim 0 over `data`; fsdp: parameters, optimizer "
                  "state and gradients too; tp: Megatron pairs of linear layers over `model`; "
                  "tp-head-blocked: tp, and fused QKV projections by heads (their weights in head-blocked "
                  "column order)")
      ->check(CLI::IsMember({"ddp", "fsdp", "tp", "tp-head-blocked"}));
  cmd->add_option("--shard", args->shardings,
                  "NAME=DIMS for an input or node: per dim `_` or mesh axes joined by + "
                  "(x=data,_  w1=_,model), or a preset (ddp, fsdp, tp, tp-head-blocked); repeatable; annotations win "
                  "over presets");
  cmd->add_flag("--no-run-checks", args->noRunChecks,
                "leave out the run-time checks of indices (cross-entropy targets, embedding and gather "
                "indices), which the global program gets before partitioning");
  cmd->add_option("--emit", args->emit, "json (a graph file, the default) or mlir")
      ->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option("-o,--output", args->output, "output path, - for stdout (the default)");
  cmd->add_flag("--report", args->report,
                "print every value's place in the communication: collective, value, bytes per device");
  cmd->callback([args] {
    noteInputFile(args->file);
    std::unique_ptr<Model> model = loadModel(args->file);
    Graph g = model->graph;
    sharding::SpmdProgram spmd;
    try {
      std::vector<std::string> presets, annotations;
      if (!args->preset.empty())
        presets.push_back(args->preset);
      for (const std::string &s : args->shardings)
        (s.find('=') == std::string::npos ? presets : annotations).push_back(s);
      spmd = driver::partitionWithOptions(g, args->mesh, presets, annotations, !args->noRunChecks);
    } catch (const Error &e) {
      fail(args->file + ": " + e.what());
    }
    std::string text;
    if (args->emit == "json") {
      text = writeGraphJson(spmd.local);
    } else {
      GraphAnalysis analysis = analyzeGraph(spmd.local, args->file);
      text = printModule(*importGraph(*model->context, spmd.local, analysis, args->file));
    }
    if (args->report) {
      const Mesh &mesh = spmd.local.meshes[0];
      std::cout << "sharding of " << g.name << " over mesh \"" << mesh.name << "\" (";
      for (size_t i = 0; i < mesh.axes.size(); ++i)
        std::cout << (i ? ", " : "") << mesh.axes[i] << "=" << mesh.sizes[i];
      std::cout << "):\n";
      for (size_t i = 0; i < g.inputs.size(); ++i)
        std::cout << "  input " << g.inputs[i].name << " " << sharding::dimAxesStr(spmd.inputShardings[i])
                  << "\n";
      for (size_t i = 0; i < g.resultCount(); ++i)
        std::cout << "  output " << g.outputs[i] << " " << sharding::dimAxesStr(spmd.outputShardings[i])
                  << "\n";
      int64_t total = 0;
      bool symbolic = false;
      for (const sharding::Communication &c : spmd.communication) {
        std::cout << "  " << c.node << ": " << c.value << ": " << c.collective << ", "
                  << bytesStr(c.bytes) << "\n";
        symbolic |= c.bytes < 0;
        total += std::max<int64_t>(c.bytes, 0);
      }
      std::cout << "communication per step: " << spmd.communication.size() << " collectives, "
                << bytesStr(total) << " per device" << (symbolic ? " (plus symbolic sizes)" : "")
                << "\n";
    }
    if (args->output == "-") {
      if (!args->report)
        std::cout << text;
    } else {
      writeOutputFile(args->output, text);
    }
  });
}

} // namespace tensorc::cli
