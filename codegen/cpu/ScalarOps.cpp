#include "codegen/cpu/ScalarOps.h"

#include "ir/core/Error.h"
#include "ir/dialect/Conversion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace tensorc::codegen::cpu {

Type computeType(MLIRContext *ctx, DType d) {
  return d == DType::F16 || d == DType::BF16 ? Builder(ctx).getF32Type()
                                             : tc::toMlirElementType(ctx, d);
}

Type storageType(MLIRContext *ctx, DType d) {
  return d == DType::I1 ? Builder(ctx).getI8Type() : tc::toMlirElementType(ctx, d);
}

Value fromStorage(OpBuilder &b, Location loc, Value v, DType d) {
  if (d == DType::I1)
    return b.create<arith::TruncIOp>(loc, b.getI1Type(), v);
  if (d == DType::F16 || d == DType::BF16)
    return b.create<arith::ExtFOp>(loc, b.getF32Type(), v);
  return v;
}

Value toStorage(OpBuilder &b, Location loc, Value v, DType d) {
  Type t = storageType(b.getContext(), d);
  if (d == DType::I1)
    return b.create<arith::ExtUIOp>(loc, t, v);
  if (d == DType::F16 || d == DType::BF16)
    return b.create<arith::TruncFOp>(loc, t, v);
  return v;
}

Value scalarConstant(OpBuilder &b, Location loc, double v, DType d) {
  Type t = computeType(b.getContext(), d);
  if (isFloat(d))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(t, v));
  if (d == DType::I1)
    return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, v != 0 ? 1 : 0));
  return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(t, int64_t(v)));
}

Value convert(OpBuilder &b, Location loc, Value v, DType from, DType to) {
  MLIRContext *ctx = b.getContext();
  Type ft = computeType(ctx, from), tt = computeType(ctx, to);
  if (from == to)
    return v;
  // f16/bf16 values live in f32 registers, so a fused kernel may hold more
  // precision than the dtype has. Casts are where that must not show: a cast
  // from f16/bf16 sees the value rounded to its dtype, a cast to them rounds
  // (overflowing to inf, flushing tiny values) exactly as storing would.
  auto roundTo = [&](Value x, DType d) -> Value {
    Value narrow = b.create<arith::TruncFOp>(loc, storageType(ctx, d), x);
    return b.create<arith::ExtFOp>(loc, b.getF32Type(), narrow);
  };
  if (from == DType::F16 || from == DType::BF16)
    v = roundTo(v, from);
  if (to == DType::F16 || to == DType::BF16) {
    Value wide = isFloat(from) ? v : convert(b, loc, v, from, DType::F32);
    if (wide.getType().isF64()) {
      // LLVM lowers no f64 -> f16/bf16 here; going through f32 rounds twice
      // unless the first rounding is to odd (truncate, then set the last bit
      // if inexact): then the second is the one correct rounding.
      Value t = b.create<arith::TruncFOp>(loc, b.getF32Type(), wide);
      Value back = b.create<arith::ExtFOp>(loc, b.getF64Type(), t);
      Value inexact = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE, back, wide);
      Value away = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT,
                                           b.create<math::AbsFOp>(loc, back),
                                           b.create<math::AbsFOp>(loc, wide));
      Value bits = b.create<arith::BitcastOp>(loc, b.getI32Type(), t);
      Value one = b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(1));
      Value towardZero =
          b.create<arith::SelectOp>(loc, away, b.create<arith::SubIOp>(loc, bits, one), bits);
      Value odd = b.create<arith::OrIOp>(loc, towardZero, one);
      wide = b.create<arith::BitcastOp>(loc, b.getF32Type(),
                                        b.create<arith::SelectOp>(loc, inexact, odd, bits));
    }
    return roundTo(wide, to);
  }
  if (ft == tt)
    return v;
  if (to == DType::I1) // nonzero (nan too) is true
    return isFloat(from)
               ? b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, v,
                                         scalarConstant(b, loc, 0, from))
                     .getResult()
               : b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, v,
                                         scalarConstant(b, loc, 0, from))
                     .getResult();
  if (isFloat(from) && isFloat(to))
    return ft.getIntOrFloatBitWidth() < tt.getIntOrFloatBitWidth()
               ? b.create<arith::ExtFOp>(loc, tt, v).getResult()
               : b.create<arith::TruncFOp>(loc, tt, v).getResult();
  if (!isFloat(from) && isFloat(to))
    return from == DType::I1 ? b.create<arith::UIToFPOp>(loc, tt, v).getResult()
                             : b.create<arith::SIToFPOp>(loc, tt, v).getResult();
  if (isFloat(from)) {
    // Truncate toward zero, saturating, nan -> 0 (the interpreter's rule;
    // fptosi alone is undefined out of range).
    unsigned bits = tt.getIntOrFloatBitWidth();
    double lo = -std::ldexp(1.0, int(bits) - 1), hi = std::ldexp(1.0, int(bits) - 1);
    Value x = v;
    Value isNan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, x, x);
    Value tooLow = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLE, x,
                                           b.create<arith::ConstantOp>(loc, b.getFloatAttr(ft, lo)));
    Value tooHigh = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, x,
                                            b.create<arith::ConstantOp>(loc, b.getFloatAttr(ft, hi)));
    Value safe = b.create<arith::SelectOp>(
        loc, b.create<arith::OrIOp>(loc, b.create<arith::OrIOp>(loc, isNan, tooLow), tooHigh),
        b.create<arith::ConstantOp>(loc, b.getFloatAttr(ft, 0)), x);
    Value i = b.create<arith::FPToSIOp>(loc, tt, safe);
    auto intConst = [&](APInt value) {
      return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(tt, value)).getResult();
    };
    Value r = b.create<arith::SelectOp>(loc, tooLow, intConst(APInt::getSignedMinValue(bits)), i);
    r = b.create<arith::SelectOp>(loc, tooHigh, intConst(APInt::getSignedMaxValue(bits)), r);
    return b.create<arith::SelectOp>(loc, isNan, intConst(APInt(bits, 0)), r);
  }
  // Integer to integer: widen (bools as 0/1) or wrap.
  unsigned fb = ft.getIntOrFloatBitWidth(), tb = tt.getIntOrFloatBitWidth();
  if (fb < tb)
    return from == DType::I1 ? b.create<arith::ExtUIOp>(loc, tt, v).getResult()
                             : b.create<arith::ExtSIOp>(loc, tt, v).getResult();
  return b.create<arith::TruncIOp>(loc, tt, v);
}

