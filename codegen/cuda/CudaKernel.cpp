#include "codegen/cuda/CudaKernel.h"

#include "codegen/cpu/ScalarOps.h"
#include "codegen/cuda/kernels/KernelSources.h"
#include "ir/core/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstring>
#include <sstream>

using namespace mlir;

namespace tensorc::codegen::cuda {

using cpu::NestContext;
using cpu::NestSpec;

const std::vector<Variant> &kernelVariants() {
  static const std::vector<Variant> v = {{256, 1, 1}, {128, 1, 1}, {256, 4, 1}, {512, 2, 1}};
  return v;
}

const std::vector<Variant> &rowVariants() {
  static const std::vector<Variant> v = {{256, 1, 8}, {256, 1, 32}, {256, 1, 256}, {512, 1, 512}};
  return v;
}

namespace {

std::string storageCType(DType d) {
  switch (d) {
  case DType::F64:
    return "double";
  case DType::F32:
    return "float";
  case DType::F16:
    return "__half";
  case DType::BF16:
    return "__nv_bfloat16";
  case DType::I64:
    return "long long";
  case DType::I32:
    return "int";
  case DType::I1:
    return "unsigned char";
  }
  return "?";
}

std::string cType(Type t) {
  if (t.isIndex() || t.isInteger(64))
    return "long long";
  if (t.isInteger(32))
    return "int";
  if (t.isInteger(8))
    return "unsigned char";
  if (t.isInteger(1))
    return "bool";
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return "__half";
  if (t.isBF16())
    return "__nv_bfloat16";
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  fail("cuda codegen: no C type for " + s);
}

// A size as C: coefficient times symbol parameters.
std::string dimExpr(const Dim &d, const std::vector<std::string> &symbols) {
  std::string e = std::to_string(d.coefficient()) + "LL";
  for (const std::string &s : d.symbols()) {
    size_t k = size_t(std::find(symbols.begin(), symbols.end(), s) - symbols.begin());
    e += " * s" + std::to_string(k);
  }
  return "(" + e + ")";
}

// Prints a function of straight-line arith/math/memref ops as C++
// statements, naming values v0, v1, ...; block arguments are given names.
class ScalarPrinter {
public:
  ScalarPrinter(std::ostream &os, const NestSpec &spec) : os_(os), spec_(spec) {}

  void name(Value v, std::string n) { names_[v.getAsOpaquePointer()] = std::move(n); }
  // Memref block argument `m` is operand `k` of the nest.
  void memref(Value m, size_t k) { memrefs_[m.getAsOpaquePointer()] = k; }

  // Prints every op of `block`; returns the returned value's name.
  std::string print(Block &block) {
    // Every op here is pure: only those the result depends on are printed
    // (no unused-variable warnings from NVRTC).
    llvm::DenseSet<Operation *> live;
    for (auto it = block.rbegin(); it != block.rend(); ++it) {
      Operation &op = *it;
      bool needed = isa<func::ReturnOp>(op) ||
                    llvm::any_of(op.getUsers(), [&](Operation *u) { return live.count(u) != 0; });
      if (needed)
        live.insert(&op);
    }
    for (Operation &op : block) {
      if (auto ret = dyn_cast<func::ReturnOp>(op))
        return at(ret.getOperand(0));
      if (live.count(&op))
        printOp(op);
    }
    fail("cuda codegen: point function without return");
  }

private:
  std::string at(Value v) {
    auto it = names_.find(v.getAsOpaquePointer());
    check(it != names_.end(), "cuda codegen: value used before definition");
    return it->second;
  }

  std::string define(Value v, const std::string &expr) {
    std::string n = "v" + std::to_string(next_++);
    os_ << "  const " << cType(v.getType()) << " " << n << " = " << expr << ";\n";
    name(v, n);
    return n;
  }

  static std::string floatLiteral(const APFloat &f, Type t) {
    char buf[64];
    if (t.isF64()) {
      uint64_t bits = f.bitcastToAPInt().getZExtValue();
      std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxLL)", (unsigned long long)bits);
    } else {
      bool lost;
      APFloat g = f;
      g.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      uint32_t bits = uint32_t(g.bitcastToAPInt().getZExtValue());
      std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", bits);
    }
    return buf;
  }

  std::string fn(Type t, const char *f32name, const char *f64name) {
    return t.isF64() ? f64name : f32name;
  }

