// tensorc-check: runs compiled cases through the runtime library alone (no
// compiler, no MLIR/LLVM: it ships in the GPU bundle) and compares every
// output with the reference interpreter's, saved beside it.
//
//   tensorc-check [--all-variants] [--graphs] CASE_DIR...
//       each CASE_DIR: model.tcx, inputs/NAME.npy (by input name),
//       expected/I.npy (output I); --all-variants also runs every GPU kernel
//       variant, not only the heuristic's choice; --graphs runs each case
//       with CUDA graphs (reduce-overhead): captured, then replayed on
//       outputs poisoned again
//
// Outputs are poisoned (all bytes 0xff) before the run, so an unwritten
// element fails. The comparison is runtime/host/Parity.h's rule. Prints PASS/FAIL/SKIP per case and the
// summary line "N passed, M failed, K skipped"; exits 1 if any failed.
#include "runtime/host/HostTensor.h"
#include "runtime/host/Npy.h"
#include "runtime/host/Parity.h"
#include "tensorc/Runtime.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rt = tensorc::runtime;
namespace fs = std::filesystem;
using tensorc::DType;
using tensorc::HostTensor;

namespace {

// Runs one case; returns "" when every output matches, else what differs.
// Throws what the runtime throws.
std::string runCase(const fs::path &dir, const std::shared_ptr<rt::Executable> &exe, int runs) {
  std::vector<HostTensor> inputs;
  std::vector<rt::TensorView> in;
  for (const rt::TensorInfo &i : exe->inputs())
    inputs.push_back(tensorc::readNpy((dir / "inputs" / (i.name + ".npy")).string(), DType(int(i.dtype))));
  for (HostTensor &t : inputs)
    in.push_back({rt::ElementType(int(t.dtype())), t.shape(), t.data()});
  rt::Session session(exe);
  std::vector<std::vector<int64_t>> shapes = session.outputShapes(in);
  std::vector<HostTensor> outputs;
  std::vector<rt::TensorView> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    outputs.emplace_back(DType(int(exe->outputs()[i].dtype)), shapes[i]);
    outputs.back().fillBytes(0xff);
  }
  for (HostTensor &t : outputs)
    out.push_back({rt::ElementType(int(t.dtype())), t.shape(), t.data()});
  for (int r = 0; r < runs; ++r) {
    for (HostTensor &t : outputs)
      t.fillBytes(0xff);
    session.run(in, out);
  }
  std::string problems;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string &o = exe->outputs()[i].name;
    HostTensor want = tensorc::readNpy((dir / "expected" / (std::to_string(i) + ".npy")).string(),
                                       outputs[i].dtype());
    // expected/I.tol: a tolerance the case generator chose (a path through
    // a less precise dtype); else the dtype's.
    double tolerance = -1;
    if (std::ifstream tol(dir / "expected" / (std::to_string(i) + ".tol")); tol)
      tol >> tolerance;
    std::string diff = tensorc::parityMismatch(outputs[i], want, tolerance);
    if (!diff.empty())
      problems += (problems.empty() ? "" : "; ") + o + ": " + diff;
  }
  return problems;
}

} // namespace

int main(int argc, char **argv) {
  int passed = 0, failed = 0, skipped = 0;
  // --all-variants: also run every kernel variant (LoadOptions::kernelVariant
  // 0..kernelVariantCount()-1; steps with fewer variants repeat their last).
  bool allVariants = false, graphs = false;
  int c = 1;
  for (; c < argc && std::string(argv[c]).rfind("--", 0) == 0; ++c) {
    std::string flag = argv[c];
    if (flag == "--all-variants")
      allVariants = true;
    else if (flag == "--graphs")
      graphs = true;
    else {
      std::fprintf(stderr, "tensorc-check: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  rt::LoadOptions base;
  base.mode = graphs ? "reduce-overhead" : "default";
  int runs = graphs ? 2 : 1; // capture, then replay
  for (; c < argc; ++c) {
    fs::path dir = argv[c];
    std::string name = dir.filename().string();
    try {
      std::shared_ptr<rt::Executable> exe;
      try {
        exe = rt::Executable::load((dir / "model.tcx").string(), base);
      } catch (const rt::Error &e) {
        std::string m = e.what();
        // No GPU here (CI): the case is skipped and counted, not passed.
        if (m.find("no NVIDIA driver") != std::string::npos) {
          std::printf("SKIP %s: %s\n", name.c_str(), m.c_str());
          ++skipped;
          continue;
        }
        throw;
      }
      std::string problems = runCase(dir, exe, runs);
      for (int v = 0; allVariants && problems.empty() && v < exe->kernelVariantCount(); ++v) {
        rt::LoadOptions options = base;
        options.kernelVariant = v;
        std::string p = runCase(dir, rt::Executable::load((dir / "model.tcx").string(), options), runs);
        if (!p.empty())
          problems = "variant " + std::to_string(v) + ": " + p;
      }
      if (problems.empty()) {
        std::printf("PASS %s\n", name.c_str());
        ++passed;
      } else {
        std::printf("FAIL %s: %s\n", name.c_str(), problems.c_str());
        ++failed;
      }
    } catch (const std::exception &e) {
      std::printf("FAIL %s: %s\n", name.c_str(), e.what());
      ++failed;
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
