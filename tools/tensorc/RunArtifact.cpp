#include "tools/tensorc/RunArtifact.h"
#include "runtime/host/ReadFile.h"

#include "compiler/driver/RandomInputs.h"
#include "ir/core/Error.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/host/Npy.h"
#include "tools/tensorc/Commands.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace tensorc::cli {

namespace {

// Graph-file semantics for a compiled artifact's inputs: the same seeds and
// streams as the interpreter path, so both see identical inputs.
std::map<std::string, HostTensor> artifactInputs(const runtime::Executable &exe,
                                                 std::map<std::string, HostTensor> given,
                                                 uint64_t seed,
                                                 const std::map<std::string, int64_t> &dims) {
  Graph g;
  for (const runtime::SymbolInfo &s : exe.symbols())
    g.dims[s.name] = DimBound{s.min, s.max < 0 ? std::nullopt : std::optional<int64_t>(s.max)};
  for (const runtime::TensorInfo &t : exe.inputs()) {
    Shape shape;
    for (const std::string &d : t.shape)
      shape.push_back(*Dim::parse(d));
    g.inputs.push_back({t.name, {DType(int(t.dtype)), shape}, false, std::nullopt});
  }
  checkDimSymbols(g, dims);
  return completeSignatureInputs(g, std::move(given), seed, dims);
}

runtime::TensorView viewOf(HostTensor &t) {
  return {runtime::ElementType(int(t.dtype())), t.shape(), t.data()};
}

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

std::map<std::string, int64_t> parseDimAssignments(const std::vector<std::string> &assignments) {
  std::map<std::string, int64_t> dims;
  for (const std::string &s : assignments) {
    size_t eq = s.find('=');
    check(eq != std::string::npos && eq > 0 && eq + 1 < s.size(),
          "--dim \"" + s + "\" must look like SYMBOL=SIZE");
    char *end = nullptr;
    long long v = std::strtoll(s.c_str() + eq + 1, &end, 10);
    check(*end == '\0' && v >= 1 && v <= (1ll << 40),
          "--dim " + s + ": the size must be a positive integer");
    std::string symbol = s.substr(0, eq);
    if (auto it = dims.find(symbol); it != dims.end())
      fail("--dim " + symbol + " is given twice (" + symbol + "=" + std::to_string(it->second) + " and " + s + ")");
    dims[symbol] = v;
  }
  return dims;
}

void addRunOptions(CLI::App &cmd, RunArgs &args) {
  cmd.add_option("FILE", args.file, "compiled model (.tcx), graph file (.json) or tc module (.mlir)")
      ->required();
  cmd.add_option("--input", args.inputs,
                 "NAME=PATH.npy for an input (repeatable); missing inputs are drawn from --seed");
  cmd.add_option("--weights", args.weights,
                 "FILE.safetensors: inputs by name (e.g. a model's parameters) not given by --input "
                 "(repeatable)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--dim", args.dims,
                 "SYMBOL=SIZE for a symbolic dim of generated inputs (repeatable; default 4)");
  cmd.add_option("--seed", args.seed, "seed for generated inputs (default 0)");
  cmd.add_option("--output-dir", args.outputDir, "write each output as OUTPUT.npy into this directory");
  cmd.add_option("--show", args.showValues, "values to print per output (default 6)")
      ->check(CLI::Range(0, 1000));
  cmd.add_option("--bench", args.bench,
                 "compiled models: time N runs after warm-up, print the median and spread (GPU: "
                 "also the device time of the launch sequence)")
      ->check(CLI::Range(1, 1000000));
  cmd.add_option("--threads", args.threads,
                 "compiled models: kernel threads, 1 to 1024 (default: one per CPU this process may use)")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--variant", args.variant,
                 "GPU artifacts: run every loop step with its kernel variant N (default: the "
                 "runtime's heuristic per step)")
      ->check(CLI::Range(0, 1023));
  cmd.add_option("--mode", args.mode,
                 "GPU artifacts: reduce-overhead replays the launch sequence as a CUDA graph, "
                 "default does not (default: the mode the artifact was compiled with)")
      ->check(CLI::IsMember({"default", "reduce-overhead"}));
  cmd.add_option("--autotune", args.autotune,
                 "compiled models: default (the autotune cache's choices where it has them, else "
                 "heuristics), max-autotune (measure what the cache does not know, store the "
                 "winners), strict (a launch the cache does not know is an error), verify (re-run "
                 "cached winners beside the default, report wrong or slower ones) or verify-delete "
                 "(also delete those entries)")
      ->check(CLI::IsMember({"default", "max-autotune", "strict", "verify", "verify-delete"}));
  cmd.add_option("--tune-db", args.tuneDb,
                 "compiled models: the autotune cache (default: $TENSORC_TUNE_DB, else "
                 "$XDG_CACHE_HOME/tensorc/autotune.sqlite)");
  cmd.add_option("--expect-sha256", args.expectSha256,
                 "compiled models: refuse the artifact unless its SHA-256 is this (64 hex "
                 "digits); a cpu artifact's native code runs when it is loaded");
}

