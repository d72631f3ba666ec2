// eigh with keep = k (LinalgOp.h): all N eigenvalues and only the eigenvectors of the k of largest modulus, W's
// first a and last b columns. Checked against the full eigh of the same matrix (the kept columns are its columns
// to rounding, W is its W bit for bit), against an independent selection (the k largest moduli by sorting), against
// A v = λ v, on spectra with multiplets at the cut, in f32 / f64 (the staged driver) and c64 / c128 (?heevd), a
// large single matrix at 1, 2 and 3 threads, and the messages of bad attributes, shapes and derivatives.
#include "LinalgTestUtil.h"

#include "compiler/ad/Ad.h"
#include "extensions/linalg/Module.h"
#include "support/ErrorOf.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

using namespace einstage;
using namespace einstage::linalg_test;
using einstage::test::error_of;

namespace {

std::vector<Tensor> eigh_on(Runtime& rt, const Tensor& a, int64_t keep) {
  Builder b("op", &rt.registry());
  Value x = b.parameter("a", {a.dtype(), std::vector<Dim>(a.shape().begin(), a.shape().end())});
  auto payload = std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::eigh, false, linalg::kDefaultEps, keep);
  return rt.prepare(b.finish(b.extension_results(payload, {x}))).run({a});
}

// The positions of the k eigenvalues of largest modulus, by a stable sort of the moduli (ties: lower position), in
// ascending order: an independent statement of the selection. Where a multiplet is cut the op may take other
// members of it (from the upper end), so the caller compares eigenvalues, not positions, there.
std::vector<int64_t> largest_moduli(const std::vector<c128>& w, int64_t k) {
  std::vector<int64_t> order(w.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t i, int64_t j) { return std::abs(w[size_t(i)].real()) > std::abs(w[size_t(j)].real()); });
  order.resize(size_t(k));
  std::sort(order.begin(), order.end());
  return order;
}

// eigh with keep = k of matrix `a` against the full eigh on `rt`: W the same bits; V [N, k]; its columns the full
// V's columns 0..a-1 and N-b..N-1 to rounding (the same tridiagonal eigenvectors and reflectors; GEMMs over fewer
// columns may round differently), whose eigenvalues are those of the k largest moduli (the same multiset);
// A v = λ v and orthonormal to the dtype's precision.
void check_keep(const Tensor& a, int64_t k, Runtime& rt) {
  const int64_t n = a.extent(0);
  CAPTURE(n);
  CAPTURE(k);
  const std::vector<Tensor> full = eigh_on(rt, a, 0), kept = eigh_on(rt, a, k);
  REQUIRE(kept[1].shape() == Shape{n, k});
  CHECK(same_bits(full[0], kept[0]));
  const std::vector<c128> w = vector_of(full[0], 0);
  const Mat vf = matrix(full[1], 0), vk = matrix(kept[1], 0);
  const double tol = decomposition_tolerance(a.dtype());
  // The columns of the full V that match the kept ones: a prefix and a suffix.
  auto matches = [&](int64_t c, int64_t full_column) {
    double diff = 0;
    for (int64_t i = 0; i < n; ++i) diff = std::max(diff, std::abs(vk[size_t(i)][size_t(c)] - vf[size_t(i)][size_t(full_column)]));
    return diff <= tol;
  };
  int64_t lower = 0;
  while (lower < k && matches(lower, lower)) ++lower;
  std::vector<int64_t> picked;
  for (int64_t c = 0; c < k; ++c) picked.push_back(c < lower ? c : n - k + c);
  for (int64_t c = lower; c < k; ++c) CHECK(matches(c, picked[size_t(c)]));
  std::vector<double> got, want;
  for (int64_t p : picked) got.push_back(w[size_t(p)].real());
  for (int64_t p : largest_moduli(w, k)) want.push_back(w[size_t(p)].real());
  CHECK(got == want);
  // A v = λ v for the kept pairs, and orthonormal columns.
  std::vector<c128> kept_w;
  for (double x : got) kept_w.push_back(x);
  const Mat am = matrix(a, 0);
  CHECK(frobenius(minus(product(am, vk), scale_columns(vk, kept_w))) <=
        tol * static_cast<double>(n) * std::max(frobenius(am), 1e-300));
  CHECK(orthonormality_error(vk) <= tol * static_cast<double>(n));
}

// Q diag(spectrum) Qᴴ for a random orthogonal (unitary) Q: a Hermitian matrix with a chosen spectrum.
Tensor with_spectrum(DType dtype, const std::vector<double>& spectrum, Rng& rng) {
  const int64_t n = int64_t(spectrum.size());
  Mat x = matrix(random_tensor(dtype, {n, n}, rng), 0);
  // Gram-Schmidt, twice.
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < j; ++p) {
        c128 dot = 0;
        for (int64_t i = 0; i < n; ++i) dot += std::conj(x[size_t(i)][size_t(p)]) * x[size_t(i)][size_t(j)];
        for (int64_t i = 0; i < n; ++i) x[size_t(i)][size_t(j)] -= dot * x[size_t(i)][size_t(p)];
      }
      double norm = 0;
      for (int64_t i = 0; i < n; ++i) norm += std::norm(x[size_t(i)][size_t(j)]);
      for (int64_t i = 0; i < n; ++i) x[size_t(i)][size_t(j)] /= std::sqrt(norm);
    }
  std::vector<c128> d(spectrum.begin(), spectrum.end());
  Mat h = product(scale_columns(x, d), adjoint(x));
  std::vector<c128> v;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i)
      v.push_back(i == j ? c128(h[size_t(i)][size_t(j)].real()) : (h[size_t(i)][size_t(j)] + std::conj(h[size_t(j)][size_t(i)])) / 2.0);
  return tensor_of(dtype, {n, n}, v);
}

}  // namespace

