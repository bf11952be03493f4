#include "compiler/graph/GraphJson.h"

#include "ir/core/Error.h"
#include "ir/core/OpSchema.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace tensorc {

using Json = nlohmann::ordered_json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxFileBytes = size_t(1) << 30;

std::string typeName(const Json &j) {
  if (j.is_number_integer())
    return "an integer";
  if (j.is_number())
    return "a number";
  if (j.is_array() || j.is_object())
    return std::string("an ") + j.type_name();
  return std::string("a ") + j.type_name();
}

struct Reader {
  std::string where;

  [[noreturn]] void error(const std::string &context, const std::string &message) const {
    fail(where + ": " + context + ": " + message);
  }
  void fieldsIn(const Json &obj, const std::string &context, std::set<std::string> allowed) const {
    if (!obj.is_object())
      error(context, "must be an object, got " + typeName(obj));
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!allowed.count(it.key()))
        error(context, "unknown field \"" + it.key() + "\"");
  }
  const Json &field(const Json &obj, const char *key, const std::string &context) const {
    auto it = obj.find(key);
    if (it == obj.end())
      error(context, std::string("missing field \"") + key + "\"");
    return *it;
  }
  std::string string(const Json &j, const std::string &context) const {
    if (!j.is_string())
      error(context, "must be a string, got " + typeName(j));
    return j.get<std::string>();
  }
  int64_t integer(const Json &j, const std::string &context) const {
    if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(INT64_MAX))
      error(context, "integer out of range");
    if (!j.is_number_integer())
      error(context, "must be an integer, got " + typeName(j));
    return j.get<int64_t>();
  }
  double number(const Json &j, const std::string &context) const {
    if (!j.is_number())
      error(context, "must be a number, got " + typeName(j));
    return j.get<double>();
  }
  const Json &array(const Json &j, const std::string &context) const {
    if (!j.is_array())
      error(context, "must be an array, got " + typeName(j));
    return j;
  }
  DType dtype(const Json &j, const std::string &context) const {
    std::string s = string(j, context);
    std::optional<DType> d = parseDType(s);
    if (!d)
      error(context, "unknown dtype \"" + s + "\" (expected f64, f32, f16, bf16, i64, i32 or i1)");
    return *d;
  }
  // An input's dims are positive; an attribute's may also be -1 (reshape
  // infers it) or 0 (a shape op on an empty tensor): the op's shape rule
  // decides.
  Dim dim(const Json &j, const std::string &context, bool attribute) const {
    if (j.is_string()) {
      std::optional<Dim> d = Dim::parse(j.get<std::string>());
      if (!d)
        error(context, "malformed dim \"" + j.get<std::string>() + "\"");
      if (d->isStatic() && d->value() < 1)
        error(context, "dim " + d->str() + " must be positive");
      return *d;
    }
    int64_t v = integer(j, context);
    if (v > kMaxElements)
      error(context, "dim " + std::to_string(v) + " is too large");
    if (v < 1 && !(attribute && (v == -1 || v == 0)))
      error(context, "dim " + std::to_string(v) + " must be positive");
    return Dim::of(v);
  }
  Shape shape(const Json &j, const std::string &context, bool attribute = false) const {
    Shape s;
    for (const Json &d : array(j, context))
      s.push_back(dim(d, context, attribute));
    if (s.size() > 16)
      error(context, "rank " + std::to_string(s.size()) + " exceeds the maximum of 16");
    return s;
  }
  std::vector<int64_t> integers(const Json &j, const std::string &context) const {
    std::vector<int64_t> v;
    for (const Json &e : array(j, context))
      v.push_back(integer(e, context));
    return v;
  }
  std::vector<std::string> strings(const Json &j, const std::string &context) const {
    std::vector<std::string> v;
    for (const Json &e : array(j, context))
      v.push_back(string(e, context));
    return v;
  }

  Sharding sharding(const Json &j, const std::string &context) const {
    std::string c = context + ": sharding";
    fieldsIn(j, c, {"mesh", "dims"});
    Sharding s;
    s.mesh = string(field(j, "mesh", c), c + ".mesh");
    for (const Json &d : array(field(j, "dims", c), c + ".dims"))
      s.dims.push_back(strings(d, c + ".dims"));
    return s;
  }

  DenseValue dense(const Json &j, const std::string &context) const {
    fieldsIn(j, context, {"dtype", "shape", "data"});
    DenseValue v;
    v.dtype = dtype(field(j, "dtype", context), context + ".dtype");
    v.shape = integers(field(j, "shape", context), context + ".shape");
    int64_t n = 1;
    for (int64_t d : v.shape) {
      if (d < 1 || d > kMaxElements)
        error(context, "constant dims must be positive");
      n = checkedMul(n, d, "constant size");
      if (n > kMaxElements)
        error(context, "constant is too large");
    }
    const Json &data = field(j, "data", context);
    std::vector<const Json *> items;
    if (data.is_array())
      for (const Json &e : data)
        items.push_back(&e);
    else
      items.push_back(&data);
    if (items.size() != 1 && int64_t(items.size()) != n)
      error(context, "data has " + std::to_string(items.size()) + " values for shape of " +
                         std::to_string(n) + " elements");
    for (const Json *e : items) {
      if (isFloat(v.dtype)) {
        v.floats.push_back(floatValue(*e, context + ".data"));
      } else if (e->is_boolean()) {
        v.ints.push_back(e->get<bool>());
      } else {
        int64_t i = integer(*e, context + ".data");
        // An integer that does not fit the dtype has no one meaning (an i1
        // 2 read as 1 by the interpreter and 0 compiled): refused.
        bool fits = v.dtype == DType::I1    ? (i == 0 || i == 1)
                    : v.dtype == DType::I32 ? (i >= INT32_MIN && i <= INT32_MAX)
                                            : true;
        if (!fits)
          error(context + ".data", std::to_string(i) + " is not a value of " + std::string(dtypeName(v.dtype)) +
                                       (v.dtype == DType::I1 ? " (true, false, 1 or 0)" : ""));
        v.ints.push_back(i);
      }
    }
    return v;
  }

  // Floats may be written as numbers or as "nan", "inf", "-inf".
  double floatValue(const Json &j, const std::string &context) const {
    if (j.is_string()) {
      std::string s = j.get<std::string>();
      if (s == "nan")
        return NAN;
      if (s == "inf")
        return INFINITY;
      if (s == "-inf")
        return -INFINITY;
    }
    return number(j, context);
  }

  Attr attr(const Json &j, const AttrDef &def, const std::string &context) const {
    switch (def.kind) {
    case AttrKind::Int:
      return Attr(integer(j, context));
    case AttrKind::Float:
      return Attr(floatValue(j, context));
    case AttrKind::Bool:
      if (!j.is_boolean())
        error(context, "must be true or false, got " + typeName(j));
      return Attr(j.get<bool>());
    case AttrKind::Enum:
      return Attr(string(j, context));
    case AttrKind::Ints:
      return Attr(integers(j, context));
    case AttrKind::Dims:
      return Attr(shape(j, context, /*attribute=*/true));
    case AttrKind::DType:
      return Attr(dtype(j, context));
    case AttrKind::Dense:
      return Attr(dense(j, context));
    case AttrKind::Strings:
      return Attr(strings(j, context));
    }
    error(context, "unsupported attribute kind");
  }

  Arg arg(const Json &j, const std::string &context) const {
    if (j.is_null())
      return Arg::absent();
    if (j.is_string())
      return Arg::ref(j.get<std::string>());
    Literal lit;
    const Json *value = &j;
    if (j.is_object()) {
      fieldsIn(j, context, {"literal", "dtype"});
      value = &field(j, "literal", context);
      if (j.contains("dtype"))
        lit.dtype = dtype(j["dtype"], context + ".dtype");
    }
    if (value->is_boolean()) {
      lit.kind = Literal::Kind::Bool;
      lit.intValue = value->get<bool>();
    } else if (value->is_number_integer()) {
      lit.kind = Literal::Kind::Int;
      lit.intValue = integer(*value, context);
      lit.floatValue = double(lit.intValue);
    } else if (value->is_number() || value->is_string()) {
      lit.kind = Literal::Kind::Float;
      lit.floatValue = floatValue(*value, context);
    } else {
      error(context, "must be a value name, a number, a bool, null or {\"literal\": ...}, got " +
                         typeName(*value));
    }
    return Arg::lit(lit);
  }

  Node node(const Json &j, size_t index) const {
    std::string context = "nodes[" + std::to_string(index) + "]";
    if (j.is_object() && j.contains("name") && j["name"].is_string())
      context = "node \"" + j["name"].get<std::string>() + "\"";
    fieldsIn(j, context, {"name", "op", "args", "attrs", "sharding"});
    Node n;
    n.name = string(field(j, "name", context), context + ".name");
    n.op = string(field(j, "op", context), context + ".op");
    const OpSchema *schema = findOpSchema(n.op);
    if (!schema)
      error(context, "unknown op '" + n.op + "'");
    context += " (" + n.op + ")";
    if (j.contains("args"))
      for (const Json &a : array(j["args"], context + ": args"))
        n.args.push_back(arg(a, context + ": args"));
    if (j.contains("attrs")) {
      const Json &attrs = j["attrs"];
      if (!attrs.is_object())
        error(context, "attrs must be an object, got " + typeName(attrs));
      for (auto it = attrs.begin(); it != attrs.end(); ++it) {
        const AttrDef *def = schema->findAttr(it.key());
        if (!def) {
          std::string known;
          for (const AttrDef &d : schema->attrs)
            known += (known.empty() ? "" : ", ") + d.name;
          error(context, "unknown attribute '" + it.key() + "'" +
                             (known.empty() ? " (it takes none)" : " (known: " + known + ")"));
        }
        n.attrs.emplace(it.key(),
                        attr(it.value(), *def, context + ": attribute '" + it.key() + "'"));
      }
    }
    if (j.contains("sharding"))
      n.sharding = sharding(j["sharding"], context);
    return n;
  }

  Graph graph(const Json &j) const {
    if (!j.is_object())
      fail(where + ": the top level must be an object, got " + typeName(j));
    fieldsIn(j, "graph",
             {"format", "version", "name", "dims", "meshes", "inputs", "nodes", "outputs", "checks"});
    if (string(field(j, "format", "graph"), "format") != "tensorc.graph")
      error("format", "must be \"tensorc.graph\"");
    int64_t version = integer(field(j, "version", "graph"), "version");
    if (version != kGraphFormatVersion)
      error("version", "unsupported version " + std::to_string(version) +
                           " (this tensorc reads version " + std::to_string(kGraphFormatVersion) +
                           ")");
    Graph g;
    if (j.contains("name"))
      g.name = string(j["name"], "name");
    if (j.contains("dims") && !j["dims"].is_object())
      error("dims", "must be an object, got " + typeName(j["dims"]));
    if (j.contains("dims"))
      for (auto it = j["dims"].begin(); it != j["dims"].end(); ++it) {
        std::string c = "dims." + it.key();
        fieldsIn(it.value(), c, {"min", "max"});
        DimBound b;
        if (it.value().contains("min"))
          b.min = integer(it.value()["min"], c + ".min");
        if (it.value().contains("max"))
          b.max = integer(it.value()["max"], c + ".max");
        g.dims.emplace(it.key(), b);
      }
    if (j.contains("meshes"))
      for (const Json &m : array(j["meshes"], "meshes")) {
        fieldsIn(m, "meshes", {"name", "axes", "sizes"});
        Mesh mesh;
        mesh.name = string(field(m, "name", "meshes"), "meshes.name");
        mesh.axes = strings(field(m, "axes", "mesh \"" + mesh.name + "\""),
                            "mesh \"" + mesh.name + "\".axes");
        mesh.sizes = integers(field(m, "sizes", "mesh \"" + mesh.name + "\""),
                              "mesh \"" + mesh.name + "\".sizes");
        g.meshes.push_back(mesh);
      }
    size_t index = 0;
    for (const Json &in : array(field(j, "inputs", "graph"), "inputs")) {
      std::string c = "inputs[" + std::to_string(index++) + "]";
      if (in.is_object() && in.contains("name") && in["name"].is_string())
        c = "input \"" + in["name"].get<std::string>() + "\"";
      fieldsIn(in, c, {"name", "dtype", "shape", "trainable", "sharding"});
      GraphInput gi;
      gi.name = string(field(in, "name", c), c + ".name");
      gi.spec.dtype = dtype(field(in, "dtype", c), c + ".dtype");
      gi.spec.shape = shape(field(in, "shape", c), c + ".shape");
      if (in.contains("trainable")) {
        if (!in["trainable"].is_boolean())
          error(c + ".trainable", "must be true or false");
        gi.trainable = in["trainable"].get<bool>();
      }
      if (in.contains("sharding"))
        gi.sharding = sharding(in["sharding"], c);
      g.inputs.push_back(gi);
    }
    index = 0;
    for (const Json &n : array(field(j, "nodes", "graph"), "nodes"))
      g.nodes.push_back(node(n, index++));
    g.outputs = strings(field(j, "outputs", "graph"), "outputs");
    if (j.contains("checks")) // their count and types: analyzeGraph
      g.checks = strings(j["checks"], "checks");
    return g;
  }
};