  void printOp(Operation &op) {
    auto a = [&](unsigned i) { return at(op.getOperand(i)); };
    Value r = op.getNumResults() ? op.getResult(0) : Value();
    std::string ty = r ? cType(r.getType()) : "";
    auto bin = [&](const char *sym) { define(r, "(" + a(0) + " " + sym + " " + a(1) + ")"); };
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      Attribute v = c.getValue();
      if (auto f = llvm::dyn_cast<FloatAttr>(v))
        define(r, floatLiteral(f.getValue(), r.getType()));
      else if (auto i = llvm::dyn_cast<IntegerAttr>(v))
        define(r, r.getType().isInteger(1)
                      ? std::string(i.getValue().getBoolValue() ? "true" : "false")
                      : "(" + ty + ")(" + std::to_string(i.getValue().getSExtValue()) + "LL)");
      else
        fail("cuda codegen: unsupported constant");
      return;
    }
    std::string n = op.getName().getStringRef().str();
    // The unsigned type of an integer's width: wrapping arithmetic and
    // logical shifts without C++'s signed-overflow undefined behaviour.
    auto unsignedOf = [](Type t) {
      return t.isInteger(32) ? std::string("(unsigned int)")
             : t.isInteger(8) ? std::string("(unsigned char)")
             : t.isInteger(1) ? std::string("(bool)")
                              : std::string("(unsigned long long)");
    };
    static const std::map<std::string, const char *> wrapping = {
        {"arith.addi", "+"}, {"arith.subi", "-"}, {"arith.muli", "*"}, {"arith.shli", "<<"}};
    if (auto it = wrapping.find(n); it != wrapping.end() && !r.getType().isInteger(1)) {
      std::string u = unsignedOf(r.getType());
      define(r, "(" + ty + ")(" + u + a(0) + " " + it->second + " " + u + a(1) + ")");
      return;
    }
    static const std::map<std::string, const char *> binaries = {
        {"arith.addi", "+"},  {"arith.subi", "-"},  {"arith.muli", "*"},  {"arith.divsi", "/"},
        {"arith.remsi", "%"}, {"arith.andi", "&"},  {"arith.ori", "|"},   {"arith.xori", "^"},
        {"arith.addf", "+"},  {"arith.subf", "-"},  {"arith.mulf", "*"},  {"arith.divf", "/"}};
    if (auto it = binaries.find(n); it != binaries.end()) {
      bin(it->second);
      return;
    }
    if (n == "arith.divui" || n == "arith.shrui") {
      std::string u = unsignedOf(r.getType());
      define(r, "(" + ty + ")(" + u + a(0) + (n == "arith.divui" ? " / " : " >> ") + u + a(1) + ")");
      return;
    }
    if (n == "arith.maxsi" || n == "arith.minsi") {
      define(r, "(" + a(0) + (n == "arith.maxsi" ? " > " : " < ") + a(1) + " ? " + a(0) + " : " + a(1) + ")");
      return;
    }
    if (n == "arith.maximumf" || n == "arith.minimumf") {
      define(r, std::string(n == "arith.maximumf" ? "tc_maximum(" : "tc_minimum(") + a(0) + ", " + a(1) + ")");
      return;
    }
    if (n == "arith.negf") {
      define(r, "(-" + a(0) + ")");
      return;
    }
    if (auto c = dyn_cast<arith::CmpFOp>(op)) {
      using P = arith::CmpFPredicate;
      std::string x = a(0), y = a(1), e;
      switch (c.getPredicate()) {
      case P::OEQ: e = x + " == " + y; break;
      case P::ONE: e = "(" + x + " < " + y + " || " + x + " > " + y + ")"; break;
      case P::OLT: e = x + " < " + y; break;
      case P::OLE: e = x + " <= " + y; break;
      case P::OGT: e = x + " > " + y; break;
      case P::OGE: e = x + " >= " + y; break;
      case P::UEQ: e = "!(" + x + " < " + y + " || " + x + " > " + y + ")"; break;
      case P::UNE: e = "!(" + x + " == " + y + ")"; break;
      case P::ULT: e = "!(" + x + " >= " + y + ")"; break;
      case P::ULE: e = "!(" + x + " > " + y + ")"; break;
      case P::UGT: e = "!(" + x + " <= " + y + ")"; break;
      case P::UGE: e = "!(" + x + " < " + y + ")"; break;
      case P::UNO: e = "(isnan(" + x + ") || isnan(" + y + "))"; break;
      case P::ORD: e = "!(isnan(" + x + ") || isnan(" + y + "))"; break;
      case P::AlwaysTrue: e = "true"; break;
      case P::AlwaysFalse: e = "false"; break;
      }
      define(r, "(" + e + ")");
      return;
    }
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      using P = arith::CmpIPredicate;
      std::string x = a(0), y = a(1);
      bool unsignedCmp = c.getPredicate() == P::ult || c.getPredicate() == P::ule ||
                         c.getPredicate() == P::ugt || c.getPredicate() == P::uge;
      if (unsignedCmp) {
        x = "(unsigned long long)" + x;
        y = "(unsigned long long)" + y;
      }
      static const std::map<P, const char *> ops = {
          {P::eq, "=="}, {P::ne, "!="}, {P::slt, "<"}, {P::sle, "<="}, {P::sgt, ">"},
          {P::sge, ">="}, {P::ult, "<"}, {P::ule, "<="}, {P::ugt, ">"}, {P::uge, ">="}};
      define(r, "(" + x + " " + ops.at(c.getPredicate()) + " " + y + ")");
      return;
    }
    if (n == "arith.bitcast") {
      Type from = op.getOperand(0).getType(), to = r.getType();
      const char *f = from.isF32() && to.isInteger(32)   ? "__float_as_int"
                      : from.isInteger(32) && to.isF32() ? "__int_as_float"
                      : from.isF64() && to.isInteger(64) ? "__double_as_longlong"
                      : from.isInteger(64) && to.isF64() ? "__longlong_as_double"
                                                         : nullptr;
      check(f != nullptr, "cuda codegen: unsupported bitcast");
      define(r, std::string(f) + "(" + a(0) + ")");
      return;
    }
    if (n == "arith.select") {
      define(r, "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")");
      return;
    }
    if (n == "arith.extf" || n == "arith.truncf") {
      Type from = op.getOperand(0).getType();
      if (from.isBF16())
        define(r, "__bfloat162float(" + a(0) + ")");
      else if (from.isF16())
        define(r, "__half2float(" + a(0) + ")");
      else if (r.getType().isBF16())
        define(r, from.isF64() ? "__double2bfloat16(" + a(0) + ")" // one rounding
                               : "__float2bfloat16((float)" + a(0) + ")");
      else if (r.getType().isF16())
        define(r, from.isF64() ? "__double2half(" + a(0) + ")"
                               : "__float2half((float)" + a(0) + ")");
      else
        define(r, "(" + ty + ")" + a(0));
      return;
    }
    if (n == "arith.sitofp" || n == "arith.fptosi" || n == "arith.extsi" || n == "arith.trunci" ||
        n == "arith.index_cast") {
      // bool -> int: 0/1; int -> bool (trunci to i1): the low bit.
      if (r.getType().isInteger(1))
        define(r, "((" + a(0) + " & 1) != 0)");
      else
        define(r, "(" + ty + ")" + a(0));
      return;
    }
    if (n == "arith.uitofp" || n == "arith.extui") {
      Type from = op.getOperand(0).getType();
      std::string u = from.isInteger(1) ? "(unsigned int)" : from.isInteger(8) ? "(unsigned char)"
                                          : from.isInteger(32) ? "(unsigned int)" : "(unsigned long long)";
      define(r, "(" + ty + ")(" + u + a(0) + ")");
      return;
    }
    static const std::map<std::string, std::pair<const char *, const char *>> unaryMath = {
        {"math.exp", {"expf", "exp"}},     {"math.log", {"logf", "log"}},
        {"math.sqrt", {"sqrtf", "sqrt"}},  {"math.tanh", {"tanhf", "tanh"}},
        {"math.erf", {"erff", "erf"}},     {"math.sin", {"sinf", "sin"}},
        {"math.cos", {"cosf", "cos"}},     {"math.floor", {"floorf", "floor"}},
        {"math.ceil", {"ceilf", "ceil"}},  {"math.absf", {"fabsf", "fabs"}}};
    if (auto it = unaryMath.find(n); it != unaryMath.end()) {
      define(r, fn(r.getType(), it->second.first, it->second.second) + "(" + a(0) + ")");
      return;
    }
    if (n == "math.powf") {
      define(r, fn(r.getType(), "powf", "pow") + "(" + a(0) + ", " + a(1) + ")");
      return;
    }
    if (n == "math.absi") {
      define(r, "(" + a(0) + " < 0 ? -" + a(0) + " : " + a(0) + ")");
      return;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      size_t k = memrefs_.at(load.getMemRef().getAsOpaquePointer());
      const Shape &shape = spec_.operands[k].shape;
      std::string index = "0LL";
      for (size_t d = 0; d < shape.size(); ++d)
        index = "(" + index + " * " + dimExpr(shape[d], spec_.symbols) + " + " + at(load.getIndices()[d]) + ")";
      define(r, "m" + std::to_string(k) + "[" + index + "]");
      return;
    }
    fail("cuda codegen: cannot print '" + n + "'");
  }

  std::ostream &os_;
  const NestSpec &spec_;
  std::map<const void *, std::string> names_;
  std::map<const void *, size_t> memrefs_;
  int next_ = 0;
};

