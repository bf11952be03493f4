// tensorc-fuzz-graphs: differential testing of the CPU backend against the
// reference interpreter on random valid graphs (test/fuzz/RandomGraph.h).
//
//   tensorc-fuzz-graphs --seeds 0:500            a fixed range (CI)
//   tensorc-fuzz-graphs --count 20000 --fresh    new seeds (a long run)
//   tensorc-fuzz-graphs --seeds 17:18 --out DIR  write the reproducer
//
// Each graph is compiled with the CPU pipeline into an artifact, loaded by
// the runtime, run with outputs poisoned (0xff bytes) on random inputs, and
// every output compared with the interpreter with the dtype's tolerance
// (runtime/host/Parity). A compile error is a failure too (the graph is
// valid). A failure is minimized (outputs cut to the first bad one, then
// every node that still reproduces it turned into an input) and written as
// DIR/fuzz-SEED.json; the last line counts graphs, failures and skips.
//
// --grad: graphs whose floats are all f64; their joint forward+backward graph
// (what `tensorc grad` derives, every float input differentiated, every float
// output seeded with a random cotangent) is checked twice: compiled for the
// CPU against the interpreter as above, and its gradient's directional
// derivative <grad, v> against central finite differences of the forward
// graph on the interpreter (several step sizes; the best must agree).
//
//   tensorc-fuzz-graphs --graph fuzz-SEED.json --seed SEED [--grad]
//                                                rechecks a (minimized) graph
//
// --special: the float inputs also hold nan, +-inf and -0.0.
#include "test/fuzz/RandomGraph.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/driver/Compile.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/Parity.h"
#include "tensorc/Runtime.h"


#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

using namespace tensorc;
namespace rt = tensorc::runtime;

namespace {

enum class Verdict { Pass, Fail, Skip };

struct Outcome {
  Verdict verdict = Verdict::Pass;
  std::string message;
};

std::string compileCpu(const Graph &g) {
  mlir::MLIRContext ctx;
  loadTensorcDialects(ctx);
  ctx.printOpOnDiagnostic(false);
  GraphAnalysis a = analyzeGraph(g, "fuzz");
  mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, "fuzz");
  driver::CompileOptions options;
  options.target = driver::Target::Cpu;
  return artifact::serialize(driver::compileModule(*module, options, "fuzz"));
}

rt::TensorView viewOf(HostTensor &t) { return {rt::ElementType(int(t.dtype())), t.shape(), t.data()}; }

// --special: float inputs also hold nan, +-inf and -0.0 (about one element
// in 16), which the generated code must treat as the interpreter does
// (IEEE, PyTorch's NaN rules).
bool specialValues = false;

void sprinkleSpecialValues(std::map<std::string, HostTensor> &inputs, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x5bd1e9955bd1e995ull);
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, -0.0};
  for (auto &[name, t] : inputs) {
    if (!isFloat(t.dtype()))
      continue;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (rng() % 16 == 0)
        t.setF(i, specials[rng() % 4]);
  }
}

Outcome check(const Graph &g, uint64_t inputSeed) {
  GraphAnalysis a;
  std::map<std::string, HostTensor> inputs;
  std::vector<HostTensor> want;
  try {
    a = analyzeGraph(g, "fuzz");
    inputs = completeInputs(g, a, {}, inputSeed);
    if (specialValues)
      sprinkleSpecialValues(inputs, inputSeed);
    want = interpret(g, a, inputs).outputs;
  } catch (const Error &e) {
    return {Verdict::Skip, std::string("interpreter: ") + e.what()}; // e.g. an index out of range
  }
  std::string bytes;
  try {
    bytes = compileCpu(g);
  } catch (const std::exception &e) {
    return {Verdict::Fail, std::string("compile failed: ") + e.what()};
  }
  try {
    std::shared_ptr<rt::Executable> exe = rt::Executable::loadFromMemory(bytes, "fuzz");
    rt::Session session(exe);
    std::vector<rt::TensorView> in;
    for (const rt::TensorInfo &i : exe->inputs())
      in.push_back(viewOf(inputs.at(i.name)));
    std::vector<std::vector<int64_t>> shapes = session.outputShapes(in);
    std::vector<HostTensor> got;
    for (size_t i = 0; i < shapes.size(); ++i) {
      got.emplace_back(DType(int(exe->outputs()[i].dtype)), shapes[i]);
      got.back().fillBytes(0xff);
    }
    std::vector<rt::TensorView> out;
    for (HostTensor &t : got)
      out.push_back(viewOf(t));
    session.run(in, out);
    if (got.size() != want.size())
      return {Verdict::Fail, "output count differs"};
    for (size_t i = 0; i < want.size(); ++i) {
      if (exe->outputs()[i].name != g.outputs[i])
        return {Verdict::Fail, "output " + std::to_string(i) + " is named \"" +
                                   exe->outputs()[i].name + "\", the graph says \"" +
                                   g.outputs[i] + "\""};
      std::string diff =
          parityMismatch(got[i], want[i], fuzz::outputTolerance(g, a, g.outputs[i], want[i].dtype()));
      if (!diff.empty())
        return {Verdict::Fail, "output \"" + g.outputs[i] + "\": " + diff};
    }
  } catch (const std::exception &e) {
    return {Verdict::Fail, std::string("runtime: ") + e.what()};
  }
  return {};
}

