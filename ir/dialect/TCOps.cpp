#include "ir/dialect/TCDialect.h"

#include "ir/core/Error.h"
#include "ir/core/ShapeInference.h"
#include "ir/dialect/Conversion.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <set>

using namespace mlir;

namespace tensorc::tc {

// The module's meshes, for a collective's group size; nothing to find for
// the other ops.
static std::vector<Mesh> moduleMeshes(Operation *op, const OpSchema &schema) {
  std::vector<Mesh> meshes;
  if (schema.category != "collective")
    return meshes;
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return meshes;
  for (MeshOp mesh : module.getOps<MeshOp>()) {
    Mesh m;
    m.name = mesh.getSymName().str();
    for (StringRef axis : mesh.getAxes().getAsValueRange<StringAttr>())
      m.axes.push_back(axis.str());
    m.sizes.assign(mesh.getSizes().begin(), mesh.getSizes().end());
    meshes.push_back(std::move(m));
  }
  return meshes;
}

LogicalResult verifyInferredResultTypes(Operation *op) {
  const OpSchema *schema = schemaOf(op);
  if (!schema)
    return op->emitOpError() << "is not in the op set";
  for (NamedAttribute attr : op->getAttrs()) {
    StringRef name = attr.getName().getValue();
    if (!schema->findAttr(std::string_view(name.data(), name.size())) &&
        name != "operandSegmentSizes" && !name.contains('.'))
      return op->emitOpError() << "unknown attribute '" << name << "'";
  }
  std::vector<OperandRef> operands;
  std::vector<std::optional<Value>> values = schemaOperands(op, *schema);
  for (size_t i = 0; i < values.size(); ++i) {
    OperandRef ref;
    size_t schemaIndex = std::min(i, schema->operands.size() - 1);
    ref.name = schema->operands.empty() ? "operand" : schema->operands[schemaIndex].name;
    if (schema->hasVariadicOperands())
      ref.name += "#" + std::to_string(i);
    if (values[i]) {
      ref.spec = toTensorSpec(values[i]->getType());
      if (!ref.spec)
        return op->emitOpError() << "operand #" << i << " is not a !tc.tensor";
    }
    operands.push_back(std::move(ref));
  }
  std::vector<TensorSpec> inferred;
  try {
    AttrMap attrs = completeAttrs(*schema, coreAttrs(op, *schema));
    inferred = inferResultTypes(*schema, operands, attrs, moduleMeshes(op, *schema));
  } catch (const Error &e) {
    return op->emitOpError() << e.what();
  }
  if (inferred.size() != op->getNumResults())
    return op->emitOpError() << "has " << op->getNumResults() << " results but " << inferred.size()
                             << " are inferred";
  for (size_t i = 0; i < inferred.size(); ++i) {
    std::optional<TensorSpec> declared = toTensorSpec(op->getResult(i).getType());
    if (!declared || *declared != inferred[i])
      return op->emitOpError() << "result #" << i << " is declared " << op->getResult(i).getType()
                               << " but inferred as " << toMlirType(op->getContext(), inferred[i]);
  }
  return success();
}

// Folders: each removes an op that is the identity on its operand.

OpFoldResult CastOp::fold(FoldAdaptor) {
  return getX().getType() == getType() ? getX() : OpFoldResult();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  // reshape(reshape(x)) -> reshape(x)
  if (auto inner = getX().getDefiningOp<ReshapeOp>()) {
    if (inner.getX().getType() == getType())
      return inner.getX();
    getXMutable().assign(inner.getX());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  int64_t rank = llvm::cast<TcTensorType>(getX().getType()).getSizes().size();
  auto norm = [rank](int64_t a) { return a < 0 ? a + rank : a; };
  if (norm(getDim0()) == norm(getDim1()))
    return getX();
  // transpose(transpose(x, a, b), a, b) -> x
  if (auto inner = getX().getDefiningOp<TransposeOp>()) {
    std::set<int64_t> outer{norm(getDim0()), norm(getDim1())};
    std::set<int64_t> in{norm(inner.getDim0()), norm(inner.getDim1())};
    if (outer == in)
      return inner.getX();
  }
  return {};
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  // broadcast_to(broadcast_to(x)) -> broadcast_to(x)
  if (auto inner = getX().getDefiningOp<BroadcastToOp>()) {
    getXMutable().assign(inner.getX());
    return getResult();
  }
  return {};
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size() << " inputs but its body takes "
                         << body.getNumArguments();
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument type " << arg.getType() << " differs from input type "
                           << input.getType();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end in tc.yield";
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from the results";
  static const std::set<std::string> kinds = {"elementwise", "reduction", "matmul",
                                              "attention",   "gather",    "copy"};
  if (!kinds.count(getKind().str()))
    return emitOpError() << "unknown kind \"" << getKind() << "\"";
  return success();
}

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getSizes().size())
    return emitOpError() << "has " << getAxes().size() << " axes but " << getSizes().size()
                         << " sizes";
  std::set<std::string> names;
  int64_t devices = 1;
  for (auto [name, size] : llvm::zip(getAxes().getAsValueRange<StringAttr>(), getSizes())) {
    if (name.empty())
      return emitOpError() << "has an empty axis name";
    if (!names.insert(name.str()).second)
      return emitOpError() << "axis \"" << name << "\" appears twice";
    if (size < 1 || size > (1 << 20))
      return emitOpError() << "axis \"" << name << "\" has size " << size
                           << "; sizes must be in [1, 2^20]";
    if (__builtin_mul_overflow(devices, size, &devices) || devices > (1 << 24))
      return emitOpError() << "has more than 2^24 devices (the product of its sizes)";
  }
  return success();
}

} // namespace tensorc::tc

#define GET_OP_CLASSES
#include "ir/dialect/TCOps.cpp.inc"