bool isArtifactFile(const std::string &path) {
  char magic[8] = {};
  if (!fileKindProblem(path).empty())
    return false; // a FIFO is never opened here (the open would wait for a writer)
  std::ifstream in(path, std::ios::binary);
  in.read(magic, 8);
  return in.gcount() == 8 && std::memcmp(magic, artifact::kMagic, 8) == 0;
}

std::map<std::string, HostTensor>
readGivenInputs(const RunArgs &args, const std::vector<std::pair<std::string, DType>> &declared) {
  std::map<std::string, HostTensor> given;
  for (const std::string &s : args.inputs) {
    auto [name, path] = splitAssignment(s, "--input");
    auto it = std::find_if(declared.begin(), declared.end(), [&](const auto &d) { return d.first == name; });
    check(it != declared.end(), "--input " + name + ": the model has no input named \"" + name + "\"");
    check(!given.count(name), "--input " + name + " is given twice");
    given.emplace(name, readNpy(path, it->second));
  }
  for (const std::string &path : args.weights) {
    std::shared_ptr<const runtime::Weights> w;
    try {
      w = runtime::Weights::open(path);
    } catch (const runtime::Error &e) {
      fail(e.what());
    }
    for (const auto &[name, dtype] : declared) {
      if (given.count(name) || !w->contains(name))
        continue;
      runtime::TensorView v = w->view(name);
      check(DType(int(v.dtype)) == dtype, "--weights " + path + ": tensor '" + name + "' is " +
                                              runtime::elementTypeName(v.dtype) + ", but the input is " +
                                              std::string(dtypeName(dtype)));
      HostTensor t(dtype, v.shape);
      if (t.nbytes())
        std::memcpy(t.data(), v.data, t.nbytes());
      given.emplace(name, std::move(t));
    }
  }
  return given;
}

std::vector<HostTensor> runExecutable(const std::shared_ptr<runtime::Executable> &exe,
                                      std::map<std::string, HostTensor> &inputs, int bench,
                                      std::map<std::string, int64_t> &bindings, int64_t deviceIndex) {
  runtime::Session session(exe);
  std::vector<runtime::TensorView> in;
  for (const runtime::TensorInfo &i : exe->inputs())
    in.push_back(viewOf(inputs.at(i.name)));
  std::vector<HostTensor> out;
  std::vector<runtime::TensorView> outViews;
  try {
    std::vector<std::vector<int64_t>> shapes = session.outputShapes(in);
    for (size_t i = 0; i < shapes.size(); ++i)
      out.emplace_back(DType(int(exe->outputs()[i].dtype)), shapes[i]);
    for (HostTensor &t : out)
      outViews.push_back(viewOf(t));
    session.run(in, outViews);
    if (bench > 0) {
      int warmup = std::clamp(bench / 10, 1, 10);
      for (int i = 0; i < warmup; ++i)
        session.run(in, outViews);
      std::vector<double> ms, device;
      for (int i = 0; i < bench; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        session.run(in, outViews);
        auto t1 = std::chrono::steady_clock::now();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (session.lastDeviceMs() >= 0)
          device.push_back(session.lastDeviceMs());
      }
      auto pct = [](std::vector<double> &v, double p) {
        std::sort(v.begin(), v.end());
        return v[size_t(p * double(v.size() - 1) + 0.5)];
      };
      std::printf("bench: %d runs after %d warm-up: median %.4f ms (min %.4f, p10 %.4f, p90 "
                  "%.4f, max %.4f); arena %lld bytes\n",
                  bench, warmup, pct(ms, 0.5), pct(ms, 0), pct(ms, 0.1), pct(ms, 0.9), pct(ms, 1),
                  (long long)session.arenaBytes());
      if (!device.empty())
        std::printf("bench: device time of the launch sequence (CUDA events, copies excluded): "
                    "median %.4f ms (min %.4f, p90 %.4f)\n",
                    pct(device, 0.5), pct(device, 0), pct(device, 0.9));
    }
  } catch (const runtime::Error &e) {
    fail((deviceIndex >= 0 ? "device " + std::to_string(deviceIndex) + ": " : std::string()) + e.what());
  }
  bindings = session.bindings();
  return out;
}

