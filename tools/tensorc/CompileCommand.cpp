// tensorc compile FILE --emit=mlir|json -o OUT: runs the compile pipeline and
// writes the result.
#include "tools/tensorc/Commands.h"

#include "compiler/autodiff/Partition.h"
#include "compiler/driver/Compile.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include "mlir/Support/Timing.h"

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
  bool train = false, accumulate = false, report = false, lossScaling = false, forwardBackward = false;
  int64_t growthInterval = 2000;
  std::string optimizer = "sgd", loss, autocast;
  std::vector<std::string> wrt, of;
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

// The parsed flags as the driver's options; usage errors name the flags.
driver::CompileOptions compileOptions(const CompileArgs &args) {
  driver::CompileOptions o;
  if (!args.target.empty()) {
    check(args.output != "-",
          "--target " + args.target + " writes a binary artifact: give the output file with -o");
    check(args.emit == "mlir", "--emit does not apply to --target " + args.target);
    o.target = args.target == "cuda" ? driver::Target::Cuda : driver::Target::Cpu;
  }
  o.pipeline = args.pipeline;
  o.fuse = args.fuse;
  if (!args.autocast.empty())
    o.autocast = parseDType(args.autocast);
  o.train = args.train;
  autodiff::TrainingStepOptions &t = o.training;
  if (args.train) {
    t.autodiff.wrt = args.wrt;
    if (!args.loss.empty())
      t.autodiff.of = {args.loss};
  }
  t.accumulate = args.accumulate;
  t.lossScaling.enabled = args.lossScaling || args.autocast == "f16";
  t.lossScaling.growthInterval = args.growthInterval;
  t.optimizer.kind = autodiff::parseOptimizer(args.optimizer);
  t.optimizer.lr = args.lr;
  t.optimizer.momentum = args.momentum;
  t.optimizer.weightDecay =
      args.weightDecay.value_or(t.optimizer.kind == autodiff::Optimizer::AdamW ? 0.01 : 0.0);
  t.optimizer.beta1 = args.beta1;
  t.optimizer.beta2 = args.beta2;
  t.optimizer.eps = args.eps;
  o.memoryBudget = args.memoryBudget;
  check(args.train || ((!args.report || args.fuse || args.pipeline != "simplify" || !args.target.empty()) &&
                       !args.accumulate && !args.memoryBudget && args.loss.empty() &&
                       (args.wrt.empty() || args.forwardBackward)),
        "--accumulate, --memory-budget, --wrt and --loss need --train; --report needs --train, "
        "--fuse or --pipeline");
  o.mesh = args.mesh;
  for (const std::string &s : args.shardings)
    (s.find('=') == std::string::npos ? o.shardPresets : o.shardAnnotations).push_back(s);
  o.report = args.report;
  o.runChecks = !args.noRunChecks;
  o.printIrAfterAll = args.printIrAfterAll;
  o.cpu = args.cpu;
  o.arch = args.arch;
  o.convAlgo = args.convAlgo;
  o.mode = args.mode;
  o.autotune = args.autotune;
  o.allowTf32 = args.allowTf32;
  o.precompile = args.precompile;
  o.source = args.file;
  driver::checkOptions(o);
  return o;
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
  cmd->add_flag("--forward-backward", args->forwardBackward,
                "with --target: the forward and backward of the derivatives of --of with respect to "
                "--wrt, split by the min cut and compiled in one process (what tensorc.torch does "
                "for a training partition): writes OUT.forward.tcx, OUT.backward.tcx and the "
                "backward's graph file OUT.backward.json");
  cmd->add_option("--of", args->of, "with --forward-backward: the outputs to differentiate")
      ->delimiter(',');
  cmd->callback([args] {
    driver::CompileOptions options = compileOptions(*args);
    // --timing: one report when the command ends (MLIR's timing manager).
    mlir::DefaultTimingManager timing;
    timing.setEnabled(args->timing);
    mlir::TimingScope root = timing.getRootScope();
    mlir::TimingScope stage = root.nest("load and import");
    noteInputFile(args->file);
    std::unique_ptr<Model> model = loadModel(args->file);
    stage.stop();
    if (args->forwardBackward) {
      check(options.target != driver::Target::None && !options.train && !options.autocast &&
                options.mesh.empty() && options.shardPresets.empty() && options.shardAnnotations.empty(),
            "--forward-backward needs --target and no --train, --autocast, --mesh or --shard");
      autodiff::AutodiffOptions autodiff;
      autodiff.wrt = args->wrt;
      autodiff.of = args->of;
      driver::ForwardBackward parts =
          driver::compileForwardBackward(model->graph, autodiff, options, args->file, root);
      mlir::TimingScope writing = root.nest("writing");
      writeOutputFile(args->output + ".forward.tcx", artifact::serialize(parts.forward));
      writeOutputFile(args->output + ".backward.tcx", artifact::serialize(parts.backward));
      writeOutputFile(args->output + ".backward.json", writeGraphJson(parts.backwardGraph));
      return;
    }
    check(args->of.empty(), "--of needs --forward-backward");
    driver::CompileResult result = driver::compile(*model, options, root);
    mlir::TimingScope writing = root.nest("writing");
    if (result.artifact) {
      writeOutputFile(args->output, artifact::serialize(*result.artifact));
      return;
    }
    // Without a target the step's .forward/.backward siblings are IR too
    // (of the global program: not written for a partitioned step).
    if (result.trainingParts && args->output != "-" && options.mesh.empty() && options.shardPresets.empty() &&
        options.shardAnnotations.empty()) {
      for (auto [graph, part] : {std::pair{&result.trainingParts->forward, "forward"},
                                 std::pair{&result.trainingParts->backward, "backward"}}) {
        GraphAnalysis a = analyzeGraph(*graph, args->file);
        std::string text = args->emit == "json"
                               ? writeGraphJson(*graph)
                               : printModule(*importGraph(*model->context, *graph, a, args->file), args->debugInfo);
        writeOutputFile(sibling(args->output, part), text);
      }
    }
    std::string text = args->emit == "json" ? writeGraphJson(exportGraph(*model->module))
                                            : printModule(*model->module, args->debugInfo);
    writeOutputFile(args->output, text);
  });
}

} // namespace tensorc::cli