namespace {

const std::set<std::string> &scalarOps() {
  static const std::set<std::string> ops = {
      "neg",   "abs",  "exp",     "log",     "sqrt",        "rsqrt",      "reciprocal",
      "tanh",  "sigmoid", "relu", "gelu",    "silu",        "sin",        "cos",
      "erf",   "floor", "ceil",   "sign",    "logical_not", "add",        "sub",
      "mul",   "div",  "pow",     "maximum", "minimum",     "eq",         "ne",
      "lt",    "le",   "gt",      "ge",      "logical_and", "logical_or", "where",
      "cast",  "clamp"};
  return ops;
}

Value floatOp(OpBuilder &b, Location loc, const std::string &op, const AttrMap &attrs,
              ArrayRef<Value> a, DType dt) {
  auto c = [&](double v) { return scalarConstant(b, loc, v, dt); };
  auto sigmoid = [&](Value x) {
    Value e = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, x));
    return b.create<arith::DivFOp>(loc, c(1), b.create<arith::AddFOp>(loc, c(1), e)).getResult();
  };
  if (op == "neg")
    return b.create<arith::NegFOp>(loc, a[0]);
  if (op == "abs")
    return b.create<math::AbsFOp>(loc, a[0]);
  if (op == "exp")
    return b.create<math::ExpOp>(loc, a[0]);
  if (op == "log")
    return b.create<math::LogOp>(loc, a[0]);
  if (op == "sqrt")
    return b.create<math::SqrtOp>(loc, a[0]);
  if (op == "rsqrt")
    return b.create<arith::DivFOp>(loc, c(1), b.create<math::SqrtOp>(loc, a[0]));
  if (op == "reciprocal")
    return b.create<arith::DivFOp>(loc, c(1), a[0]);
  if (op == "tanh")
    return b.create<math::TanhOp>(loc, a[0]);
  if (op == "sigmoid")
    return sigmoid(a[0]);
  if (op == "relu") {
    // relu(nan) = nan; relu(-0) = 0.
    Value positive = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UGT, a[0], c(0));
    return b.create<arith::SelectOp>(loc, positive, a[0], c(0));
  }
  if (op == "silu")
    return b.create<arith::MulFOp>(loc, a[0], sigmoid(a[0]));
  if (op == "gelu") {
    Value x = a[0];
    if (getEnum(attrs, "approximate") == "tanh") {
      Value x3 = b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, x), x);
      Value inner = b.create<arith::MulFOp>(
          loc, b.create<arith::AddFOp>(loc, x, b.create<arith::MulFOp>(loc, x3, c(0.044715))),
          c(std::sqrt(2.0 / M_PI)));
      Value th = b.create<math::TanhOp>(loc, inner);
      return b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, c(0.5)),
                                     b.create<arith::AddFOp>(loc, c(1), th));
    }
    Value e = b.create<math::ErfOp>(loc, b.create<arith::MulFOp>(loc, x, c(1 / std::sqrt(2.0))));
    return b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, c(0.5)),
                                   b.create<arith::AddFOp>(loc, c(1), e));
  }
  // sin and erf are odd: f(-0) is -0 (1/f(-0) is -inf, as in the
  // interpreter and PyTorch); the polynomial approximations return +0
  // there, so a zero passes through as it is.
  auto keepZero = [&](Value fx) {
    Value zero = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OEQ, a[0], c(0));
    return b.create<arith::SelectOp>(loc, zero, a[0], fx).getResult();
  };
  if (op == "sin")
    return keepZero(b.create<math::SinOp>(loc, a[0]));
  if (op == "cos")
    return b.create<math::CosOp>(loc, a[0]);
  if (op == "erf")
    return keepZero(b.create<math::ErfOp>(loc, a[0]));
  if (op == "floor")
    return b.create<math::FloorOp>(loc, a[0]);
  if (op == "ceil")
    return b.create<math::CeilOp>(loc, a[0]);
  if (op == "sign") {
    Value pos = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, a[0], c(0));
    Value neg = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, a[0], c(0));
    // +0 for both zeros and for nan (as the interpreter and PyTorch: sign(-0)
    // is 0, so 1/sign is +inf; both comparisons are false for nan).
    return b.create<arith::SelectOp>(loc, pos, c(1), b.create<arith::SelectOp>(loc, neg, c(-1), c(0)));
  }
  if (op == "add")
    return b.create<arith::AddFOp>(loc, a[0], a[1]);
  if (op == "sub")
    return b.create<arith::SubFOp>(loc, a[0], a[1]);
  if (op == "mul")
    return b.create<arith::MulFOp>(loc, a[0], a[1]);
  if (op == "div")
    return b.create<arith::DivFOp>(loc, a[0], a[1]);
  if (op == "pow")
    return b.create<math::PowFOp>(loc, a[0], a[1]);
  if (op == "maximum")
    return b.create<arith::MaximumFOp>(loc, a[0], a[1]);
  if (op == "minimum")
    return b.create<arith::MinimumFOp>(loc, a[0], a[1]);
  if (op == "clamp") {
    // min(max(x, lo), hi) with nan kept: compare-and-select.
    Value v = a[0];
    if (hasAttr(attrs, "min")) {
      Value lo = c(getFloat(attrs, "min"));
      v = b.create<arith::SelectOp>(
          loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, v, lo), lo, v);
    }
    if (hasAttr(attrs, "max")) {
      Value hi = c(getFloat(attrs, "max"));
      v = b.create<arith::SelectOp>(
          loc, b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, v, hi), hi, v);
    }
    return v;
  }
  fail("cpu codegen: op '" + op + "' is not supported on " + std::string(dtypeName(dt)));
}

