// The CPU backend's elementwise kernels, JIT-compiled, against the reference
// interpreter: every supported op, f32 and f64, odd sizes, broadcasting,
// a fused chain; fresh random inputs; outputs poisoned before each run.
#include "TestUtil.h"

#include "codegen/cpu/LoopKernel.h"
#include "codegen/cpu/SharedLibrary.h"
#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/MemRefDescriptor.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <dlfcn.h>
#include <filesystem>
#include <random>

using namespace tensorc;
using namespace tensorc::testing;

namespace {

HostTensor runKernel(const Graph &g, std::vector<HostTensor> inputs,
                     std::map<std::string, int64_t> bindings = {}) {
  static bool initialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)initialized;
  mlir::MLIRContext ctx;
  mlir::registerBuiltinDialectTranslation(ctx);
  mlir::registerLLVMDialectTranslation(ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = codegen::cpu::buildLoopKernel(ctx, g, "kernel");
  codegen::cpu::lowerToLLVMDialect(*module);
  mlir::ExecutionEngineOptions options;
  options.transformer = mlir::makeOptimizingTransformer(2, 0, nullptr);
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    ADD_FAILURE() << "JIT failed: " << llvm::toString(engine.takeError());
    return HostTensor();
  }
  GraphAnalysis a = analyzeGraph(g, "kernel");
  std::vector<int64_t> outShape = concreteShape(a.outputs[0].shape, bindings);
  HostTensor out(a.outputs[0].dtype, outShape);
  out.fillBytes(0xff); // poison: an unwritten element is nan
  std::vector<std::vector<int64_t>> descs;
  for (HostTensor &t : inputs)
    descs.push_back(memrefDescriptor(t));
  descs.push_back(memrefDescriptor(out));
  std::vector<void *> pointers, args;
  for (auto &d : descs)
    pointers.push_back(d.data());
  for (void *&p : pointers)
    args.push_back(&p);
  if (llvm::Error e = (*engine)->invokePacked("_mlir_ciface_kernel", args))
    ADD_FAILURE() << "invoke failed: " << llvm::toString(std::move(e));
  return out;
}

void checkAgainstInterpreter(const std::string &label, const Graph &g, double lo = -2,
                             double hi = 2, std::map<std::string, int64_t> bindings = {}) {
  std::random_device device;
  uint64_t seed = device();
  SCOPED_TRACE(label + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::map<std::string, HostTensor> named;
  std::vector<HostTensor> inputs;
  for (const GraphInput &in : g.inputs) {
    HostTensor t(in.spec.dtype, concreteShape(in.spec.shape, bindings));
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setF(i, std::uniform_real_distribution<double>(lo, hi)(rng));
    named.emplace(in.name, t);
    inputs.push_back(t);
  }
  HostTensor want = interpret(g, analyzeGraph(g, "ref"), named).outputs[0];
  HostTensor got = runKernel(g, inputs, bindings);
  ASSERT_EQ(got.shape(), want.shape());
  // The kernel computes in the dtype (f32 math), the interpreter in f64 with
  // one rounding per op: allow a few ulps per op.
  // The kernel rounds f16/bf16 once at the end, the interpreter once per op.
  double ulp = want.dtype() == DType::F32   ? 2e-6
               : want.dtype() == DType::F64 ? 1e-13
               : want.dtype() == DType::F16 ? 1e-3
                                            : 8e-3;
  double tol = ulp * double(1 + g.nodes.size());
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = want.getF(i), v = got.getF(i);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(v)) << i;
      continue;
    }
    EXPECT_NEAR(v, w, tol * std::max(1.0, std::fabs(w))) << label << "[" << i << "]";
  }
}

Graph unaryGraph(const std::string &op, DType d, std::vector<int64_t> shape, AttrMap attrs = {}) {
  trace::Tracer t("k");
  trace::Tensor x = t.input("x", d, trace::DimSpec(shape.begin(), shape.end()));
  t.output(t.call(op, {x}, attrs)[0]);
  return t.graph();
}

