// Tensor dimensions that are static or symbolic.
//
// A symbolic dim is a monomial: a positive coefficient times a product of
// named symbols, e.g. `B`, `B*T`, `3*C`. Monomials are closed under the
// products that reshape/flatten produce, so `x.view(B*T, C)` keeps its meaning,
// while sums (concat of `B` and `C`) are rejected. The same symbol anywhere in
// a module means the same size.
#pragma once

#include "ir/core/DType.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tensorc {

// The largest element count of any tensor; bigger shapes are rejected as
// absurd before anything is allocated (2^40 elements is 4 TiB of f32).
inline constexpr int64_t kMaxElements = int64_t(1) << 40;

class Dim {
public:
  Dim() = default;
  static Dim of(int64_t size) { return Dim(size, {}); }
  static Dim symbol(std::string name) { return Dim(1, {std::move(name)}); }
  // Parses "784", "B", "B*T", "2*B"; nullopt if malformed.
  static std::optional<Dim> parse(std::string_view text);
  static bool isValidSymbolName(std::string_view name);

  bool isStatic() const { return symbols_.empty(); }
  // The static size; only meaningful when isStatic().
  int64_t value() const { return coeff_; }
  int64_t coefficient() const { return coeff_; }
  const std::vector<std::string> &symbols() const { return symbols_; }
  // A lone symbol with coefficient 1: the form that binds a size at run time.
  bool isPlainSymbol() const { return coeff_ == 1 && symbols_.size() == 1; }

  std::string str() const;
  // Multiplies; throws Error on overflow.
  Dim operator*(const Dim &other) const;
  // Exact quotient when this == quotient * divisor, else nullopt.
  std::optional<Dim> dividedBy(const Dim &divisor) const;
  // The size under a binding of every symbol; nullopt if a symbol is unbound.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t> &bindings) const;

  bool operator==(const Dim &o) const { return coeff_ == o.coeff_ && symbols_ == o.symbols_; }
  bool operator!=(const Dim &o) const { return !(*this == o); }
  bool operator<(const Dim &o) const {
    return symbols_ != o.symbols_ ? symbols_ < o.symbols_ : coeff_ < o.coeff_;
  }

private:
  Dim(int64_t coeff, std::vector<std::string> symbols)
      : coeff_(coeff), symbols_(std::move(symbols)) {}
  int64_t coeff_ = 1;
  std::vector<std::string> symbols_; // sorted, may repeat (B*B)
};

using Shape = std::vector<Dim>;

std::string shapeStr(const Shape &shape); // "(B, 784)"
// The product of all dims; throws Error on overflow.
Dim numElements(const Shape &shape);
bool isStaticShape(const Shape &shape);

// A tensor's type: element type and shape.
struct TensorSpec {
  DType dtype = DType::F32;
  Shape shape;

  int64_t rank() const { return int64_t(shape.size()); }
  std::string str() const; // "(B, 784) f32"
  bool operator==(const TensorSpec &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorSpec &o) const { return !(*this == o); }
};

// Multiplies with overflow detection; throws Error naming `what`.
int64_t checkedMul(int64_t a, int64_t b, const char *what = "size");

} // namespace tensorc