// The nodes the outputs need, in order.
Graph pruned(Graph g) {
  std::set<std::string> needed;
  for (const std::string &o : g.outputs)
    needed.insert(parseValueRef(o).producer);
  std::vector<Node> kept;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    if (!needed.count(it->name))
      continue;
    kept.insert(kept.begin(), *it);
    for (const Arg &arg : it->args)
      if (arg.kind == Arg::Kind::Value)
        needed.insert(parseValueRef(arg.value).producer);
  }
  g.nodes = kept;
  std::vector<GraphInput> inputs;
  for (const GraphInput &in : g.inputs)
    if (needed.count(in.name))
      inputs.push_back(in);
  g.inputs = inputs;
  return g;
}

// Node `index` becomes a graph input of its result's type (single-result nodes).
std::optional<Graph> cutAt(const Graph &g, size_t index) {
  const Node &n = g.nodes[index];
  GraphAnalysis a = analyzeGraph(g, "fuzz", false);
  std::optional<TensorSpec> spec;
  for (const TypedNode &t : a.nodes)
    if (t.node->name == n.name && t.results.size() == 1)
      spec = t.results[0];
  if (!spec)
    return std::nullopt;
  Graph cut = g;
  cut.nodes.erase(cut.nodes.begin() + long(index));
  GraphInput in;
  in.name = n.name;
  in.spec = *spec;
  cut.inputs.push_back(in);
  return cut;
}

using Check = std::function<Outcome(const Graph &, uint64_t)>;

Graph minimize(Graph g, uint64_t inputSeed, const Check &checker) {
  auto fails = [&](const Graph &c) {
    try {
      return checker(c, inputSeed).verdict == Verdict::Fail;
    } catch (const std::exception &) {
      return false;
    }
  };
  // One output at a time.
  for (const std::string &o : g.outputs) {
    Graph one = g;
    one.outputs = {o};
    one = pruned(one);
    if (fails(one)) {
      g = one;
      break;
    }
  }
  // Cut upstream nodes into inputs while it still fails.
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      bool isOutput = false;
      for (const std::string &o : g.outputs)
        isOutput |= parseValueRef(o).producer == g.nodes[i].name;
      if (isOutput)
        continue;
      std::optional<Graph> cut;
      try {
        cut = cutAt(g, i);
      } catch (const std::exception &) {
      }
      if (cut && fails(pruned(*cut))) {
        g = pruned(*cut);
        progress = true;
        break;
      }
    }
  }
  return g;
}

double sumOf(const std::vector<HostTensor> &ys, const std::map<std::string, HostTensor> &weights,
             const std::vector<std::string> &weightNames) {
  double total = 0;
  for (size_t o = 0; o < ys.size(); ++o) {
    const HostTensor *w = weightNames[o].empty() ? nullptr : &weights.at(weightNames[o]);
    for (int64_t i = 0; i < ys[o].numel(); ++i)
      total += ys[o].getF(i) * (w ? w->getF(i) : 1.0);
  }
  return total;
}

