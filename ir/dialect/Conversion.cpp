#include "ir/dialect/Conversion.h"

#include "ir/core/Error.h"

#include "mlir/IR/Builders.h"

namespace tensorc::tc {

mlir::Type toMlirElementType(mlir::MLIRContext *ctx, DType dtype) {
  mlir::Builder b(ctx);
  switch (dtype) {
  case DType::F64:
    return b.getF64Type();
  case DType::F32:
    return b.getF32Type();
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::I64:
    return b.getI64Type();
  case DType::I32:
    return b.getI32Type();
  case DType::I1:
    return b.getI1Type();
  }
  return {};
}

std::optional<DType> toDType(mlir::Type t) {
  if (t.isF64())
    return DType::F64;
  if (t.isF32())
    return DType::F32;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (t.isSignlessInteger(64))
    return DType::I64;
  if (t.isSignlessInteger(32))
    return DType::I32;
  if (t.isSignlessInteger(1))
    return DType::I1;
  return std::nullopt;
}

TcTensorType toMlirType(mlir::MLIRContext *ctx, const TensorSpec &spec) {
  llvm::SmallVector<int64_t> sizes;
  llvm::SmallVector<mlir::StringAttr> symbols;
  for (const Dim &d : spec.shape) {
    sizes.push_back(d.isStatic() ? d.value() : mlir::ShapedType::kDynamic);
    symbols.push_back(d.isStatic() ? mlir::StringAttr() : mlir::StringAttr::get(ctx, d.str()));
  }
  return TcTensorType::get(ctx, sizes, symbols, toMlirElementType(ctx, spec.dtype));
}

std::optional<TensorSpec> toTensorSpec(mlir::Type type) {
  auto t = llvm::dyn_cast<TcTensorType>(type);
  if (!t)
    return std::nullopt;
  std::optional<DType> dtype = toDType(t.getElementType());
  if (!dtype)
    return std::nullopt;
  TensorSpec spec{*dtype, {}};
  for (size_t i = 0; i < t.getSizes().size(); ++i) {
    if (t.getSymbols()[i])
      spec.shape.push_back(*Dim::parse(t.getSymbols()[i].getValue().str()));
    else
      spec.shape.push_back(Dim::of(t.getSizes()[i]));
  }
  return spec;
}

static mlir::Attribute denseToMlir(mlir::MLIRContext *ctx, const DenseValue &v) {
  mlir::Type element = toMlirElementType(ctx, v.dtype);
  auto type = mlir::RankedTensorType::get(v.shape, element); // one value: a splat
  llvm::SmallVector<mlir::Attribute> values;
  if (isFloat(v.dtype)) {
    auto ft = llvm::cast<mlir::FloatType>(element);
    for (double d : v.floats) {
      llvm::APFloat f(d);
      bool lost;
      f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
      values.push_back(mlir::FloatAttr::get(ft, f));
    }
  } else {
    for (int64_t i : v.ints)
      values.push_back(mlir::IntegerAttr::get(element, i));
  }
  if (values.size() == 1)
    return mlir::DenseElementsAttr::get(type, values[0]);
  return mlir::DenseElementsAttr::get(type, values);
}

static DenseValue denseFromMlir(mlir::DenseElementsAttr attr) {
  DenseValue v;
  std::optional<DType> dtype = toDType(attr.getElementType());
  check(dtype.has_value(), "constant has an unsupported element type");
  v.dtype = *dtype;
  auto type = llvm::cast<mlir::RankedTensorType>(attr.getType());
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  if (attr.isSplat()) {
    if (isFloat(v.dtype))
      v.floats.push_back(attr.getSplatValue<llvm::APFloat>().convertToDouble());
    else
      v.ints.push_back(v.dtype == DType::I1 ? attr.getSplatValue<bool>()
                                            : attr.getSplatValue<llvm::APInt>().getSExtValue());
    return v;
  }
  if (isFloat(v.dtype)) {
    for (const llvm::APFloat &f : attr.getValues<llvm::APFloat>()) {
      llvm::APFloat d = f;
      bool lost;
      d.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
      v.floats.push_back(d.convertToDouble());
    }
  } else if (v.dtype == DType::I1) {
    for (bool b : attr.getValues<bool>())
      v.ints.push_back(b);
  } else {
    for (const llvm::APInt &i : attr.getValues<llvm::APInt>())
      v.ints.push_back(i.getSExtValue());
  }
  return v;
}

mlir::Attribute toMlirAttr(mlir::MLIRContext *ctx, const Attr &attr) {
  mlir::Builder b(ctx);
  switch (kindOf(attr)) {
  case AttrKind::Int:
    return b.getI64IntegerAttr(std::get<int64_t>(attr));
  case AttrKind::Float:
    return b.getF64FloatAttr(std::get<double>(attr));
  case AttrKind::Bool:
    return b.getBoolAttr(std::get<bool>(attr));
  case AttrKind::Enum:
    return b.getStringAttr(std::get<std::string>(attr));
  case AttrKind::Ints:
    return b.getDenseI64ArrayAttr(std::get<std::vector<int64_t>>(attr));
  case AttrKind::Dims: {
    llvm::SmallVector<mlir::Attribute> dims;
    for (const Dim &d : std::get<Shape>(attr))
      dims.push_back(d.isStatic() ? mlir::Attribute(b.getI64IntegerAttr(d.value()))
                                  : mlir::Attribute(b.getStringAttr(d.str())));
    return b.getArrayAttr(dims);
  }
  case AttrKind::DType:
    return mlir::TypeAttr::get(toMlirElementType(ctx, std::get<DType>(attr)));
  case AttrKind::Dense:
    return denseToMlir(ctx, std::get<DenseValue>(attr));
  case AttrKind::Strings: {
    llvm::SmallVector<llvm::StringRef> names;
    for (const std::string &s : std::get<std::vector<std::string>>(attr))
      names.push_back(s);
    return b.getStrArrayAttr(names);
  }
  }
  return {};
}

Attr toCoreAttr(mlir::Attribute attr, const AttrDef &def) {
  auto wrong = [&]() -> Attr {
    fail("attribute '" + def.name + "' must be a " + attrKindName(def.kind));
  };
  switch (def.kind) {
  case AttrKind::Int:
    if (auto a = llvm::dyn_cast<mlir::IntegerAttr>(attr); a && !a.getType().isInteger(1))
      return Attr(a.getValue().getSExtValue());
    return wrong();
  case AttrKind::Float:
    if (auto a = llvm::dyn_cast<mlir::FloatAttr>(attr))
      return Attr(a.getValueAsDouble());
    return wrong();
  case AttrKind::Bool:
    if (auto a = llvm::dyn_cast<mlir::BoolAttr>(attr))
      return Attr(a.getValue());
    return wrong();
  case AttrKind::Enum:
    if (auto a = llvm::dyn_cast<mlir::StringAttr>(attr))
      return Attr(a.getValue().str());
    return wrong();
  case AttrKind::Ints:
    if (auto a = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(attr))
      return Attr(std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end()));
    return wrong();
  case AttrKind::Dims: {
    auto a = llvm::dyn_cast<mlir::ArrayAttr>(attr);
    if (!a)
      return wrong();
    Shape shape;
    for (mlir::Attribute e : a) {
      if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(e)) {
        shape.push_back(Dim::of(i.getValue().getSExtValue()));
      } else if (auto s = llvm::dyn_cast<mlir::StringAttr>(e)) {
        std::optional<Dim> d = Dim::parse(s.getValue().str());
        check(d.has_value(),
              "attribute '" + def.name + "' has a malformed dim \"" + s.getValue().str() + "\"");
        shape.push_back(*d);
      } else {
        return wrong();
      }
    }
    return Attr(shape);
  }
  case AttrKind::DType:
    if (auto a = llvm::dyn_cast<mlir::TypeAttr>(attr))
      if (std::optional<DType> d = toDType(a.getValue()))
        return Attr(*d);
    return wrong();
  case AttrKind::Dense:
    if (auto a = llvm::dyn_cast<mlir::DenseElementsAttr>(attr))
      return Attr(denseFromMlir(a));
    return wrong();
  case AttrKind::Strings: {
    auto a = llvm::dyn_cast<mlir::ArrayAttr>(attr);
    if (!a)
      return wrong();
    std::vector<std::string> names;
    for (mlir::Attribute e : a) {
      auto s = llvm::dyn_cast<mlir::StringAttr>(e);
      if (!s)
        return wrong();
      names.push_back(s.getValue().str());
    }
    return Attr(names);
  }
  }
  return wrong();
}