Value intOp(OpBuilder &b, Location loc, const std::string &op, const AttrMap &attrs,
            ArrayRef<Value> a, DType dt) {
  auto c = [&](double v) { return scalarConstant(b, loc, v, dt); };
  if (op == "neg")
    return b.create<arith::SubIOp>(loc, c(0), a[0]);
  if (op == "abs")
    return b.create<math::AbsIOp>(loc, a[0]);
  if (op == "relu")
    return b.create<arith::MaxSIOp>(loc, a[0], c(0));
  if (op == "floor" || op == "ceil")
    return a[0];
  if (op == "sign") {
    Value pos = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, a[0], c(0));
    Value neg = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, a[0], c(0));
    return b.create<arith::SelectOp>(loc, pos, c(1), b.create<arith::SelectOp>(loc, neg, c(-1), c(0)));
  }
  if (op == "add")
    return b.create<arith::AddIOp>(loc, a[0], a[1]);
  if (op == "sub")
    return b.create<arith::SubIOp>(loc, a[0], a[1]);
  if (op == "mul")
    return b.create<arith::MulIOp>(loc, a[0], a[1]);
  if (op == "maximum")
    return dt == DType::I1 ? b.create<arith::OrIOp>(loc, a[0], a[1]).getResult()
                           : b.create<arith::MaxSIOp>(loc, a[0], a[1]).getResult();
  if (op == "minimum")
    return dt == DType::I1 ? b.create<arith::AndIOp>(loc, a[0], a[1]).getResult()
                           : b.create<arith::MinSIOp>(loc, a[0], a[1]).getResult();
  if (op == "clamp") {
    // Integer bounds: the nearest integers inside [min, max].
    Value v = a[0];
    if (hasAttr(attrs, "min")) {
      Value lo = c(std::ceil(getFloat(attrs, "min")));
      v = b.create<arith::MaxSIOp>(loc, v, lo);
    }
    if (hasAttr(attrs, "max")) {
      Value hi = c(std::floor(getFloat(attrs, "max")));
      v = b.create<arith::MinSIOp>(loc, v, hi);
    }
    return v;
  }
  fail("cpu codegen: op '" + op + "' is not supported on " + std::string(dtypeName(dt)));
}

} // namespace

