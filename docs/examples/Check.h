// A tiny checker for the guide's example programs (docs/examples/): each example compares what einstage computed
// with values it computes itself by plain loops, counts mismatches here and returns non-zero from main when any
// occurred, so ctest fails. Depends on ir/Tensor.h only.
#pragma once

#include "ir/Tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <vector>

namespace example {

inline int failures = 0;

inline void check(bool ok, std::string_view what) {
  if (!ok) {
    fmt::print(stderr, "MISMATCH: {}\n", what);
    ++failures;
  }
}

/// `got` (any layout, f64) against `want` given in column-major order.
inline void check_close(const einstage::Tensor& got, const std::vector<double>& want, std::string_view what,
                        double tol = 1e-9) {
  std::vector<double> g = got.to_col_major<double>();
  bool ok = g.size() == want.size();
  for (size_t i = 0; ok && i < g.size(); ++i) ok = std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i]));
  if (!ok) fmt::print(stderr, "{}: got {}\nwant {}\n", what, fmt::join(g, ", "), fmt::join(want, ", "));
  check(ok, what);
}

inline int result(std::string_view name) {
  if (failures == 0) fmt::print("{}: ok\n", name);
  return failures == 0 ? 0 : 1;
}

}  // namespace example