const OpSchema *schemaOf(mlir::Operation *op) {
  llvm::StringRef name = op->getName().getStringRef();
  if (!name.consume_front("tc."))
    return nullptr;
  return findOpSchema(std::string_view(name.data(), name.size()));
}

AttrMap coreAttrs(mlir::Operation *op, const OpSchema &schema) {
  AttrMap attrs;
  for (const AttrDef &def : schema.attrs)
    if (mlir::Attribute a = op->getAttr(def.name))
      attrs.emplace(def.name, toCoreAttr(a, def));
  return attrs;
}

std::vector<std::optional<mlir::Value>> schemaOperands(mlir::Operation *op,
                                                       const OpSchema &schema) {
  std::vector<std::optional<mlir::Value>> out;
  if (schema.hasVariadicOperands() || !schema.hasOptionalOperands()) {
    for (mlir::Value v : op->getOperands())
      out.push_back(v);
    return out;
  }
  // Optional operands: follow operandSegmentSizes when present (several
  // optionals), else the single optional is present iff the count says so.
  auto segments = op->getAttrOfType<mlir::DenseI32ArrayAttr>("operandSegmentSizes");
  unsigned next = 0;
  for (size_t i = 0; i < schema.operands.size(); ++i) {
    bool present;
    if (segments && i < size_t(segments.size()))
      present = segments[i] > 0;
    else
      present = next < op->getNumOperands();
    out.push_back(present && next < op->getNumOperands() ? std::optional(op->getOperand(next++))
                                                         : std::nullopt);
  }
  return out;
}

void addSchemaOperands(mlir::OperationState &state, const std::vector<std::optional<mlir::Value>> &operands) {
  std::vector<int32_t> segments;
  bool gap = false, ambiguous = false;
  for (const std::optional<mlir::Value> &v : operands) {
    segments.push_back(v ? 1 : 0);
    ambiguous = ambiguous || (v && gap);
    gap = gap || !v;
    if (v)
      state.addOperands(*v);
  }
  std::optional<mlir::RegisteredOperationName> info = state.name.getRegisteredInfo();
  bool required = info && info->hasTrait<mlir::OpTrait::AttrSizedOperandSegments>();
  state.attributes.erase("operandSegmentSizes");
  if (required || ambiguous)
    state.addAttribute("operandSegmentSizes",
                       mlir::DenseI32ArrayAttr::get(state.getContext(), segments));
}

} // namespace tensorc::tc
