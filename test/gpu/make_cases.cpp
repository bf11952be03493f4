// tensorc-gpu-cases OUTDIR: writes the GPU parity cases of the bundle. For
// every graph of the catalog (every op in several dtypes, the example models
// and training steps): OUTDIR/NNN_name/model.tcx (compiled with --target
// cuda), inputs/NAME.npy (fresh random inputs, the seed printed) and
// expected/I.npy (the reference interpreter's output I). Symbolic dims are
// bound to odd sizes (B=13, T=9, N=3). tensorc-check runs them on a GPU.
// `--random N` adds N random graphs (test/fuzz/RandomGraph.h, seeds 0..N-1):
// differential fuzzing of the CUDA backend; expected/I.tol holds an output's
// tolerance where its path went through a less precise dtype.
#include "compiler/driver/Compile.h"
#include "compiler/driver/RandomInputs.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/interpreter/Interpreter.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/Npy.h"
#include "runtime/host/Parity.h"
#include "test/fuzz/RandomGraph.h"
#include "test/gpu/OpCatalog.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <random>

using namespace tensorc;
namespace fs = std::filesystem;

int main(int argc, char **argv) {
  int randomGraphs = 0;
  if (argc == 4 && std::string(argv[2]) == "--random")
    randomGraphs = std::atoi(argv[3]);
  if (argc != 2 && !(argc == 4 && randomGraphs > 0)) {
    std::fprintf(stderr, "usage: tensorc-gpu-cases OUTDIR [--random N]\n");
    return 2;
  }
  fs::path out = argv[1];
  uint64_t seed = std::random_device()();
  std::printf("seed %llu\n", (unsigned long long)seed);
  std::vector<std::pair<std::string, Graph>> graphs = gpu::opGraphs();
  for (auto &m : gpu::backwardGraphs())
    graphs.push_back(m);
  for (auto &m : gpu::largeGraphs())
    graphs.push_back(m);
  for (auto &m : gpu::modelGraphs(TENSORC_SOURCE_DIR))
    graphs.push_back(m);
  for (int r = 0; r < randomGraphs; ++r)
    graphs.push_back({"random_" + std::to_string(r), fuzz::randomGraph(uint64_t(r))});
  int n = 0, written = 0;
  try {
    for (auto &[name, graph] : graphs) {
      char id[16];
      std::snprintf(id, sizeof id, "%03d_", n++);
      fs::path dir = out / (id + name);
      fs::create_directories(dir / "inputs");
      fs::create_directories(dir / "expected");
      Graph g = graph;
      g.name = "case" + std::string(id) + name;
      mlir::MLIRContext ctx;
      loadTensorcDialects(ctx);
      GraphAnalysis a = analyzeGraph(g, g.name);
      mlir::OwningOpRef<mlir::ModuleOp> module = importGraph(ctx, g, a, g.name);
      // What `tensorc compile --target cuda` builds (the one compile driver);
      // the linear-gradient cases check the bias-gradient epilogue (off by
      // default) on cuBLASLt.
      driver::CompileOptions options;
      options.target = driver::Target::Cuda;
      options.gemmBiasGradient = name.find("linear_grad") != std::string::npos;
      artifact::Artifact art = driver::compileModule(*module, options, g.name);
      writeFileAtomically((dir / "model.tcx").string(), artifact::serialize(art));
      std::map<std::string, HostTensor> inputs =
          completeInputs(g, a, {}, seed + uint64_t(n), {{"B", 13}, {"T", 9}, {"N", 3}});
      for (const auto &[in, t] : inputs)
        writeNpy((dir / "inputs" / (in + ".npy")).string(), t);
      std::vector<HostTensor> outs;
      try {
        outs = interpret(g, a, inputs).outputs;
      } catch (const Error &) {
        if (name.rfind("random_", 0) != 0)
          throw;
        fs::remove_all(dir); // a random graph the interpreter refuses (an index range)
        continue;
      }
      for (size_t i = 0; i < outs.size(); ++i) {
        writeNpy((dir / "expected" / (std::to_string(i) + ".npy")).string(), outs[i]);
        double tol = gpu::caseTolerance(name) >= 0 ? gpu::caseTolerance(name)
                                                   : fuzz::outputTolerance(g, a, g.outputs[i], outs[i].dtype());
        if (tol != parityTolerance(outs[i].dtype()))
          writeFileAtomically((dir / "expected" / (std::to_string(i) + ".tol")).string(),
                              std::to_string(tol) + "\n");
      }
      ++written;
    }
  } catch (const Error &e) {
    std::fprintf(stderr, "tensorc-gpu-cases: %s\n", e.what());
    return 1;
  }
  std::printf("%d cases written to %s\n", written, out.c_str());
  return 0;
}
