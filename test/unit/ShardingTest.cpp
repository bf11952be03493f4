// Sharding propagation and SPMD partitioning: every partitioned program,
// run on the interpreter's simulated devices, gives each device its shard of
// what the global program computes (docs/sharding.md).
#include "TestUtil.h"

#include "compiler/autodiff/Autodiff.h"
#include "compiler/autodiff/TrainingStep.h"
#include "compiler/graph/GraphJson.h"
#include "compiler/sharding/Presets.h"
#include "compiler/sharding/SpmdPartition.h"
#include "compiler/transforms/RunChecks.h"
#include "ir/core/Error.h"

#include <algorithm>
#include <random>
#include <set>

using namespace tensorc;
using namespace tensorc::testing;
using namespace tensorc::sharding;
using trace::Tensor;
using trace::Tracer;

namespace {

std::map<std::string, HostTensor> randomInputs(const Graph &g, uint64_t seed,
                                               const std::map<std::string, int64_t> &bindings) {
  std::mt19937_64 rng(seed);
  std::map<std::string, HostTensor> inputs;
  for (const GraphInput &in : g.inputs) {
    HostTensor t(in.spec.dtype, concreteShape(in.spec.shape, bindings));
    // Adam's second moments are squares: never negative.
    double lo = in.name.find("exp_avg_sq") != std::string::npos ? 0.0 : -1.0;
    for (int64_t i = 0; i < t.numel(); ++i)
      isFloat(in.spec.dtype) ? t.setF(i, std::uniform_real_distribution<double>(lo, 1)(rng))
                             : t.setI(i, std::uniform_int_distribution<int64_t>(0, 4)(rng));
    inputs.emplace(in.name, t);
  }
  return inputs;
}

// Partitions `g` (its inputs' shardings set), runs the global program and
// the per-device one, and checks every device's outputs against its shards
// of the global outputs. Returns the partition for further checks.
// `bindings`: the global sizes of symbolic dims.
SpmdProgram expectPartitionMatches(const Graph &g, double tol = 1e-12,
                                   const std::map<std::string, int64_t> &bindings = {}) {
  uint64_t seed = freshSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  GraphAnalysis a = analyzeGraph(g, "global");
  ShardingPlan plan = propagateShardings(g, a);
  SpmdProgram spmd = partitionSpmd(g, a, plan);
  GraphAnalysis la = analyzeGraph(spmd.local, "local");
  std::map<std::string, HostTensor> inputs = randomInputs(g, seed, bindings);
  std::vector<HostTensor> want = interpret(g, a, inputs).outputs;
  int64_t devices = plan.mesh.numDevices();
  std::vector<std::map<std::string, HostTensor>> local(static_cast<size_t>(devices));
  for (size_t i = 0; i < g.inputs.size(); ++i)
    for (int64_t d = 0; d < devices; ++d)
      local[size_t(d)].emplace(g.inputs[i].name,
                               shardOf(inputs.at(g.inputs[i].name), spmd.inputShardings[i], plan.mesh, d));
  std::vector<InterpreterResult> got = interpretSpmd(spmd.local, la, local);
  for (int64_t d = 0; d < devices; ++d)
    for (size_t o = 0; o < g.resultCount(); ++o) {
      HostTensor expected = shardOf(want[o], spmd.outputShardings[o], plan.mesh, d);
      const HostTensor &out = got[size_t(d)].outputs[o];
      EXPECT_EQ(out.shape(), expected.shape()) << g.outputs[o] << " on device " << d;
      if (out.shape() != expected.shape())
        continue;
      for (int64_t i = 0; i < out.numel(); ++i)
        EXPECT_NEAR(out.getF(i), expected.getF(i), tol * std::max(1.0, std::fabs(expected.getF(i))))
            << g.outputs[o] << "[" << i << "] on device " << d;
    }
  return spmd;
}

// A two-layer MLP's training graph: the loss and every parameter's gradient.
Graph mlpTraining(const std::string &reduction = "sum") {
  Tracer t("mlp");
  Tensor x = t.input("x", DType::F64, {8, 12});
  Tensor labels = t.input("labels", DType::I64, {8});
  Tensor w1 = t.parameter("w1", DType::F64, {12, 16});
  Tensor b1 = t.parameter("b1", DType::F64, {16});
  Tensor w2 = t.parameter("w2", DType::F64, {16, 6});
  Tensor b2 = t.parameter("b2", DType::F64, {6});
  Tensor h = tanh(matmul(x, w1) + b1);
  Tensor logits = matmul(h, w2) + b2;
  t.output(cross_entropy(logits, labels, reduction).named("loss"));
  return autodiff::buildJointGraph(t.graph(), {}).graph;
}

// Shardings of inputs and of nodes, by name.
void shard(Graph &g, const Mesh &mesh, const std::map<std::string, DimAxes> &shardings) {
  g.meshes = {mesh};
  for (GraphInput &in : g.inputs)
    if (shardings.count(in.name))
      in.sharding = Sharding{mesh.name, shardings.at(in.name)};
  for (Node &n : g.nodes)
    if (shardings.count(n.name))
      n.sharding = Sharding{mesh.name, shardings.at(n.name)};
}

// `g` on a mesh of one `model` axis of `devices` under --preset `preset`,
// and its propagated plan.
ShardingPlan presetPlan(Graph &g, int64_t devices, const std::string &preset) {
  g.meshes = {Mesh{"mesh", {"model"}, {devices}}};
  applyPreset(g, preset);
  GraphAnalysis a = analyzeGraph(g, g.name);
  return propagateShardings(g, a);
}

bool communicates(const SpmdProgram &p, const std::string &what) {
  for (const Communication &c : p.communication)
    if (c.collective.find(what) != std::string::npos)
      return true;
  return false;
}

std::string report(const SpmdProgram &p) {
  std::string out;
  for (const Communication &c : p.communication)
    out += c.node + ": " + c.value + ": " + c.collective + "\n";
  return out;
}

TEST(Sharding, DataParallelMlp) {
  for (int64_t devices : {2, 4, 8})
    for (const char *reduction : {"sum", "mean"}) {
      SCOPED_TRACE(std::to_string(devices) + " devices, " + reduction);
      Graph g = mlpTraining(reduction);
      shard(g, Mesh{"mesh", {"data"}, {devices}}, {{"x", {{"data"}, {}}}, {"labels", {{"data"}}}});
      SpmdProgram p = expectPartitionMatches(g);
      // Parameters stay whole; their gradients are all-reduced partial sums.
      EXPECT_TRUE(communicates(p, "all_reduce (sum) over [data]")) << report(p);
      EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
    }
}

// A symbolic batch B split over `data` is each device's batch: the global
// program runs on devices * B rows.
TEST(Sharding, SymbolicBatch) {
  Graph g = readGraphFile(TENSORC_EXAMPLES_DIR "/mlp.json");
  for (GraphInput &in : g.inputs)
    if (in.spec.dtype == DType::F32)
      in.spec.dtype = DType::F64;
  g = autodiff::buildJointGraph(g, {}).graph;
  shard(g, Mesh{"mesh", {"data"}, {3}}, {{"x", {{"data"}, {}}}});
  SpmdProgram p = expectPartitionMatches(g, 1e-9, {{"B", 6}});
  EXPECT_EQ(p.local.inputs[0].spec.str(), "(B, 784) f64");
}

// The transformer block (reshapes into heads, attention, layer norms): its
// training graph under data parallelism.
// The transformer block's training graph in f64 over mesh data=2 with a
// preset applied.
Graph transformerBlockTraining(const std::string &preset) {
  Graph g = readGraphFile(TENSORC_EXAMPLES_DIR "/transformer_block.json");
  for (GraphInput &in : g.inputs)
    if (in.spec.dtype == DType::F32)
      in.spec.dtype = DType::F64;
  g = autodiff::buildJointGraph(g, {}).graph;
  g.meshes = {Mesh{"mesh", {"data"}, {2}}};
  applyPreset(g, preset);
  return g;
}

TEST(Sharding, DataParallelTransformerBlock) {
  Graph g = transformerBlockTraining("ddp");
  SpmdProgram p = expectPartitionMatches(g, 1e-9, {{"B", 4}, {"T", 3}});
  // Pure data parallelism: reshapes into heads, splits and slices keep the
  // batch split; the only communication is one all_reduce per gradient.
  size_t parameters = 0;
  for (const GraphInput &in : g.inputs)
    parameters += in.trainable;
  EXPECT_EQ(p.communication.size(), parameters) << report(p);
  EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
}

// The fsdp preset on the transformer block's training graph (batch split
// too): the computation lies as under DDP. Each parameter is gathered once
// (forward and backward read the same gather), each gradient is a partial
// sum reduce-scattered where it leaves; no activation moves. (Letting the
// parameters' split spread into the backward reduce-scattered and gathered
// whole activations: 182 MiB a step for a GPT-2 block instead of 20.)
TEST(Sharding, FullyShardedTransformerBlockMovesOnlyParameters) {
  Graph g = transformerBlockTraining("fsdp");
  std::set<std::string> parameters;
  for (const GraphInput &in : g.inputs)
    if (in.trainable)
      parameters.insert(in.name);
  SpmdProgram p = expectPartitionMatches(g, 1e-9, {{"B", 4}, {"T", 3}});
  size_t gathers = 0, scatters = 0;
  for (const Communication &c : p.communication) {
    bool gather = c.collective.find("all_gather") != std::string::npos;
    bool scatter = c.collective.find("reduce_scatter") != std::string::npos;
    gathers += gather;
    scatters += scatter;
    if (gather)
      EXPECT_TRUE(parameters.count(c.value)) << "gathers a non-parameter:\n" << report(p);
    else if (scatter)
      EXPECT_EQ(c.value.rfind("grad_", 0), 0u) << "reduce-scatters a non-gradient:\n" << report(p);
    else // an all_reduce: only of an output (a loss)
      EXPECT_NE(std::find(g.outputs.begin(), g.outputs.end(), parseValueRef(c.value).producer), g.outputs.end())
          << "moves an activation:\n" << report(p);
  }
  EXPECT_LE(gathers, parameters.size()) << report(p);
  EXPECT_GT(scatters, 0u) << report(p);
}

// Whole AdamW training steps (loss, updated parameters and moments) of the
// MLP and the transformer block under each preset, on 2, 4 and 8 devices,
// equal to the one-device step.
TEST(Sharding, TrainingStepsUnderPresets) {
  for (const char *example : {"mlp.json", "transformer_block.json"}) {
    Graph forward = readGraphFile(std::string(TENSORC_EXAMPLES_DIR "/") + example);
    if (forward.outputs.size() == 1 && forward.outputs[0] == "y") { // the block: a scalar loss of y
      Graph body = forward;
      body.outputs.clear();
      Tracer t(body);
      Tensor y = t.value("y");
      t.output(mean(y * y).named("loss"));
      forward = t.graph();
    }
    for (GraphInput &in : forward.inputs)
      if (in.spec.dtype == DType::F32)
        in.spec.dtype = DType::F64;
    autodiff::TrainingStepOptions options;
    options.optimizer.kind = autodiff::Optimizer::AdamW;
    options.optimizer.lr = 0.01;
    options.optimizer.weightDecay = 0.1;
    Graph step = autodiff::buildTrainingStep(forward, options).graph;
    for (const char *preset : {"ddp", "fsdp"})
      for (int64_t devices : {2, 4, 8}) {
        SCOPED_TRACE(std::string(example) + ", " + preset + ", " + std::to_string(devices) + " devices");
        Graph g = step;
        g.meshes = {Mesh{"mesh", {"data"}, {devices}}};
        applyPreset(g, preset);
        SpmdProgram p = expectPartitionMatches(g, 1e-9, {{"B", 2 * devices}, {"T", 3}});
        if (std::string(preset) == "fsdp")
          EXPECT_TRUE(communicates(p, "reduce_scatter")) << report(p);
      }
  }
}

// The tp preset finds the Megatron pairs: the MLP's two layers, the
// transformer block's fc and fc_proj (its fused QKV weight stays whole: one
// matmul split three ways is not three column-parallel layers); with
// tp-head-blocked the fused QKV projection splits by heads too, with the
// output projection (symbolic batch and sequence, heads through permutes,
// beside DDP on a 2 x 2 mesh).
TEST(Sharding, TensorParallelPreset) {
  Graph mlp = mlpTraining();
  ShardingPlan plan = presetPlan(mlp, 2, "tp");
  EXPECT_EQ(dimAxesStr(plan.of("w1")), "[_, model]");
  EXPECT_EQ(dimAxesStr(plan.of("b1")), "[model]");
  EXPECT_EQ(dimAxesStr(plan.of("w2")), "[model, _]");
  expectPartitionMatches(mlp);

  Graph joint = readGraphFile(TENSORC_EXAMPLES_DIR "/transformer_block.json");
  for (GraphInput &in : joint.inputs)
    if (in.spec.dtype == DType::F32)
      in.spec.dtype = DType::F64;
  joint = autodiff::buildJointGraph(joint, {}).graph;
  for (const char *tp : {"tp", "tp-head-blocked"}) {
    SCOPED_TRACE(tp);
    Graph block = joint;
    block.meshes = {Mesh{"mesh", {"data", "model"}, {2, 2}}};
    applyPreset(block, "ddp");
    EXPECT_EQ(applyPreset(block, tp).size(), std::string(tp) == "tp" ? 0u : 1u); // the layout note
    GraphAnalysis ba = analyzeGraph(block, "block");
    ShardingPlan blockPlan = propagateShardings(block, ba);
    EXPECT_EQ(dimAxesStr(blockPlan.of("fc_w")), "[_, model]");
    EXPECT_EQ(dimAxesStr(blockPlan.of("fc_proj_w")), "[model, _]");
    bool heads = std::string(tp) != "tp";
    EXPECT_EQ(dimAxesStr(blockPlan.of("attn_w")), heads ? "[_, model]" : "[_, _]");
    EXPECT_EQ(dimAxesStr(blockPlan.of("attn_b")), heads ? "[model]" : "[_]");
    EXPECT_EQ(dimAxesStr(blockPlan.of("proj_w")), heads ? "[model, _]" : "[_, _]");
    expectPartitionMatches(block, 1e-9, {{"B", 4}, {"T", 3}});
  }
}

// Attention with separate q, k and v projections (Megatron's layout): the
// tp preset splits the heads: q, k and v by columns, the output projection
// by rows, as with the MLP's pair after it; through the attention op and
// through explicit scores, softmax and products alike. Every device's
// results equal its shard of the one-device step.
TEST(Sharding, TensorParallelPresetSplitsAttentionHeads) {
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "scaled_dot_product_attention" : "matmul, softmax, matmul");
    const int64_t b = 2, s = 3, d = 8, heads = 4;
    Tracer t("heads");
    Tensor x = t.input("x", DType::F64, {b, s, d});
    auto linear = [&](const Tensor &in, const std::string &name, int64_t from, int64_t to) {
      return matmul(in, t.parameter(name + "_w", DType::F64, {from, to})) + t.parameter(name + "_b", DType::F64, {to});
    };
    auto split = [&](const Tensor &v) { return transpose(reshape(v, {b, s, heads, d / heads}), 1, 2); };
    Tensor h = layer_norm(x) * t.parameter("ln_w", DType::F64, {d}); // its gradient needs h's
    Tensor q = split(linear(h, "q", d, d)), k = split(linear(h, "k", d, d)), v = split(linear(h, "v", d, d));
    Tensor y = fused ? scaled_dot_product_attention(q, k, v, std::nullopt, true)
                     : matmul(softmax(matmul(q, transpose(k, 2, 3)) * 0.5), v);
    Tensor x1 = x + linear(reshape(transpose(y, 1, 2), {b, s, d}), "proj", d, d);
    Tensor out = x1 + linear(tanh(linear(layer_norm(x1), "fc", d, 2 * d)), "fc2", 2 * d, d);
    t.output(sum(out * out).named("loss"));
    Graph g = autodiff::buildJointGraph(t.graph(), {}).graph;
    g.meshes = {Mesh{"mesh", {"model"}, {2}}};
    applyPreset(g, "tp");
    GraphAnalysis a = analyzeGraph(g, "heads");
    ShardingPlan plan = propagateShardings(g, a);
    for (const char *column : {"q_w", "k_w", "v_w", "fc_w"})
      EXPECT_EQ(dimAxesStr(plan.of(column)), "[_, model]") << column;
    for (const char *bias : {"q_b", "k_b", "v_b", "fc_b"})
      EXPECT_EQ(dimAxesStr(plan.of(bias)), "[model]") << bias;
    for (const char *row : {"proj_w", "fc2_w"})
      EXPECT_EQ(dimAxesStr(plan.of(row)), "[model, _]") << row;
    SpmdProgram p = expectPartitionMatches(g, 1e-9);
    // Partial sums reduced after each row-parallel layer (forward) and for
    // the gradients reaching x (backward): no all_gather of whole heads.
    EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
    // One all_reduce per row-parallel layer (proj, fc2) and per gradient
    // reaching a replicated input of column-parallel layers: h through q, k
    // and v (their partial input gradients summed first: one all_reduce, not
    // three), layer_norm(x1) through fc.
    size_t allReduces = 0;
    for (const Communication &c : p.communication)
      allReduces += c.collective.find("all_reduce") != std::string::npos;
    EXPECT_EQ(allReduces, 4u) << report(p);
  }
}