TEST(CpuCodegen, EveryUnaryOpMatchesTheInterpreter) {
  for (DType d : {DType::F32, DType::F64})
    for (const char *op : {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "gelu", "silu", "sin",
                           "cos", "erf", "floor", "ceil", "sign"})
      checkAgainstInterpreter(std::string(op) + " " + std::string(dtypeName(d)),
                              unaryGraph(op, d, {3, 7}));
  for (DType d : {DType::F32, DType::F64})
    for (const char *op : {"log", "sqrt", "rsqrt", "reciprocal"})
      checkAgainstInterpreter(op, unaryGraph(op, d, {1, 1001}), 0.1, 3);
  checkAgainstInterpreter(
      "gelu tanh", unaryGraph("gelu", DType::F32, {17}, {{"approximate", std::string("tanh")}}));
  checkAgainstInterpreter("clamp",
                          unaryGraph("clamp", DType::F32, {5, 3}, {{"min", -0.5}, {"max", 0.25}}));
}

TEST(CpuCodegen, HalfPrecisionComputesInF32) {
  for (DType d : {DType::F16, DType::BF16}) {
    for (const char *op : {"exp", "tanh", "gelu", "silu", "relu", "erf"})
      checkAgainstInterpreter(std::string(op) + " " + std::string(dtypeName(d)),
                              unaryGraph(op, d, {5, 13}));
    trace::Tracer t("pointwise");
    trace::Tensor x = t.input("x", d, {7, 9});
    trace::Tensor a = t.input("a", d, {9});
    t.output(trace::gelu(x * a + 1.0) * trace::sigmoid(x));
    checkAgainstInterpreter("chain " + std::string(dtypeName(d)), t.graph());
  }
}

TEST(CpuCodegen, BinaryOpsBroadcast) {
  for (const char *op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    trace::Tracer t("k");
    trace::Tensor a = t.input("a", DType::F32, {4, 1, 5}), b = t.input("b", DType::F32, {3, 1});
    t.output(t.call(op, {a, b})[0]);
    checkAgainstInterpreter(op, t.graph());
  }
  trace::Tracer t("k");
  trace::Tensor a = t.input("a", DType::F64, {9}), b = t.input("b", DType::F64, {1});
  t.output(trace::pow(a, b));
  checkAgainstInterpreter("pow", t.graph(), 0.5, 2);
}

TEST(CpuCodegen, AFusedChainIsOneLoopNest) {
  // The pointwise workload: gelu(x * a + b) * sigmoid(x), rows broadcast.
  trace::Tracer t("pointwise");
  trace::Tensor x = t.input("x", DType::F32, {33, 65});
  trace::Tensor a = t.input("a", DType::F32, {65}), b = t.input("b", DType::F32, {65});
  t.output(trace::gelu(x * a + b) * trace::sigmoid(x));
  checkAgainstInterpreter("pointwise", t.graph());
  // Comparisons and select inside the chain, with literals.
  trace::Tracer u("select");
  trace::Tensor y = u.input("y", DType::F32, {4097});
  u.output(trace::where(trace::gt(y, 0.0), y * 2.0, trace::exp(y) - 1.0));
  checkAgainstInterpreter("select", u.graph());
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> m = codegen::cpu::buildLoopKernel(ctx, t.graph(), "kernel");
  int generics = 0;
  m->walk(
      [&](mlir::Operation *op) { generics += op->getName().getStringRef() == "linalg.generic"; });
  EXPECT_EQ(generics, 1);
}

TEST(CpuCodegen, SymbolicDimsServeEverySize) {
  trace::Tracer t("k");
  trace::Tensor x = t.input("x", DType::F32, {"B", "T", 5});
  trace::Tensor b = t.input("b", DType::F32, {5});
  t.output(trace::tanh(x + b));
  for (auto [B, T] : {std::pair{1, 1}, std::pair{3, 7}, std::pair{2, 129}})
    checkAgainstInterpreter("symbolic", t.graph(), -2, 2, {{"B", B}, {"T", T}});
}

