// tensorc compile FILE --emit=mlir|json -o OUT: runs the compile pipeline and
// writes the result.
#include "tools/tensorc/Commands.h"
#include "tools/tensorc/ShardOptions.h"

#include "codegen/cpu/CpuProgram.h"
#include "codegen/cuda/CudaProgram.h"
#include "runtime/cuda/CudaProgram.h"
#include "compiler/autodiff/Partition.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/driver/Model.h"
#include "compiler/driver/RunPipeline.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/sharding/SpmdPartition.h"
#include "compiler/transforms/Autocast.h"
#include "compiler/transforms/BackendPipelines.h"
#include "compiler/transforms/RecognizeAttention.h"
#include "ir/core/Error.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <iostream>
#include <optional>

namespace tensorc::cli {

namespace {
struct CompileArgs {
  std::string file, output = "-", emit = "mlir", pipeline = "simplify", target, cpu = "host",
                   arch = "sm_90", convAlgo = "cudnn", mode = "default", autotune;
  bool printIrAfterAll = false, debugInfo = false, fuse = false, precompile = false,
       allowTf32 = false, noRunChecks = false, timing = false;
  // --train
  bool train = false, accumulate = false, report = false, lossScaling = false;
  int64_t growthInterval = 2000;
  std::string optimizer = "sgd", loss, autocast;
  std::vector<std::string> wrt;
  std::string mesh;                   // --mesh
  std::vector<std::string> shardings; // --shard: presets and NAME=DIMS
  double lr = 1e-3, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::optional<double> weightDecay;
  std::optional<int64_t> memoryBudget;
};

// "out/model.mlir" -> "out/model.forward.mlir"
std::string sibling(const std::string &path, const std::string &part) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + "." + part;
  return path.substr(0, dot) + "." + part + path.substr(dot);
}
} // namespace