Json writeSharding(const Sharding &s) {
  Json dims = Json::array();
  for (const auto &d : s.dims)
    dims.push_back(d);
  return Json{{"mesh", s.mesh}, {"dims", dims}};
}

Json writeFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

Json writeAttr(const Attr &a) {
  switch (kindOf(a)) {
  case AttrKind::Int:
    return std::get<int64_t>(a);
  case AttrKind::Float:
    return writeFloat(std::get<double>(a));
  case AttrKind::Bool:
    return std::get<bool>(a);
  case AttrKind::Enum:
    return std::get<std::string>(a);
  case AttrKind::Ints:
    return std::get<std::vector<int64_t>>(a);
  case AttrKind::Dims: {
    Json dims = Json::array();
    for (const Dim &d : std::get<Shape>(a))
      d.isStatic() ? dims.push_back(d.value()) : dims.push_back(d.str());
    return dims;
  }
  case AttrKind::DType:
    return std::string(dtypeName(std::get<DType>(a)));
  case AttrKind::Strings:
    return std::get<std::vector<std::string>>(a);
  case AttrKind::Dense: {
    const DenseValue &v = std::get<DenseValue>(a);
    Json data = Json::array();
    if (isFloat(v.dtype))
      for (double f : v.floats)
        data.push_back(writeFloat(f));
    else if (v.dtype == DType::I1)
      for (int64_t i : v.ints)
        data.push_back(i != 0);
    else
      data = v.ints;
    return Json{{"dtype", std::string(dtypeName(v.dtype))},
                {"shape", v.shape},
                {"data", data.size() == 1 ? data[0] : data}};
  }
  }
  return nullptr;
}