// A fused QKV projection (GPT-2's c_attn: one [d, 3d] weight, its output
// split into q, k and v): --preset tp-head-blocked takes the weight, its bias and their
// gradients in head-blocked column order (device r's block is q_r | k_r |
// v_r) and splits them by columns, the output projection by rows. The
// rewritten program equals the original on head-blocked weights (its
// gradients head-blocked too), and the partition equals the rewritten
// program with no gather of heads.
TEST(Sharding, TensorParallelPresetSplitsFusedQkvByHeads) {
  const int64_t b = 2, s = 3, d = 8, heads = 4;
  for (int64_t parts : {2, 4}) {
    SCOPED_TRACE("model=" + std::to_string(parts));
    Tracer t("gpt2");
    Tensor x = t.input("x", DType::F64, {b, s, d});
    auto linear = [&](const Tensor &in, const std::string &name, int64_t from, int64_t to) {
      return matmul(in, t.parameter(name + "_w", DType::F64, {from, to})) + t.parameter(name + "_b", DType::F64, {to});
    };
    auto heads4 = [&](const Tensor &v) { return transpose(reshape(v, {b, s, heads, d / heads}), 1, 2); };
    Tensor h = layer_norm(x) * t.parameter("ln_w", DType::F64, {d});
    std::vector<Tensor> qkv = split(linear(h, "qkv", d, 3 * d), {d, d, d}, -1);
    Tensor y = scaled_dot_product_attention(heads4(qkv[0]), heads4(qkv[1]), heads4(qkv[2]), std::nullopt, true);
    Tensor x1 = x + linear(reshape(transpose(y, 1, 2), {b, s, d}), "proj", d, d);
    Tensor out = x1 + linear(tanh(linear(layer_norm(x1), "fc", d, 2 * d)), "fc2", 2 * d, d);
    t.output(sum(out * out).named("loss"));
    const Graph original = autodiff::buildJointGraph(t.graph(), {}).graph;
    Graph g = original;
    g.meshes = {Mesh{"mesh", {"model"}, {parts}}};
    applyPreset(g, "tp-head-blocked");
    GraphAnalysis a = analyzeGraph(g, "fused");
    ShardingPlan plan = propagateShardings(g, a);
    EXPECT_EQ(dimAxesStr(plan.of("qkv_w")), "[_, model]");
    EXPECT_EQ(dimAxesStr(plan.of("qkv_b")), "[model]");
    EXPECT_EQ(dimAxesStr(plan.of("proj_w")), "[model, _]");
    SpmdProgram p = expectPartitionMatches(g, 1e-9);
    EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
    size_t allReduces = 0;
    for (const Communication &c : p.communication)
      allReduces += c.collective.find("all_reduce") != std::string::npos;
    EXPECT_EQ(allReduces, 4u) << report(p); // proj, fc2; dx through qkv and fc

    // Head-blocked column c' = g*(3d/G) + j*(d/G) + e holds column j*d + g*(d/G) + e.
    auto headBlocked = [&](const HostTensor &w) {
      HostTensor r = w;
      const int64_t cols = w.shape().back(), rows = w.numel() / cols, block = d / parts;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t gi = 0; gi < parts; ++gi)
          for (int64_t j = 0; j < 3; ++j)
            for (int64_t e = 0; e < block; ++e)
              r.setF(row * cols + gi * 3 * block + j * block + e, w.getF(row * cols + j * d + gi * block + e));
      return r;
    };
    std::map<std::string, HostTensor> inputs = randomInputs(original, freshSeed(), {});
    std::vector<HostTensor> want = interpret(original, analyzeGraph(original, "original"), inputs).outputs;
    std::map<std::string, HostTensor> blocked = inputs;
    for (const char *name : {"qkv_w", "qkv_b"})
      blocked.at(name) = headBlocked(inputs.at(name));
    std::vector<HostTensor> got = interpret(g, a, blocked).outputs;
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      const std::string &name = original.outputs[o];
      HostTensor expected = name == "grad_qkv_w" || name == "grad_qkv_b" ? headBlocked(want[o]) : want[o];
      ASSERT_EQ(got[o].shape(), expected.shape()) << name;
      for (int64_t i = 0; i < expected.numel(); ++i)
        EXPECT_NEAR(got[o].getF(i), expected.getF(i), 1e-9 * std::max(1.0, std::fabs(expected.getF(i))))
            << name << "[" << i << "]";
    }
  }
}

