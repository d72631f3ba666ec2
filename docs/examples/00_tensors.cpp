// Guide section "Tensors and layout": column-major storage, views and .npy files. Quoted in docs/guide.md. Writes
// its .npy files into the current directory (ctest: the build's docs/examples/ directory).
#include "docs/examples/Check.h"
#include "ir/Npy.h"
#include "ir/Tensor.h"

#include <vector>

using namespace einstage;
using example::check;
using example::check_close;

int main() {
  // [layout]
  // 0..5 read column-major as 2x3: rows [[0, 2, 4], [1, 3, 5]]  (NumPy: np.arange(6.).reshape(2, 3, order="F"))
  Tensor a = Tensor::from_col_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  // 0..5 read row-major as 2x3: rows [[0, 1, 2], [3, 4, 5]]     (NumPy: np.arange(6.).reshape(2, 3))
  Tensor b = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});

  fmt::print("{}\n", a);                                 // f64[2,3]
                                                         // [[0, 2, 4],
                                                         //  [1, 3, 5]]
  std::vector<double> stored = b.to_col_major<double>(); // {0, 3, 1, 4, 2, 5}: from_row_major reordered the data once
  std::vector<double> rows = b.to_row_major<double>();   // {0, 1, 2, 3, 4, 5}
  double e = b.at<double>({1, 2});                       // 5: element (1, 2) whatever the storage order
  // [layout]
  check(stored == std::vector<double>{0, 3, 1, 4, 2, 5}, "to_col_major");
  check(rows == std::vector<double>{0, 1, 2, 3, 4, 5}, "to_row_major");
  check(e == 5 && a.at<double>({1, 2}) == 5 && a.at<double>({0, 1}) == 2, "at");

  // [views]
  std::vector<double> data(24);
  for (size_t k = 0; k < data.size(); ++k) data[k] = double(k);
  Tensor t = Tensor::from_col_major<double>({2, 3, 4}, data);  // strides [1, 2, 6]
  Tensor p = t.permute({2, 0, 1});                   // shape [4, 2, 3], strides [6, 1, 2]: p(k, i, j) == t(i, j, k)
  Tensor tt = t.transpose();                         // all axes reversed (NumPy .T): shape [4, 3, 2]
  Tensor s = t.slice(2, 1, 4, 2);                    // axis 2, elements 1 and 3 (begin, end, step): shape [2, 3, 2]
  Tensor c = p.contiguous();                         // a column-major copy (or p itself if it already is column-major)
  Tensor cube = Tensor::from_col_major<double>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor r = cube.reshape({4, 2});                   // column-major order: rows [[0, 4], [1, 5], [2, 6], [3, 7]]
  // [views]
  check(p.shape() == Shape{4, 2, 3} && p.at<double>({3, 1, 2}) == t.at<double>({1, 2, 3}), "permute");
  check(tt.shape() == Shape{4, 3, 2} && tt.at<double>({3, 2, 1}) == t.at<double>({1, 2, 3}), "transpose");
  check(s.shape() == Shape{2, 3, 2} && s.at<double>({1, 2, 1}) == t.at<double>({1, 2, 3}), "slice");
  check(c.is_col_major() && c.at<double>({3, 1, 2}) == t.at<double>({1, 2, 3}), "contiguous");
  check(r.at<double>({0, 1}) == 4 && r.at<double>({3, 0}) == 3, "reshape keeps column-major order");
  check(p.shares_storage_with(t) && !c.shares_storage_with(t), "views share storage, copies do not");

  // [npy]
  write_npy("y.npy", b);                    // fortran_order True: einstage's own order, no reordering
  write_npy("y_c.npy", b, NpyOrder::c);     // fortran_order False: what np.save writes for a default array
  NpyHeader h;
  Tensor back = read_npy("y_c.npy", &h);    // h.order says how the file stored it; back is column-major either way
  // [npy]
  check(h.order == NpyOrder::c, "header order");
  check_close(back, b.to_col_major<double>(), "npy round trip (C order)");
  check_close(read_npy("y.npy"), b.to_col_major<double>(), "npy round trip (Fortran order)");
  return example::result("00_tensors");
}
