// Tensor: views (permute, transpose, slice, reshape as view or copy), contiguous, astype, copy_from with overlap,
// errors pinned by their text, printing, bitwise_equal. Oracles are index formulas written here, read through at().
#include "ir/Tensor.h"
#include "support/ErrorOf.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

using namespace einstage;

using einstage::test::error_of;
using einstage::test::SplitMix64;

namespace {

// A [2,3,4] f64 tensor whose element (i, j, k) is 100i + 10j + k.
Tensor t234() {
  Tensor t = Tensor::empty(DType::f64, {2, 3, 4});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) t.at<double>({i, j, k}) = 100.0 * i + 10.0 * j + k;
  return t;
}
double v234(int64_t i, int64_t j, int64_t k) { return 100.0 * i + 10.0 * j + k; }

// All multi-indices of a shape in column-major order.
std::vector<std::vector<int64_t>> col_major_indices(const Shape& shape) {
  std::vector<std::vector<int64_t>> out;
  int64_t n = element_count(shape);
  for (int64_t lin = 0; lin < n; ++lin) {
    std::vector<int64_t> idx(shape.size());
    int64_t r = lin;
    for (size_t a = 0; a < shape.size(); ++a) {
      idx[a] = r % shape[a];
      r /= shape[a];
    }
    out.push_back(idx);
  }
  return out;
}

// Elements read through at() in column-major index order: the oracle for layouts.
std::vector<double> values_by_index(const Tensor& t) {
  std::vector<double> out;
  for (const auto& idx : col_major_indices(t.shape())) out.push_back(t.at<double>(std::span<const int64_t>(idx)));
  return out;
}

}  // namespace

TEST_CASE("permute and transpose are views with reordered axes") {
  Tensor t = t234();
  Tensor p = t.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{6, 1, 2});
  CHECK(p.shares_storage_with(t));
  CHECK_FALSE(p.is_col_major());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) CHECK(p.at<double>({k, i, j}) == v234(i, j, k));
  Tensor tt = t.transpose();
  CHECK(tt.shape() == Shape{4, 3, 2});
  CHECK(tt.at<double>({3, 2, 1}) == v234(1, 2, 3));
  CHECK(tt.transpose().is_col_major());
  // Writing through a view writes the parent.
  p.at<double>({3, 1, 2}) = -1;
  CHECK(t.at<double>({1, 2, 3}) == -1);
}

TEST_CASE("slice with a step is a view") {
  Tensor t = t234();
  Tensor s = t.slice(2, 1, 4, 2);  // k = 1, 3
  CHECK(s.shape() == Shape{2, 3, 2});
  CHECK(s.strides() == Strides{1, 2, 12});
  CHECK(s.offset() == 6);
  CHECK(s.shares_storage_with(t));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      CHECK(s.at<double>({i, j, 0}) == v234(i, j, 1));
      CHECK(s.at<double>({i, j, 1}) == v234(i, j, 3));
    }
  Tensor s2 = t.slice(1, 0, 3, 2).slice(0, 1, 2);  // j = 0, 2; i = 1
  CHECK(s2.shape() == Shape{1, 2, 4});
  CHECK(s2.at<double>({0, 1, 3}) == v234(1, 2, 3));
  CHECK(t.slice(1, 1, 3, 5).shape() == Shape{2, 1, 4});  // step longer than the range: one element
  Tensor empty = t.slice(1, 3, 3);
  CHECK(empty.shape() == Shape{2, 0, 4});
  CHECK(empty.numel() == 0);
  CHECK(empty.contiguous().numel() == 0);
}

