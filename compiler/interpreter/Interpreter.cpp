#include "compiler/interpreter/Interpreter.h"

#include "compiler/interpreter/Collectives.h"
#include "compiler/interpreter/Kernels.h"
#include "ir/core/Error.h"

namespace tensorc {

namespace interp {

static const KernelTable &kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    addElementwiseKernels(t);
    addReductionKernels(t);
    addLinalgKernels(t);
    addNNKernels(t);
    addShapeKernels(t);
    addCreationKernels(t);
    return t;
  }();
  return table;
}

} // namespace interp

bool interpreterSupports(const std::string &op) {
  const OpSchema *schema = findOpSchema(op);
  return interp::kernels().count(op) != 0 || (schema && schema->category == "collective");
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t p0 = uint64_t(kM0) * c[0], p1 = uint64_t(kM1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
  }
  return c;
}

std::vector<int64_t> concreteShape(const Shape &shape,
                                   const std::map<std::string, int64_t> &bindings) {
  std::vector<int64_t> out;
  for (const Dim &d : shape) {
    std::optional<int64_t> v = d.evaluate(bindings);
    if (!v) {
      std::string missing;
      for (const std::string &s : d.symbols())
        if (!bindings.count(s))
          missing = s;
      fail("symbol " + missing + " cannot be bound: no input has it as a plain dim");
    }
    out.push_back(*v);
  }
  return out;
}

static std::map<std::string, int64_t> bindSymbols(const Graph &g,
                                                  const std::map<std::string, HostTensor> &inputs) {
  std::map<std::string, int64_t> bindings;
  for (const GraphInput &in : g.inputs) {
    auto it = inputs.find(in.name);
    check(it != inputs.end(), "input \"" + in.name + "\" is missing");
    const HostTensor &t = it->second;
    check(t.dtype() == in.spec.dtype,
          "input \"" + in.name + "\" has dtype " + std::string(dtypeName(t.dtype())) +
              " but the graph expects " + std::string(dtypeName(in.spec.dtype)));
    check(t.rank() == in.spec.rank(), "input \"" + in.name + "\" has shape " + t.shapeStr() +
                                          " but the graph expects " + shapeStr(in.spec.shape));
    for (size_t i = 0; i < in.spec.shape.size(); ++i) {
      const Dim &d = in.spec.shape[i];
      if (!d.isPlainSymbol())
        continue;
      const std::string &s = d.symbols()[0];
      auto [pos, inserted] = bindings.emplace(s, t.shape()[i]);
      check(inserted || pos->second == t.shape()[i],
            "input \"" + in.name + "\" dim " + std::to_string(i) + " binds " + s + " = " +
                std::to_string(t.shape()[i]) + " but an earlier input bound " + s + " = " +
                std::to_string(pos->second));
    }
  }
  for (const auto &[symbol, value] : bindings) {
    auto bound = g.dims.find(symbol);
    check(value >= 1, "symbol " + symbol + " = " + std::to_string(value) + " must be >= 1");
    if (bound != g.dims.end())
      check(value >= bound->second.min && (!bound->second.max || value <= *bound->second.max),
            "symbol " + symbol + " = " + std::to_string(value) + " is outside its bounds [" +
                std::to_string(bound->second.min) + ", " +
                (bound->second.max ? std::to_string(*bound->second.max) : "inf") + "]");
  }
  for (const GraphInput &in : g.inputs) {
    const HostTensor &t = inputs.at(in.name);
    std::vector<int64_t> expected = concreteShape(in.spec.shape, bindings);
    check(expected == t.shape(), "input \"" + in.name + "\" has shape " + t.shapeStr() +
                                     " but the graph expects " + shapeStr(in.spec.shape));
  }
  for (const auto &[name, tensor] : inputs) {
    bool known = false;
    for (const GraphInput &in : g.inputs)
      known |= in.name == name;
    check(known, "\"" + name + "\" is not an input of the graph");
  }
  return bindings;
}

