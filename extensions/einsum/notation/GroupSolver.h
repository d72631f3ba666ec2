// The exact integer linear system behind the grouped dialect's group lengths (internal to Grouped.cpp).
//
// Unknowns are group lengths; rows are "sum of the term's groups = rank - lower-case letters" and supplied unit
// rows. Fraction-free row reduction over int64 with every product and difference overflow-checked (no floating
// point, no silent wrap-around); rows are divided by their gcd to keep entries small. Which functionals are
// determined depends on the coefficient matrix only, never on the right-hand side, so identifiability is a property
// of the subscripts. Stage: front end (notation). Depends on ir/Error.h only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace einstage::einsum::detail {

class GroupSystem {
 public:
  explicit GroupSystem(size_t unknowns) : n_(unknowns) {}

  void add_row(std::vector<int64_t> coefficients, int64_t rhs);
  /// Row echelon form (pivots in increasing columns, positive); `what` names the subscripts in overflow errors.
  void eliminate(std::string_view what);
  /// False when some row reduced to 0 = nonzero.
  bool consistent() const;

  /// The value of the functional f·x, if f lies in the row space: num/den in lowest terms, den > 0.
  struct Value {
    bool determined = false;
    int64_t num = 0, den = 1;
  };
  Value reduce(std::vector<int64_t> f, std::string_view what) const;

 private:
  size_t n_;
  std::vector<std::vector<int64_t>> rows_;  // n_ coefficients followed by the right-hand side
  std::vector<std::pair<size_t, size_t>> pivots_;  // (row, column)
};

}  // namespace einstage::einsum::detail
