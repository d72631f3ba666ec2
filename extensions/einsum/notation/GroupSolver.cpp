#include "extensions/einsum/notation/GroupSolver.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <numeric>

namespace einstage::einsum::detail {

namespace {

[[noreturn]] void overflow(std::string_view what) {
  fail(ErrorKind::unsupported,
       "grouped einsum {}: integer overflow while solving for the group lengths; the operand ranks or supplied "
       "lengths are too large",
       quote_for_message(what));
}

int64_t mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow(what);
  return r;
}

int64_t sub(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow(what);
  return r;
}

int64_t add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow(what);
  return r;
}

// Divides every entry by the gcd of their absolute values (INT64_MIN is rejected as an overflow).
void normalize(std::vector<int64_t>& v, std::string_view what) {
  int64_t g = 0;
  for (int64_t x : v) {
    if (x == INT64_MIN) overflow(what);
    g = std::gcd(g, x < 0 ? -x : x);
  }
  if (g > 1)
    for (int64_t& x : v) x /= g;
}

}  // namespace

void GroupSystem::add_row(std::vector<int64_t> coefficients, int64_t rhs) {
  EIN_ASSERT(coefficients.size() == n_, "row width");
  coefficients.push_back(rhs);
  rows_.push_back(std::move(coefficients));
}

void GroupSystem::eliminate(std::string_view what) {
  size_t r = 0;
  for (size_t c = 0; c < n_ && r < rows_.size(); ++c) {
    size_t p = r;
    while (p < rows_.size() && rows_[p][c] == 0) ++p;
    if (p == rows_.size()) continue;
    std::swap(rows_[p], rows_[r]);
    auto& piv = rows_[r];
    if (piv[c] < 0)
      for (int64_t& x : piv) x = sub(0, x, what);
    normalize(piv, what);
    for (size_t i = r + 1; i < rows_.size(); ++i) {
      auto& row = rows_[i];
      if (row[c] == 0) continue;
      int64_t f = row[c];
      for (size_t j = 0; j <= n_; ++j) row[j] = sub(mul(piv[c], row[j], what), mul(f, piv[j], what), what);
      normalize(row, what);
    }
    pivots_.emplace_back(r, c);
    ++r;
  }
}

bool GroupSystem::consistent() const {
  for (size_t i = pivots_.size(); i < rows_.size(); ++i)
    if (rows_[i][n_] != 0) return false;
  return true;
}

GroupSystem::Value GroupSystem::reduce(std::vector<int64_t> f, std::string_view what) const {
  // Invariant: f0·x = (f·x + num) / den. Eliminating f's entry at a pivot (row r, column c) with
  // f' = r_c f - f_c r gives f·x = (f'·x + f_c b_r) / r_c, hence num' = f_c b_r + num r_c and den' = den r_c.
  int64_t num = 0, den = 1;
  for (auto [ri, c] : pivots_) {
    if (f[c] == 0) continue;
    const auto& row = rows_[ri];
    int64_t fc = f[c], rc = row[c];
    for (size_t j = 0; j < n_; ++j) f[j] = sub(mul(rc, f[j], what), mul(fc, row[j], what), what);
    num = add(mul(fc, row[n_], what), mul(num, rc, what), what);
    den = mul(den, rc, what);
    f.push_back(num);
    f.push_back(den);
    normalize(f, what);
    den = f.back();
    f.pop_back();
    num = f.back();
    f.pop_back();
  }
  for (size_t j = 0; j < n_; ++j)
    if (f[j] != 0) return {};
  int64_t g = std::gcd(num < 0 ? -num : num, den);
  if (g > 1) num /= g, den /= g;
  return {true, num, den};
}

}  // namespace einstage::einsum::detail