// Builds a scalar MLIR function (ivs, symbols, operand memrefs[, acc]) whose
// body is `body`, and prints it as a __device__ function named `name`.
std::string deviceFunction(MLIRContext &ctx, const NestSpec &spec, const std::string &name,
                           std::optional<DType> accumulator,
                           const std::function<Value(NestContext &, std::optional<Value>)> &body) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  SmallVector<Type> args;
  size_t rank = spec.space.size(), nsym = spec.symbols.size();
  for (size_t i = 0; i < rank + nsym; ++i)
    args.push_back(b.getIndexType());
  for (const cpu::NestOperand &o : spec.operands) {
    SmallVector<int64_t> shape;
    for (const Dim &d : o.shape)
      shape.push_back(d.isStatic() ? d.value() : ShapedType::kDynamic);
    args.push_back(MemRefType::get(shape, cpu::storageType(&ctx, o.dtype)));
  }
  if (accumulator)
    args.push_back(cpu::computeType(&ctx, *accumulator));
  auto f = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, {}));
  Block *entry = f.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  SmallVector<Value> ivs(entry->getArguments().begin(), entry->getArguments().begin() + rank);
  SmallVector<Value> syms(entry->getArguments().begin() + rank,
                          entry->getArguments().begin() + rank + nsym);
  SmallVector<Value> memrefs(entry->getArguments().begin() + rank + nsym,
                             entry->getArguments().begin() + rank + nsym + spec.operands.size());
  auto size = [&](const Dim &d) -> Value {
    Value v = b.create<arith::ConstantIndexOp>(loc, d.coefficient());
    for (const std::string &s : d.symbols()) {
      size_t k = size_t(std::find(spec.symbols.begin(), spec.symbols.end(), s) - spec.symbols.begin());
      v = b.create<arith::MulIOp>(loc, v, syms[k]);
    }
    return v;
  };
  NestContext nc{b, loc, ivs, memrefs, size};
  std::optional<Value> acc;
  if (accumulator)
    acc = entry->getArguments().back();
  Value result = body(nc, acc);
  b.create<func::ReturnOp>(loc, result);

  std::ostringstream os;
  std::ostringstream body_os;
  ScalarPrinter printer(body_os, spec);
  std::string params;
  for (size_t i = 0; i < rank; ++i) {
    printer.name(ivs[i], "i" + std::to_string(i));
    params += (params.empty() ? "" : ", ") + std::string("long long i") + std::to_string(i);
  }
  for (size_t k = 0; k < nsym; ++k) {
    printer.name(syms[k], "s" + std::to_string(k));
    params += (params.empty() ? "" : ", ") + std::string("long long s") + std::to_string(k);
  }
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    printer.memref(memrefs[k], k);
    params += (params.empty() ? "" : ", ") + std::string(k == 0 ? "" : "const ") +
              storageCType(spec.operands[k].dtype) + " *m" + std::to_string(k);
  }
  if (acc) {
    printer.name(*acc, "acc");
    params += ", " + cType(acc->getType()) + " acc";
  }
  std::string ret = printer.print(*entry);
  os << "__device__ __forceinline__ " << cType(result.getType()) << " " << name << "(" << params
     << ") {\n"
     << body_os.str() << "  return " << ret << ";\n}\n";
  return os.str();
}

} // namespace

