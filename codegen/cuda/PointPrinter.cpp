#include "codegen/cuda/PointPrinter.h"

#include "codegen/cpu/ScalarOps.h"
#include "ir/core/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstring>
#include <array>
#include <map>
#include <set>
#include <sstream>

using namespace mlir;

namespace tensorc::codegen::cuda {

using cpu::NestContext;
using cpu::NestSpec;

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

namespace {

// Prints a function of straight-line arith/math/memref ops as C++
// statements, naming values v0, v1, ...; block arguments are given names.
class ScalarPrinter {
public:
  ScalarPrinter(std::ostream &os, const NestSpec &spec) : os_(os), spec_(spec) {}

  void name(Value v, std::string n) { names_[v.getAsOpaquePointer()] = std::move(n); }
  // Prints the function at four consecutive values of `iv` (lanes: iv,
  // iv + 1, iv + 2, iv + 3; iv a multiple of 4): what depends on it four
  // times, the rest once; a load of a row that `iv` indexes contiguously
  // as one vector (tc_load4).
  void vectorize(Value iv, const std::string &ivName) {
    std::array<std::string, 4> l;
    for (int j = 0; j < 4; ++j)
      l[j] = j == 0 ? ivName : "(" + ivName + " + " + std::to_string(j) + "LL)";
    lanes_[iv.getAsOpaquePointer()] = l;
    vectorIv_ = iv;
  }
  // The operands read as vectors (vectorize) through m<k> and through e<k>:
  // those pointers must be 16-byte aligned (4 elements) for the function to
  // run (in a split chain's row template e<k> is device memory while m<k>
  // is the row cache).
  const std::set<size_t> &vectorOperands() const { return vectorOperands_; }
  const std::set<size_t> &vectorElsewhereOperands() const { return vectorElsewhere_; }
  // The operands read through their second pointer (e<k>).
  const std::set<size_t> &elsewhereOperands() const { return elsewhereOperands_; }
  // The returned value per lane (print's result for lane 0).
  std::array<std::string, 4> returnedLanes() const { return returned_; }
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
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (lane_ = 0; lane_ < 4; ++lane_)
          returned_[size_t(lane_)] = at(ret.getOperand(0));
        lane_ = 0;
        return returned_[0];
      }
      if (!live.count(&op))
        continue;
      if (!varies(op)) {
        printOp(op);
        continue;
      }
      if (auto load = dyn_cast<memref::LoadOp>(op); load && printVectorLoad(load))
        continue;
      for (lane_ = 0; lane_ < 4; ++lane_)
        printOp(op);
      lane_ = 0;
    }
    fail("cuda codegen: point function without return");
  }

private:
  bool varying(Value v) const { return lanes_.count(v.getAsOpaquePointer()) != 0; }
  bool varies(Operation &op) const {
    return llvm::any_of(op.getOperands(), [&](Value v) { return varying(v); });
  }

  std::string at(Value v) {
    if (auto l = lanes_.find(v.getAsOpaquePointer()); l != lanes_.end())
      return l->second[size_t(lane_)];
    auto it = names_.find(v.getAsOpaquePointer());
    check(it != names_.end(), "cuda codegen: value used before definition");
    return it->second;
  }

  // Defines `v` (in the current lane where it varies with the vector index).
  std::string define(Value v, const std::string &expr) {
    std::string n = "v" + std::to_string(next_++);
    os_ << "  const " << cType(v.getType()) << " " << n << " = " << expr << ";\n";
    if (vectorIv_ && varies(*v.getDefiningOp()))
      lanes_[v.getAsOpaquePointer()][size_t(lane_)] = n;
    else
      name(v, n);
    return n;
  }

  // A load whose last index is the vector index itself (its other indices
  // the same in every lane) from an operand whose rows hold a multiple of 4
  // elements: the four lanes are four consecutive elements, one aligned
  // vector load. Returns false for any other load (printed per lane).
  bool printVectorLoad(memref::LoadOp load) {
    size_t k = memrefs_.at(load.getMemRef().getAsOpaquePointer());
    const Shape &shape = spec_.operands[k].shape;
    auto indices = load.getIndices();
    if (shape.empty() || !shape.back().isStatic() || shape.back().value() % 4 != 0 ||
        indices.back() != vectorIv_)
      return false;
    for (size_t d = 0; d + 1 < indices.size(); ++d)
      if (varying(indices[d]))
        return false;
    std::string index = loadIndex(load, k);
    std::string n = "v" + std::to_string(next_++);
    std::string from = pointer(load, k);
    os_ << "  const tc_vec4<" << storageCType(spec_.operands[k].dtype) << "> " << n << " = tc_load4(" << from
        << " + " << index << ");\n";
    std::array<std::string, 4> l;
    for (int j = 0; j < 4; ++j)
      l[size_t(j)] = n + ".v[" + std::to_string(j) + "]";
    lanes_[load.getResult().getAsOpaquePointer()] = l;
    (load->hasAttr(cpu::kElsewhereLoad) ? vectorElsewhere_ : vectorOperands_).insert(k);
    return true;
  }

  // The operand's pointer a load reads through: m<k>, or e<k> for a read
  // away from the point's own indices (kElsewhereLoad).
  std::string pointer(memref::LoadOp load, size_t k) {
    if (!load->hasAttr(cpu::kElsewhereLoad))
      return "m" + std::to_string(k);
    elsewhereOperands_.insert(k);
    return "e" + std::to_string(k);
  }

  std::string loadIndex(memref::LoadOp load, size_t k) {
    const Shape &shape = spec_.operands[k].shape;
    std::string index = "0LL";
    for (size_t d = 0; d < shape.size(); ++d)
      index = "(" + index + " * " + dimExpr(shape[d], spec_.symbols) + " + " + at(load.getIndices()[d]) + ")";
    return index;
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

  // x ** y. A constant exponent of 2, 3, 0.5, -0.5, -1 or -2 is multiplied,
  // square-rooted or divided out, as PyTorch's CUDA pow does
  // (pow_tensor_scalar_optimized_kernel): the same values as eager, and a
  // general powf is ~40 instructions (GPT-2's tanh-GELU backward was
  // compute-bound on six of them per element).
  std::string powerOf(Operation &op, const std::string &x, const std::string &y, Type t) {
    auto c = op.getOperand(1).getDefiningOp<arith::ConstantOp>();
    auto e = c ? llvm::dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
    if (e) {
      double v = e.getValueAsDouble();
      std::string one = t.isF64() ? "1.0" : "1.0f";
      if (v == 2)
        return "(" + x + " * " + x + ")";
      if (v == 3)
        return "(" + x + " * " + x + " * " + x + ")";
      if (v == 0.5)
        return fn(t, "sqrtf", "sqrt") + "(" + x + ")";
      if (v == -0.5)
        return fn(t, "rsqrtf", "rsqrt") + "(" + x + ")";
      if (v == -1)
        return "(" + one + " / " + x + ")";
      if (v == -2)
        return "(" + one + " / (" + x + " * " + x + "))";
    }
    return fn(t, "powf", "pow") + "(" + x + ", " + y + ")";
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
      define(r, powerOf(op, a(0), a(1), r.getType()));
      return;
    }
    if (n == "math.absi") {
      define(r, "(" + a(0) + " < 0 ? -" + a(0) + " : " + a(0) + ")");
      return;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      size_t k = memrefs_.at(load.getMemRef().getAsOpaquePointer());
      define(r, pointer(load, k) + "[" + loadIndex(load, k) + "]");
      return;
    }
    fail("cuda codegen: cannot print '" + n + "'");
  }

  std::ostream &os_;
  const NestSpec &spec_;
  std::map<const void *, std::string> names_;
  std::map<const void *, size_t> memrefs_;
  int next_ = 0;
  // Vectorized printing: each varying value's name per lane.
  std::map<const void *, std::array<std::string, 4>> lanes_;
  Value vectorIv_;
  int lane_ = 0;
  std::set<size_t> vectorOperands_, vectorElsewhere_, elsewhereOperands_;
  std::array<std::string, 4> returned_;
};

} // namespace