TEST_CASE("reshape keeps column-major order; a view when the layout allows") {
  Tensor t = t234();
  Tensor r = t.reshape({6, 4});
  CHECK(r.shares_storage_with(t));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) CHECK(r.at<double>({i + 2 * j, k}) == v234(i, j, k));
  CHECK(t.reshape({24}).shares_storage_with(t));
  CHECK(t.reshape({1, 2, 1, 12, 1}).shares_storage_with(t));
  CHECK(t.reshape({2, 3, 4}).strides() == Strides{1, 2, 6});

  // A slice along the last axis keeps the first two axes contiguous: merging them is a view ...
  Tensor s = t.slice(2, 0, 4, 2);
  Tensor sv = s.reshape({6, 2});
  CHECK(sv.shares_storage_with(t));
  CHECK(sv.strides() == Strides{1, 12});
  CHECK(values_by_index(sv) == values_by_index(s));
  // ... merging across the gap is not: a copy.
  Tensor sc = s.reshape({12});
  CHECK_FALSE(sc.shares_storage_with(t));
  CHECK(sc.is_col_major());
  CHECK(values_by_index(sc) == values_by_index(s));

  // A transposed view reshaped: the column-major order of the view, not of the parent's storage.
  Tensor tr = t.transpose();  // [4,3,2]
  Tensor flat = tr.reshape({24});
  CHECK_FALSE(flat.shares_storage_with(t));
  std::vector<double> expect;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) expect.push_back(v234(i, j, k));  // tr's column-major = k fastest
  CHECK(flat.to_col_major<double>() == expect);
  CHECK_FALSE(tr.reshape({4, 6}).shares_storage_with(t));  // merging [3,2] with strides [2,1]: not one stride
  CHECK(values_by_index(tr.reshape({4, 6})) == expect);
  Tensor split = tr.reshape({2, 2, 3, 2});  // splitting one axis is always a view
  CHECK(split.shares_storage_with(t));
  CHECK(split.strides() == Strides{6, 12, 2, 1});
  CHECK(values_by_index(split) == expect);

  // Rank 0 and zero-size.
  Tensor sc0 = Tensor::scalar(7.0);
  CHECK(sc0.reshape({1, 1}).at<double>({0, 0}) == 7.0);
  CHECK(sc0.reshape({1, 1}).reshape({}).at<double>({}) == 7.0);
  Tensor z = Tensor::zeros(DType::f64, {0, 3});
  CHECK(z.reshape({3, 0, 5}).shape() == Shape{3, 0, 5});
}

TEST_CASE("reshape of random views matches the column-major oracle") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    INFO("seed " << seed);
    SplitMix64 rng{seed};
    int rank = 1 + static_cast<int>(rng.below(4));
    Shape shape(rank);
    for (auto& e : shape) e = 1 + rng.below(4);
    Tensor base = Tensor::empty(DType::f64, shape);
    double* p = base.data<double>();
    for (int64_t i = 0; i < base.numel(); ++i) p[i] = static_cast<double>(i);
    // A random view: permute, then maybe slice one axis with a step.
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    Tensor v = base.permute(std::span<const int>(perm));
    if (rng.below(2)) {
      int ax = static_cast<int>(rng.below(rank));
      int64_t e = v.extent(ax);
      int64_t b = rng.below(e);
      v = v.slice(ax, b, e, 1 + rng.below(2));
    }
    // A random target shape with the same element count: factor it by small primes into up to 4 axes.
    int64_t n = v.numel();
    Shape target;
    int64_t left = n;
    for (int64_t f : {2, 3, 2, 3, 2, 5, 7}) {
      if (left % f == 0 && rng.below(2)) {
        target.push_back(f);
        left /= f;
      }
    }
    target.push_back(left);
    if (rng.below(2)) target.insert(target.begin() + rng.below(static_cast<int64_t>(target.size()) + 1), 1);
    CAPTURE(shape_to_string(v.shape()));
    CAPTURE(shape_to_string(target));
    Tensor r = v.reshape(target);
    CHECK(r.shape() == target);
    CHECK(values_by_index(r) == values_by_index(v));
    // A view must alias exactly: writing through it writes the element the oracle names.
    if (r.shares_storage_with(base) && r.numel() > 0) {
      auto last = col_major_indices(target).back();
      r.at<double>(std::span<const int64_t>(last)) = -1;
      CHECK(values_by_index(v).back() == -1);
    }
    // A dense column-major tensor always reshapes as a view.
    CHECK(base.reshape({base.numel()}).shares_storage_with(base));
  }
}