std::vector<std::string> CudaSourceBuilder::addNest(const NestSpec &spec, const cpu::PointFn &point) {
  std::ostringstream os;
  const std::string &sym = spec.symbol;
  os << "// " << sym << ": space (";
  for (size_t d = 0; d < spec.space.size(); ++d)
    os << (d ? ", " : "") << spec.space[d].str() << (spec.reduced[d] ? " reduced" : "");
  os << ")" << (spec.reduction.empty() ? "" : " " + spec.reduction) << "\n";
  os << deviceFunction(ctx_, spec, sym + "_point", std::nullopt,
                       [&](NestContext &n, std::optional<Value>) { return point(n); });
  if (spec.epilogue)
    os << deviceFunction(ctx_, spec, sym + "_epilogue", spec.valueDtype,
                         [&](NestContext &n, std::optional<Value> acc) { return spec.epilogue(n, *acc); });
  size_t rank = spec.space.size(), nsym = spec.symbols.size();
  std::string params, symList, memList;
  for (size_t k = 0; k < spec.operands.size(); ++k) {
    params += std::string(k ? ", const " : "") + storageCType(spec.operands[k].dtype) + " *__restrict__ m" + std::to_string(k);
    memList += ", m" + std::to_string(k);
  }
  for (size_t k = 0; k < nsym; ++k) {
    params += ", long long s" + std::to_string(k);
    symList += ", s" + std::to_string(k);
  }
  // Arguments of the point/epilogue functions: ivs, symbols, operands.
  std::string callArgs;
  for (size_t d = 0; d < rank; ++d)
    callArgs += ", i" + std::to_string(d);
  callArgs += symList + memList;
  callArgs = callArgs.substr(2);
  std::string pointCall = sym + "_point(" + callArgs + ")";
  // The epilogue runs after the reduction loops: reduced indices are 0.
  std::string epilogueArgs;
  for (size_t d = 0; d < rank; ++d)
    epilogueArgs += spec.reduced[d] ? ", 0LL" : ", i" + std::to_string(d);
  epilogueArgs = (epilogueArgs + symList + memList).substr(2);
  std::string acct = cType(cpu::computeType(&ctx_, spec.valueDtype));
  DType out = spec.operands[0].dtype;
  std::string outT = storageCType(out);
  auto dims = [&](size_t d) { return dimExpr(spec.space[d], spec.symbols); };
  std::vector<size_t> reducedDims;
  for (size_t d = 0; d < rank; ++d)
    if (spec.reduced[d])
      reducedDims.push_back(d);
  bool arg = spec.reduction == "argmax" || spec.reduction == "argmin";
  bool isF = isFloat(spec.valueDtype);
  std::string total = "1LL", reducedTotal = "1LL";
  for (size_t d = 0; d < rank; ++d)
    (spec.reduced[d] ? reducedTotal : total) += " * " + dims(d);

  // Pieces both templates share.
  auto parallelIndices = [&](const std::string &linear, const std::string &indent) {
    std::string c;
    if (reducedDims.size() < rank)
      c += indent + "long long rest = " + linear + ";\n";
    for (size_t d = rank; d-- > 0;)
      if (!spec.reduced[d])
        c += indent + "const long long i" + std::to_string(d) + " = rest % " + dims(d) + "; rest /= " + dims(d) + ";\n";
    return c;
  };
  std::string identity;
  if (spec.reduction == "sum" || spec.reduction == "mean")
    identity = "0";
  else if (spec.reduction == "prod")
    identity = "1";
  else if (spec.reduction == "max")
    identity = isF ? "-TC_INFINITY" : "tc_lowest<" + acct + ">()";
  else
    identity = isF ? "TC_INFINITY" : "tc_highest<" + acct + ">()";
  auto accInit = [&](const std::string &indent) {
    return arg ? indent + acct + " best = 0; long long bestIndex = -1;\n"
               : indent + acct + " acc = (" + acct + ")(" + identity + ");\n";
  };
  // Combines (x, position) into the accumulator; positions arrive in
  // increasing order per thread (the first max/min wins, nan counts as the
  // largest, as in the interpreter).
  auto combine = [&](const std::string &x, const std::string &position) {
    if (arg)
      return std::string("tc_arg_combine<") + (spec.reduction == "argmax" ? "true" : "false") +
             ">(best, bestIndex, " + x + ", " + position + ");";
    if (spec.reduction == "sum" || spec.reduction == "mean")
      return "acc = acc + " + x + ";";
    if (spec.reduction == "prod")
      return "acc = acc * " + x + ";";
    return "acc = " + std::string(spec.reduction == "max" ? "tc_maximum" : "tc_minimum") + "(acc, " + x + ");";
  };
  auto finish = [&](const std::string &indent) {
    std::string c;
    if (spec.reduction == "mean")
      c += indent + "acc = acc / (" + acct + ")(" + reducedTotal + ");\n";
    if (spec.epilogue)
      c += indent + "acc = " + sym + "_epilogue(" + epilogueArgs + ", acc);\n";
    return c;
  };
  std::string value = reducedDims.empty() ? "tc_store<" + outT + ">(" + pointCall + ")"
                      : arg               ? "(long long)bestIndex"
                                          : "tc_store<" + outT + ">(acc)";
  // Output index: parallel dims (reduced ones as 0 with keepdim), plus offsets.
  std::string index = "0LL";
  size_t od = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (spec.reduced[d] && !spec.keepdim)
      continue;
    std::string i = spec.reduced[d] ? "0LL" : "i" + std::to_string(d);
    if (od < spec.outputOffset.size() && spec.outputOffset[od] != Dim::of(0))
      i = "(" + i + " + " + dimExpr(spec.outputOffset[od], spec.symbols) + ")";
    index = "(" + index + " * " + dimExpr(spec.operands[0].shape[od], spec.symbols) + " + " + i + ")";
    ++od;
  }
  std::string store = "m0[" + index + "] = " + value + ";\n";

  // Cooperative reductions: one thread's share of the reduced iterations
  // (from `first`, every `stride`), and one xor-butterfly exchange step.
  auto reducedIterations = [&](const std::string &first, const std::string &stride, const std::string &indent) {
    std::string c = indent + "for (long long r = " + first + "; r < reduced; r += " + stride + ") {\n";
    if (reducedDims.size() == 1) {
      c += indent + "  const long long i" + std::to_string(reducedDims[0]) + " = r;\n";
    } else {
      c += indent + "  long long rr = r;\n";
      for (size_t k = reducedDims.size(); k-- > 0;) {
        std::string d = std::to_string(reducedDims[k]);
        c += indent + "  const long long i" + d + " = rr % " + dims(reducedDims[k]) + "; rr /= " +
             dims(reducedDims[k]) + ";\n";
      }
    }
    c += indent + "  const " + acct + " x = " + pointCall + ";\n";
    c += indent + "  " + combine("x", "r") + "\n" + indent + "}\n";
    return c;
  };
  std::string shuffleStep =
      arg ? "{ const " + acct + " ob = tc_shfl_xor(best, o); const long long oi = tc_shfl_xor(bestIndex, o); " +
                combine("ob", "oi") + " }"
          : "{ const " + acct + " other = tc_shfl_xor(acc, o); " + combine("other", "") + " }";
  // A full-warp xor butterfly, and the combine across the warps of a block
  // (each warp's lane 0 leaves its result in shared memory; after a barrier
  // warp 0 reloads and combines them). Uses threadIdx only, so any caller's
  // local names are free.
  auto warpCombine = [&](const std::string &indent) {
    return indent + "#pragma unroll\n" + indent + "for (int o = 16; o > 0; o >>= 1) " + shuffleStep + "\n";
  };
  auto declarePartials = [&](const std::string &indent) {
    return indent + "__shared__ " + acct + " partial[BLOCK / 32];\n" +
           (arg ? indent + "__shared__ long long partialIndex[BLOCK / 32];\n" : std::string());
  };
  auto storePartial = [&](const std::string &indent) {
    return indent + "if (threadIdx.x % 32 == 0) { partial[threadIdx.x / 32] = " +
           (arg ? "best; partialIndex[threadIdx.x / 32] = bestIndex;" : "acc;") + " }\n" + indent +
           "__syncthreads();\n";
  };
  auto reloadPartials = [&](const std::string &indent) { // in warp 0
    return (arg ? indent + "best = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : (" + acct +
                      ")0; bestIndex = threadIdx.x < BLOCK / 32 ? partialIndex[threadIdx.x] : -1LL;\n"
                : indent + "acc = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : (" + acct + ")(" + identity +
                      ");\n") +
           warpCombine(indent);
  };

  // Elementwise (and sequential reduction) template: each thread computes
  // ITEMS outputs, BLOCK apart; reductions loop over the reduced dims.
  os << "template <int BLOCK, int ITEMS>\n__device__ __forceinline__ void " << sym << "_body(" << params << ") {\n";
  os << "  const long long total = " << total << ";\n";
  os << "  const long long base = (long long)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;\n";
  os << "#pragma unroll\n  for (int item = 0; item < ITEMS; ++item) {\n";
  os << "    const long long linear = base + (long long)item * BLOCK;\n";
  os << "    if (linear >= total) return;\n";
  os << parallelIndices("linear", "    ");
  if (!reducedDims.empty()) {
    os << accInit("    ");
    if (arg)
      os << "    long long position = 0;\n";
    std::string indent = "    ";
    for (size_t d : reducedDims) {
      os << indent << "for (long long i" << d << " = 0; i" << d << " < " << dims(d) << "; ++i" << d << ") {\n";
      indent += "  ";
    }
    os << indent << "const " << acct << " x = " << pointCall << ";\n";
    os << indent << combine("x", "position") << "\n";
    if (arg)
      os << indent << "++position;\n";
    for (size_t k = 0; k < reducedDims.size(); ++k) {
      indent = indent.substr(2);
      os << indent << "}\n";
    }
    os << finish("    ");
  }
  os << "    " << store << "  }\n}\n";
  std::vector<std::string> names;
  for (const Variant &v : kernelVariants()) {
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << sym << v.suffix()
       << "(" << params << ") { " << sym << "_body<" << v.block << ", " << v.items << ">("
       << memList.substr(2) << symList << "); }\n";
    names.push_back(v.suffix().substr(1));
  }

  // Cooperative reduction template: LANES threads share each output (a
  // warp-part or the whole block), striding over the reduced iterations,
  // then combine through warp shuffles (and shared memory across warps).
  if (!reducedDims.empty()) {
    os << "template <int BLOCK, int LANES>\n__device__ __forceinline__ void " << sym << "_rows(" << params << ") {\n";
    os << "  static_assert(LANES <= 32 || LANES == BLOCK, \"lanes: part of a warp or the whole block\");\n";
    os << "  const long long total = " << total << ";\n";
    os << "  const long long reduced = " << reducedTotal << ";\n";
    os << "  const int lane = threadIdx.x % LANES;\n";
    os << "  const long long linear = (long long)blockIdx.x * (BLOCK / LANES) + threadIdx.x / LANES;\n";
    os << "  const bool active = linear < total;\n";
    os << parallelIndices("active ? linear : 0LL", "  ");
    os << accInit("  ");
    os << "  if (active) {\n";
    os << reducedIterations("lane", "LANES", "    ");
    os << "  }\n";
    // Lanes combine pairwise (xor butterfly inside each group of LANES).
    os << "#pragma unroll\n  for (int o = (LANES < 32 ? LANES : 32) / 2; o > 0; o >>= 1) " << shuffleStep << "\n";
    os << "  if constexpr (LANES > 32) {\n";
    os << declarePartials("    ") << storePartial("    ");
    os << "    if (threadIdx.x / 32 != 0) return;\n";
    os << reloadPartials("    ");
    os << "  }\n";
    os << "  if (!active || lane != 0) return;\n";
    os << finish("  ");
    os << "  " << store << "}\n";
    for (const Variant &v : rowVariants()) {
      os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << sym << v.suffix()
         << "(" << params << ") { " << sym << "_rows<" << v.block << ", " << v.lanes << ">("
         << memList.substr(2) << symList << "); }\n";
      names.push_back(v.suffix().substr(1));
    }
  }
  // Row template: the whole block computes row i0 of the nest (every
  // output whose first index is i0), so a chain of nests over the same rows
  // (softmax's max, sum and normalize; layer norm's passes) runs as one
  // kernel, one row per block, __syncthreads between nests (chainKernel).
  if (!spec.space.empty() && !spec.reduced[0]) {
    std::string inner = "1LL";
    for (size_t d = 1; d < rank; ++d)
      if (!spec.reduced[d])
        inner += " * " + dims(d);
    auto innerIndices = [&](const std::string &linear, const std::string &indent) {
      std::string c;
      bool any = false;
      for (size_t d = 1; d < rank; ++d)
        any = any || !spec.reduced[d];
      if (any)
        c += indent + "long long rest = " + linear + ";\n";
      for (size_t d = rank; d-- > 1;)
        if (!spec.reduced[d])
          c += indent + "const long long i" + std::to_string(d) + " = rest % " + dims(d) + "; rest /= " + dims(d) + ";\n";
      return c;
    };
    // No __restrict__ here: in a chain kernel a nest reads what an earlier
    // nest of the same kernel wrote, which the read-only (non-coherent)
    // load path that restrict-qualified const pointers allow would miss.
    std::string plain = params;
    for (size_t at; (at = plain.find("__restrict__ ")) != std::string::npos;)
      plain.erase(at, 13);
    os << "template <int BLOCK>\n__device__ __forceinline__ void " << sym << "_row(long long i0, " << plain << ") {\n";
    os << "  const long long inner = " << inner << ";\n";
    if (reducedDims.empty()) {
      os << "  for (long long p = threadIdx.x; p < inner; p += BLOCK) {\n";
      os << innerIndices("p", "    ");
      os << "    " << store << "  }\n}\n";
    } else {
      std::string reducedLoop = reducedIterations("first", "stride", "      ");
      os << "  const long long reduced = " << reducedTotal << ";\n";
      os << "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n";
      // Few outputs per row (a row max/sum): the whole block reduces each.
      os << "  if (inner < BLOCK / 32) {\n";
      os << declarePartials("    ");
      os << "    for (long long p = 0; p < inner; ++p) {\n";
      os << innerIndices("p", "      ");
      os << accInit("      ");
      os << "      const long long first = threadIdx.x, stride = BLOCK;\n";
      os << reducedLoop;
      os << warpCombine("      ") << storePartial("      ");
      os << "      if (warp == 0) {\n";
      os << reloadPartials("        ");
      os << "        if (lane == 0) {\n" << finish("          ") << "          " << store << "        }\n";
      os << "      }\n";
      os << "      __syncthreads(); // partial is reused by the next output\n";
      os << "    }\n";
      // Many outputs per row: a warp per output.
      os << "  } else {\n";
      os << "    for (long long p = warp; p < inner; p += BLOCK / 32) {\n";
      os << innerIndices("p", "      ");
      os << accInit("      ");
      os << "      const long long first = lane, stride = 32;\n";
      os << reducedLoop;
      os << warpCombine("      ");
      os << "      if (lane == 0) {\n" << finish("        ") << "        " << store << "      }\n";
      os << "    }\n  }\n}\n";
    }
  }
  os << "\n";
  kernels_ += os.str();
  return names;
}