bool isScalarOp(const std::string &op) { return scalarOps().count(op) != 0; }

Value emitScalarOp(OpBuilder &b, Location loc, const std::string &op, const AttrMap &attrs,
                   ArrayRef<Value> operands, ArrayRef<DType> operandDtypes, DType result) {
  if (op == "cast")
    return convert(b, loc, operands[0], operandDtypes[0], result);
  if (op == "where") {
    Value t = convert(b, loc, operands[1], operandDtypes[1], result);
    Value f = convert(b, loc, operands[2], operandDtypes[2], result);
    return b.create<arith::SelectOp>(loc, convert(b, loc, operands[0], operandDtypes[0], DType::I1),
                                     t, f);
  }
  if (op == "logical_not" || op == "logical_and" || op == "logical_or") {
    Value x = convert(b, loc, operands[0], operandDtypes[0], DType::I1);
    Value one = scalarConstant(b, loc, 1, DType::I1);
    if (op == "logical_not")
      return b.create<arith::XOrIOp>(loc, x, one);
    Value y = convert(b, loc, operands[1], operandDtypes[1], DType::I1);
    return op == "logical_and" ? b.create<arith::AndIOp>(loc, x, y).getResult()
                               : b.create<arith::OrIOp>(loc, x, y).getResult();
  }
  static const std::map<std::string, std::pair<arith::CmpFPredicate, arith::CmpIPredicate>>
      compares = {{"eq", {arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq}},
                  {"ne", {arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne}},
                  {"lt", {arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt}},
                  {"le", {arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle}},
                  {"gt", {arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt}},
                  {"ge", {arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge}}};
  if (auto it = compares.find(op); it != compares.end()) {
    // Compare in the operands' common type (bools as integers 0/1).
    DType common = operandDtypes[0];
    Value x = operands[0], y = convert(b, loc, operands[1], operandDtypes[1], common);
    if (common == DType::I1) {
      x = convert(b, loc, x, DType::I1, DType::I32);
      y = convert(b, loc, y, DType::I1, DType::I32);
      common = DType::I32;
    }
    return isFloat(common) ? b.create<arith::CmpFOp>(loc, it->second.first, x, y).getResult()
                           : b.create<arith::CmpIOp>(loc, it->second.second, x, y).getResult();
  }
  check(isScalarOp(op), "cpu codegen: op '" + op + "' is not elementwise");
  // Arithmetic: operands in the result's type.
  SmallVector<Value> a;
  for (size_t i = 0; i < operands.size(); ++i)
    a.push_back(convert(b, loc, operands[i], operandDtypes[i], result));
  return isFloat(result) ? floatOp(b, loc, op, attrs, a, result) : intOp(b, loc, op, attrs, a, result);
}

Value reductionIdentity(OpBuilder &b, Location loc, const std::string &op, DType d) {
  if (op == "sum" || op == "mean")
    return scalarConstant(b, loc, 0, d);
  if (op == "prod")
    return scalarConstant(b, loc, 1, d);
  bool isMax = op == "max";
  check(isMax || op == "min", "cpu codegen: no reduction '" + op + "'");
  if (isFloat(d))
    return scalarConstant(b, loc, isMax ? -INFINITY : INFINITY, d);
  Type t = computeType(b.getContext(), d);
  unsigned bits = t.getIntOrFloatBitWidth();
  return b.create<arith::ConstantOp>(
      loc, b.getIntegerAttr(t, isMax ? APInt::getSignedMinValue(bits) : APInt::getSignedMaxValue(bits)));
}

Value combine(OpBuilder &b, Location loc, const std::string &op, Value acc, Value x, DType d) {
  // Float sums and products may be reassociated so that LLVM vectorizes the
  // reduction loop (the interpreter's f64 order is not reproduced anyway).
  auto fm = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::reassoc);
  if (isFloat(d)) {
    if (op == "sum" || op == "mean")
      return b.create<arith::AddFOp>(loc, acc, x, fm);
    if (op == "prod")
      return b.create<arith::MulFOp>(loc, acc, x, fm);
    return op == "max" ? b.create<arith::MaximumFOp>(loc, acc, x).getResult()
                       : b.create<arith::MinimumFOp>(loc, acc, x).getResult();
  }
  if (op == "sum" || op == "mean")
    return b.create<arith::AddIOp>(loc, acc, x);
  if (op == "prod")
    return b.create<arith::MulIOp>(loc, acc, x);
  return op == "max" ? b.create<arith::MaxSIOp>(loc, acc, x).getResult()
                     : b.create<arith::MinSIOp>(loc, acc, x).getResult();
}

} // namespace tensorc::codegen::cpu