// One node on every device's values; literals become scalars of their
// resolved dtype.
static void runNode(const Graph &g, const TypedNode &typed,
                    std::vector<std::map<std::string, HostTensor>> &values,
                    const std::vector<std::map<std::string, int64_t>> &bindings) {
  const Node &n = *typed.node;
  size_t devices = values.size();
  std::vector<std::vector<HostTensor>> literals(devices);
  std::vector<interp::OpCall> calls;
  for (size_t d = 0; d < devices; ++d) {
    auto lookup = [&](const std::string &ref) -> const HostTensor & {
      auto it = values[d].find(ref);
      if (it == values[d].end())
        it = values[d].find(ref + ":0");
      return it->second;
    };
    literals[d].reserve(n.args.size());
    interp::OpCall call{typed, {}, {}, {}};
    for (size_t i = 0; i < typed.argTypes.size(); ++i) {
      const Arg arg = i < n.args.size() ? n.args[i] : Arg::absent();
      if (arg.kind == Arg::Kind::Absent) {
        call.args.push_back(nullptr);
      } else if (arg.kind == Arg::Kind::Value) {
        call.args.push_back(&lookup(arg.value));
      } else {
        HostTensor t(typed.argTypes[i]->dtype, {});
        if (arg.literal.kind == Literal::Kind::Float)
          t.setF(0, arg.literal.floatValue);
        else
          t.setI(0, arg.literal.intValue);
        literals[d].push_back(std::move(t));
        call.args.push_back(&literals[d].back());
      }
    }
    for (const TensorSpec &r : typed.results) {
      call.resultShapes.push_back(concreteShape(r.shape, bindings[d]));
      call.resultDTypes.push_back(r.dtype);
    }
    calls.push_back(std::move(call));
  }
  std::vector<std::vector<HostTensor>> outs(devices);
  if (typed.schema->category == "collective") {
    const Mesh &mesh = findMesh(g.meshes, getEnum(typed.attrs, "mesh"));
    check(int64_t(devices) == mesh.numDevices(),
          "a collective over mesh \"" + mesh.name + "\" (" + std::to_string(mesh.numDevices()) +
              " devices) in a program run on " + std::to_string(devices) +
              (devices == 1 ? " device" : " devices") +
              "; run it as an SPMD program on that many devices");
    interp::CollectiveCall call{typed, mesh, {}, calls[0].resultShapes[0], calls[0].resultDTypes[0]};
    for (const interp::OpCall &c : calls)
      if (!c.args.empty())
        call.x.push_back(c.args[0]);
    std::vector<HostTensor> perDevice = interp::runCollective(call);
    for (size_t d = 0; d < devices; ++d)
      outs[d].push_back(std::move(perDevice[d]));
  } else {
    auto kernel = interp::kernels().find(n.op);
    check(kernel != interp::kernels().end(), "the interpreter has no kernel for this op");
    for (size_t d = 0; d < devices; ++d)
      outs[d] = kernel->second(calls[d]);
  }
  for (size_t d = 0; d < devices; ++d) {
    check(outs[d].size() == typed.results.size(), "kernel produced the wrong number of results");
    for (size_t r = 0; r < outs[d].size(); ++r) {
      check(outs[d][r].shape() == calls[d].resultShapes[r] &&
                outs[d][r].dtype() == calls[d].resultDTypes[r],
            "kernel result " + std::to_string(r) + " has the wrong type");
      values[d][n.name + ":" + std::to_string(r)] = std::move(outs[d][r]);
    }
  }
}

std::vector<InterpreterResult>
interpretSpmd(const Graph &g, const GraphAnalysis &analysis,
              const std::vector<std::map<std::string, HostTensor>> &inputs) {
  check(!inputs.empty(), "an SPMD program runs on at least one device");
  std::vector<InterpreterResult> results(inputs.size());
  std::vector<std::map<std::string, int64_t>> bindings;
  for (size_t d = 0; d < inputs.size(); ++d) {
    try {
      results[d].bindings = bindSymbols(g, inputs[d]);
    } catch (const Error &e) {
      if (inputs.size() == 1)
        throw;
      fail("device " + std::to_string(d) + ": " + e.what());
    }
    bindings.push_back(results[d].bindings);
  }
  std::vector<std::map<std::string, HostTensor>> values;
  for (const auto &in : inputs)
    values.emplace_back(in.begin(), in.end());
  for (const TypedNode &typed : analysis.nodes) {
    try {
      runNode(g, typed, values, bindings);
    } catch (const Error &e) {
      fail("node \"" + typed.node->name + "\" (" + typed.node->op + "): " + e.what());
    }
  }
  // Outputs, then the run-time checks (Graph::checks), raised as compiled
  // code raises them: after the run, each device's own.
  for (size_t d = 0; d < inputs.size(); ++d)
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      auto it = values[d].find(g.outputs[o]);
      if (it == values[d].end())
        it = values[d].find(g.outputs[o] + ":0");
      if (o < g.resultCount())
        results[d].outputs.push_back(it->second);
      else if (it->second.getI(0) != 0)
        fail((inputs.size() == 1 ? "" : "device " + std::to_string(d) + ": ") +
             g.checks[o - g.resultCount()]);
    }
  return results;
}

InterpreterResult interpret(const Graph &g, const GraphAnalysis &analysis,
                            const std::map<std::string, HostTensor> &inputs) {
  return std::move(interpretSpmd(g, analysis, {inputs})[0]);
}

int64_t spmdDevices(const Graph &g) {
  int64_t devices = 1;
  for (size_t i = 0; i < g.meshes.size(); ++i) {
    check(i == 0 || g.meshes[i].numDevices() == devices,
          "meshes \"" + g.meshes[0].name + "\" and \"" + g.meshes[i].name +
              "\" have different device counts; an SPMD program runs on one set of devices");
    devices = g.meshes[i].numDevices();
  }
  return devices;
}

} // namespace tensorc