const std::vector<Variant> &chainVariants() {
  static const std::vector<Variant> v = {{256, 1, 0}, {512, 1, 0}, {1024, 1, 0}};
  return v;
}

// Chain kernels' pointers are not __restrict__: later nests read what
// earlier ones wrote (see the row template).
std::vector<std::string> CudaSourceBuilder::addChain(const std::string &name,
                                                     const std::vector<ChainedNest> &nests,
                                                     const std::vector<std::string> &symbols,
                                                     const Dim &rows) {
  std::ostringstream os;
  std::string params, body;
  size_t k = 0;
  for (size_t n = 0; n < nests.size(); ++n) {
    std::string args;
    for (size_t o = 0; o < nests[n].operands.size(); ++o, ++k) {
      params += (params.empty() ? "" : ", ") + std::string(o ? "const " : "") +
                storageCType(nests[n].operands[o]) + " *p" + std::to_string(k);
      args += ", p" + std::to_string(k);
    }
    for (size_t i = 0; i < symbols.size(); ++i)
      args += ", s" + std::to_string(i);
    if (n)
      body += "  __syncthreads(); // the next nest reads this row's results\n";
    body += "  " + nests[n].symbol + "_row<BLOCK>(i0" + args + ");\n";
  }
  for (size_t i = 0; i < symbols.size(); ++i)
    params += ", long long s" + std::to_string(i);
  os << "// " << name << ": one row per block through " << nests.size() << " nests\n";
  os << "template <int BLOCK>\n__device__ __forceinline__ void " << name << "_body(" << params << ") {\n";
  os << "  const long long i0 = blockIdx.x;\n";
  os << "  if (i0 >= " << dimExpr(rows, symbols) << ") return;\n";
  os << body << "}\n";
  std::string callArgs;
  for (size_t i = 0; i < k; ++i)
    callArgs += (i ? ", p" : "p") + std::to_string(i);
  for (size_t i = 0; i < symbols.size(); ++i)
    callArgs += ", s" + std::to_string(i);
  std::vector<std::string> names;
  for (const Variant &v : chainVariants()) {
    std::string variant = "b" + std::to_string(v.block) + "_r1";
    os << "extern \"C\" __global__ void __launch_bounds__(" << v.block << ") " << name << "_" << variant << "("
       << params << ") { " << name << "_body<" << v.block << ">(" << callArgs << "); }\n";
    names.push_back(variant);
  }
  os << "\n";
  kernels_ += os.str();
  return names;
}

