// The staged drivers of real svd and eigh (extensions/linalg/Staged.h) against LAPACK's own drivers called here
// directly through LAPACKE (?gesdd / ?syevd, values only, an independent path through LAPACK), on seeded random
// square, tall, wide, rank-deficient, degenerate, zero and badly scaled matrices in f32 and f64 (and the complex
// dtypes, which keep ?gesdd / ?heevd, through the same checks): the spectra agree, A = U S Vᴴ and A V = V diag(W)
// with orthonormal factors, large single matrices give the same bits at 1, 2 and 3 threads, and a ?bdsdc failure
// falls back to ?gesvd.
#include "LinalgTestUtil.h"

#include "extensions/linalg/Lapack.h"
#include "extensions/linalg/Module.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <complex>
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <cstring>
#include <memory>

using namespace einstage;
using namespace einstage::linalg_test;

namespace {

std::vector<Tensor> run_on(Runtime& rt, linalg::LinalgKind kind, const Tensor& a) {
  Builder b("op", &rt.registry());
  Value x = b.parameter("a", {a.dtype(), std::vector<Dim>(a.shape().begin(), a.shape().end())});
  return rt.prepare(b.finish(b.extension_results(std::make_shared<linalg::LinalgPayload>(kind), {x}))).run({a});
}

// The oracle: singular values (descending) or eigenvalues (ascending) of matrix `a` (column-major m x n) by LAPACKE's
// ?gesdd / ?syevd / ?heevd with jobz 'N'.
template <typename T> std::vector<double> oracle(linalg::LinalgKind kind, int64_t m, int64_t n, std::vector<T> a) {
  using R = decltype(std::abs(T{}));
  std::vector<R> out(static_cast<size_t>(std::min(m, n)));
  const auto lm = static_cast<lapack_int>(m), ln = static_cast<lapack_int>(n);
  lapack_int info = -1;
  T* x = a.data();
  R* s = out.data();
  if (kind == linalg::LinalgKind::svd) {
    if constexpr (std::is_same_v<T, float>) info = LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'N', lm, ln, x, lm, s, nullptr, 1, nullptr, 1);
    if constexpr (std::is_same_v<T, double>) info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', lm, ln, x, lm, s, nullptr, 1, nullptr, 1);
    if constexpr (std::is_same_v<T, c64>) info = LAPACKE_cgesdd(LAPACK_COL_MAJOR, 'N', lm, ln, x, lm, s, nullptr, 1, nullptr, 1);
    if constexpr (std::is_same_v<T, c128>) info = LAPACKE_zgesdd(LAPACK_COL_MAJOR, 'N', lm, ln, x, lm, s, nullptr, 1, nullptr, 1);
  } else {
    if constexpr (std::is_same_v<T, float>) info = LAPACKE_ssyevd(LAPACK_COL_MAJOR, 'N', 'L', ln, x, ln, s);
    if constexpr (std::is_same_v<T, double>) info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'N', 'L', ln, x, ln, s);
    if constexpr (std::is_same_v<T, c64>) info = LAPACKE_cheevd(LAPACK_COL_MAJOR, 'N', 'L', ln, x, ln, s);
    if constexpr (std::is_same_v<T, c128>) info = LAPACKE_zheevd(LAPACK_COL_MAJOR, 'N', 'L', ln, x, ln, s);
  }
  REQUIRE(info == 0);
  return {out.begin(), out.end()};
}

std::vector<double> oracle_of(linalg::LinalgKind kind, const Tensor& a) {
  return dispatch_dtype(a.dtype(), [&](auto zero) -> std::vector<double> {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, int64_t>) return {};
    else return oracle<T>(kind, a.extent(0), a.extent(1), a.to_col_major<T>());
  });
}

double max_abs(const std::vector<double>& v) {
  double r = 0;
  for (double x : v) r = std::max(r, std::abs(x));
  return r;
}

// svd of `a` (one matrix) on `rt`: the values against the oracle, descending and non-negative, A = U S Vᴴ,
// orthonormal columns of U and rows of Vᴴ.
void check_svd(const Tensor& a, Runtime& rt) {
  const int64_t m = a.extent(0), n = a.extent(1), k = std::min(m, n);
  std::vector<Tensor> f = run_on(rt, linalg::LinalgKind::svd, a);
  const std::vector<double> want = oracle_of(linalg::LinalgKind::svd, a);
  const std::vector<c128> s = vector_of(f[1], 0);
  const double tol = decomposition_tolerance(a.dtype());
  const Mat am = matrix(a, 0), u = matrix(f[0], 0), vh = matrix(f[2], 0);
  const double scale = std::max(max_abs(want), 1e-300);
  for (int64_t i = 0; i < k; ++i) {
    CHECK(std::abs(s[static_cast<size_t>(i)].real() - want[static_cast<size_t>(i)]) <= tol * scale * 4);
    if (i + 1 < k) CHECK(s[static_cast<size_t>(i)].real() >= s[static_cast<size_t>(i) + 1].real());
  }
  CHECK(s.back().real() >= 0);
  CHECK(frobenius(minus(am, product(scale_columns(u, s), vh))) <= tol * std::max(frobenius(am), 1e-300));
  CHECK(orthonormality_error(u) <= tol * static_cast<double>(m));
  CHECK(orthonormality_error(adjoint(vh)) <= tol * static_cast<double>(n));
}

