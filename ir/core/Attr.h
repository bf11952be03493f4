// Attribute values of tc ops, independent of MLIR: what graph files, the
// tracing API, shape inference and the interpreter exchange.
#pragma once

#include "ir/core/Dim.h"

#include <map>
#include <string>
#include <variant>
#include <vector>

namespace tensorc {

// A dense literal (the `value` of tc.constant). Float dtypes use `floats`,
// integer and bool dtypes use `ints`; one element means a splat.
struct DenseValue {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;

  size_t size() const { return isFloat(dtype) ? floats.size() : ints.size(); }
  bool operator==(const DenseValue &o) const {
    return dtype == o.dtype && shape == o.shape && floats == o.floats && ints == o.ints;
  }
};

// The kinds, in the order of Attr's alternatives.
// `Enum` is a string: one of the schema's choices, or any name when the
// schema lists none (a mesh's name). `Strings` is a list of names (mesh axes).
enum class AttrKind { Int, Float, Bool, Enum, Ints, Dims, DType, Dense, Strings };

using Attr = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, Shape, DType,
                          DenseValue, std::vector<std::string>>;
using AttrMap = std::map<std::string, Attr>;

inline AttrKind kindOf(const Attr &a) { return AttrKind(a.index()); }
const char *attrKindName(AttrKind kind);
std::string attrStr(const Attr &a); // for messages and tables

// Typed access to an attribute that shape inference has already validated.
int64_t getInt(const AttrMap &attrs, const std::string &name);
double getFloat(const AttrMap &attrs, const std::string &name);
bool getBool(const AttrMap &attrs, const std::string &name);
const std::string &getEnum(const AttrMap &attrs, const std::string &name);
const std::vector<int64_t> &getInts(const AttrMap &attrs, const std::string &name);
const Shape &getDims(const AttrMap &attrs, const std::string &name);
DType getDType(const AttrMap &attrs, const std::string &name);
const DenseValue &getDense(const AttrMap &attrs, const std::string &name);
const std::vector<std::string> &getStrings(const AttrMap &attrs, const std::string &name);
bool hasAttr(const AttrMap &attrs, const std::string &name);

} // namespace tensorc
