#include "codegen/cpu/LoopNest.h"

#include "codegen/cpu/ScalarOps.h"
#include "ir/core/Error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <algorithm>

using namespace mlir;

namespace tensorc::codegen::cpu {

bool nestIsParallel(const NestSpec &s) {
  return std::find(s.reduced.begin(), s.reduced.end(), false) != s.reduced.end();
}

Dim nestExtent(const NestSpec &s) {
  for (size_t d = 0; d < s.space.size(); ++d)
    if (!s.reduced[d])
      return s.space[d];
  return Dim::of(1);
}

Dim nestWork(const NestSpec &s) { return numElements(s.space); }

namespace {

class NestBuilder {
public:
  NestBuilder(ModuleOp module, const NestSpec &spec)
      : spec_(spec), b_(module.getContext()), loc_(b_.getUnknownLoc()) {
    MLIRContext *ctx = module.getContext();
    b_.setInsertionPointToEnd(module.getBody());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto fnType = b_.getFunctionType({ptr, ptr, b_.getI64Type(), b_.getI64Type()}, {});
    fn_ = b_.create<func::FuncOp>(loc_, spec.symbol, fnType);
    Block *entry = fn_.addEntryBlock();
    b_.setInsertionPointToEnd(entry);
    operandsPtr_ = entry->getArgument(0);
    symbolsPtr_ = entry->getArgument(1);
    begin_ = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), entry->getArgument(2));
    end_ = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), entry->getArgument(3));
  }

  void build(const PointFn &point) {
    for (size_t i = 0; i < spec_.operands.size(); ++i)
      memrefs_.push_back(memrefFromPointer(int(i), spec_.operands[i]));
    point_ = point;
    std::vector<int> parallel, reduced;
    for (size_t d = 0; d < spec_.space.size(); ++d)
      (spec_.reduced[d] ? reduced : parallel).push_back(int(d));
    SmallVector<Value> ivs(spec_.space.size());
    buildParallel(parallel, reduced, 0, ivs, point);
    b_.create<func::ReturnOp>(loc_);
  }