Outcome checkGradient(const Graph &g, uint64_t inputSeed) {
  GraphAnalysis a = analyzeGraph(g, "fuzz");
  autodiff::AutodiffOptions options;
  for (const GraphInput &in : g.inputs)
    if (isFloat(in.spec.dtype))
      options.wrt.push_back(in.name);
  std::vector<size_t> floatOutputs;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (isFloat(a.outputs[i].dtype)) {
      options.of.push_back(g.outputs[i]);
      floatOutputs.push_back(i);
    }
  if (options.wrt.empty() || options.of.empty())
    return {Verdict::Skip, "no float input or output"};
  autodiff::JointGraph joint;
  try {
    joint = autodiff::buildJointGraph(g, options);
  } catch (const Error &e) {
    return {Verdict::Fail, std::string("tensorc grad refused it: ") + e.what()};
  }
  if (joint.wrt.empty())
    return {Verdict::Skip, "no output depends on a float input"};

  Outcome compiled = check(joint.graph, inputSeed);
  if (compiled.verdict != Verdict::Pass) {
    compiled.message = "joint graph: " + compiled.message;
    return compiled;
  }

  GraphAnalysis ja = analyzeGraph(joint.graph, "fuzz-joint");
  std::map<std::string, HostTensor> inputs = completeInputs(joint.graph, ja, {}, inputSeed);
  std::vector<HostTensor> jointOut = interpret(joint.graph, ja, inputs).outputs;
  // The cotangent of each differentiated output (none: a scalar, seeded
  // with 1, or an output no input reaches, a constant).
  std::vector<std::string> weightNames;
  for (const std::string &o : options.of) {
    ValueRef r = parseValueRef(o);
    std::string name = "cotangent_" + r.producer + (r.index ? "_" + std::to_string(r.index) : "");
    weightNames.push_back(inputs.count(name) ? name : "");
  }
  std::mt19937_64 rng(inputSeed ^ 0x9e3779b97f4a7c15ull);
  std::map<std::string, HostTensor> direction;
  double analytic = 0, scale = 0;
  for (size_t w = 0; w < joint.wrt.size(); ++w) {
    const std::string &name = joint.wrt[w];
    auto at = std::find(joint.graph.outputs.begin(), joint.graph.outputs.end(), joint.gradientOutputs[w]);
    const HostTensor &grad = jointOut.at(size_t(at - joint.graph.outputs.begin()));
    HostTensor v(DType::F64, inputs.at(name).shape());
    for (int64_t i = 0; i < v.numel(); ++i) {
      v.setF(i, std::uniform_real_distribution<double>(-1, 1)(rng));
      analytic += grad.getF(i) * v.getF(i);
      scale += std::fabs(grad.getF(i) * v.getF(i));
    }
    direction.emplace(name, std::move(v));
  }
  auto loss = [&](double t) {
    std::map<std::string, HostTensor> moved;
    for (const GraphInput &in : g.inputs) {
      HostTensor x = inputs.at(in.name);
      if (direction.count(in.name))
        for (int64_t i = 0; i < x.numel(); ++i)
          x.setF(i, x.getF(i) + t * direction.at(in.name).getF(i));
      moved.emplace(in.name, std::move(x));
    }
    std::vector<HostTensor> all = interpret(g, a, moved).outputs, ys;
    for (size_t i : floatOutputs)
      ys.push_back(all[i]);
    return sumOf(ys, inputs, weightNames);
  };
  double at0 = loss(0);
  if (!std::isfinite(analytic) || !std::isfinite(at0))
    return {Verdict::Skip, "not finite at the drawn inputs"};
  // Finite differences are only as good as their step: too large and the
  // curvature shows, too small and rounding does (1/x near 0 has both).
  // Central differences at several steps and their Richardson extrapolations
  // (error O(h^4)); the best must agree. A wrong gradient rule is off by far
  // more than this tolerance.
  double best = INFINITY, numericAtBest = 0;
  auto consider = [&](double numeric) {
    if (std::isfinite(numeric) && std::fabs(numeric - analytic) < best) {
      best = std::fabs(numeric - analytic);
      numericAtBest = numeric;
    }
  };
  for (double h : {1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7}) {
    double wide = (loss(h) - loss(-h)) / (2 * h), narrow = (loss(h / 2) - loss(-h / 2)) / h;
    consider(wide);
    consider(narrow);
    consider((4 * narrow - wide) / 3);
  }
  if (best <= 1e-6 * std::max(1.0, scale))
    return {};
  char text[200];
  std::snprintf(text, sizeof text,
                "directional derivative: gradient gives %.12g, finite differences %.12g (|g.v| sum %.3g)",
                analytic, numericAtBest, scale);
  return {Verdict::Fail, text};
}

