// The tracing API records exactly the graph the equivalent graph file holds,
// so both import to identical IR; errors surface at the traced call.
#include "compiler/trace/Tracer.h"
#include "compiler/driver/Model.h"
#include "compiler/frontend/GraphImport.h"
#include "compiler/graph/GraphAnalysis.h"
#include "compiler/graph/GraphJson.h"
#include "ir/core/Error.h"

#include <gtest/gtest.h>

#include <cstdio>

#ifndef TENSORC_EXAMPLES_DIR
#error "TENSORC_EXAMPLES_DIR must be defined"
#endif

using namespace tensorc;
using namespace tensorc::trace;

namespace {

std::string importedIR(const Graph &g) {
  mlir::MLIRContext ctx;
  GraphAnalysis a = analyzeGraph(g, "traced");
  return printModule(*importGraph(ctx, g, a, "traced"), /*debugInfo=*/true);
}

std::string fileIR(const std::string &path) {
  std::unique_ptr<Model> m = loadModel(path);
  return printModule(*m->module, /*debugInfo=*/true);
}

// Locations name the file; compare everything else.
std::string withoutFile(std::string ir, const std::string &file) {
  for (size_t at; (at = ir.find(file)) != std::string::npos;)
    ir.replace(at, file.size(), "FILE");
  return ir;
}

TEST(Tracer, MlpMatchesTheGraphFile) {
  Tracer t("mlp");
  t.bound("B", 1, 4096);
  Tensor x = t.input("x", DType::F32, {"B", 784});
  Tensor labels = t.input("labels", DType::I64, {"B"});
  Tensor w1 = t.parameter("w1", DType::F32, {784, 128});
  Tensor b1 = t.parameter("b1", DType::F32, {128});
  Tensor w2 = t.parameter("w2", DType::F32, {128, 10});
  Tensor b2 = t.parameter("b2", DType::F32, {10});
  Tensor h1 = matmul(x, w1).named("h1");
  Tensor h1b = (h1 + b1).named("h1b");
  Tensor a1 = relu(h1b).named("a1");
  Tensor h2 = matmul(a1, w2).named("h2");
  Tensor logits = (h2 + b2).named("logits");
  Tensor loss = cross_entropy(logits, labels).named("loss");
  t.output(logits);
  t.output(loss);
  std::string path = std::string(TENSORC_EXAMPLES_DIR) + "/mlp.json";
  EXPECT_EQ(withoutFile(importedIR(t.graph()), "traced"), withoutFile(fileIR(path), path));
}

TEST(Tracer, TransformerBlockMatchesTheGraphFile) {
  Tracer t("transformer_block");
  t.bound("B", 1, 64);
  t.bound("T", 1, 1024);
  Tensor x = t.input("x", DType::F32, {"B", "T", 64});
  auto p = [&](const char *name, std::vector<std::variant<int64_t, std::string>> shape) {
    return t.parameter(name, DType::F32, shape);
  };
  Tensor ln1w = p("ln1_w", {64}), ln1b = p("ln1_b", {64}), aw = p("attn_w", {64, 192}),
         ab = p("attn_b", {192});
  Tensor pw = p("proj_w", {64, 64}), pb = p("proj_b", {64}), ln2w = p("ln2_w", {64}),
         ln2b = p("ln2_b", {64});
  Tensor fw = p("fc_w", {64, 256}), fb = p("fc_b", {256}), fpw = p("fc_proj_w", {256, 64}),
         fpb = p("fc_proj_b", {64});
  Tensor ln1 = layer_norm(x, ln1w, ln1b).named("ln1");
  Tensor qkv = (matmul(ln1, aw).named("qkv_mm") + ab).named("qkv");
  std::vector<Tensor> parts = split(qkv, {64, 64, 64}, 2);
  parts[0].named("qkv_split");
  Tensor qh = reshape(parts[0], {"B", "T", 4, 16}).named("q_heads");
  Tensor kh = reshape(parts[1], {"B", "T", 4, 16}).named("k_heads");
  Tensor vh = reshape(parts[2], {"B", "T", 4, 16}).named("v_heads");
  Tensor q = permute(qh, {0, 2, 1, 3}).named("q"), k = permute(kh, {0, 2, 1, 3}).named("k"),
         v = permute(vh, {0, 2, 1, 3}).named("v");
  Tensor attn = scaled_dot_product_attention(q, k, v, std::nullopt, true).named("attn");
  Tensor merged =
      reshape(permute(attn, {0, 2, 1, 3}).named("attn_t"), {"B", "T", 64}).named("attn_merged");
  Tensor proj = (matmul(merged, pw).named("proj_mm") + pb).named("proj");
  Tensor res1 = (x + proj).named("res1");
  Tensor ln2 = layer_norm(res1, ln2w, ln2b).named("ln2");
  Tensor fc = (matmul(ln2, fw).named("fc_mm") + fb).named("fc");
  Tensor act = gelu(fc, "tanh").named("act");
  Tensor fcp = (matmul(act, fpw).named("fc_proj_mm") + fpb).named("fc_proj");
  Tensor y = (res1 + fcp).named("y");
  t.output(y);
  std::string path = std::string(TENSORC_EXAMPLES_DIR) + "/transformer_block.json";
  EXPECT_EQ(withoutFile(importedIR(t.graph()), "traced"), withoutFile(fileIR(path), path));
}

TEST(Tracer, ErrorsNameTheOpAtTheCall) {
  Tracer t("bad");
  Tensor x = t.input("x", DType::F32, {"B", 784});
  Tensor w = t.parameter("w1", DType::F32, {512, 256});
  try {
    matmul(x, w);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_STREQ(
        e.what(),
        "trace bad: node \"matmul0\" (matmul): inner dims differ: x is (B, 784), w1 is (512, 256)");
  }
  EXPECT_THROW(t.input("x", DType::F32, {2}), Error); // name taken
  EXPECT_THROW(t.input("z", DType::F32, {0}), Error); // zero dim
  EXPECT_THROW(sum(x, {2}), Error);                   // axis out of range
  Tensor r = relu(x);
  Tensor s = exp(r);
  EXPECT_THROW(r.named("late"), Error); // already used by `s`
  EXPECT_NO_THROW(s.named("early"));
}

TEST(Tracer, LiteralsAndSaving) {
  Tracer t("lits");
  Tensor x = t.input("x", DType::F16, {3});
  t.output(x * 0.5 + 1);
  Graph g = t.graph();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].args[1].literal.kind, Literal::Kind::Int);
  GraphAnalysis a = analyzeGraph(g, "lits");
  EXPECT_EQ(a.outputs[0].str(), "(3) f16");
  // save() writes the canonical graph file, which reads back to the same graph.
  std::string path = ::testing::TempDir() + "tensorc-trace-save.json";
  t.save(path);
  EXPECT_EQ(readGraphFile(path), g);
  std::remove(path.c_str());
}

} // namespace
