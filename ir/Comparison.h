// The six elementwise comparisons of the standard op `select` (ir/Ops.h Select): their one text spelling (lt, le, gt,
// ge, eq, ne, used by the printer, the parser and JSON) and their one evaluation, which the runtime kernel calls, so
// the IR and the kernel cannot disagree on what a comparison means. Depends on nothing but the standard library.
//
// Semantics: IEEE comparisons, so every comparison with a nan is false except ne, which is true (NumPy's and XLA's
// rule); -0.0 equals 0.0. lt, le, gt and ge are ordered and need real operands; eq and ne also compare complex
// numbers (both parts equal).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace einstage {

enum class Comparison : uint8_t { lt, le, gt, ge, eq, ne };

inline constexpr std::array<Comparison, 6> kAllComparisons = {Comparison::lt, Comparison::le, Comparison::gt,
                                                              Comparison::ge, Comparison::eq, Comparison::ne};

/// "lt", "le", "gt", "ge", "eq", "ne".
constexpr std::string_view name(Comparison c) {
  constexpr std::string_view names[] = {"lt", "le", "gt", "ge", "eq", "ne"};
  return names[static_cast<size_t>(c)];
}

/// The comparison spelled `text`, or nullopt.
constexpr std::optional<Comparison> parse_comparison(std::string_view text) {
  for (Comparison c : kAllComparisons)
    if (name(c) == text) return c;
  return std::nullopt;
}

/// lt, le, gt and ge: they need an order, which complex numbers do not have.
constexpr bool is_ordered(Comparison c) { return c != Comparison::eq && c != Comparison::ne; }

/// a <c> b. T is a real type for every comparison, or a complex one for eq and ne.
template <typename T> constexpr bool compare(Comparison c, const T& a, const T& b) {
  switch (c) {
    case Comparison::eq: return a == b;
    case Comparison::ne: return a != b;
    default: break;
  }
  if constexpr (requires { a < b; }) {
    switch (c) {
      case Comparison::lt: return a < b;
      case Comparison::le: return a <= b;
      case Comparison::gt: return a > b;
      case Comparison::ge: return a >= b;
      default: break;
    }
  }
  return false;  // unreachable: ordered comparisons of complex numbers are refused before any element is compared
}

}  // namespace einstage
