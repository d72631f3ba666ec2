// The layout rules of docs/behaviour.md §6, as tests.
#include "ir/Tensor.h"

#include <doctest/doctest.h>

using namespace einstage;

namespace {
// y = M v for a 2-D tensor M, computed through at() so it is independent of the storage order.
std::vector<double> matvec(const Tensor& m, const std::vector<double>& v) {
  std::vector<double> y(m.extent(0), 0.0);
  for (int64_t i = 0; i < m.extent(0); ++i)
    for (int64_t j = 0; j < m.extent(1); ++j) y[i] += m.at<double>({i, j}) * v[j];
  return y;
}
}  // namespace

TEST_CASE("0..5 read column-major as 2x3") {
  Tensor m = Tensor::from_col_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  CHECK(m.to_row_major<double>() == std::vector<double>{0, 2, 4, 1, 3, 5});
  CHECK(matvec(m, {1, 10, 100}) == std::vector<double>{420, 531});
  CHECK(m.to_string() == "f64[2,3]\n[[0, 2, 4],\n [1, 3, 5]]");
}

TEST_CASE("0..5 read row-major as 2x3") {
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  CHECK(m.to_col_major<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(m.to_row_major<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(matvec(m, {1, 10, 100}) == std::vector<double>{210, 543});
}

TEST_CASE("0..7 as 2x2x2 reshaped to 4x2 keeps column-major order") {
  Tensor t = Tensor::from_col_major<double>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor r = t.reshape({4, 2});
  CHECK(r.shares_storage_with(t));
  CHECK(r.to_row_major<double>() == std::vector<double>{0, 4, 1, 5, 2, 6, 3, 7});
}