Json writeArg(const Arg &a) {
  switch (a.kind) {
  case Arg::Kind::Absent:
    return nullptr;
  case Arg::Kind::Value:
    return a.value;
  case Arg::Kind::Literal: {
    const Literal &l = a.literal;
    Json v = l.kind == Literal::Kind::Bool  ? Json(l.intValue != 0)
             : l.kind == Literal::Kind::Int ? Json(l.intValue)
                                            : writeFloat(l.floatValue);
    // A bare string in args names a value, so non-finite floats need the
    // object form.
    if (!l.dtype && !v.is_string())
      return v;
    Json object = {{"literal", v}};
    if (l.dtype)
      object["dtype"] = std::string(dtypeName(*l.dtype));
    return object;
  }
  }
  return nullptr;
}

Json writeShape(const Shape &s) { return writeAttr(Attr(s)); }

} // namespace

// The deepest nesting of arrays/objects in `text`, by one linear scan
// (brackets inside strings do not count). A parser callback would do the same
// check but makes nlohmann's parse quadratic in the number of nodes.
static int maxNestingDepth(const std::string &text) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

Graph parseGraphJson(const std::string &text, const std::string &where) {
  Json j;
  try {
    check(maxNestingDepth(text) <= kMaxJsonDepth,
          "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    j = Json::parse(text);
  } catch (const Json::exception &e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 5: ...",
    // or "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    std::string what = e.what();
    size_t at = what.find("] ");
    fail(where + ": invalid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  } catch (const Error &e) {
    fail(where + ": " + e.what());
  }
  return Reader{where}.graph(j);
}

Graph readGraphFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec))
    check(std::filesystem::is_regular_file(path, ec),
          path + ": cannot read it: not a regular file");
  std::ifstream in(path, std::ios::binary);
  check(bool(in), path + ": cannot open the file");
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  check(size >= 0, path + ": cannot read the file (is it a directory?)");
  check(size_t(size) <= kMaxFileBytes, path + ": the file is larger than 1 GiB");
  in.seekg(0);
  std::string text(size_t(size), '\0');
  in.read(text.data(), size);
  check(bool(in) || in.eof(), path + ": cannot read the file");
  return parseGraphJson(text, path);
}