void printOutputs(const std::vector<std::string> &names, const std::vector<HostTensor> &outputs,
                  const std::map<std::string, int64_t> &bindings, const RunArgs &args) {
  if (!args.outputDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.outputDir, ec);
    check(!ec, args.outputDir + ": cannot create the directory: " + ec.message());
  }
  for (const auto &[symbol, value] : bindings)
    std::cout << symbol << " = " << value << "\n";
  for (size_t i = 0; i < names.size(); ++i) {
    const HostTensor &t = outputs[i];
    std::cout << names[i] << ": " << t.shapeStr() << " " << dtypeName(t.dtype()) << " [";
    int64_t shown = std::min<int64_t>(t.numel(), args.showValues);
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
    if (!args.outputDir.empty())
      writeNpy((std::filesystem::path(args.outputDir) / fileNameFor(names[i])).string(), t);
  }
}

// Under mpirun or tensorc launch each process is one device of an SPMD run
// (docs/sharding.md): its rank, or -1 when not launched so.
static int64_t launchedRank() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "RANK"})
    if (const char *rank = std::getenv(name); rank && *rank)
      return std::atoll(rank);
  return -1;
}

void runArtifact(const RunArgs &given) {
  // One device of an SPMD run draws its missing inputs from --seed + rank
  // and writes its outputs under OUTPUT_DIR/deviceR, as `tensorc run
  // --devices N` does for each simulated device.
  RunArgs args = given;
  int64_t rank = launchedRank();
  if (rank >= 0) {
    args.seed += uint64_t(rank);
    if (!args.outputDir.empty())
      args.outputDir = (std::filesystem::path(args.outputDir) / ("device" + std::to_string(rank))).string();
  }
  std::shared_ptr<runtime::Executable> exe;
  runtime::LoadOptions load;
  load.threads = args.threads;
  load.kernelVariant = args.variant;
  load.expectSha256 = args.expectSha256;
  load.mode = args.mode;
  load.autotune = args.autotune;
  load.tuneDb = args.tuneDb;
  try {
    exe = runtime::Executable::load(args.file, load);
  } catch (const runtime::Error &e) {
    fail(e.what());
  }
  std::vector<std::pair<std::string, DType>> declared;
  for (const runtime::TensorInfo &i : exe->inputs())
    declared.emplace_back(i.name, DType(int(i.dtype)));
  std::map<std::string, HostTensor> inputs = artifactInputs(
      *exe, readGivenInputs(args, declared), args.seed, parseDimAssignments(args.dims));
  std::map<std::string, int64_t> bindings;
  std::vector<HostTensor> outputs = runExecutable(exe, inputs, args.bench, bindings, rank);
  std::vector<std::string> names;
  for (const runtime::TensorInfo &o : exe->outputs())
    names.push_back(o.name);
  if (rank >= 0)
    std::cout << "device " << rank << ":\n";
  printOutputs(names, outputs, bindings, args);
}

int runCommandLine(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // CLI11 prints the usage error; its codes (100-110) mean nothing to a
    // shell: a usage error exits 2, --help 0.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const Error &e) {
    std::cerr << "tensorc: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "tensorc: out of memory (an allocation failed; a smaller model, batch or --threads needs less)\n";
    return 1;
  } catch (const std::filesystem::filesystem_error &e) {
    std::cerr << "tensorc: " << e.what() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "tensorc: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

} // namespace tensorc::cli