TEST_CASE("linalg eigh keep: the kept eigenpairs are the full eigh's, of the largest moduli, in every dtype") {
  const uint64_t seed = 3701;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::f32, DType::c128, DType::c64}) {
    CAPTURE(name(dtype));
    for (int64_t n : {1, 2, 7, 40, 130}) {
      const Tensor a = random_hermitian(dtype, n, {}, rng);
      for (int64_t k : {int64_t(1), std::max<int64_t>(1, n / 3), n}) check_keep(a, k, runtime_with_threads(1));
    }
  }
}

TEST_CASE("linalg eigh keep: multiplets at the cut, a spectrum like a corner transfer matrix's, a zero matrix") {
  const uint64_t seed = 3702;
  INFO("seed ", seed);
  Rng rng{seed};
  for (DType dtype : {DType::f64, DType::c128}) {
    CAPTURE(name(dtype));
    // Pairs ±λ and a threefold multiplet: every cut through them.
    const std::vector<double> spectrum{-3, 3, 2, 2, 2, -1, 1, 0.5, -0.25, 0.125, 0.0625, 1e-9};
    const Tensor a = with_spectrum(dtype, spectrum, rng);
    for (int64_t k = 1; k <= int64_t(spectrum.size()); ++k) check_keep(a, k, runtime_with_threads(1));
    // Exponentially decaying moduli of both signs (what CTMRG truncates), cut at 54 of 200.
    std::vector<double> ctm;
    for (int i = 0; i < 200; ++i) ctm.push_back((i % 2 ? -1.0 : 1.0) * std::exp(-i / 15.0));
    check_keep(with_spectrum(dtype, ctm, rng), 54, runtime_with_threads(1));
    check_keep(Tensor::zeros(dtype, {20, 20}), 5, runtime_with_threads(1));
  }
}

TEST_CASE("linalg eigh keep: a large single matrix (third stage on the pool) gives the same bits at 1, 2 and 3 "
          "threads") {
  const uint64_t seed = 3703;
  INFO("seed ", seed);
  Rng rng{seed};
  const Tensor a = random_hermitian(DType::f64, 520, {}, rng);
  check_keep(a, 60, runtime_with_threads(2));
  const std::vector<Tensor> one = eigh_on(runtime_with_threads(1), a, 60);
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    const std::vector<Tensor> other = eigh_on(runtime_with_threads(threads), a, 60);
    CHECK(same_bits(one[0], other[0]));
    CHECK(same_bits(one[1], other[1]));
  }
  // A batch: each matrix on one thread of the pool, the same bits as alone.
  const Tensor batch = random_hermitian(DType::f64, 30, {3}, rng);
  const std::vector<Tensor> together = eigh_on(runtime_with_threads(2), batch, 4);
  REQUIRE(together[1].shape() == Shape{30, 4, 3});
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<Tensor> alone = eigh_on(runtime_with_threads(1), batch.slice(2, b, b + 1).contiguous(), 4);
    CHECK(same_bits(alone[1], together[1].slice(2, b, b + 1).contiguous()));
  }
}

TEST_CASE("linalg eigh keep: text form, bad attributes and shapes, and no derivative") {
  const ExtensionSemantics& family = registry()->get(linalg::kLinalgFamily);
  CHECK(family.parse_text("keep = 3, op = eigh")->to_text() == "eps = 1e-12, keep = 3, op = eigh");
  CHECK(family.parse_json(R"({"op":"eigh","keep":3})")->to_text() == "eps = 1e-12, keep = 3, op = eigh");
  CHECK(error_of([&] { family.parse_text("keep = 0, op = eigh"); }) ==
        "'einstage.linalg.v1' attribute 'keep' must be at least 1 (got 0); leave it out for the unsplit eigh");
  auto type_error = [](int64_t keep, TensorType type) {
    return error_of([&] {
      Builder e("bad", registry());
      Value v = e.parameter("a", std::move(type));
      e.extension_results(std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::eigh, false, 1e-12, keep), {v});
    });
  };
  CHECK(type_error(5, {DType::f64, {4, 4}}) ==
        "'einstage.linalg.v1' at %0 in @bad: eigh with keep = 5: operand 0 has type f64[4,4] with 4 eigenvalues; "
        "keep must be at most that (leave keep out for all eigenvectors)");
  CHECK(type_error(2, {DType::f64, {Dim::symbol("n"), Dim::symbol("n")}}) ==
        "'einstage.linalg.v1' at %0 in @bad: eigh with keep = 2: operand 0 has type f64[n,n]; keep needs a constant "
        "matrix extent");
  // Differentiating through it is an error naming the fix; under stop_gradient it differentiates (to zero).
  auto program = [](bool stopped) {
    Builder b("f", registry());
    Value x = b.parameter("a", {DType::f64, {6, 6}});
    Value in = stopped ? b.stop_gradient(x) : x;
    auto payload = std::make_shared<linalg::LinalgPayload>(linalg::LinalgKind::eigh, false, 1e-12, 2);
    std::vector<Value> f = b.extension_results(payload, {in});
    return b.finish({b.reduce_sum(b.mul(f[1], f[1]), {0, 1})});
  };
  CHECK(error_of([&] { ad::grad(program(false), {0}, registry()); }) ==
        "eigh with keep = 2: operand 0 (f64[6,6]) has a tangent, but only 2 of its 6 eigenvectors are computed and "
        "eigh's derivative needs all of them; differentiate the full eigh (leave keep out) or put the operand under "
        "stop_gradient");
  CHECK_NOTHROW(ad::grad(program(true), {0}, registry()));
}
