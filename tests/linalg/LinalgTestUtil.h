// Helpers of the linalg suite: matrices of a batched column-major tensor [M, N, B...] as complex<double>, products
// and the checks every decomposition goes through (reconstruction, orthonormal columns, ordered spectra), on the AD
// suite's Runtime (ad/AdTestUtil.h, which links the linalg module in). Test-only.
#pragma once

#include "ad/AdTestUtil.h"
#include "extensions/linalg/LinalgOp.h"

#include <complex>
#include <cstring>
#include <vector>

namespace einstage::linalg_test {

using namespace einstage::ad_test;
using Mat = std::vector<std::vector<c128>>;  // [row][col]

/// Matrix `b` of the batch of `t` ([M, N, B...]).
inline Mat matrix(const Tensor& t, int64_t b) {
  std::vector<c128> v = values(t);
  const int64_t m = t.extent(0), n = t.extent(1);
  Mat out(static_cast<size_t>(m), std::vector<c128>(static_cast<size_t>(n)));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) out[i][j] = v[static_cast<size_t>(b * m * n + j * m + i)];
  return out;
}

/// Entry b of a batch of vectors [K, B...].
inline std::vector<c128> vector_of(const Tensor& t, int64_t b) {
  std::vector<c128> v = values(t);
  const int64_t k = t.extent(0);
  return {v.begin() + b * k, v.begin() + (b + 1) * k};
}

inline Mat product(const Mat& a, const Mat& b) {
  const size_t inner = b.size(), cols = b.empty() ? 0 : b[0].size();
  Mat c(a.size(), std::vector<c128>(cols));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < inner; ++k)
      for (size_t j = 0; j < cols; ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

inline Mat adjoint(const Mat& a) {
  const size_t cols = a.empty() ? 0 : a[0].size();
  Mat c(cols, std::vector<c128>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < cols; ++j) c[j][i] = std::conj(a[i][j]);
  return c;
}

/// Columns scaled: a diag(d).
inline Mat scale_columns(Mat a, const std::vector<c128>& d) {
  for (auto& row : a)
    for (size_t j = 0; j < row.size(); ++j) row[j] *= d[j];
  return a;
}

inline double frobenius(const Mat& a) {
  double s = 0;
  for (const auto& row : a)
    for (c128 x : row) s += std::norm(x);
  return std::sqrt(s);
}

inline Mat minus(Mat a, const Mat& b) {
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) a[i][j] -= b[i][j];
  return a;
}

/// ‖Xᴴ X − I‖_F: how far the columns of X are from orthonormal.
inline double orthonormality_error(const Mat& x) {
  Mat g = product(adjoint(x), x);
  for (size_t i = 0; i < g.size(); ++i) g[i][i] -= 1.0;
  return frobenius(g);
}

/// The precision a decomposition in `dtype` meets (reconstruction relative to ‖A‖, orthonormality).
inline double decomposition_tolerance(DType dtype) {
  return dtype == DType::f32 || dtype == DType::c64 ? 2e-5 : 1e-13;
}

/// A random batch of Hermitian [n, n] matrices: (X + Xᴴ) / 2 per matrix.
inline Tensor random_hermitian(DType dtype, int64_t n, const Shape& batch, Rng& rng) {
  Shape shape{n, n};
  shape.insert(shape.end(), batch.begin(), batch.end());
  Tensor x = random_tensor(dtype, shape, rng);
  std::vector<c128> v = values(x);
  const int64_t count = element_count(batch);
  for (int64_t b = 0; b < count; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i <= j; ++i) {
        c128& lo = v[static_cast<size_t>(b * n * n + j * n + i)];
        c128& up = v[static_cast<size_t>(b * n * n + i * n + j)];
        c128 h = (lo + std::conj(up)) / 2.0;
        lo = h;
        up = std::conj(h);
      }
  return tensor_of(dtype, shape, v);
}

// ---- building programs over batched matrices [M, N, B...] ----

inline std::vector<Value> decompose(Builder& b, linalg::LinalgKind kind, const Value& a) {
  return b.extension_results(std::make_shared<linalg::LinalgPayload>(kind), {a});
}

inline Axes batch_axes(const Value& x) {
  Axes axes;
  for (int64_t a = 2; a < x.type.rank(); ++a) axes.push_back(a);
  return axes;
}

inline Value mm(Builder& b, const Value& x, const Value& y) {
  return b.dot_general(x, y, {1}, {0}, batch_axes(x), batch_axes(y));
}

inline Value adj(Builder& b, const Value& x) {
  Axes perm{1, 0};
  for (int64_t a = 2; a < x.type.rank(); ++a) perm.push_back(a);
  return b.conj(b.transpose(x, perm));
}

/// x diag(c) xᴴ with fixed distinct weights c_j = j + 1: invariant under x -> x diag(phases).
inline Value weighted_projector(Builder& b, const Value& x) {
  const int64_t k = x.type.dims[1].constant();
  std::vector<double> c;
  for (int64_t j = 0; j < k; ++j) c.push_back(1.0 + static_cast<double>(j));
  Value w = b.constant(Tensor::from_col_major<double>({k}, std::span<const double>(c)));
  if (x.type.dtype != DType::f64) w = b.convert(w, x.type.dtype);
  return mm(b, b.mul(x, b.broadcast_in_dim(w, {1}, x.type.dims)), adj(b, x));
}

inline Tolerance loose(DType dtype) {
  Tolerance t = tolerance_for(dtype);
  if (dtype == DType::f32 || dtype == DType::c64) t.fd = 6e-2;
  return t;
}

inline Shape with_batch(Shape head, const Shape& batch) {
  head.insert(head.end(), batch.begin(), batch.end());
  return head;
}

/// One Runtime with the linalg module per thread count (1 to 3), made on first use and never destroyed (like the
/// suite's own): for comparing the bits of one decomposition at several thread counts.
inline Runtime& runtime_with_threads(int threads) {
  static Runtime* rts[4] = {};
  if (!rts[threads]) {
    rts[threads] = new Runtime(RuntimeOptions{.threads = threads});
    rts[threads]->add_module(linalg::module_descriptor());
  }
  return *rts[threads];
}

inline bool same_bits(const Tensor& x, const Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace einstage::linalg_test
