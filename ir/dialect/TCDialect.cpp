#include "ir/dialect/TCDialect.h"

#include "ir/dialect/Conversion.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include <set>

using namespace mlir;

#include "ir/dialect/TCDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/dialect/TCAttrs.cpp.inc"

namespace tensorc::tc {

void TCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/dialect/TCOps.cpp.inc"
      >();
  registerTypes();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/dialect/TCAttrs.cpp.inc"
      >();
}

// Checks a #tc.sharding against the mesh it names and the type it annotates.
static LogicalResult verifySharding(Operation *anchor, ShardingAttr sharding, Type type,
                                    function_ref<InFlightDiagnostic()> emitError) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(anchor, sharding.getMesh());
  if (!mesh)
    return emitError() << "sharding names unknown mesh " << sharding.getMesh();
  std::optional<TensorSpec> spec = toTensorSpec(type);
  if (!spec)
    return emitError() << "sharding is on a value that is not a !tc.tensor";
  if (int64_t(sharding.getDims().size()) != spec->rank())
    return emitError() << "sharding has " << sharding.getDims().size()
                       << " dim entries for a value of rank " << spec->rank();
  std::set<std::string> used;
  for (auto [i, entry] : llvm::enumerate(sharding.getDims())) {
    auto axes = llvm::dyn_cast<ArrayAttr>(entry);
    if (!axes)
      return emitError() << "sharding dim " << i << " must be a list of mesh axis names";
    int64_t parts = 1;
    for (Attribute a : axes) {
      auto name = llvm::dyn_cast<StringAttr>(a);
      if (!name)
        return emitError() << "sharding dim " << i << " must list mesh axis names";
      auto it = llvm::find(mesh.getAxes().getAsValueRange<StringAttr>(), name.getValue());
      if (it == mesh.getAxes().getAsValueRange<StringAttr>().end())
        return emitError() << "sharding uses axis \"" << name.getValue() << "\" not in mesh "
                           << sharding.getMesh();
      if (!used.insert(name.getValue().str()).second)
        return emitError() << "sharding uses mesh axis \"" << name.getValue() << "\" twice";
      int64_t size =
          mesh.getSizes()[std::distance(mesh.getAxes().getAsValueRange<StringAttr>().begin(), it)];
      if (size < 1 || __builtin_mul_overflow(parts, size, &parts) || parts > kMaxElements)
        return emitError() << "sharding splits dim " << i << " into more than 2^40 parts";
    }
    const Dim &dim = spec->shape[i];
    if (dim.isStatic() && dim.value() % parts != 0)
      return emitError() << "sharding splits dim " << i << " of size " << dim.value() << " into "
                         << parts << " parts, which does not divide it";
  }
  return success();
}

static LogicalResult verifyValueAttr(Operation *op, NamedAttribute attr, Type type) {
  StringRef name = attr.getName().getValue();
  auto emit = [&] { return op->emitOpError() << "'" << name << "': "; };
  if (name == "tc.name") {
    if (!llvm::isa<StringAttr>(attr.getValue()))
      return emit() << "must be a string";
    return success();
  }
  if (name == "tc.trainable") {
    if (!llvm::isa<UnitAttr, BoolAttr>(attr.getValue()))
      return emit() << "must be a unit or bool attribute";
    return success();
  }
  if (name == "tc.sharding") {
    auto sharding = llvm::dyn_cast<ShardingAttr>(attr.getValue());
    if (!sharding)
      return emit() << "must be a #tc.sharding";
    return verifySharding(op, sharding, type, emit);
  }
  return emit() << "unknown tc attribute";
}

LogicalResult TCDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == "tc.dim_bounds") {
    auto dict = llvm::dyn_cast<DictionaryAttr>(attr.getValue());
    if (!dict)
      return op->emitOpError() << "'tc.dim_bounds' must be a dictionary";
    for (NamedAttribute bound : dict) {
      auto range = llvm::dyn_cast<DenseI64ArrayAttr>(bound.getValue());
      if (!range || range.size() < 1 || range.size() > 2 || range[0] < 1 ||
          (range.size() == 2 && range[0] > range[1]))
        return op->emitOpError() << "'tc.dim_bounds' entry '" << bound.getName().getValue()
                                 << "' must be array<i64: min> or array<i64: min, max> with 1 <= "
                                    "min <= max";
    }
    return success();
  }
  if (name == "tc.sharding") {
    if (op->getNumResults() != 1)
      return op->emitOpError() << "'tc.sharding' needs an op with one result";
    return verifyValueAttr(op, attr, op->getResult(0).getType());
  }
  if (name == "tc.name")
    return verifyValueAttr(op, attr, {});
  if (name == "tc.buffer") {
    auto slots = llvm::dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!slots || slots.size() != 2 * int64_t(op->getNumResults()))
      return op->emitOpError() << "'tc.buffer' must hold (offset, bytes) per result";
    return success();
  }
  if (name == "tc.memory_plan") {
    if (!llvm::isa<DictionaryAttr>(attr.getValue()))
      return op->emitOpError() << "'tc.memory_plan' must be a dictionary";
    return success();
  }
  if (name == "tc.literal") {
    if (!llvm::isa<UnitAttr>(attr.getValue()) || op->getName().getStringRef() != "tc.constant")
      return op->emitOpError() << "'tc.literal' is a unit attribute of tc.constant";
    return success();
  }
  return op->emitOpError() << "unknown tc attribute '" << name << "'";
}

LogicalResult TCDialect::verifyRegionArgAttribute(Operation *op, unsigned region, unsigned index,
                                                  NamedAttribute attr) {
  Type type = op->getRegion(region).getNumArguments() > index
                  ? op->getRegion(region).getArgument(index).getType()
                  : Type();
  return verifyValueAttr(op, attr, type);
}

LogicalResult TCDialect::verifyRegionResultAttribute(Operation *op, unsigned region, unsigned index,
                                                     NamedAttribute attr) {
  Type type;
  if (auto fn = llvm::dyn_cast<FunctionOpInterface>(op))
    if (index < fn.getResultTypes().size())
      type = fn.getResultTypes()[index];
  // A run-time check result (compiler/transforms/RunChecks.h): its message.
  if (attr.getName().getValue() == "tc.check") {
    std::optional<TensorSpec> spec = type ? toTensorSpec(type) : std::nullopt;
    if (!llvm::isa<StringAttr>(attr.getValue()) || !spec || *spec != TensorSpec{DType::I32, {}})
      return op->emitOpError() << "'tc.check' is a string on an i32 scalar result";
    return success();
  }
  return verifyValueAttr(op, attr, type);
}

} // namespace tensorc::tc