private:
  // A size as an index: coefficient times the bound symbols.
  Value dimValue(const Dim &d) {
    Value v = b_.create<arith::ConstantIndexOp>(loc_, d.coefficient());
    for (const std::string &s : d.symbols()) {
      auto it = std::find(spec_.symbols.begin(), spec_.symbols.end(), s);
      check(it != spec_.symbols.end(), "cpu codegen: unknown symbol " + s);
      v = b_.create<arith::MulIOp>(loc_, v, symbol(int(it - spec_.symbols.begin())));
    }
    return v;
  }

  Value symbol(int k) {
    if (Value v = symbolCache_.lookup(k))
      return v;
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPointToStart(&fn_.getBody().front());
    auto ptr = LLVM::LLVMPointerType::get(b_.getContext());
    Value p = b_.create<LLVM::GEPOp>(loc_, ptr, b_.getI64Type(), symbolsPtr_,
                                     ArrayRef<LLVM::GEPArg>{k});
    Value raw = b_.create<LLVM::LoadOp>(loc_, b_.getI64Type(), p);
    Value v = b_.create<arith::IndexCastOp>(loc_, b_.getIndexType(), raw);
    symbolCache_[k] = v;
    return v;
  }

  // A memref over operands[index]: MLIR's descriptor {allocated, aligned,
  // offset, sizes, strides} built from the raw pointer and the sizes.
  Value memrefFromPointer(int index, const NestOperand &o) {
    MLIRContext *ctx = b_.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    Type i64 = b_.getI64Type();
    int64_t rank = int64_t(o.shape.size());
    SmallVector<int64_t> shape;
    for (const Dim &d : o.shape)
      shape.push_back(d.isStatic() ? d.value() : ShapedType::kDynamic);
    auto type = MemRefType::get(shape, storageType(ctx, o.dtype));
    Value slot = b_.create<LLVM::GEPOp>(loc_, ptr, ptr, operandsPtr_, ArrayRef<LLVM::GEPArg>{index});
    Value data = b_.create<LLVM::LoadOp>(loc_, ptr, slot);
    SmallVector<Type> fields = {ptr, ptr, i64};
    if (rank > 0) {
      fields.push_back(LLVM::LLVMArrayType::get(i64, unsigned(rank)));
      fields.push_back(LLVM::LLVMArrayType::get(i64, unsigned(rank)));
    }
    auto structType = LLVM::LLVMStructType::getLiteral(ctx, fields);
    Value desc = b_.create<LLVM::UndefOp>(loc_, structType);
    desc = b_.create<LLVM::InsertValueOp>(loc_, desc, data, ArrayRef<int64_t>{0});
    desc = b_.create<LLVM::InsertValueOp>(loc_, desc, data, ArrayRef<int64_t>{1});
    desc = b_.create<LLVM::InsertValueOp>(loc_, desc,
                                          b_.create<LLVM::ConstantOp>(loc_, i64, int64_t(0)),
                                          ArrayRef<int64_t>{2});
    Value stride = b_.create<arith::ConstantIndexOp>(loc_, 1);
    for (int64_t k = rank - 1; k >= 0; --k) {
      Value size = dimValue(o.shape[k]);
      desc = b_.create<LLVM::InsertValueOp>(
          loc_, desc, b_.create<arith::IndexCastOp>(loc_, i64, size), ArrayRef<int64_t>{3, k});
      desc = b_.create<LLVM::InsertValueOp>(
          loc_, desc, b_.create<arith::IndexCastOp>(loc_, i64, stride), ArrayRef<int64_t>{4, k});
      stride = b_.create<arith::MulIOp>(loc_, stride, size);
    }
    return b_.create<UnrealizedConversionCastOp>(loc_, TypeRange{type}, ValueRange{desc})
        .getResult(0);
  }

  NestContext context(ArrayRef<Value> ivs) {
    return NestContext{b_, loc_, ivs, memrefs_, [this](const Dim &d) { return dimValue(d); }};
  }

  Value pointValue(ArrayRef<Value> ivs) {
    NestContext c = context(ivs);
    return point_(c);
  }

  void buildParallel(const std::vector<int> &parallel, const std::vector<int> &reduced,
                     size_t level, SmallVector<Value> &ivs, const PointFn &point) {
    if (level == parallel.size()) {
      DType out = spec_.operands[0].dtype;
      // The value (an accumulator, a point value) is in registers in its
      // compute type: an f16/bf16 valueDtype is held in f32 and must not be
      // rounded to f16/bf16 on the way into f32 storage (a full reduction's
      // f32 partials were rounded to bf16: 1e-1 errors).
      DType held = spec_.valueDtype == DType::F16 || spec_.valueDtype == DType::BF16
                       ? DType::F32
                       : spec_.valueDtype;
      if (reduced.empty()) {
        store(ivs, convert(b_, loc_, pointValue(ivs), held, out));
      } else if (spec_.reduction == "argmax" || spec_.reduction == "argmin") {
        store(ivs, argReduce(reduced, ivs));
      } else {
        Value acc = reduce(reduced, ivs, point);
        if (spec_.epilogue) {
          NestContext c = context(ivs);
          acc = spec_.epilogue(c, acc);
        }
        store(ivs, convert(b_, loc_, acc, held, out));
      }
      return;
    }
    int d = parallel[level];
    Value lb = level == 0 ? begin_ : b_.create<arith::ConstantIndexOp>(loc_, 0).getResult();
    Value ub = level == 0 ? end_ : dimValue(spec_.space[d]);
    Value one = b_.create<arith::ConstantIndexOp>(loc_, 1);
    auto loop = b_.create<scf::ForOp>(loc_, lb, ub, one);
    OpBuilder::InsertionGuard g(b_);
    b_.setInsertionPoint(loop.getBody()->getTerminator());
    ivs[d] = loop.getInductionVar();
    buildParallel(parallel, reduced, level + 1, ivs, point);
  }

  // The reduction over the reduced dims at the current parallel point.
  Value reduce(const std::vector<int> &reduced, SmallVector<Value> &ivs, const PointFn &point) {
    DType dt = spec_.valueDtype;
    Value init = reductionIdentity(b_, loc_, spec_.reduction, dt);
    Value acc = reduceLevel(reduced, 0, ivs, init, point);
    if (spec_.reduction == "mean") {
      Dim count = Dim::of(1);
      for (int d : reduced)
        count = count * spec_.space[d];
      Value n = b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), dimValue(count));
      Value nf = b_.create<arith::SIToFPOp>(loc_, acc.getType(), n);
      acc = b_.create<arith::DivFOp>(loc_, acc, nf);
    }
    return acc;
  }

  Value reduceLevel(const std::vector<int> &reduced, size_t level, SmallVector<Value> &ivs,
                    Value acc, const PointFn &point) {
    DType dt = spec_.valueDtype;
    if (level == reduced.size())
      return combine(b_, loc_, spec_.reduction, acc, pointValue(ivs), dt);
    int d = reduced[level];
    Value lb = b_.create<arith::ConstantIndexOp>(loc_, 0);
    Value ub = dimValue(spec_.space[d]);
    Value one = b_.create<arith::ConstantIndexOp>(loc_, 1);
    auto loop = b_.create<scf::ForOp>(loc_, lb, ub, one, ValueRange{acc});
    {
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToStart(loop.getBody());
      ivs[d] = loop.getInductionVar();
      Value next = reduceLevel(reduced, level + 1, ivs, loop.getRegionIterArgs()[0], point);
      b_.create<scf::YieldOp>(loc_, next);
    }
    return loop.getResult(0);
  }

  // argmax/argmin: (best value, its position) through the reduced loops;
  // the first extreme wins, a nan beats every number and the first nan wins.
  Value argReduce(const std::vector<int> &reduced, SmallVector<Value> &ivs) {
    bool isMax = spec_.reduction == "argmax";
    DType dt = spec_.valueDtype;
    Value best = scalarConstant(b_, loc_, 0, dt);
    Value none = b_.create<arith::ConstantIndexOp>(loc_, -1);
    Value zero = b_.create<arith::ConstantIndexOp>(loc_, 0);
    std::function<std::pair<Value, Value>(size_t, Value, Value, Value)> level =
        [&](size_t l, Value bestV, Value bestI, Value position) -> std::pair<Value, Value> {
      if (l == reduced.size()) {
        Value v = pointValue(ivs);
        Value first = b_.create<arith::CmpIOp>(loc_, arith::CmpIPredicate::slt, bestI, zero);
        Value better;
        if (isFloat(dt)) {
          Value bestNan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, bestV, bestV);
          Value vNan = b_.create<arith::CmpFOp>(loc_, arith::CmpFPredicate::UNO, v, v);
          Value cmp = b_.create<arith::CmpFOp>(
              loc_, isMax ? arith::CmpFPredicate::OGT : arith::CmpFPredicate::OLT, v, bestV);
          // !bestNan && (vNan || cmp)
          Value notBestNan = b_.create<arith::XOrIOp>(loc_, bestNan, scalarConstant(b_, loc_, 1, DType::I1));
          better = b_.create<arith::AndIOp>(loc_, notBestNan, b_.create<arith::OrIOp>(loc_, vNan, cmp));
        } else {
          better = b_.create<arith::CmpIOp>(
              loc_, isMax ? arith::CmpIPredicate::sgt : arith::CmpIPredicate::slt, v, bestV);
        }
        better = b_.create<arith::OrIOp>(loc_, first, better);
        return {b_.create<arith::SelectOp>(loc_, better, v, bestV).getResult(),
                b_.create<arith::SelectOp>(loc_, better, position, bestI).getResult()};
      }
      int d = reduced[l];
      Value ub = dimValue(spec_.space[d]);
      Value one = b_.create<arith::ConstantIndexOp>(loc_, 1);
      auto loop = b_.create<scf::ForOp>(loc_, zero, ub, one, ValueRange{bestV, bestI});
      OpBuilder::InsertionGuard g(b_);
      b_.setInsertionPointToStart(loop.getBody());
      ivs[d] = loop.getInductionVar();
      // Row-major position among the reduced dims.
      Value pos = b_.create<arith::AddIOp>(loc_, b_.create<arith::MulIOp>(loc_, position, ub), ivs[d]);
      auto [v, i] = level(l + 1, loop.getRegionIterArgs()[0], loop.getRegionIterArgs()[1], pos);
      b_.create<scf::YieldOp>(loc_, ValueRange{v, i});
      return {loop.getResult(0), loop.getResult(1)};
    };
    auto [v, i] = level(0, best, none, zero);
    (void)v;
    return b_.create<arith::IndexCastOp>(loc_, b_.getI64Type(), i);
  }

  void store(ArrayRef<Value> ivs, Value v) {
    const NestOperand &out = spec_.operands[0];
    SmallVector<Value> idx;
    for (size_t d = 0; d < spec_.space.size(); ++d) {
      if (!spec_.reduced[d])
        idx.push_back(ivs[d]);
      else if (spec_.keepdim)
        idx.push_back(b_.create<arith::ConstantIndexOp>(loc_, 0));
    }
    check(idx.size() == out.shape.size(), "cpu codegen: nest output rank mismatch");
    for (size_t k = 0; k < spec_.outputOffset.size(); ++k)
      if (spec_.outputOffset[k] != Dim::of(0))
        idx[k] = b_.create<arith::AddIOp>(loc_, idx[k], dimValue(spec_.outputOffset[k]));
    b_.create<memref::StoreOp>(loc_, toStorage(b_, loc_, v, out.dtype), memrefs_[0], idx);
  }

  const NestSpec &spec_;
  OpBuilder b_;
  Location loc_; // a null UnknownLoc() here tripped MLIR's assertion (ASan build)
  func::FuncOp fn_;
  Value operandsPtr_, symbolsPtr_, begin_, end_;
  SmallVector<Value> memrefs_;
  PointFn point_;
  llvm::DenseMap<int, Value> symbolCache_;
};

} // namespace

void emitLoopNest(ModuleOp module, const NestSpec &spec, const PointFn &point) {
  check(spec.reduced.size() == spec.space.size(), "cpu codegen: bad nest");
  NestBuilder(module, spec).build(point);
}

} // namespace tensorc::codegen::cpu
