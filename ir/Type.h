// Dim and TensorType: the static types of IR values (compiler stage; no data, no runtime).
//
// A Dim is a constant extent (`4`), a named symbol (`n`) bound when the program runs, or a small product of them
// (`2*n*m`) where reshape needs one. Products are kept canonical (constant factor first, symbols sorted), so two dims
// are equal exactly when their text is equal. A TensorType is a dtype plus dims, printed `f64[n,4]` (scalar: `f64[]`).
// These text forms are the only type grammar: the printer, the parser and JSON all use them. Depends on ir/DType.h
// and ir/Error.h only.
#pragma once

#include "ir/DType.h"
#include "ir/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace einstage {

/// Values of the symbolic dims of a program, e.g. {"n": 5}. Ordered, so everything built from it is deterministic.
using DimBindings = std::map<std::string, int64_t, std::less<>>;

class Dim {
 public:
  /// A constant extent (>= 0). Implicit, so `TensorType{DType::f64, {n, 4}}` reads naturally.
  Dim(int64_t extent = 0);  // NOLINT(google-explicit-constructor)
  /// A named symbolic extent; the name is an identifier ([A-Za-z_][A-Za-z0-9_]*).
  static Dim symbol(std::string_view name);
  /// Reads the text form (`4`, `n`, `2*n*m`); nullopt when it is not one.
  static std::optional<Dim> parse(std::string_view text);

  bool is_constant() const { return symbols_.empty(); }
  /// The extent of a constant dim (asserts is_constant()).
  int64_t constant() const;
  /// True for a single symbol with factor 1 (`n`).
  bool is_symbol() const { return factor_ == 1 && symbols_.size() == 1; }
  int64_t factor() const { return factor_; }
  /// Sorted symbol names of the product (repeated for powers), empty for a constant.
  const std::vector<std::string>& symbols() const { return symbols_; }

  /// The extent under the given bindings; nullopt when a symbol is unbound.
  std::optional<int64_t> evaluate(const DimBindings& bindings) const;
  std::string to_string() const;

  friend Dim operator*(const Dim& a, const Dim& b);
  friend bool operator==(const Dim& a, const Dim& b) = default;
  friend auto operator<=>(const Dim& a, const Dim& b) = default;

 private:
  int64_t factor_ = 0;
  std::vector<std::string> symbols_;  // sorted; empty for a constant
};

/// Product of dims (1 for none): the element count of a type, used by reshape's type rule.
Dim product(const std::vector<Dim>& dims);

struct TensorType {
  DType dtype = DType::f64;
  std::vector<Dim> dims;

  int rank() const { return static_cast<int>(dims.size()); }
  /// The extents when every dim is constant.
  std::optional<std::vector<int64_t>> constant_shape() const;
  /// "f64[n,4]", "f64[]".
  std::string to_string() const;
  /// Reads the text form; nullopt when it is not one.
  static std::optional<TensorType> parse(std::string_view text);

  friend bool operator==(const TensorType& a, const TensorType& b) = default;
};

/// True for identifiers usable as symbol, parameter and program names.
bool is_identifier(std::string_view text);

}  // namespace einstage

template <> struct fmt::formatter<einstage::Dim> : einstage::detail::ToStringFormatter<einstage::Dim> {};
template <> struct fmt::formatter<einstage::TensorType> : einstage::detail::ToStringFormatter<einstage::TensorType> {};
