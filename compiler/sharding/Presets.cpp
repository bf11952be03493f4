#include "compiler/sharding/Presets.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <set>

namespace tensorc::sharding {

namespace {

// The trainable input that `name` is the state or gradient of ("w1" for
// "w1.exp_avg", "w1.grad", "grad_w1"), or "".
std::string ownerParameter(const std::set<std::string> &parameters, const std::string &name) {
  if (name.rfind("grad_", 0) == 0 && parameters.count(name.substr(5)))
    return name.substr(5);
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    if (parameters.count(name.substr(0, dot)))
      return name.substr(0, dot);
  return "";
}

} // namespace

void applyPreset(Graph &g, const std::string &preset) {
  check(preset == "ddp" || preset == "fsdp",
        "unknown sharding preset \"" + preset + "\" (expected ddp or fsdp)");
  check(g.meshes.size() == 1, "--preset " + preset + " needs exactly one mesh (--mesh data=N)");
  const Mesh &mesh = g.meshes[0];
  auto axis = std::find(mesh.axes.begin(), mesh.axes.end(), "data");
  check(axis != mesh.axes.end(), "--preset " + preset + " splits over a mesh axis named \"data\"; mesh \"" +
                                     mesh.name + "\" has none");
  int64_t parts = mesh.sizes[size_t(axis - mesh.axes.begin())];
  // A plain symbol (a batch B) splits: each device then has B rows.
  auto firstDimSplits = [&](const TensorSpec &spec) {
    return spec.rank() >= 1 &&
           (spec.shape[0].dividedBy(Dim::of(parts)).has_value() || spec.shape[0].isPlainSymbol());
  };
  auto splitFirst = [&](int64_t rank) {
    Sharding s{mesh.name, std::vector<std::vector<std::string>>(size_t(rank))};
    s.dims[0] = {"data"};
    return s;
  };
  std::set<std::string> parameters;
  for (const GraphInput &in : g.inputs)
    if (in.trainable)
      parameters.insert(in.name);
  std::set<std::string> splitParameters;
  for (GraphInput &in : g.inputs) {
    if (in.sharding)
      continue;
    bool isData = !in.trainable && ownerParameter(parameters, in.name).empty();
    bool isParameterOrState = !isData;
    if ((isData || (preset == "fsdp" && isParameterOrState)) && firstDimSplits(in.spec)) {
      in.sharding = splitFirst(in.spec.rank());
      if (in.trainable)
        splitParameters.insert(in.name);
    }
  }
  if (preset != "fsdp")
    return;
  // A joint graph's gradient outputs lie like their parameters.
  for (Node &n : g.nodes) {
    std::string owner = ownerParameter(parameters, n.name);
    if (n.sharding || owner.empty() || !splitParameters.count(owner))
      continue;
    for (const GraphInput &in : g.inputs)
      if (in.name == owner && std::find(g.outputs.begin(), g.outputs.end(), n.name) != g.outputs.end())
        n.sharding = splitFirst(in.spec.rank());
  }
}

} // namespace tensorc::sharding