TEST(CpuCodegen, ReductionsWithTheirPrologue) {
  for (const char *op : {"sum", "mean", "max", "min", "prod"})
    for (auto [axes, keepdim] :
         {std::pair{std::vector<int64_t>{1}, false}, std::pair{std::vector<int64_t>{0, 2}, true},
          std::pair{std::vector<int64_t>{}, false}}) {
      trace::Tracer t("k");
      trace::Tensor x = t.input("x", DType::F32, {4, 37, 3});
      trace::Tensor w = t.input("w", DType::F32, {3});
      trace::Tensor e = trace::exp(x * w) * 0.5; // the prologue, in the same loop nest
      AttrMap attrs{{"keepdim", keepdim}};
      if (!axes.empty())
        attrs["axes"] = axes;
      t.output(t.call(op, {e}, attrs)[0]);
      checkAgainstInterpreter(std::string(op) + " axes " + std::to_string(axes.size()), t.graph(),
                              -0.5, 0.5);
    }
  trace::Tracer t("k");
  trace::Tensor x = t.input("x", DType::F64, {"B", 1000});
  t.output(trace::sum(x, {1}));
  checkAgainstInterpreter("symbolic rows", t.graph(), -1, 1, {{"B", 3}});
}

// The path an artifact takes: object code, a shared library, dlopen.
TEST(CpuCodegen, SharedLibraryRunsWithoutTheJit) {
  trace::Tracer t("k");
  trace::Tensor x = t.input("x", DType::F32, {"B", 65});
  trace::Tensor a = t.input("a", DType::F32, {65});
  t.output(trace::gelu(x * a) * trace::sigmoid(x));
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> m = codegen::cpu::buildLoopKernel(ctx, t.graph(), "kernel");
  codegen::cpu::lowerToLLVMDialect(*m);
  std::string library = codegen::cpu::linkSharedLibrary({codegen::cpu::emitObject(*m)});
  std::string path = (std::filesystem::path(::testing::TempDir()) / "tensorc-kernels.so").string();
  writeFileAtomically(path, library);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto kernel =
      reinterpret_cast<void (*)(void *, void *, void *)>(dlsym(handle, "_mlir_ciface_kernel"));
  ASSERT_NE(kernel, nullptr);
  for (int64_t B : {1, 5}) {
    HostTensor xv = f32({B, 65}, std::vector<double>(size_t(B * 65), 0.0)),
               av = f32({65}, std::vector<double>(65, 0.0));
    std::mt19937_64 rng(B);
    for (int64_t i = 0; i < xv.numel(); ++i)
      xv.setF(i, std::uniform_real_distribution<double>(-2, 2)(rng));
    for (int64_t i = 0; i < av.numel(); ++i)
      av.setF(i, std::uniform_real_distribution<double>(-2, 2)(rng));
    HostTensor out(DType::F32, {B, 65});
    out.fillBytes(0xff);
    std::vector<int64_t> dx = memrefDescriptor(xv), da = memrefDescriptor(av),
                         dout = memrefDescriptor(out);
    kernel(dx.data(), da.data(), dout.data());
    HostTensor want =
        interpret(t.graph(), analyzeGraph(t.graph(), "ref"), {{"x", xv}, {"a", av}}).outputs[0];
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(out.getF(i), want.getF(i), 1e-5 * std::max(1.0, std::fabs(want.getF(i)))) << i;
  }
  dlclose(handle);
  std::filesystem::remove(path);
}

TEST(CpuCodegen, UnsupportedInputsAreErrors) {
  mlir::MLIRContext ctx;
  EXPECT_THROW(codegen::cpu::buildLoopKernel(ctx, unaryGraph("exp", DType::I32, {3}), "k"),
               tensorc::Error);
  EXPECT_THROW(codegen::cpu::buildLoopKernel(ctx, unaryGraph("softmax", DType::F32, {3}), "k"),
               tensorc::Error);
}

} // namespace