int usage() {
  std::fprintf(stderr, "usage: tensorc-fuzz-graphs (--seeds A:B | --count N [--fresh] | --graph FILE "
                       "--seed S) [--grad | --special] [--out DIR] [--max-seconds S] [--quiet]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  uint64_t first = 0, last = 200;
  bool fresh = false, quiet = false, grad = false;
  std::string outDir = ".", graphFile;
  double maxSeconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--seeds") {
      std::string r = next();
      size_t colon = r.find(':');
      if (colon == std::string::npos)
        return usage();
      first = std::stoull(r.substr(0, colon));
      last = std::stoull(r.substr(colon + 1));
    } else if (a == "--count") {
      first = 0;
      last = std::stoull(next());
    } else if (a == "--fresh") {
      fresh = true;
    } else if (a == "--out") {
      outDir = next();
    } else if (a == "--max-seconds") {
      maxSeconds = std::stod(next());
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--grad") {
      grad = true;
    } else if (a == "--special") {
      specialValues = true;
    } else if (a == "--graph") {
      graphFile = next();
    } else if (a == "--seed") {
      first = std::stoull(next());
      last = first + 1;
    } else {
      return usage();
    }
  }
  uint64_t base = 0;
  if (fresh) {
    std::random_device dev;
    base = (uint64_t(dev()) << 32) | dev();
    std::printf("fresh seeds from %llu\n", (unsigned long long)base);
  }
  auto start = std::chrono::steady_clock::now();
  int passed = 0, failed = 0, skipped = 0;
  for (uint64_t s = first; s < last; ++s) {
    uint64_t seed = base + s;
    if (maxSeconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > maxSeconds)
      break;
    Graph g;
    try {
      fuzz::RandomGraphOptions options;
      options.onlyF64 = grad;
      g = graphFile.empty() ? fuzz::randomGraph(seed, options) : readGraphFile(graphFile);
    } catch (const std::exception &e) {
      std::printf("FAIL seed %llu: %s: %s\n", (unsigned long long)seed,
                  graphFile.empty() ? "generator" : graphFile.c_str(), e.what());
      ++failed;
      continue;
    }
    Check checker = grad ? Check(checkGradient)
                         : Check([](const Graph &c, uint64_t s) { return check(c, s); });
    Outcome o;
    try {
      o = checker(g, seed);
    } catch (const std::exception &e) {
      o = {Verdict::Fail, std::string("checker: ") + e.what()};
    }
    if (o.verdict == Verdict::Pass) {
      ++passed;
      continue;
    }
    if (o.verdict == Verdict::Skip) {
      ++skipped;
      if (!quiet)
        std::printf("SKIP seed %llu: %s\n", (unsigned long long)seed, o.message.c_str());
      continue;
    }
    ++failed;
    Graph small = minimize(g, seed, checker);
    std::string path = outDir + (grad ? "/fuzz-grad-" : "/fuzz-") + std::to_string(seed) + ".json";
    try {
      writeFileAtomically(path, writeGraphJson(small));
    } catch (const std::exception &e) {
      path = std::string("(not written: ") + e.what() + ")";
    }
    std::printf("FAIL seed %llu: %s\n  minimized (%zu nodes): %s\n  reproduce: tensorc-fuzz-graphs "
                "--graph %s --seed %llu%s\n",
                (unsigned long long)seed, o.message.c_str(), small.nodes.size(), path.c_str(),
                path.c_str(), (unsigned long long)seed, grad ? " --grad" : "");
    if (!grad)
      std::printf("  or: tensorc run %s --target cpu --seed %llu (and without --target: the "
                  "interpreter)\n",
                  path.c_str(), (unsigned long long)seed);
    std::fflush(stdout);
  }
  std::printf("%d graphs: %d passed, %d failed, %d skipped (interpreter refused the inputs%s)\n",
              passed + failed + skipped, passed, failed, skipped,
              grad ? ", no float path, or not finite there" : "");
  return failed == 0 ? 0 : 1;
}
