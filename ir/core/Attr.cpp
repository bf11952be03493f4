#include "ir/core/Attr.h"

#include "ir/core/Error.h"

#include <cstdio>
#include <cstdlib>

namespace tensorc {

const char *attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::Enum:
    return "string";
  case AttrKind::Ints:
    return "int list";
  case AttrKind::Dims:
    return "shape";
  case AttrKind::DType:
    return "dtype";
  case AttrKind::Dense:
    return "dense literal";
  case AttrKind::Strings:
    return "string list";
  }
  return "?";
}

// The shortest text that reads back as the same double.
static std::string floatStr(double v) {
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string attrStr(const Attr &a) {
  switch (kindOf(a)) {
  case AttrKind::Int:
    return std::to_string(std::get<int64_t>(a));
  case AttrKind::Float:
    return floatStr(std::get<double>(a));
  case AttrKind::Bool:
    return std::get<bool>(a) ? "true" : "false";
  case AttrKind::Enum:
    return "\"" + std::get<std::string>(a) + "\"";
  case AttrKind::Ints: {
    std::string out = "[";
    for (int64_t v : std::get<std::vector<int64_t>>(a))
      out += (out.size() > 1 ? ", " : "") + std::to_string(v);
    return out + "]";
  }
  case AttrKind::Dims:
    return shapeStr(std::get<Shape>(a));
  case AttrKind::DType:
    return std::string(dtypeName(std::get<DType>(a)));
  case AttrKind::Dense: {
    const DenseValue &d = std::get<DenseValue>(a);
    return "dense<" + std::to_string(d.size()) + " x " + std::string(dtypeName(d.dtype)) + ">";
  }
  case AttrKind::Strings: {
    std::string out = "[";
    for (const std::string &v : std::get<std::vector<std::string>>(a))
      out += (out.size() > 1 ? ", \"" : "\"") + v + "\"";
    return out + "]";
  }
  }
  return "?";
}

template <typename T> static const T &get(const AttrMap &attrs, const std::string &name) {
  auto it = attrs.find(name);
  check(it != attrs.end(), "attribute '" + name + "' is missing");
  const T *v = std::get_if<T>(&it->second);
  check(v != nullptr, "attribute '" + name + "' has the wrong kind");
  return *v;
}

int64_t getInt(const AttrMap &a, const std::string &n) { return get<int64_t>(a, n); }
double getFloat(const AttrMap &a, const std::string &n) { return get<double>(a, n); }
bool getBool(const AttrMap &a, const std::string &n) { return get<bool>(a, n); }
const std::string &getEnum(const AttrMap &a, const std::string &n) {
  return get<std::string>(a, n);
}
const std::vector<int64_t> &getInts(const AttrMap &a, const std::string &n) {
  return get<std::vector<int64_t>>(a, n);
}
const Shape &getDims(const AttrMap &a, const std::string &n) { return get<Shape>(a, n); }
DType getDType(const AttrMap &a, const std::string &n) { return get<DType>(a, n); }
const DenseValue &getDense(const AttrMap &a, const std::string &n) { return get<DenseValue>(a, n); }
const std::vector<std::string> &getStrings(const AttrMap &a, const std::string &n) {
  return get<std::vector<std::string>>(a, n);
}
bool hasAttr(const AttrMap &a, const std::string &n) { return a.count(n) != 0; }

} // namespace tensorc
