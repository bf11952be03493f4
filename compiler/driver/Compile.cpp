#include "compiler/driver/Compile.h"

#include "codegen/cpu/CpuProgram.h"
#include "codegen/cuda/CudaProgram.h"
#include "compiler/autodiff/Autodiff.h"
#include "compiler/driver/RunPipeline.h"
#include "compiler/driver/ShardOptions.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/transforms/Autocast.h"
#include "compiler/transforms/BackendPipelines.h"
#include "compiler/transforms/RecognizeAttention.h"
#include "ir/core/Error.h"
#include "passes/Pipelines.h"
#include "runtime/cuda/CudaProgram.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <thread>

namespace tensorc::driver {

namespace {

// An Error from a stage, naming the file once.
[[noreturn]] void failIn(const std::string &where, const Error &e) {
  std::string what = e.what();
  fail(what.rfind(where, 0) == 0 ? what : where + ": " + what);
}

// PyTorch's optimizers' ranges, and finite: a NaN or infinite
// hyperparameter compiled into every step would make every weight NaN.
void checkOptimizer(const autodiff::OptimizerOptions &o) {
  auto inRange = [](const char *flag, double v, double lo, double hi, bool hiOpen) {
    check(std::isfinite(v) && v >= lo && (hiOpen ? v < hi : v <= hi),
          std::string(flag) + " " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
              (std::isinf(hi) ? std::string("inf") : std::to_string(hi)) + (hiOpen ? ")" : "]"));
  };
  const double inf = std::numeric_limits<double>::infinity();
  inRange("--lr", o.lr, 0, inf, true);
  inRange("--momentum", o.momentum, 0, 1, true);
  inRange("--beta1", o.beta1, 0, 1, true);
  inRange("--beta2", o.beta2, 0, 1, true);
  inRange("--eps", o.eps, 0, inf, true);
  inRange("--weight-decay", o.weightDecay, 0, inf, true);
}

void buildPipeline(mlir::PassManager &pm, const CompileOptions &options) {
  PipelineOptions pipeline;
  pipeline.report = options.report;
  pipeline.runChecks = options.runChecks;
  pipeline.convolutionLibrary = options.target == Target::Cuda && options.convAlgo == "cudnn";
  // A target compiles with its registered pipeline: the CPU's, or for CUDA
  // the CPU pipeline's decomposition less gelu (matmul epilogues absorb it).
  if (options.target == Target::Cpu || (options.target == Target::None && options.pipeline == "cpu"))
    buildCpuPipeline(pm, pipeline);
  else if (options.target == Target::Cuda)
    buildCudaCodegenPipeline(pm, pipeline);
  else if (options.pipeline == "cuda")
    buildCudaPipeline(pm, pipeline);
  else if (options.fuse)
    buildKernelPipeline(pm, pipeline);
  else
    buildSimplifyPipeline(pm, pipeline);
  if (options.printIrAfterAll)
    pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                        [](mlir::Pass *, mlir::Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, llvm::errs());
}

artifact::Artifact generate(mlir::ModuleOp module, const CompileOptions &options, const std::string &where,
                            mlir::TimingScope &timing) {
  mlir::TimingScope stage = timing.nest("code generation");
  std::map<std::string, std::string> record;
  if (!options.source.empty())
    record["source"] = options.source;
  if (options.train)
    record["train"] = autodiff::optimizerName(options.training.optimizer.kind);
  if (!options.autotune.empty())
    record["autotune"] = options.autotune;
  artifact::Artifact art;
  try {
    if (options.target == Target::Cpu) {
      codegen::cpu::CpuCompileOptions cpu;
      cpu.cpu = options.cpu;
      cpu.record = record;
      cpu.record["target"] = "cpu";
      cpu.record["cpu"] = options.cpu;
      if (options.autocast)
        cpu.record["autocast"] = dtypeName(*options.autocast);
      art = codegen::cpu::compileCpuArtifact(module, cpu);
      art.tensorcVersion = TENSORC_VERSION;
      return art;
    }
    codegen::cuda::CudaCompileOptions cuda;
    cuda.arch = options.arch;
    cuda.conv = options.convAlgo;
    cuda.gemmBiasGradient = options.gemmBiasGradient;
    cuda.record = record;
    cuda.record["target"] = "cuda";
    cuda.record["arch"] = options.arch;
    if (options.allowTf32)
      cuda.record["allow_tf32"] = "true";
    if (options.mode != "default")
      cuda.record["mode"] = options.mode;
    art = codegen::cuda::compileCudaArtifact(module, cuda);
    art.tensorcVersion = TENSORC_VERSION;
    if (options.precompile) {
      stage.stop();
      mlir::TimingScope nvrtc = timing.nest("NVRTC (--precompile " + options.arch + ")");
      cuda::precompile(art, options.arch, where);
    }
  } catch (const Error &e) {
    failIn(where, e);
  }
  return art;
}

// The model's module again from its (transformed) graph.
void reimport(Model &model) {
  model.analysis = analyzeGraph(model.graph, model.path);
  model.module = importGraph(*model.context, model.graph, model.analysis, model.path);
}

} // namespace

void checkOptions(const CompileOptions &o) {
  bool cuda = o.target == Target::Cuda;
  check(cuda || (!o.precompile && !o.allowTf32), "--precompile and --allow-tf32 need --target cuda");
  check(o.mode == "default" || cuda, "--mode reduce-overhead (CUDA graphs) needs --target cuda");
  check(o.autotune.empty() || o.target != Target::None, "--autotune needs --target cpu or cuda");
  check(o.train || (!o.training.accumulate && !o.memoryBudget && o.training.autodiff.wrt.empty() &&
                    o.training.autodiff.of.empty()),
        "--accumulate, --memory-budget, --wrt and --loss need --train");
  if (o.train)
    checkOptimizer(o.training.optimizer);
}

CompileResult compile(Model &model, const CompileOptions &options, mlir::TimingScope &timing) {
  checkOptions(options);
  const std::string &where = model.path;
  CompileResult result;
  // The graph stages, then one import of what they made.
  bool graphChanged = false;
  if (options.autocast) {
    try {
      model.graph = transforms::autocastGraph(model.graph, *options.autocast);
    } catch (const Error &e) {
      failIn(where, e);
    }
    graphChanged = true;
  }
  if (options.train) {
    mlir::TimingScope stage = timing.nest("training step (autodiff, optimizer, partition)");
    try {
      model.graph = transforms::recognizeAttention(model.graph);
      autodiff::TrainingStep step = autodiff::buildTrainingStep(model.graph, options.training);
      autodiff::AutodiffOptions separate = options.training.autodiff;
      separate.separateBackward = true;
      autodiff::JointGraph joint = autodiff::buildJointGraph(model.graph, separate);
      autodiff::PartitionOptions partition;
      partition.memoryBudget = options.memoryBudget;
      result.trainingParts = autodiff::partitionJointGraph(model.graph, joint, partition);
      if (options.report) // before the pipeline's reports, all on stdout
        std::cout << autodiff::partitionReport(*result.trainingParts);
      model.graph = std::move(step.graph);
    } catch (const Error &e) {
      failIn(where, e);
    }
    graphChanged = true;
  }
  if (!options.mesh.empty() || !options.shardPresets.empty() || !options.shardAnnotations.empty()) {
    mlir::TimingScope stage = timing.nest("sharding (propagation, SPMD partition)");
    try {
      model.graph = partitionWithOptions(model.graph, options.mesh, options.shardPresets,
                                         options.shardAnnotations, options.runChecks)
                        .local;
    } catch (const Error &e) {
      failIn(where, e);
    }
    graphChanged = true;
  }
  if (graphChanged) {
    mlir::TimingScope stage = timing.nest("import");
    reimport(model);
  }
  mlir::PassManager pm(model.context.get());
  buildPipeline(pm, options);
  {
    mlir::TimingScope passes = timing.nest("pipeline");
    if (passes)
      pm.enableTiming(passes);
    runPipeline(pm, *model.module, where);
  }
  if (options.target != Target::None)
    result.artifact = generate(*model.module, options, where, timing);
  return result;
}

CompileResult compile(Model &model, const CompileOptions &options) {
  mlir::DefaultTimingManager off;
  mlir::TimingScope root = off.getRootScope();
  return compile(model, options, root);
}

artifact::Artifact compileModule(mlir::ModuleOp module, const CompileOptions &options, const std::string &where) {
  check(options.target != Target::None, where + ": compileModule needs a target");
  mlir::DefaultTimingManager off;
  mlir::TimingScope root = off.getRootScope();
  mlir::PassManager pm(module.getContext());
  buildPipeline(pm, options);
  runPipeline(pm, module, where);
  return generate(module, options, where, root);
}

ForwardBackward compileForwardBackward(const Graph &graph, const autodiff::AutodiffOptions &autodiff,
                                       const CompileOptions &options, const std::string &where) {
  mlir::DefaultTimingManager off;
  mlir::TimingScope root = off.getRootScope();
  return compileForwardBackward(graph, autodiff, options, where, root);
}

ForwardBackward compileForwardBackward(const Graph &graph, const autodiff::AutodiffOptions &autodiff,
                                       const CompileOptions &options, const std::string &where,
                                       mlir::TimingScope &timing) {
  check(options.target != Target::None && !options.train && !options.autocast && options.mesh.empty(),
        where + ": a forward and backward compile for a target, without --train, --autocast or --mesh");
  ForwardBackward out;
  mlir::TimingScope split = timing.nest("autodiff and min-cut partition");
  try {
    Graph recognized = transforms::recognizeAttention(graph);
    autodiff::AutodiffOptions separate = autodiff;
    separate.separateBackward = true;
    autodiff::JointGraph joint = autodiff::buildJointGraph(recognized, separate);
    autodiff::PartitionResult parts = autodiff::partitionJointGraph(recognized, joint, {});
    out.forwardGraph = std::move(parts.forward);
    out.backwardGraph = std::move(parts.backward);
  } catch (const Error &e) {
    failIn(where, e);
  }
  // The partition lists what the backward needs after the model's outputs;
  // one the model returns already is one output, not a copy in a second.
  // (Results only: the run-time checks' flags follow them.)
  std::vector<std::string> &outputs = out.forwardGraph.outputs;
  const size_t results = out.forwardGraph.resultCount();
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (i >= results || seen.insert(outputs[i].find(':') == std::string::npos ? outputs[i] + ":0" : outputs[i]).second)
      unique.push_back(outputs[i]);
  outputs = std::move(unique);
  split.stop();
  // The two compiles side by side, each in its own MLIR context (the CPU
  // target's LLVM code generation of a Swin-T partition: 21 s and 28 s),
  // each timed under its own name (the report shows both threads').
  auto compilePart = [&](const Graph &part, const char *name) {
    mlir::TimingScope scope = timing.nest(name);
    Model model;
    model.path = where;
    model.context = std::make_unique<mlir::MLIRContext>();
    model.context->disableMultithreading();
    loadTensorcDialects(*model.context);
    model.graph = part;
    try {
      mlir::TimingScope stage = scope.nest("load and import");
      reimport(model);
    } catch (const Error &e) {
      failIn(where, e);
    }
    return *compile(model, options, scope).artifact;
  };
  std::exception_ptr backwardFailed;
  std::thread backward([&] {
    try {
      out.backward = compilePart(out.backwardGraph, "backward");
    } catch (...) {
      backwardFailed = std::current_exception();
    }
  });
  try {
    out.forward = compilePart(out.forwardGraph, "forward");
  } catch (...) {
    backward.join();
    throw;
  }
  backward.join();
  if (backwardFailed)
    std::rethrow_exception(backwardFailed);
  return out;
}

} // namespace tensorc::driver