void check_eigh(const Tensor& a, Runtime& rt) {
  const int64_t n = a.extent(0);
  std::vector<Tensor> f = run_on(rt, linalg::LinalgKind::eigh, a);
  const std::vector<double> want = oracle_of(linalg::LinalgKind::eigh, a);
  const std::vector<c128> w = vector_of(f[0], 0);
  const double tol = decomposition_tolerance(a.dtype());
  const Mat am = matrix(a, 0), v = matrix(f[1], 0);
  const double scale = std::max(max_abs(want), 1e-300);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(std::abs(w[static_cast<size_t>(i)].real() - want[static_cast<size_t>(i)]) <= tol * scale * 4);
    if (i + 1 < n) CHECK(w[static_cast<size_t>(i)].real() <= w[static_cast<size_t>(i) + 1].real());
  }
  CHECK(frobenius(minus(product(am, v), scale_columns(v, w))) <=
        tol * static_cast<double>(n) * std::max(frobenius(am), 1e-300));
  CHECK(orthonormality_error(v) <= tol * static_cast<double>(n));
}

Tensor scaled(const Tensor& a, double factor) {
  std::vector<c128> v = values(a);
  for (c128& x : v) x *= factor;
  return tensor_of(a.dtype(), a.shape(), v);
}

// X Yᵀ with X m x r, Y n x r: rank r.
Tensor low_rank(DType dtype, int64_t m, int64_t n, int64_t r, Rng& rng) {
  Mat x = matrix(random_tensor(dtype, {m, r}, rng), 0), y = matrix(random_tensor(dtype, {n, r}, rng), 0);
  Mat p = product(x, adjoint(y));
  std::vector<c128> v;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) v.push_back(p[static_cast<size_t>(i)][static_cast<size_t>(j)]);
  return tensor_of(dtype, {m, n}, v);
}

// I − 2 v vᴴ / vᴴv: orthogonal, every singular value 1 (a fully degenerate spectrum), eigenvalues ±1.
Tensor reflector(DType dtype, int64_t n, Rng& rng) {
  std::vector<c128> x = values(random_tensor(dtype, {n}, rng)), out;
  double norm = 0;
  for (c128 e : x) norm += std::norm(e);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i)
      out.push_back((i == j ? 1.0 : 0.0) - 2.0 * x[static_cast<size_t>(i)] * std::conj(x[static_cast<size_t>(j)]) / norm);
  return tensor_of(dtype, {n, n}, out);
}

}  // namespace

TEST_CASE("linalg staged: svd of random, rank-deficient, degenerate, zero and badly scaled matrices against ?gesdd") {
  const uint64_t seed = 1601;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::f32, DType::c128, DType::c64}) {
    const bool real = !is_complex(dtype);
    // Square, tall and wide within ?gesdd's direct-reduction bound (the staged driver), across its panel (8) and
    // block (16, 32) sizes and ?sytd2's crossover; 90 x 40 is past the bound (?gesdd's QR path).
    std::vector<std::pair<int64_t, int64_t>> shapes{{2, 2}, {3, 2}, {9, 9}, {40, 40}, {70, 50}, {50, 70}, {90, 40}};
    if (real) shapes.insert(shapes.end(), {{130, 100}, {100, 130}, {257, 257}});
    for (auto [m, n] : shapes) {
      CAPTURE(name(dtype));
      CAPTURE(m);
      CAPTURE(n);
      check_svd(random_tensor(dtype, {m, n}, rng), runtime_with_threads(1));
    }
    CAPTURE(name(dtype));
    check_svd(low_rank(dtype, 60, 45, 3, rng), runtime_with_threads(1));
    check_svd(reflector(dtype, 50, rng), runtime_with_threads(1));
    check_svd(Tensor::zeros(dtype, {30, 30}), runtime_with_threads(1));
    // Outside ?gesdd's unscaled range [6.6e-139, 1.5e138] in f64 (f32's [9e-13, 1.1e12]): ?gesdd scales them
    // itself.
    if (dtype == DType::f64 || dtype == DType::c128) {
      check_svd(scaled(random_tensor(dtype, {40, 40}, rng), 1e-150), runtime_with_threads(1));
      check_svd(scaled(random_tensor(dtype, {40, 40}, rng), 1e150), runtime_with_threads(1));
    } else {
      check_svd(scaled(random_tensor(dtype, {40, 40}, rng), 1e-14), runtime_with_threads(1));
      check_svd(scaled(random_tensor(dtype, {40, 40}, rng), 1e14), runtime_with_threads(1));
    }
  }
}

