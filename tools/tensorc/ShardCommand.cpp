// tensorc shard FILE: the per-device (SPMD) program of a global graph under
// a sharding: a preset (ddp, fsdp) and/or --shard annotations, propagated
// to every value, the communication made explicit as collectives
// (docs/sharding.md).
#include "tools/tensorc/Commands.h"

#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/sharding/Presets.h"
#include "compiler/sharding/SpmdPartition.h"
#include "ir/core/Error.h"

#include <cstdio>
#include <iostream>

namespace tensorc::cli {

namespace {

struct ShardArgs {
  std::string file, output = "-", emit = "json", mesh, preset;
  std::vector<std::string> shardings;
  bool report = false;
};

int64_t parseSize(const std::string &text, const std::string &what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  check(used == text.size() && !text.empty(), what + ": \"" + text + "\" is not an integer");
  return v;
}

// "data=2,model=4"
Mesh parseMesh(const std::string &text) {
  Mesh m{"mesh", {}, {}};
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t eq = item.find('=');
    check(eq != std::string::npos && eq > 0, "--mesh: \"" + item + "\" is not AXIS=SIZE");
    m.axes.push_back(item.substr(0, eq));
    m.sizes.push_back(parseSize(item.substr(eq + 1), "--mesh " + item));
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  checkMesh(m);
  return m;
}

// "x=data,_" or "w=_,data+model": per dim, `_` or axes joined by `+`.
std::pair<std::string, sharding::DimAxes> parseSharding(const std::string &text) {
  size_t eq = text.find('=');
  check(eq != std::string::npos && eq > 0,
        "--shard: \"" + text + "\" is not NAME=DIMS (e.g. x=data,_ or w=_,data+model)");
  std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
  sharding::DimAxes out;
  if (dims.empty())
    return {name, out}; // a scalar
  size_t start = 0;
  while (true) {
    size_t end = dims.find(',', start);
    std::string dim = dims.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::vector<std::string> axes;
    if (dim != "_") {
      size_t s = 0;
      while (true) {
        size_t plus = dim.find('+', s);
        std::string axis = dim.substr(s, plus == std::string::npos ? std::string::npos : plus - s);
        check(!axis.empty(), "--shard " + text + ": an empty axis name");
        axes.push_back(axis);
        if (plus == std::string::npos)
          break;
        s = plus + 1;
      }
    }
    out.push_back(axes);
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return {name, out};
}

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
                  "state and gradients too")
      ->check(CLI::IsMember({"ddp", "fsdp"}));
  cmd->add_option("--shard", args->shardings,
                  "NAME=DIMS for an input or node: per dim `_` or mesh axes joined by + "
                  "(x=data,_  w1=_,model); repeatable, wins over the preset");
  cmd->add_option("--emit", args->emit, "json (a graph file, the default) or mlir")
      ->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option("-o,--output", args->output, "output path, - for stdout (the default)");
  cmd->add_flag("--report", args->report,
                "print every value's place in the communication: collective, value, bytes per device");
  cmd->callback([args] {
    std::unique_ptr<Model> model = loadModel(args->file);
    Graph g = model->graph;
    sharding::SpmdProgram spmd;
    try {
      if (!args->mesh.empty()) {
        Mesh mesh = parseMesh(args->mesh);
        check(g.meshes.empty() || (g.meshes.size() == 1 && g.meshes[0].axes == mesh.axes &&
                                   g.meshes[0].sizes == mesh.sizes),
              "--mesh differs from the mesh the graph declares");
        if (g.meshes.empty())
          g.meshes = {mesh};
      }
      check(g.meshes.size() == 1, "the graph declares " + std::to_string(g.meshes.size()) +
                                      " meshes; give one with --mesh AXIS=SIZE,...");
      for (const std::string &text : args->shardings) {
        auto [name, dims] = parseSharding(text);
        bool found = false;
        for (GraphInput &in : g.inputs)
          if (in.name == name) {
            in.sharding = Sharding{g.meshes[0].name, dims};
            found = true;
          }
        for (Node &n : g.nodes)
          if (n.name == name) {
            n.sharding = Sharding{g.meshes[0].name, dims};
            found = true;
          }
        check(found, "--shard " + text + ": the graph has no input or node named \"" + name + "\"");
      }
      if (!args->preset.empty())
        sharding::applyPreset(g, args->preset);
      GraphAnalysis analysis = analyzeGraph(g, args->file);
      sharding::ShardingPlan plan = sharding::propagateShardings(g, analysis);
      spmd = sharding::partitionSpmd(g, analysis, plan);
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
      for (size_t i = 0; i < g.outputs.size(); ++i)
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