// Vocab-parallel embedding (Megatron): the table's rows split; each device
// looks up the indices among its rows (zero elsewhere, all_reduced) and sums
// the gradient of its rows only; with a padding row (no gradient) and with
// the indices split over a second axis (DDP x vocab-parallel).
TEST(Sharding, VocabParallelEmbedding) {
  for (bool padding : {false, true}) {
    Tracer t("vocab");
    Tensor x = t.input("x", DType::F64, {8, 3});
    Tensor ids = cast(abs(x) * 11.99, DType::I64); // rows 0..11 of 12
    Tensor table = t.parameter("table", DType::F64, {12, 4});
    Tensor h = tanh(embedding(ids, table, padding ? std::optional<int64_t>(5) : std::nullopt));
    t.output(sum(h * h).named("loss"));
    Graph joint = autodiff::buildJointGraph(t.graph(), {}).graph;
    for (bool twoAxes : {false, true}) {
      SCOPED_TRACE(std::string(padding ? "padding row, " : "") + (twoAxes ? "ids over data" : "model=4"));
      Graph g = joint;
      if (twoAxes)
        shard(g, Mesh{"mesh", {"data", "model"}, {2, 2}},
              {{"x", {{"data"}, {}}}, {"table", {{"model"}, {}}}, {"grad_table", {{"model"}, {}}}});
      else
        shard(g, Mesh{"mesh", {"model"}, {4}}, {{"table", {{"model"}, {}}}, {"grad_table", {{"model"}, {}}}});
      SpmdProgram p = expectPartitionMatches(g);
      // The lookups' partial sums completed; the table never gathered.
      EXPECT_TRUE(communicates(p, "all_reduce (sum) over [model]")) << report(p);
      EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
    }
    // --preset tp splits the table's rows (12 over 2) and its gradient.
    Graph g = joint;
    ShardingPlan plan = presetPlan(g, 2, "tp");
    EXPECT_EQ(dimAxesStr(plan.of("table")), "[model, _]");
    EXPECT_EQ(dimAxesStr(plan.of("grad_table:0")), "[model, _]");
    SpmdProgram p = expectPartitionMatches(g);
    EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
  }
}

