// Uses the installed headers and libraries: builds a tensor from row-major data, round-trips it through .npy bytes
// in C order and prints it. Exit status 0 only if the round trip is bitwise exact.
#include "ir/Npy.h"
#include "ir/Tensor.h"

#include <fmt/format.h>

int main() {
  using namespace einstage;
  Tensor m = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor back = read_npy_bytes(write_npy_bytes(m, NpyOrder::c));
  fmt::print("{}\n", back);
  return bitwise_equal(m, back) ? 0 : 1;
}
