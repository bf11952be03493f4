// The one compile path: a loaded model through the stages its options ask for
// (autocast, the training step, the SPMD partition: all on the graph, then one
// import), the target's registered pipeline, code generation and NVRTC
// (--precompile), to an artifact or the transformed module. `tensorc compile`,
// `tensorc run` of a graph on a target, the Python bridge (through the CLI),
// the tests and the benchmarks are its callers.
#pragma once

#include "compiler/autodiff/Partition.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/Model.h"
#include "runtime/artifact/Artifact.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir {
class TimingScope;
} // namespace mlir

namespace tensorc::driver {

enum class Target { None, Cpu, Cuda };

struct CompileOptions {
  Target target = Target::None;
  // Without a target, the pipeline to run: simplify (default), cpu, cuda,
  // or the kernel pipeline (fusion and the memory plan) with `fuse`.
  std::string pipeline = "simplify";
  bool fuse = false;
  std::optional<DType> autocast; // mixed precision (docs/autocast.md)
  // A training step: forward, backward and optimizer update in one program.
  bool train = false;
  autodiff::TrainingStepOptions training;
  std::optional<int64_t> memoryBudget; // bytes the forward may save
  // SPMD: the mesh (AXIS=SIZE,...), presets and NAME=DIMS annotations.
  std::string mesh;
  std::vector<std::string> shardPresets, shardAnnotations;
  bool report = false;    // training-partition, fusion and memory-plan reports on stdout
  bool runChecks = true;  // index range checks raised after a run
  bool printIrAfterAll = false;
  // Code generation.
  std::string cpu = "host";      // cpu: the LLVM CPU name
  std::string arch = "sm_90";    // cuda: the architecture recorded and for precompile
  std::string convAlgo = "cudnn";
  std::string mode = "default";  // cuda: reduce-overhead (CUDA graphs)
  std::string autotune;          // recorded default autotune mode
  bool allowTf32 = false, precompile = false;
  // cuda: a linear layer's bias gradient on its weight-gradient GEMM
  // (cuBLASLt's bgrad epilogue; off by default, docs/cuda-backend.md).
  bool gemmBiasGradient = false;
  // A note of where the graph came from, recorded in the artifact.
  std::string source;
};

struct CompileResult {
  std::optional<artifact::Artifact> artifact; // with a target
  // With `train`: the step's forward and backward graphs (the min-cut split).
  std::optional<autodiff::PartitionResult> trainingParts;
};

// Checks the options against each other (Error naming the flags at fault).
void checkOptions(const CompileOptions &options);

// Every stage on `model`: its graph, then its module, end as the last stage
// left them. `timing` (may be disabled) gets one nested scope per stage.
// Throws Error naming the model's file.
CompileResult compile(Model &model, const CompileOptions &options, mlir::TimingScope &timing);
CompileResult compile(Model &model, const CompileOptions &options);

// A module that already is tc IR: the target's pipeline and code generation
// (what the fuzzers, benchmarks and GPU case generator compile with).
artifact::Artifact compileModule(mlir::ModuleOp module, const CompileOptions &options,
                                 const std::string &where);

// A training partition as the Python bridge compiles it, in one process: the
// joint graph of `graph` (derivatives of `of` with respect to `wrt`), split
// by the min cut, the forward and backward each compiled for the target;
// the forward's outputs listed once ("h" and "h:0" are one value: the first
// spelling stays).
struct ForwardBackward {
  Graph forwardGraph, backwardGraph;
  artifact::Artifact forward, backward;
};
ForwardBackward compileForwardBackward(const Graph &graph, const autodiff::AutodiffOptions &autodiff,
                                       const CompileOptions &options, const std::string &where);
// The same, timed under `timing` (tensorc compile --timing): the autodiff
// and partition, then the forward's and the backward's stages.
ForwardBackward compileForwardBackward(const Graph &graph, const autodiff::AutodiffOptions &autodiff,
                                       const CompileOptions &options, const std::string &where,
                                       mlir::TimingScope &timing);

} // namespace tensorc::driver
