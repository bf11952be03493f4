// The op set v1 as data: each op's operands, attributes (with kinds and
// defaults), result count and differentiability. Graph files, the tracing API,
// shape inference, `tensorc ops` and the MLIR dialect all read this one table;
// a unit test checks that the ODS definitions in ir/dialect agree with it.
#pragma once

#include "ir/core/Attr.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tensorc {

enum class Arity { One, Optional, Variadic };

struct OperandDef {
  std::string name;
  Arity arity = Arity::One;
};

struct AttrDef {
  std::string name;
  AttrKind kind;
  bool required = false;
  std::optional<Attr> defaultValue; // used when absent and not required
  std::vector<std::string> choices; // for Enum
};

struct OpSchema {
  std::string name;     // "matmul"; the MLIR op is "tc.matmul"
  std::string category; // "unary", "binary", "reduction", ...
  std::vector<OperandDef> operands;
  std::vector<AttrDef> attrs;
  int numResults = 1; // -1: variadic (split)
  bool differentiable = true;

  const AttrDef *findAttr(std::string_view attrName) const;
  bool hasOptionalOperands() const;
  bool hasVariadicOperands() const;
};

const std::vector<OpSchema> &allOpSchemas();
const OpSchema *findOpSchema(std::string_view name);

// Checks `attrs` against the schema (unknown names, missing required ones,
// kinds, enum choices) and returns them with defaults filled in. Throws Error.
AttrMap completeAttrs(const OpSchema &op, const AttrMap &attrs);
// Removes attributes equal to their default: the canonical form stored in IR.
AttrMap canonicalAttrs(const OpSchema &op, const AttrMap &attrs);

} // namespace tensorc