// An LM head split by its output columns (the classes): the loss and its
// gradient without gathering the logits (Megatron's vocab-parallel
// cross-entropy), for each reduction, label smoothing and ignored rows, on 2
// and 4 devices and with the rows split over a second axis.
TEST(Sharding, VocabParallelCrossEntropy) {
  struct Case {
    std::string reduction;
    double smoothing;
    bool ignoreSome;
  };
  for (const Case &c : {Case{"mean", 0.0, false}, Case{"mean", 0.0, true}, Case{"sum", 0.0, true},
                        Case{"none", 0.0, false}, Case{"mean", 0.1, true}}) {
    Tracer t("head");
    Tensor x = t.input("x", DType::F64, {8, 6});
    Tensor u = t.input("u", DType::F64, {8});
    // Targets over all 12 classes (every device's block); with ignoreSome,
    // rows with u < -0.5 carry ignore_index 7.
    Tensor target = cast(abs(u) * 11.99, DType::I64);
    if (c.ignoreSome)
      target = where(lt(u, -0.5), int64_t(7), target);
    Tensor w = t.parameter("head_w", DType::F64, {6, 12});
    Tensor b = t.parameter("head_b", DType::F64, {12});
    Tensor loss = cross_entropy(matmul(tanh(x), w) + b, target, c.reduction, c.ignoreSome ? 7 : -100, c.smoothing);
    t.output((c.reduction == "none" ? sum(loss * loss) : loss).named("loss"));
    Graph joint = autodiff::buildJointGraph(t.graph(), {}).graph;
    for (int layout = 0; layout < 3; ++layout) {
      SCOPED_TRACE(c.reduction + " smoothing " + std::to_string(c.smoothing) + (c.ignoreSome ? " ignoring" : "") +
                   " layout " + std::to_string(layout));
      Graph g = joint;
      std::map<std::string, DimAxes> columns = {{"head_w", {{}, {"model"}}}, {"head_b", {{"model"}}},
                                                {"grad_head_w", {{}, {"model"}}}, {"grad_head_b", {{"model"}}}};
      if (layout == 2) {
        columns["x"] = {{"data"}, {}};
        columns["u"] = {{"data"}};
      }
      shard(g, layout == 2 ? Mesh{"mesh", {"data", "model"}, {2, 2}} : Mesh{"mesh", {"model"}, {layout ? 4 : 2}},
            columns);
      SpmdProgram p = expectPartitionMatches(g, 1e-10);
      EXPECT_TRUE(communicates(p, "all_reduce (max) over [model] (the rows' maximum)")) << report(p);
      EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
    }
    // --preset tp finds the head (columns to cross_entropy's classes).
    Graph g = joint;
    ShardingPlan plan = presetPlan(g, 2, "tp");
    EXPECT_EQ(dimAxesStr(plan.of("head_w")), "[_, model]");
    EXPECT_EQ(dimAxesStr(plan.of("head_b")), "[model]");
    SpmdProgram p = expectPartitionMatches(g, 1e-10);
    EXPECT_FALSE(communicates(p, "all_gather")) << report(p);
  }
}

