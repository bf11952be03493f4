#include "compiler/driver/ShardOptions.h"

#include "compiler/sharding/Presets.h"
#include "compiler/sharding/Propagation.h"
#include "compiler/transforms/RunChecks.h"
#include "ir/core/Error.h"

#include <map>

namespace tensorc::driver {

namespace {

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

} // namespace

void applyShardOptions(Graph &g, const std::string &meshText, const std::vector<std::string> &presets,
                       const std::vector<std::string> &annotations) {
  if (!meshText.empty()) {
    Mesh mesh = parseMesh(meshText);
    check(g.meshes.empty() ||
              (g.meshes.size() == 1 && g.meshes[0].axes == mesh.axes && g.meshes[0].sizes == mesh.sizes),
          "--mesh differs from the mesh the graph declares");
    if (g.meshes.empty())
      g.meshes = {mesh};
  }
  check(g.meshes.size() == 1, "the graph declares " + std::to_string(g.meshes.size()) +
                                  " meshes; give one with --mesh AXIS=SIZE,...");
  std::map<std::string, std::string> annotated; // name -> its --shard
  for (const std::string &text : annotations) {
    auto [name, dims] = parseSharding(text);
    auto [earlier, fresh] = annotated.emplace(name, text);
    check(fresh, "--shard " + text + ": \"" + name + "\" is annotated twice (also --shard " + earlier->second + ")");
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
  for (const std::string &preset : presets)
    for (const std::string &note : sharding::applyPreset(g, preset))
      std::fprintf(stderr, "tensorc: --shard %s: %s\n", preset.c_str(), note.c_str());
}

sharding::SpmdProgram partitionWithOptions(Graph &graph, const std::string &mesh,
                                           const std::vector<std::string> &presets,
                                           const std::vector<std::string> &annotations, bool runChecks) {
  applyShardOptions(graph, mesh, presets, annotations);
  // Checked before partitioning: the global ops' index ranges (a target
  // outside the classes of a vocab-parallel cross-entropy is in no device's
  // block, and no local op could tell).
  // Errors name "sharding": the caller names the file.
  if (runChecks)
    graph = transforms::addRunChecks(graph, "sharding");
  GraphAnalysis analysis = analyzeGraph(graph, "sharding");
  return sharding::partitionSpmd(graph, analysis, sharding::propagateShardings(graph, analysis));
}

} // namespace tensorc::driver