void CudaSourceBuilder::addColumnSums(const std::string &prefix, DType dtype) {
  std::string t = storageCType(dtype);
  std::string acc = dtype == DType::F64 ? "double" : "float";
  std::string load = dtype == DType::BF16 ? "__bfloat162float(in[r * cols + c])"
                     : dtype == DType::F16 ? "__half2float(in[r * cols + c])"
                                           : "in[r * cols + c]";
  kernels_ += "extern \"C\" __global__ void __launch_bounds__(256) " + prefix + "_column_sums_" + std::string(dtypeName(dtype)) +
              "(" + t + " *__restrict__ out, const " + t + " *__restrict__ in, long long rows, long long cols) {\n"
              "  const long long c = (long long)blockIdx.x * 256 + threadIdx.x;\n"
              "  if (c >= cols) return;\n  " + acc + " acc = 0;\n"
              "  for (long long r = 0; r < rows; ++r) acc += " + load + ";\n"
              "  out[c] = tc_store<" + t + ">(acc);\n}\n\n";
}

std::string CudaSourceBuilder::addAttention(const std::string &prefix, DType dtype, int paddedHeadDim,
                                            bool causal) {
  check(dtype == DType::F16 || dtype == DType::BF16, "cuda codegen: fused attention takes f16 or bf16");
  check(paddedHeadDim % 16 == 0 && paddedHeadDim >= 16 && paddedHeadDim <= 128,
        "cuda codegen: fused attention head dim out of range");
  std::string name = prefix + "_attention_" + std::string(dtypeName(dtype)) + "_d" +
                     std::to_string(paddedHeadDim) + (causal ? "_causal" : "");
  attention_[name].arguments =
      storageCType(dtype) + ", " + std::to_string(paddedHeadDim) + ", " + (causal ? "true" : "false");
  return name;
}