namespace {

// deviceFunction, or with `vectorOperands` vectorDeviceFunction.
std::string printFunction(MLIRContext &ctx, const NestSpec &spec, const std::string &name,
                          std::optional<DType> accumulator,
                          const std::function<Value(NestContext &, std::optional<Value>)> &body,
                          VectorFunction *vector, std::set<size_t> &elsewhere) {
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
  params += kElsewhereParams;
  if (acc) {
    printer.name(*acc, "acc");
    params += ", " + cType(acc->getType()) + " acc";
  }
  if (vector) {
    check(rank > 0, "cuda codegen: a vector point function needs an index");
    printer.vectorize(ivs[rank - 1], "i" + std::to_string(rank - 1));
  }
  std::string ret = printer.print(*entry);
  elsewhere.insert(printer.elsewhereOperands().begin(), printer.elsewhereOperands().end());
  if (!vector) {
    os << "__device__ __forceinline__ " << cType(result.getType()) << " " << name << "(" << params << ") {\n"
       << body_os.str() << "  return " << ret << ";\n}\n";
    return os.str();
  }
  vector->operands = printer.vectorOperands();
  vector->elsewhereOperands = printer.vectorElsewhereOperands();
  vector->resultType = cType(result.getType());
  os << "__device__ __forceinline__ void " << name << "(" << params << ", " << cType(result.getType())
     << " (&r)[4]) {\n"
     << body_os.str();
  std::array<std::string, 4> lanes = printer.returnedLanes();
  for (size_t j = 0; j < 4; ++j)
    os << "  r[" << j << "] = " << lanes[j] << ";\n";
  os << "}\n";
  vector->text = os.str();
  return vector->text;
}

} // namespace

std::string deviceFunction(MLIRContext &ctx, const NestSpec &spec, const std::string &name,
                           std::optional<DType> accumulator,
                           const std::function<Value(NestContext &, std::optional<Value>)> &body,
                           std::set<size_t> &elsewhere) {
  return printFunction(ctx, spec, name, accumulator, body, nullptr, elsewhere);
}

VectorFunction vectorDeviceFunction(MLIRContext &ctx, const NestSpec &spec, const std::string &name,
                                    const std::function<Value(NestContext &, std::optional<Value>)> &body,
                                    std::set<size_t> &elsewhere) {
  VectorFunction f;
  printFunction(ctx, spec, name, std::nullopt, body, &f, elsewhere);
  return f;
}

std::string elsewhereParams(const NestSpec &spec, const std::set<size_t> &elsewhere) {
  std::string params;
  for (size_t k : elsewhere)
    params += ", const " + storageCType(spec.operands[k].dtype) + " *e" + std::to_string(k);
  return params;
}

} // namespace tensorc::codegen::cuda
