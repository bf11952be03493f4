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
#include "test/fuzz/RandomGraph.h"

#include "codegen/cpu/CpuProgram.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/driver/RunPipeline.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/transforms/BackendPipelines.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/Parity.h"
#include "tensorc/Runtime.h"

#include "mlir/Pass/PassManager.h"

#include <chrono>
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
  mlir::PassManager pm(&ctx);
  buildCpuPipeline(pm, PipelineOptions{});
  runPipeline(pm, *module, "fuzz");
  artifact::Artifact art = codegen::cpu::compileCpuArtifact(*module, {});
  art.tensorcVersion = "fuzz";
  return artifact::serialize(art);
}

rt::TensorView viewOf(HostTensor &t) { return {rt::ElementType(int(t.dtype())), t.shape(), t.data()}; }

Outcome check(const Graph &g, uint64_t inputSeed) {
  GraphAnalysis a;
  std::map<std::string, HostTensor> inputs;
  std::vector<HostTensor> want;
  try {
    a = analyzeGraph(g, "fuzz");
    inputs = completeInputs(g, a, {}, inputSeed);
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

Graph minimize(Graph g, uint64_t inputSeed) {
  auto fails = [&](const Graph &c) {
    try {
      return check(c, inputSeed).verdict == Verdict::Fail;
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

int usage() {
  std::fprintf(stderr, "usage: tensorc-fuzz-graphs (--seeds A:B | --count N [--fresh]) [--out DIR] "
                       "[--max-seconds S] [--quiet]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  uint64_t first = 0, last = 200;
  bool fresh = false, quiet = false;
  std::string outDir = ".";
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
      g = fuzz::randomGraph(seed);
    } catch (const std::exception &e) {
      std::printf("FAIL seed %llu: generator: %s\n", (unsigned long long)seed, e.what());
      ++failed;
      continue;
    }
    Outcome o = check(g, seed);
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
    Graph small = minimize(g, seed);
    std::string path = outDir + "/fuzz-" + std::to_string(seed) + ".json";
    try {
      writeFileAtomically(path, writeGraphJson(small));
    } catch (const std::exception &e) {
      path = std::string("(not written: ") + e.what() + ")";
    }
    std::printf("FAIL seed %llu: %s\n  minimized (%zu nodes): %s\n  reproduce: tensorc run %s "
                "--target cpu --seed %llu (and without --target: the interpreter)\n",
                (unsigned long long)seed, o.message.c_str(), small.nodes.size(), path.c_str(),
                path.c_str(), (unsigned long long)seed);
    std::fflush(stdout);
  }
  std::printf("%d graphs: %d passed, %d failed, %d skipped (interpreter refused the inputs)\n",
              passed + failed + skipped, passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}