TEST_CASE("contiguous, clone and the export orders") {
  Tensor t = t234();
  CHECK(t.contiguous().shares_storage_with(t));
  CHECK_FALSE(t.clone().shares_storage_with(t));
  Tensor p = t.permute({1, 2, 0});
  Tensor c = p.contiguous();
  CHECK_FALSE(c.shares_storage_with(t));
  CHECK(c.is_col_major());
  CHECK(c.strides() == Strides{1, 3, 12});
  CHECK(values_by_index(c) == values_by_index(p));
  // Size-1 axes do not make a tensor non-contiguous.
  Tensor one = t.slice(0, 1, 2);
  CHECK_FALSE(one.is_col_major());  // [1,3,4] with strides [1,2,6]: axis 1 jumps
  CHECK(t.slice(2, 1, 2).is_col_major());
  // Row-major export of a 3-D tensor.
  Tensor rm = Tensor::from_row_major<int64_t>({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(rm.at<int64_t>({1, 0, 2}) == 8);
  CHECK(rm.to_row_major<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  CHECK(rm.to_col_major<int64_t>() == std::vector<int64_t>{0, 6, 3, 9, 1, 7, 4, 10, 2, 8, 5, 11});
}

TEST_CASE("astype converts values of any view") {
  Tensor i = Tensor::from_row_major<int64_t>({2, 3}, {1, -2, 3, 4, 5, -6}).transpose();
  Tensor f = i.astype(DType::f64);
  CHECK(f.is_col_major());
  CHECK(f.shape() == Shape{3, 2});
  CHECK(f.to_row_major<double>() == std::vector<double>{1, 4, -2, 5, 3, -6});
  Tensor c = f.astype(DType::c64);
  CHECK(c.at<c64>({2, 1}) == c64(-6, 0));
  Tensor cc = c.astype(DType::c128);
  CHECK(cc.at<c128>({1, 0}) == c128(-2, 0));
  CHECK(Tensor::scalar(0.1).astype(DType::f32).at<float>({}) == 0.1f);
  CHECK(Tensor::scalar(-2.75).astype(DType::i64).at<int64_t>({}) == -2);  // C++ truncation, as NumPy
  Tensor same = f.astype(DType::f64);
  CHECK_FALSE(same.shares_storage_with(f));
  CHECK(error_of([&] { cc.astype(DType::f64); }) ==
        "astype: converting c128 to f64 would drop the imaginary part; take the real part explicitly");
}

TEST_CASE("copy_from between overlapping views of the same storage") {
  // In place transpose of a square matrix: the source is the destination read the other way.
  Tensor m = Tensor::from_row_major<double>({3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  m.copy_from(m.transpose());
  CHECK(m.to_row_major<double>() == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});
  // Shifting rows up by one through strided (non-dense) views.
  Tensor a = Tensor::from_row_major<double>({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  a.slice(0, 0, 3).copy_from(a.slice(0, 1, 4));
  CHECK(a.to_row_major<double>() == std::vector<double>{2, 3, 4, 5, 6, 7, 6, 7});
  // ... and down by one (the overlap in the other direction).
  Tensor b = Tensor::from_row_major<double>({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  b.slice(0, 1, 4).copy_from(b.slice(0, 0, 3));
  CHECK(b.to_row_major<double>() == std::vector<double>{0, 1, 0, 1, 2, 3, 4, 5});
  // Dense overlapping ranges (memmove).
  Tensor v = Tensor::from_col_major<int64_t>({6}, {0, 1, 2, 3, 4, 5});
  v.slice(0, 1, 6).copy_from(v.slice(0, 0, 5));
  CHECK(v.to_col_major<int64_t>() == std::vector<int64_t>{0, 0, 1, 2, 3, 4});
  // Caller memory seen through two views (different storage handles, same bytes).
  std::vector<double> mem = {0, 1, 2, 3};
  Tensor x = Tensor::view_of(DType::f64, {2, 2}, {1, 2}, mem.data());
  Tensor xt = Tensor::view_of(DType::f64, {2, 2}, {2, 1}, mem.data());
  x.copy_from(xt);
  CHECK(mem == std::vector<double>{0, 2, 1, 3});
  CHECK(error_of([&] { x.copy_from(Tensor::zeros(DType::f64, {2, 3})); }) ==
        "copy_from: source has shape [2,3] but destination has [2,2]");
  CHECK(error_of([&] { x.copy_from(Tensor::zeros(DType::f32, {2, 2})); }) ==
        "copy_from: source has dtype f32 but destination has f64");
}

TEST_CASE("errors say what was expected and what was given") {
  CHECK(error_of([] { Tensor::from_col_major<double>({2, 3}, {1, 2, 3}); }) ==
        "tensor data has 3 elements but shape [2,3] needs 6; pass exactly one value per element");
  CHECK(error_of([] { Tensor::from_row_major<int64_t>({2}, {1, 2, 3}); }) ==
        "tensor data has 3 elements but shape [2] needs 2; pass exactly one value per element");
  CHECK(error_of([] { Tensor::zeros(DType::f64, {2, -1}); }) ==
        "shape [2,-1]: extent -1 of axis 1 is negative; extents must be >= 0");
  CHECK(error_of([] { Tensor::empty(DType::f64, {int64_t{1} << 40, int64_t{1} << 30}); }) ==
        "shape [1099511627776,1073741824] has more elements than fit in 64 bits");
  CHECK(error_of([] { Tensor::empty(DType::c128, {int64_t{1} << 61}); }) ==
        "shape [2305843009213693952] needs more bytes than fit in 64 bits (2305843009213693952 elements of 16 bytes)");

  Tensor t = t234();
  CHECK(error_of([&] { t.data<float>(); }) == "data: tensor has dtype f64 but f32 was requested");
  CHECK(error_of([&] { t.at<c128>({0, 0, 0}); }) == "at: tensor has dtype f64 but c128 was requested");
  CHECK(error_of([&] { t.to_col_major<int64_t>(); }) == "to_col_major: tensor has dtype f64 but i64 was requested");
  CHECK(error_of([&] { t.at<double>({0, 3, 0}); }) == "index 3 is out of range for axis 1 of extent 3 (shape [2,3,4])");
  CHECK(error_of([&] { t.at<double>({-1, 0, 0}); }) ==
        "index -1 is out of range for axis 0 of extent 2 (shape [2,3,4])");
  CHECK(error_of([&] { t.at<double>({0, 0}); }) == "index has 2 entries but the tensor [2,3,4] has rank 3");
  CHECK(error_of([&] { t.extent(3); }) == "axis 3 is out of range for a tensor of rank 3");
  CHECK(error_of([&] { t.permute({0, 0, 1}); }) == "permute: [0,0,1] is not a permutation of 0..2");
  CHECK(error_of([&] { t.permute({0, 1, 3}); }) == "permute: [0,1,3] is not a permutation of 0..2");
  CHECK(error_of([&] { t.permute({1, 0}); }) == "permute: permutation has 2 entries but the tensor has rank 3");
  CHECK(error_of([&] { t.reshape({5, 5}); }) ==
        "cannot reshape [2,3,4] (24 elements) to [5,5] (25 elements); the element counts must match");
  CHECK(error_of([&] { t.slice(1, 1, 4); }) == "slice [1, 4) is out of range for axis 1 of extent 3; need end <= 3");
  CHECK(error_of([&] { t.slice(1, 2, 1); }) == "slice [2, 1) is out of range for axis 1; need 0 <= begin <= end");
  CHECK(error_of([&] { t.slice(0, 0, 1, 0); }) == "slice: step must be positive, got 0");
  CHECK(error_of([] { Tensor().contiguous(); }) == "contiguous: the tensor is undefined");
  CHECK(error_of([] { Tensor().data<double>(); }) == "data: the tensor is undefined");
}

TEST_CASE("printing: nested rows like NumPy with a dtype[shape] header") {
  // The integer cases match NumPy's np.array2string(a, separator=', ') character for character.
  CHECK(Tensor::from_col_major<int64_t>({3}, {1, -20, 300}).to_string() == "i64[3]\n[  1, -20, 300]");
  std::vector<int64_t> r8(8);
  std::iota(r8.begin(), r8.end(), 0);
  CHECK(Tensor::from_row_major<int64_t>({2, 2, 2}, r8).to_string() ==
        "i64[2,2,2]\n[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]]");
  // Floats print shortest round trip, complex as a+bj; all right-aligned to the widest element.
  CHECK(Tensor::from_row_major<double>({2, 2}, {-1.5, 10, 100, 2}).to_string() ==
        "f64[2,2]\n[[-1.5,   10],\n [ 100,    2]]");
  CHECK(Tensor::from_col_major<double>({3}, {0.1, 1e-300, -0.0}).to_string() == "f64[3]\n[   0.1, 1e-300,     -0]");
  CHECK(Tensor::from_col_major<float>({2}, {0.1f, 3.0f}).to_string() == "f32[2]\n[0.1,   3]");
  CHECK(Tensor::from_col_major<c128>({2}, {c128(1, 2), c128(-0.5, -3)}).to_string() == "c128[2]\n[   1+2j, -0.5-3j]");
  CHECK(Tensor::from_col_major<c64>({2}, {c64(0, -0.0f), c64(2.5f, 0)}).to_string() == "c64[2]\n[  0-0j, 2.5+0j]");
  CHECK(Tensor::scalar<double>(2.5).to_string() == "f64[]\n2.5");
  CHECK(Tensor::scalar<int64_t>(-7).to_string() == "i64[]\n-7");
  CHECK(Tensor::zeros(DType::f64, {2, 0}).to_string() == "f64[2,0]\n[]");
  CHECK(Tensor::zeros(DType::i64, {0}).to_string() == "i64[0]\n[]");
  CHECK(Tensor().to_string() == "Tensor(undefined)");
  CHECK(fmt::format("{}", Tensor::scalar<int64_t>(3)) == "i64[]\n3");
  // A view prints its own elements.
  CHECK(Tensor::from_row_major<int64_t>({2, 3}, {0, 1, 2, 3, 4, 5}).transpose().slice(0, 0, 3, 2).to_string() ==
        "i64[2,2]\n[[0, 3],\n [2, 5]]");
}

TEST_CASE("printing: more than 1000 elements are summarised like NumPy") {
  std::vector<int64_t> r(2000);
  std::iota(r.begin(), r.end(), 0);
  CHECK(Tensor::from_col_major<int64_t>({2000}, r).to_string() ==
        "i64[2000]\n[   0,    1,    2, ..., 1997, 1998, 1999]");
  CHECK(Tensor::from_row_major<int64_t>({100, 20}, r).to_string() ==
        "i64[100,20]\n"
        "[[   0,    1,    2, ...,   17,   18,   19],\n [  20,   21,   22, ...,   37,   38,   39],\n"
        " [  40,   41,   42, ...,   57,   58,   59],\n ...,\n [1940, 1941, 1942, ..., 1957, 1958, 1959],\n"
        " [1960, 1961, 1962, ..., 1977, 1978, 1979],\n [1980, 1981, 1982, ..., 1997, 1998, 1999]]");
  std::vector<int64_t> r3(1200);
  std::iota(r3.begin(), r3.end(), 0);
  CHECK(Tensor::from_row_major<int64_t>({2, 3, 200}, r3).to_string() ==
        "i64[2,3,200]\n"
        "[[[   0,    1,    2, ...,  197,  198,  199],\n  [ 200,  201,  202, ...,  397,  398,  399],\n"
        "  [ 400,  401,  402, ...,  597,  598,  599]],\n\n [[ 600,  601,  602, ...,  797,  798,  799],\n"
        "  [ 800,  801,  802, ...,  997,  998,  999],\n  [1000, 1001, 1002, ..., 1197, 1198, 1199]]]");
  // Exactly 1000 elements: not summarised.
  std::vector<int64_t> r1000(1000, 1);
  CHECK(Tensor::from_col_major<int64_t>({1000}, r1000).to_string().find("...") == std::string::npos);
}

TEST_CASE("bitwise_equal compares dtype, shape and bits, not layout") {
  Tensor a = Tensor::from_row_major<double>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor b = Tensor::from_col_major<double>({3, 2}, {0, 1, 2, 3, 4, 5}).transpose();
  CHECK(bitwise_equal(a, b));
  CHECK_FALSE(bitwise_equal(a, a.astype(DType::c128)));
  CHECK_FALSE(bitwise_equal(a, a.reshape({3, 2})));
  CHECK_FALSE(bitwise_equal(Tensor::scalar(0.0), Tensor::scalar(-0.0)));  // equal values, different bits
  double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(bitwise_equal(Tensor::scalar(nan), Tensor::scalar(nan)));
  CHECK(bitwise_equal(Tensor::zeros(DType::f64, {0, 2}), Tensor::zeros(DType::f64, {0, 2})));
  CHECK(bitwise_equal(Tensor(), Tensor()));
  CHECK_FALSE(bitwise_equal(Tensor(), Tensor::scalar(0.0)));
}

TEST_CASE("zero-size tensors export, copy and view like any other") {
  Tensor z = Tensor::zeros(DType::f64, {0, 3});
  CHECK(z.to_col_major<double>().empty());
  CHECK(z.to_row_major<double>().empty());
  std::vector<double> none;
  Tensor v = Tensor::view_of(DType::f64, {3, 0}, {1, 3}, none.data());
  CHECK(v.defined());
  v.copy_from(z.transpose());
  CHECK(bitwise_equal(v, z.transpose()));
  CHECK(z.permute({1, 0}).shape() == Shape{3, 0});
  CHECK(error_of([] { Tensor::view_of(DType::f64, {2}, {1}, nullptr); }) ==
        "view_of: data is null for a view of shape [2]");
}

TEST_CASE("storage is 64-byte aligned") {
  for (DType d : kAllDTypes)
    for (int64_t n : {0, 1, 3, 100}) {
      Tensor t = Tensor::empty(d, {n});
      CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0);
    }
}

TEST_CASE("item: the one element of a tensor of one element, whatever its shape; other sizes fail naming the shape") {
  CHECK(Tensor::scalar(2.5).item<double>() == 2.5);
  CHECK(Tensor::scalar(int64_t{-7}).item<int64_t>() == -7);
  CHECK(Tensor::scalar(c128(1, -2)).item<c128>() == c128(1, -2));
  // A [1,1,1] view into a larger tensor: item() reads at its offset, as at<T>({0, 0, 0}) does.
  Tensor t = t234();
  Tensor one = t.slice(0, 1, 2).slice(1, 2, 3).slice(2, 3, 4);
  CHECK(one.shape() == Shape{1, 1, 1});
  CHECK(one.item<double>() == t.at<double>({1, 2, 3}));
  CHECK(error_of([&] { t.item<double>(); }) ==
        "item: the tensor has shape [2,3,4] (24 elements) but item() reads a tensor of one element; index it with "
        "at<T>({...}) or reduce it first");
  CHECK(error_of([] { Tensor::zeros(DType::f64, {0}).item<double>(); }) ==
        "item: the tensor has shape [0] (0 elements) but item() reads a tensor of one element; index it with "
        "at<T>({...}) or reduce it first");
  CHECK(error_of([] { Tensor::scalar(1.0f).item<double>(); }) == "item: tensor has dtype f32 but f64 was requested");
  CHECK(error_of([] { Tensor().item<double>(); }) == "item: the tensor is undefined");
}