TEST_CASE("linalg staged: eigh of random, degenerate, zero and badly scaled matrices against ?syevd") {
  const uint64_t seed = 1602;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::f32, DType::c128, DType::c64}) {
    CAPTURE(name(dtype));
    std::vector<int64_t> sizes{2, 3, 31, 33, 48};
    if (!is_complex(dtype)) sizes.insert(sizes.end(), {100, 130});
    for (int64_t n : sizes) {
      CAPTURE(n);
      check_eigh(random_hermitian(dtype, n, {}, rng), runtime_with_threads(1));
    }
    check_eigh(reflector(dtype, 50, rng), runtime_with_threads(1));  // eigenvalue -1 once and 1 forty-nine times
    check_eigh(Tensor::zeros(dtype, {20, 20}), runtime_with_threads(1));
    // Outside ?syevd's unscaled range [1e-146, 1e146] in f64 (f32's [3e-16, 3e15]).
    if (dtype == DType::f64 || dtype == DType::c128) {
      check_eigh(scaled(random_hermitian(dtype, 40, {}, rng), 1e-150), runtime_with_threads(1));
      check_eigh(scaled(random_hermitian(dtype, 40, {}, rng), 1e150), runtime_with_threads(1));
    } else {
      check_eigh(scaled(random_hermitian(dtype, 40, {}, rng), 1e-18), runtime_with_threads(1));
      check_eigh(scaled(random_hermitian(dtype, 40, {}, rng), 1e17), runtime_with_threads(1));
    }
  }
}

TEST_CASE("linalg staged: a large single matrix (third stage on the pool) gives the same bits at 1, 2 and 3 threads") {
  const uint64_t seed = 1603;
  INFO("seed ", seed);
  Rng rng{seed};
  for (auto kind : {linalg::LinalgKind::svd, linalg::LinalgKind::eigh}) {
    const bool svd = kind == linalg::LinalgKind::svd;
    Tensor a = svd ? random_tensor(DType::f64, {530, 520}, rng) : random_hermitian(DType::f64, 520, {}, rng);
    CAPTURE(std::string(linalg::name(kind)));
    if (svd) check_svd(a, runtime_with_threads(2));
    else check_eigh(a, runtime_with_threads(2));
    const std::vector<Tensor> one = run_on(runtime_with_threads(1), kind, a);
    for (int threads : {2, 3}) {
      const std::vector<Tensor> other = run_on(runtime_with_threads(threads), kind, a);
      for (size_t r = 0; r < one.size(); ++r) {
        CAPTURE(threads);
        CAPTURE(r);
        CHECK(same_bits(one[r], other[r]));
      }
    }
  }
}

TEST_CASE("linalg staged: a ?bdsdc failure falls back to ?gesvd, a ?stedc failure is ?syevd's error") {
  // The status hook (Lapack.h) reports the staged driver's ?bdsdc / ?stedc status as "gesdd" / "syevd", the routine
  // that failure stands for.
  auto context = std::make_shared<ExecutionContext>(ConfigOptions{.threads = 1});
  Runtime hooked(RuntimeOptions{.context = context});
  hooked.add_module(linalg::module_descriptor());
  Rng rng{1604};
  linalg::set_lapack_status_hook_for_testing(
      *context, [](std::string_view routine, int64_t info) -> int64_t { return routine == "gesdd" ? 4 : info; });
  for (DType dtype : {DType::f64, DType::f32}) check_svd(random_tensor(dtype, {20, 18}, rng), hooked);
  linalg::set_lapack_status_hook_for_testing(
      *context, [](std::string_view routine, int64_t info) -> int64_t { return routine == "syevd" ? 7 : info; });
  std::string error;
  try {
    run_on(hooked, linalg::LinalgKind::eigh, random_hermitian(DType::f64, 40, {}, rng));
  } catch (const Error& e) {
    error = e.what();
  }
  CHECK(error == "eigh: LAPACK ?syevd did not converge on matrix 0 of the batch (info 7); the input may be badly "
                 "scaled or nearly singular in a way LAPACK cannot resolve");
  linalg::set_lapack_status_hook_for_testing(*context, nullptr);
}