void addCompileCommand(CLI::App &app) {
  auto *cmd = app.add_subcommand("compile", "Compile a graph file or .mlir module");
  auto args = std::make_shared<CompileArgs>();
  cmd->add_option("FILE", args->file, "graph file (.json) or tc module (.mlir)")->required();
  cmd->add_option("--emit", args->emit, "what to write: mlir (tc IR) or json (a graph file)")
      ->check(CLI::IsMember({"mlir", "json"}));
  cmd->add_option("-o,--output", args->output, "output path, - for stdout (the default)");
  cmd->add_flag("--print-ir-after-all", args->printIrAfterAll,
                "print the IR to stderr after every pass");
  cmd->add_flag("--debug-info", args->debugInfo, "keep locations (node names) in emitted MLIR");
  cmd->add_option(
         "--pipeline", args->pipeline,
         "simplify (default), cpu or cuda: the backend pipelines decompose, fuse and plan memory")
      ->check(CLI::IsMember({"simplify", "cpu", "cuda"}));
  // --pipeline cuda-codegen is what --target cuda selects (not a user choice).
  cmd->add_option("--target", args->target,
                  "cpu or cuda: compile to an artifact (.tcx) that `tensorc run` and the runtime "
                  "library execute (docs/artifact-format.md); cuda artifacts hold CUDA C++ "
                  "(the GPU runtime comes with the CUDA backend's next step)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--arch", args->arch,
                  "with --target cuda: the GPU architecture (sm_90) for --precompile and the record");
  cmd->add_flag("--precompile", args->precompile,
                "with --target cuda: also compile the kernels with NVRTC for --arch now and store "
                "the binary in the artifact (no JIT at load on that architecture; needs NVRTC here)");
  cmd->add_option("--conv-algo", args->convAlgo,
                  "with --target cuda: conv2d and its gradients on cudnn (cuDNN's engines where the "
                  "runtime finds cuDNN 9, else direct kernels; default), gemm (im2col + cuBLASLt; "
                  "gradients as per-tap GEMMs) or direct (one reduction per output; gradients per-tap GEMMs)")
      ->check(CLI::IsMember({"cudnn", "gemm", "direct"}));
  cmd->add_flag("--allow-tf32", args->allowTf32,
                "with --target cuda: f32 matmuls may round their inputs to TF32 on tensor cores "
                "(faster, ~1e-3 relative error; PyTorch's allow_tf32); off by default");
  cmd->add_option("--cpu", args->cpu,
                  "with --target cpu: the CPU to generate code for: host (default), x86-64, "
                  "x86-64-v2, x86-64-v3, x86-64-v4 or another LLVM CPU name");
  cmd->add_flag("--fuse", args->fuse,
                "group ops into kernels (tc.fused) and plan the memory arena; with --report, print "
                "every kernel, "
                "the refused fusions and the arena");
  cmd->add_option("--autocast", args->autocast,
                  "mixed precision: run matmul/conv/attention in bf16 or f16 (docs/autocast.md)")
      ->check(CLI::IsMember({"bf16", "f16"}));
  cmd->add_flag(
      "--train", args->train,
      "compile a training step: forward, backward and optimizer update in one program; with -o OUT "
      "also writes OUT's .forward and .backward siblings");
  cmd->add_option("--mesh", args->mesh,
                  "partition into the program each device runs (SPMD) over this mesh, AXIS=SIZE,... "
                  "(docs/sharding.md)");
  cmd->add_option("--shard", args->shardings,
                  "with --mesh: ddp, fsdp, tp, tp-head-blocked (presets) or NAME=DIMS for an input or node (per dim `_` or "
                  "mesh axes joined by +); repeatable");
  cmd->add_option("--optimizer", args->optimizer, "with --train: sgd (default), momentum or adamw")
      ->check(CLI::IsMember({"sgd", "momentum", "adamw"}));
  cmd->add_option("--lr", args->lr, "learning rate (default 1e-3)");
  cmd->add_option("--momentum", args->momentum, "momentum for --optimizer momentum (default 0.9)");
  cmd->add_option("--weight-decay", args->weightDecay, "weight decay (default 0; 0.01 for adamw)");
  cmd->add_option("--beta1", args->beta1, "AdamW beta1 (default 0.9)");
  cmd->add_option("--beta2", args->beta2, "AdamW beta2 (default 0.999)");
  cmd->add_option("--eps", args->eps, "AdamW epsilon (default 1e-8)");
  cmd->add_option("--wrt", args->wrt, "parameters to train (default: the trainable inputs)")
      ->delimiter(',');
  cmd->add_option("--loss", args->loss,
                  "the scalar output to minimize (default: the only scalar float output)");
  cmd->add_flag(
      "--loss-scaling", args->lossScaling,
      "with --train: dynamic loss scaling (on by default with --autocast f16); reads and returns "
      "loss_scale and good_steps");
  cmd->add_option("--loss-scale-growth-interval", args->growthInterval,
                  "clean steps before the loss scale doubles (default 2000)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag(
      "--accumulate", args->accumulate,
      "read each parameter's accumulated gradient (`w.grad`) and add this micro-batch's to it");
  cmd->add_option("--memory-budget", args->memoryBudget,
                  "bytes the forward may save for the backward (the .forward/.backward split)");
  cmd->add_option("--mode", args->mode,
                  "with --target cuda: reduce-overhead makes the runtime replay each session's "
                  "launch sequence as a CUDA graph by default (the runtime can override it)")
      ->check(CLI::IsMember({"default", "reduce-overhead"}));
  cmd->add_option("--autotune", args->autotune,
                  "with --target: the autotune mode the runtime uses by default (default, "
                  "max-autotune, strict; docs/autotune.md); the runtime can override it")
      ->check(CLI::IsMember({"default", "max-autotune", "strict"}));
  cmd->add_flag("--timing", args->timing,
                "print where compile time went on stderr: loading, the training step, every pass "
                "(MLIR's pass timing), code generation, NVRTC (--precompile), writing");
  cmd->add_flag("--no-run-checks", args->noRunChecks,
                "compiled code does not check cross_entropy targets and embedding/gather indices "
                "(out-of-range ones are clamped silently instead of failing the run)");
  cmd->add_flag("--report", args->report,
                "with --train: print the saved tensors, bytes and recompute FLOPs");
  cmd->callback([args] {
    check(!args->target.empty() || (!args->precompile && !args->allowTf32),
          "--precompile and --allow-tf32 need --target cuda");
    check(args->mode == "default" || args->target == "cuda",
          "--mode reduce-overhead (CUDA graphs) needs --target cuda");
    check(args->autotune.empty() || !args->target.empty(), "--autotune needs --target cpu or cuda");
    if (!args->target.empty()) {
      check(args->output != "-", "--target " + args->target +
                                     " writes a binary artifact: give the output file with -o");
      check(args->emit == "mlir", "--emit does not apply to --target " + args->target);
      check(args->target == "cuda" || (!args->precompile && !args->allowTf32),
            "--precompile and --allow-tf32 need --target cuda");
      // Until the CUDA kernels have normalization/attention emitters, both
      // targets use the CPU pipeline's decomposition (CUDA keeps gelu).
      args->pipeline = args->target == "cuda" ? "cuda-codegen" : "cpu";
    }
    // --timing: one report when the command ends (MLIR's timing manager).
    mlir::DefaultTimingManager timing;
    timing.setEnabled(args->timing);
    mlir::TimingScope root = timing.getRootScope();
    mlir::TimingScope stage = root.nest("load and import");
    noteInputFile(args->file);
    std::unique_ptr<Model> model = loadModel(args->file);
    stage.stop();
    if (!args->autocast.empty()) {
      try {
        model->graph = transforms::autocastGraph(model->graph, *parseDType(args->autocast));
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
      model->analysis = analyzeGraph(model->graph, args->file);
      model->module = importGraph(*model->context, model->graph, model->analysis, args->file);
    }
    if (args->train) {
      stage = root.nest("training step (autodiff, optimizer, partition)");
      autodiff::TrainingStepOptions options;
      options.autodiff.wrt = args->wrt;
      if (!args->loss.empty())
        options.autodiff.of = {args->loss};
      options.accumulate = args->accumulate;
      options.lossScaling.enabled = args->lossScaling || args->autocast == "f16";
      options.lossScaling.growthInterval = args->growthInterval;
      options.optimizer.kind = autodiff::parseOptimizer(args->optimizer);
      // PyTorch's optimizers' ranges, and finite: a NaN or infinite
      // hyperparameter compiled into every step would make every weight NaN.
      auto inRange = [](const char *flag, double v, double lo, double hi, bool hiOpen) {
        check(std::isfinite(v) && v >= lo && (hiOpen ? v < hi : v <= hi),
              std::string(flag) + " " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                  (std::isinf(hi) ? std::string("inf") : std::to_string(hi)) + (hiOpen ? ")" : "]"));
      };
      const double inf = std::numeric_limits<double>::infinity();
      inRange("--lr", args->lr, 0, inf, true);
      inRange("--momentum", args->momentum, 0, 1, true);
      inRange("--beta1", args->beta1, 0, 1, true);
      inRange("--beta2", args->beta2, 0, 1, true);
      inRange("--eps", args->eps, 0, inf, true);
      if (args->weightDecay)
        inRange("--weight-decay", *args->weightDecay, 0, inf, true);
      options.optimizer.lr = args->lr;
      options.optimizer.momentum = args->momentum;
      options.optimizer.weightDecay = args->weightDecay.value_or(
          options.optimizer.kind == autodiff::Optimizer::AdamW ? 0.01 : 0.0);
      options.optimizer.beta1 = args->beta1;
      options.optimizer.beta2 = args->beta2;
      options.optimizer.eps = args->eps;
      autodiff::TrainingStep step;
      autodiff::PartitionResult parts;
      try {
        model->graph = transforms::recognizeAttention(model->graph);
        step = autodiff::buildTrainingStep(model->graph, options);
        autodiff::AutodiffOptions separate = options.autodiff;
        separate.separateBackward = true;
        autodiff::JointGraph joint = autodiff::buildJointGraph(model->graph, separate);
        autodiff::PartitionOptions partition;
        partition.memoryBudget = args->memoryBudget;
        parts = autodiff::partitionJointGraph(model->graph, joint, partition);
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
      if (args->report)
        std::cout << autodiff::partitionReport(parts);
      model->graph = step.graph;
      model->analysis = analyzeGraph(step.graph, args->file);
      model->module = importGraph(*model->context, model->graph, model->analysis, args->file);
      stage.stop();
      // Artifacts hold the whole step; the .forward/.backward siblings are IR
      // (of the global program: not written for a partitioned step).
      if (args->output != "-" && args->target.empty() && args->mesh.empty() && args->shardings.empty()) {
        for (auto [graph, part] :
             {std::pair{&parts.forward, "forward"}, std::pair{&parts.backward, "backward"}}) {
          GraphAnalysis a = analyzeGraph(*graph, args->file);
          std::string text = args->emit == "json"
                                 ? writeGraphJson(*graph)
                                 : printModule(*importGraph(*model->context, *graph, a, args->file),
                                               args->debugInfo);
          writeOutputFile(sibling(args->output, part), text);
        }
      }
    } else {
      check(!args->accumulate && (!args->report || args->fuse || args->pipeline != "simplify") &&
                !args->memoryBudget && args->wrt.empty() && args->loss.empty(),
            "--accumulate, --memory-budget, --wrt and --loss need --train; --report needs --train, "
            "--fuse or --pipeline");
    }
    if (!args->mesh.empty() || !args->shardings.empty()) {
      stage = root.nest("sharding (propagation, SPMD partition)");
      std::vector<std::string> presets, annotations;
      for (const std::string &s : args->shardings)
        (s.find('=') == std::string::npos ? presets : annotations).push_back(s);
      try {
        model->graph = partitionWithOptions(model->graph, args->mesh, presets, annotations,
                                            !args->noRunChecks)
                           .local;
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
      model->analysis = analyzeGraph(model->graph, args->file);
      model->module = importGraph(*model->context, model->graph, model->analysis, args->file);
      stage.stop();
    }
    mlir::PassManager pm(model->context.get());
    PipelineOptions pipeline;
    pipeline.report = args->report;
    pipeline.runChecks = !args->noRunChecks;
    pipeline.convolutionLibrary = args->target == "cuda" && args->convAlgo == "cudnn";
    if (args->pipeline == "cpu")
      buildCpuPipeline(pm, pipeline);
    else if (args->pipeline == "cuda-codegen")
      buildCudaCodegenPipeline(pm, pipeline);
    else if (args->pipeline == "cuda")
      buildCudaPipeline(pm, pipeline);
    else if (args->fuse)
      buildKernelPipeline(pm, pipeline);
    else
      buildSimplifyPipeline(pm, pipeline);
    if (args->printIrAfterAll)
      pm.enableIRPrinting([](mlir::Pass *, mlir::Operation *) { return false; },
                          [](mlir::Pass *, mlir::Operation *) { return true; },
                          /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                          /*printAfterOnlyOnFailure=*/false, llvm::errs());
    if (args->timing) {
      mlir::TimingScope passes = root.nest("pipeline");
      pm.enableTiming(passes);
      runPipeline(pm, *model->module, args->file);
    } else {
      runPipeline(pm, *model->module, args->file);
    }
    stage = root.nest("code generation and writing");
    if (args->target == "cpu") {
      codegen::cpu::CpuCompileOptions options;
      options.cpu = args->cpu;
      options.record = {{"target", "cpu"}, {"cpu", args->cpu}, {"source", args->file}};
      if (args->train)
        options.record["train"] = args->optimizer;
      if (!args->autocast.empty())
        options.record["autocast"] = args->autocast;
      if (!args->autotune.empty())
        options.record["autotune"] = args->autotune;
      artifact::Artifact art;
      try {
        art = codegen::cpu::compileCpuArtifact(*model->module, options);
      } catch (const Error &e) {
        fail(args->file + ": " + e.what());
      }
      art.tensorcVersion = TENSORC_VERSION;
      writeOutputFile(args->output, artifact::serialize(art));
      return;
    }
    if (args->target == "cuda") {
      codegen::cuda::CudaCompileOptions options;
      options.arch = args->arch;
      options.conv = args->convAlgo;
      options.record = {{"target", "cuda"}, {"arch", args->arch}, {"source", args->file}};
      if (args->allowTf32)
        options.record["allow_tf32"] = "true";
      if (args->mode != "default")
        options.record["mode"] = args->mode;
      if (!args->autotune.empty())
        options.record["autotune"] = args->autotune;
      artifact::Artifact art;
      try {
        art = codegen::cuda::compileCudaArtifact(*model->module, options);
        art.tensorcVersion = TENSORC_VERSION;
        if (args->precompile) {
          stage.stop();
          stage = root.nest("NVRTC (--precompile " + args->arch + ")");
          cuda::precompile(art, args->arch, args->file);
        }
      } catch (const Error &e) {
        fail(std::string(e.what()).rfind(args->file, 0) == 0 ? e.what() : args->file + ": " + e.what());
      }
      writeOutputFile(args->output, artifact::serialize(art));
      return;
    }
    std::string text = args->emit == "json" ? writeGraphJson(exportGraph(*model->module))
                                            : printModule(*model->module, args->debugInfo);
    writeOutputFile(args->output, text);
  });
}

} // namespace tensorc::cli