// A vocab-parallel cross-entropy's targets are checked as in the global
// program (a target outside the classes is in no device's block of
// classes): the checks, added before partitioning, stay each device's own
// (no collective) and fail the run naming the device whose target is bad.
TEST(Sharding, RunChecksOfVocabParallelCrossEntropy) {
  Tracer t("head");
  Tensor x = t.input("x", DType::F64, {8, 6});
  Tensor target = t.input("target", DType::I64, {8});
  Tensor w = t.parameter("head_w", DType::F64, {6, 12});
  t.output(cross_entropy(matmul(x, w), target).named("loss"));
  Graph unchecked = autodiff::buildJointGraph(t.graph(), {}).graph;
  shard(unchecked, Mesh{"mesh", {"data", "model"}, {2, 2}},
        {{"x", {{"data"}, {}}}, {"target", {{"data"}}}, {"head_w", {{}, {"model"}}}});
  Graph g = transforms::addRunChecks(unchecked, "test");
  ASSERT_EQ(g.checks.size(), 1u);
  EXPECT_NE(g.checks[0].find("outside the classes [0, 12)"), std::string::npos) << g.checks[0];
  auto partition = [](const Graph &graph) {
    GraphAnalysis a = analyzeGraph(graph, "global");
    return partitionSpmd(graph, a, propagateShardings(graph, a));
  };
  SpmdProgram p = partition(g);
  EXPECT_EQ(p.local.checks, g.checks);
  EXPECT_EQ(p.communication.size(), partition(unchecked).communication.size()) << report(p);
  expectPartitionMatches(g, 1e-10); // the results are unchanged
  GraphAnalysis la = analyzeGraph(p.local, "local");
  std::map<std::string, HostTensor> global = randomInputs(g, freshSeed(), {});
  for (int64_t bad : {-1, 12, 0}) {
    SCOPED_TRACE("target " + std::to_string(bad));
    global.at("target").setI(6, bad); // row 6: the second half of the batch (devices 2, 3)
    std::vector<std::map<std::string, HostTensor>> local(4);
    for (size_t i = 0; i < g.inputs.size(); ++i)
      for (int64_t d = 0; d < 4; ++d)
        local[size_t(d)].emplace(g.inputs[i].name,
                                 shardOf(global.at(g.inputs[i].name), p.inputShardings[i], p.local.meshes[0], d));
    if (bad == 0) {
      EXPECT_EQ(interpretSpmd(p.local, la, local)[0].outputs.size(), g.resultCount());
      continue;
    }
    try {
      interpretSpmd(p.local, la, local);
      ADD_FAILURE() << "no error";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("device 2: node \"loss\" (cross_entropy): a target is outside"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Sharding, TensorParallelMlp) {
  // Megatron: the first layer's columns, the second's rows.
  for (int64_t devices : {2, 4}) {
    Graph g = mlpTraining();
    shard(g, Mesh{"mesh", {"model"}, {devices}},
          {{"w1", {{}, {"model"}}}, {"b1", {{"model"}}}, {"w2", {{"model"}, {}}}});
    SpmdProgram p = expectPartitionMatches(g);
    EXPECT_TRUE(communicates(p, "all_reduce (sum) over [model]")) << report(p);
  }
}

TEST(Sharding, FullyShardedMlp) {
  // ZeRO-3: parameters and their gradients split like the batch.
  Graph g = mlpTraining();
  shard(g, Mesh{"mesh", {"data"}, {4}},
        {{"x", {{"data"}, {}}}, {"labels", {{"data"}}}, {"w1", {{"data"}, {}}}, {"w2", {{"data"}, {}}},
         {"grad_w1", {{"data"}, {}}}, {"grad_w2", {{"data"}, {}}}});
  SpmdProgram p = expectPartitionMatches(g);
  // Parameters gathered before use, gradients reduce-scattered.
  EXPECT_TRUE(communicates(p, "all_gather over [data] along dim 0")) << report(p);
  EXPECT_TRUE(communicates(p, "reduce_scatter over [data] along dim 0")) << report(p);
  for (const Communication &c : p.communication)
    if (c.value == "grad_w1:0" || c.value == "grad_w2:0")
      EXPECT_NE(c.collective.find("reduce_scatter"), std::string::npos) << report(p);
}

TEST(Sharding, TwoDimensionalMesh) {
  Graph g = mlpTraining();
  shard(g, Mesh{"mesh", {"data", "model"}, {2, 2}},
        {{"x", {{"data"}, {}}}, {"labels", {{"data"}}}, {"w1", {{}, {"model"}}}, {"b1", {{"model"}}},
         {"w2", {{"model"}, {}}}});
  expectPartitionMatches(g);
}

// Reductions over a split dim (partial sums, maxima, a scaled mean), softmax
// along a split axis (its statistics all-reduced), views and broadcasts.
TEST(Sharding, ReductionsViewsAndWholeAxes) {
  Tracer t("ops");
  Tensor x = t.input("x", DType::F64, {8, 6});
  Tensor w = t.input("w", DType::F64, {6});
  t.output(softmax(x, 0));
  t.output(mean(x, {0}));
  t.output(max(x, {0}, true));
  t.output(min(x, {0}));
  t.output(sum(x * x));
  t.output(broadcast_to(unsqueeze(mean(x, {1}), 1), {8, 6}) + x);
  t.output(layer_norm(transpose(x, 0, 1), std::nullopt, std::nullopt, 0) * 2.0);
  t.output(layer_norm(x, w));
  Tensor table = t.input("table", DType::F64, {5, 4});
  t.output(embedding(cast(abs(x * 2.0), DType::I64), table)); // indices in [0, 2]
  Graph g = t.graph();
  for (const DimAxes &x : {DimAxes{{"data"}, {}}, DimAxes{{}, {"data"}}, DimAxes{{"data", "model"}, {}},
                           DimAxes{{"model"}, {"data"}}}) {
    SCOPED_TRACE(dimAxesStr(x));
    Graph sharded = g;
    shard(sharded, Mesh{"mesh", {"data", "model"}, {2, 2}}, {{"x", x}});
    expectPartitionMatches(sharded);
  }
}

// shardOf agrees with the collectives: gathering every device's shard
// rebuilds the global value on each device.
TEST(Sharding, ShardsGatherBackToTheWhole) {
  Mesh mesh{"mesh", {"data", "model"}, {2, 3}};
  HostTensor global(DType::F64, {6, 6});
  for (int64_t i = 0; i < global.numel(); ++i)
    global.setF(i, double(i));
  auto check = [&](const DimAxes &dims, const std::function<Tensor(const Tensor &)> &gather) {
    SCOPED_TRACE(dimAxesStr(dims));
    Tracer t("g");
    t.mesh(mesh.name, mesh.axes, mesh.sizes);
    HostTensor piece = shardOf(global, dims, mesh, 0);
    Tensor x = t.input("x", DType::F64, {piece.shape()[0], piece.shape()[1]});
    t.output(gather(x));
    GraphAnalysis a = analyzeGraph(t.graph(), "g");
    std::vector<std::map<std::string, HostTensor>> inputs;
    for (int64_t d = 0; d < 6; ++d)
      inputs.push_back({{"x", shardOf(global, dims, mesh, d)}});
    for (const InterpreterResult &r : interpretSpmd(t.graph(), a, inputs))
      for (int64_t i = 0; i < global.numel(); ++i)
        EXPECT_EQ(r.outputs[0].getF(i), global.getF(i));
  };
  check({{"data"}, {"model"}}, [](const Tensor &x) {
    return all_gather(all_gather(x, {"mesh", {"model"}}, 1), {"mesh", {"data"}}, 0);
  });
  check({{"model", "data"}, {}}, [](const Tensor &x) { return all_gather(x, {"mesh", {"model", "data"}}, 0); });
  check({{}, {"data", "model"}}, [](const Tensor &x) { return all_gather(x, {"mesh", {"data", "model"}}, 1); });
}

TEST(Sharding, PropagationFollowsTheAnnotations) {
  Graph g = mlpTraining();
  shard(g, Mesh{"mesh", {"data"}, {2}}, {{"x", {{"data"}, {}}}});
  GraphAnalysis a = analyzeGraph(g, "g");
  ShardingPlan plan = propagateShardings(g, a);
  EXPECT_EQ(dimAxesStr(plan.of("labels")), "[data]");
  EXPECT_EQ(dimAxesStr(plan.of("w1")), "[_, _]");
  EXPECT_EQ(dimAxesStr(plan.of("loss:0")), "[]");
}

TEST(Sharding, Errors) {
  auto message = [](Graph g) {
    try {
      GraphAnalysis a = analyzeGraph(g, "g");
      ShardingPlan plan = propagateShardings(g, a);
      partitionSpmd(g, a, plan);
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Graph none = mlpTraining();
  EXPECT_NE(message(none).find("declares 0 meshes; SPMD partitioning takes exactly one"), std::string::npos);
  Graph odd = mlpTraining();
  shard(odd, Mesh{"mesh", {"data"}, {3}}, {{"x", {{"data"}, {}}}});
  EXPECT_NE(message(odd).find("input \"x\": sharding splits dim 0 of size 8 into 3 parts"),
            std::string::npos)
      << message(odd);
  Graph collective = mlpTraining();
  collective.meshes = {Mesh{"mesh", {"data"}, {2}}};
  collective.nodes.push_back(Node{"r", "all_reduce", {Arg::ref("x")},
                                  {{"mesh", std::string("mesh")}, {"axes", std::vector<std::string>{"data"}}}, {}});
  EXPECT_NE(message(collective).find("node \"r\" (all_reduce) is a collective: the partitioner takes a global program"),
            std::string::npos)
      << message(collective);
}

} // namespace
