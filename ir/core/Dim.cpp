#include "ir/core/Dim.h"

#include "ir/core/Error.h"

#include <algorithm>
#include <cctype>

namespace tensorc {

int64_t checkedMul(int64_t a, int64_t b, const char *what) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    fail(std::string(what) + " overflows 64 bits");
  return result;
}

bool Dim::isValidSymbolName(std::string_view name) {
  if (name.empty() || name.size() > 64 || !(std::isalpha((unsigned char)name[0]) || name[0] == '_'))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
}

std::optional<Dim> Dim::parse(std::string_view text) {
  int64_t coeff = 1;
  std::vector<std::string> symbols;
  bool sawNumber = false;
  while (true) {
    size_t star = text.find('*');
    std::string_view factor = text.substr(0, star);
    if (factor.empty())
      return std::nullopt;
    if (std::isdigit((unsigned char)factor[0])) {
      if (sawNumber || factor.size() > 18)
        return std::nullopt;
      int64_t v = 0;
      for (char c : factor) {
        if (!std::isdigit((unsigned char)c))
          return std::nullopt;
        v = v * 10 + (c - '0');
      }
      coeff = v;
      sawNumber = true;
    } else {
      if (!isValidSymbolName(factor))
        return std::nullopt;
      symbols.emplace_back(factor);
    }
    if (star == std::string_view::npos)
      break;
    text.remove_prefix(star + 1);
  }
  // "0*B" is no size; a coefficient past 2^40 is no tensor anyone can hold.
  if ((!symbols.empty() && coeff < 1) || coeff > kMaxElements)
    return std::nullopt;
  std::sort(symbols.begin(), symbols.end());
  return Dim(coeff, std::move(symbols));
}

std::string Dim::str() const {
  if (symbols_.empty())
    return std::to_string(coeff_);
  std::string out = coeff_ == 1 ? "" : std::to_string(coeff_) + "*";
  for (size_t i = 0; i < symbols_.size(); ++i)
    out += (i ? "*" : "") + symbols_[i];
  return out;
}

Dim Dim::operator*(const Dim &other) const {
  std::vector<std::string> symbols = symbols_;
  symbols.insert(symbols.end(), other.symbols_.begin(), other.symbols_.end());
  std::sort(symbols.begin(), symbols.end());
  return Dim(checkedMul(coeff_, other.coeff_, "dimension product"), std::move(symbols));
}

std::optional<Dim> Dim::dividedBy(const Dim &divisor) const {
  if (divisor.coeff_ == 0 || coeff_ % divisor.coeff_ != 0)
    return std::nullopt;
  std::vector<std::string> remaining = symbols_;
  for (const std::string &s : divisor.symbols_) {
    auto it = std::find(remaining.begin(), remaining.end(), s);
    if (it == remaining.end())
      return std::nullopt;
    remaining.erase(it);
  }
  return Dim(coeff_ / divisor.coeff_, std::move(remaining));
}

std::optional<int64_t> Dim::evaluate(const std::map<std::string, int64_t> &bindings) const {
  int64_t v = coeff_;
  for (const std::string &s : symbols_) {
    auto it = bindings.find(s);
    if (it == bindings.end())
      return std::nullopt;
    v = checkedMul(v, it->second, "dimension");
  }
  return v;
}

std::string shapeStr(const Shape &shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + shape[i].str();
  return out + ")";
}

Dim numElements(const Shape &shape) {
  Dim n = Dim::of(1);
  for (const Dim &d : shape)
    n = n * d;
  return n;
}

bool isStaticShape(const Shape &shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim &d) { return d.isStatic(); });
}

std::string TensorSpec::str() const {
  return shapeStr(shape) + " " + std::string(dtypeName(dtype));
}

} // namespace tensorc