void CudaSourceBuilder::requireAttentionKernel(const std::string &name, const std::string &kernel) {
  static const std::set<std::string> kinds = {"FWD", "BWD_Q", "BWD_Q_SAVED", "BWD_KV"};
  check(attention_.count(name) && kinds.count(kernel), "cuda codegen: unknown attention kernel " + name + " " + kernel);
  attention_[name].kernels.insert(kernel);
}

std::string CudaSourceBuilder::source() const {
  if (attention_.empty())
    return cudaPrelude() + kernels_;
  // The attention kernels' definitions, then the instantiations used.
  std::string instances;
  for (const auto &[name, config] : attention_)
    for (const std::string &kernel : config.kernels)
      instances += "TC_ATTENTION_" + kernel + "(" + name + ", " + config.arguments + ")\n";
  return cudaPrelude() + attentionKernelSource() + kernels_ + instances;
}

std::string cudaPrelude() {
  return R"(// Generated by tensorc: CUDA C++ kernels, compiled at run time with NVRTC.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define TC_INFINITY __int_as_float(0x7f800000)

// NaN-propagating max/min (PyTorch's maximum/minimum; fmaxf drops NaN).
template <typename T> __device__ __forceinline__ T tc_maximum(T a, T b) {
  return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b);
}
template <typename T> __device__ __forceinline__ T tc_minimum(T a, T b) {
  return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b);
}
template <typename T> __device__ __forceinline__ T tc_lowest();
template <> __device__ __forceinline__ int tc_lowest<int>() { return -2147483647 - 1; }
template <> __device__ __forceinline__ long long tc_lowest<long long>() { return -9223372036854775807LL - 1; }
template <typename T> __device__ __forceinline__ T tc_highest();
template <> __device__ __forceinline__ int tc_highest<int>() { return 2147483647; }
template <> __device__ __forceinline__ long long tc_highest<long long>() { return 9223372036854775807LL; }
// A computed value to its storage type (one rounding for f16/bf16).
template <typename S, typename T> __device__ __forceinline__ S tc_store(T v) { return (S)v; }
template <> __device__ __forceinline__ __half tc_store<__half, float>(float v) { return __float2half(v); }
template <> __device__ __forceinline__ __nv_bfloat16 tc_store<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ unsigned char tc_store<unsigned char, bool>(bool v) { return v ? 1 : 0; }
// Warp exchange for every accumulator type (bool travels as int).
template <typename T> __device__ __forceinline__ T tc_shfl_xor(T v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
template <> __device__ __forceinline__ bool tc_shfl_xor<bool>(bool v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, (int)v, lane_mask) != 0;
}
// argmax/argmin: keeps (best, index) of the first max/min; nan counts as
// the largest for both (the interpreter's rule); index < 0: nothing yet.
template <bool MAX, typename T>
__device__ __forceinline__ void tc_arg_combine(T &best, long long &index, T x, long long xi) {
  if (xi < 0) return;
  if (index < 0) { best = x; index = xi; return; }
  const bool bn = best != best, xn = x != x;
  const bool take = (bn || xn) ? (xn && (!bn || xi < index))
                               : ((MAX ? x > best : x < best) || (x == best && xi < index));
  if (take) { best = x; index = xi; }
}

)";
}

} // namespace tensorc::codegen::cuda
