// !tc.tensor<[B, 784], f32>: parsing, printing and verification.
#include "ir/dialect/TCDialect.h"

#include "ir/core/Dim.h"
#include "ir/dialect/Conversion.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace tensorc::tc {

// One dim: a product of integers and symbol names, e.g. `784`, `B`, `2*B*T`.
static ParseResult parseDim(AsmParser &parser, int64_t &size, StringAttr &symbol) {
  std::string text;
  do {
    int64_t value;
    StringRef keyword;
    OptionalParseResult number = parser.parseOptionalInteger(value);
    if (number.has_value()) {
      if (failed(*number))
        return failure();
      text += (text.empty() ? "" : "*") + std::to_string(value);
    } else if (succeeded(parser.parseOptionalKeyword(&keyword))) {
      text += (text.empty() ? "" : "*") + keyword.str();
    } else {
      return parser.emitError(parser.getCurrentLocation(), "expected a dim (integer or symbol)");
    }
  } while (succeeded(parser.parseOptionalStar()));
  std::optional<Dim> dim = Dim::parse(text);
  if (!dim)
    return parser.emitError(parser.getCurrentLocation(), "malformed dim '" + text + "'");
  if (dim->isStatic()) {
    size = dim->value();
    symbol = {};
  } else {
    size = ShapedType::kDynamic;
    symbol = StringAttr::get(parser.getContext(), dim->str());
  }
  return success();
}

Type TcTensorType::parse(AsmParser &parser) {
  SmallVector<int64_t> sizes;
  SmallVector<StringAttr> symbols;
  Type elementType;
  auto parseOne = [&]() -> ParseResult {
    int64_t size;
    StringAttr symbol;
    if (parseDim(parser, size, symbol))
      return failure();
    sizes.push_back(size);
    symbols.push_back(symbol);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseOne) ||
      parser.parseComma() || parser.parseType(elementType) || parser.parseGreater())
    return {};
  return TcTensorType::getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                                  parser.getContext(), sizes, symbols, elementType);
}

void TcTensorType::print(AsmPrinter &printer) const {
  printer << "<[";
  for (size_t i = 0; i < getSizes().size(); ++i) {
    if (i)
      printer << ", ";
    if (getSymbols()[i])
      printer << getSymbols()[i].getValue();
    else
      printer << getSizes()[i];
  }
  printer << "], " << getElementType() << ">";
}

LogicalResult TcTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<int64_t> sizes, ArrayRef<StringAttr> symbols,
                                   Type elementType) {
  if (!toDType(elementType))
    return emitError()
           << "!tc.tensor element type must be f64, f32, f16, bf16, i64, i32 or i1, got "
           << elementType;
  if (sizes.size() != symbols.size())
    return emitError() << "!tc.tensor sizes and symbols differ in length";
  int64_t elements = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (symbols[i]) {
      if (sizes[i] != ShapedType::kDynamic)
        return emitError() << "!tc.tensor dim " << i << " is both static and symbolic";
      continue;
    }
    if (sizes[i] < 0)
      return emitError() << "!tc.tensor dim " << i << " is negative (" << sizes[i] << ")";
    if (__builtin_mul_overflow(elements, sizes[i], &elements) || elements > kMaxElements)
      return emitError() << "!tc.tensor has more than 2^40 elements";
  }
  return success();
}

} // namespace tensorc::tc

#define GET_TYPEDEF_CLASSES
#include "ir/dialect/TCTypes.cpp.inc"

void tensorc::tc::TCDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/dialect/TCTypes.cpp.inc"
      >();
}