std::string writeGraphJson(const Graph &g) {
  Json j;
  j["format"] = "tensorc.graph";
  j["version"] = kGraphFormatVersion;
  j["name"] = g.name;
  if (!g.dims.empty()) {
    Json dims = Json::object();
    for (const auto &[name, b] : g.dims) {
      Json bound = {{"min", b.min}};
      if (b.max)
        bound["max"] = *b.max;
      dims[name] = bound;
    }
    j["dims"] = dims;
  }
  if (!g.meshes.empty()) {
    Json meshes = Json::array();
    for (const Mesh &m : g.meshes)
      meshes.push_back(Json{{"name", m.name}, {"axes", m.axes}, {"sizes", m.sizes}});
    j["meshes"] = meshes;
  }
  Json inputs = Json::array();
  for (const GraphInput &in : g.inputs) {
    Json e = {{"name", in.name},
              {"dtype", std::string(dtypeName(in.spec.dtype))},
              {"shape", writeShape(in.spec.shape)}};
    if (in.trainable)
      e["trainable"] = true;
    if (in.sharding)
      e["sharding"] = writeSharding(*in.sharding);
    inputs.push_back(e);
  }
  j["inputs"] = inputs;
  Json nodes = Json::array();
  for (const Node &n : g.nodes) {
    Json e = {{"name", n.name}, {"op", n.op}};
    Json args = Json::array();
    for (const Arg &a : n.args)
      args.push_back(writeArg(a));
    if (!args.empty())
      e["args"] = args;
    const OpSchema *schema = findOpSchema(n.op);
    AttrMap attrs = schema ? canonicalAttrs(*schema, n.attrs) : n.attrs;
    if (!attrs.empty()) {
      Json a = Json::object();
      for (const auto &[name, value] : attrs)
        a[name] = writeAttr(value);
      e["attrs"] = a;
    }
    if (n.sharding)
      e["sharding"] = writeSharding(*n.sharding);
    nodes.push_back(e);
  }
  j["nodes"] = nodes;
  j["outputs"] = g.outputs;
  if (!g.checks.empty())
    j["checks"] = g.checks;
  return j.dump(2) + "\n";
}

} // namespace tensorc
