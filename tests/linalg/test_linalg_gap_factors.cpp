// gap_factors (LinalgOp.h), the fused elementwise factors of svd's AD rule: values against the formulas evaluated
// here in long double, with and without the diagonal mask and with batch axes; derivatives against finite
// differences, the dot-product test and transposition (check_derivatives); the type rule's errors. svd's own
// derivatives, which now use it, are checked in test_linalg_ad.cpp and test_linalg_truncated.cpp.
#include "LinalgTestUtil.h"

#include "support/ErrorOf.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::linalg_test;

using linalg::LinalgKind;
using linalg::LinalgPayload;

namespace {

std::vector<Value> gaps(Builder& b, const Value& si, const Value& sj, bool diagonal, double eps) {
  return b.extension_results(std::make_shared<LinalgPayload>(LinalgKind::gap_factors, false, eps, 0, diagonal),
                             {si, sj});
}

TensorType vector_type(DType dtype, const Shape& shape) {
  return TensorType{dtype, std::vector<Dim>(shape.begin(), shape.end())};
}

// Spread-out positive values (singular values), so that finite differences never cross a gap.
Tensor spectrum(DType dtype, const Shape& shape, Rng& rng) {
  std::vector<c128> v(static_cast<size_t>(element_count(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5 + 0.7 * static_cast<double>(i) + 0.2 * rng.uniform();
  return tensor_of(dtype, shape, v);
}

}  // namespace

TEST_CASE("linalg: gap_factors are (F ± G)/2 of the broadened inverse gaps and sums, F's diagonal masked") {
  Rng rng{170};
  for (DType dtype : {DType::f64, DType::f32}) {
    for (bool diagonal : {false, true}) {
      const int64_t ni = 3, nj = diagonal ? 3 : 4;
      const double eps = 0.05;  // large, so the broadening shows
      const Shape batch{2};
      const Tensor si = spectrum(dtype, with_batch({ni}, batch), rng);
      const Tensor sj = diagonal ? si : spectrum(dtype, with_batch({nj}, batch), rng);
      Builder c("gaps", registry());
      const Value vi = c.parameter("si", vector_type(dtype, si.shape()));
      const Value vj = c.parameter("sj", vector_type(dtype, sj.shape()));
      const std::vector<Value> h = gaps(c, vi, diagonal ? vi : vj, diagonal, eps);
      const std::vector<Tensor> out = run(c.finish({h[0], h[1]}), {si, sj});
      REQUIRE(out[0].shape() == Shape{ni, nj, 2});
      const std::vector<c128> a = values(si), b = values(sj), hp = values(out[0]), hm = values(out[1]);
      const double tol = dtype == DType::f32 ? 1e-5 : 1e-14;
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t j = 0; j < nj; ++j)
          for (int64_t i = 0; i < ni; ++i) {
            INFO(fmt::format("{} diagonal {} at ({}, {}) of batch {}, seed 170", name(dtype), diagonal, i, j, k));
            const long double x = a[static_cast<size_t>(k * ni + i)].real();
            const long double y = b[static_cast<size_t>(k * nj + j)].real();
            const long double d = y - x, p = y + x;
            const long double f = diagonal && i == j ? 0 : d / (d * d + eps), g = p / (p * p + eps);
            const size_t at = static_cast<size_t>(k * ni * nj + j * ni + i);
            const double want_p = static_cast<double>((f + g) / 2), want_m = static_cast<double>((f - g) / 2);
            CHECK(std::abs(hp[at].real() - want_p) <= tol * (1 + std::abs(want_p)));
            CHECK(std::abs(hm[at].real() - want_m) <= tol * (1 + std::abs(want_m)));
          }
    }
  }
}

TEST_CASE("linalg ad: gap_factors against finite differences, with and without the diagonal mask") {
  Rng rng{171};
  for (const Shape& batch : {Shape{}, Shape{2}}) {
    {
      Builder c("gaps", registry());
      const Tensor si = spectrum(DType::f64, with_batch({3}, batch), rng);
      const Tensor sj = spectrum(DType::f64, with_batch({4}, batch), rng);
      const Value vi = c.parameter("si", vector_type(DType::f64, si.shape()));
      const Value vj = c.parameter("sj", vector_type(DType::f64, sj.shape()));
      const std::vector<Value> h = gaps(c, vi, vj, false, 1e-3);
      check_derivatives(c.finish({h[0], h[1]}), {0, 1}, {si, sj}, rng, loose(DType::f64),
                        fmt::format("s_I [3], s_J [4], batch {}, seed 171", batch.size()));
    }
    {
      Builder c("gaps", registry());
      const Tensor s = spectrum(DType::f64, with_batch({4}, batch), rng);
      const Value v = c.parameter("s", vector_type(DType::f64, s.shape()));
      const std::vector<Value> h = gaps(c, v, v, true, 1e-3);
      check_derivatives(c.finish({h[0], h[1]}), {0}, {s}, rng, loose(DType::f64),
                        fmt::format("s [4] against itself, diagonal, batch {}, seed 171", batch.size()));
    }
  }
}

TEST_CASE("linalg: gap_factors' type rule names the operand") {
  auto emit = [](std::vector<TensorType> types, bool diagonal) {
    return test::error_of([&] {
      Builder c("gaps", registry());
      std::vector<Value> ops;
      for (size_t i = 0; i < types.size(); ++i) ops.push_back(c.parameter(fmt::format("s{}", i), types[i]));
      c.extension_results(std::make_shared<LinalgPayload>(LinalgKind::gap_factors, false, 1e-12, 0, diagonal), ops);
    });
  };
  const TensorType v3{DType::f64, {Dim(3)}}, v4{DType::f64, {Dim(4)}}, c3{DType::c128, {Dim(3)}};
  CHECK(emit({v3}, false).find("gap_factors takes 2 operands") != std::string::npos);
  CHECK(emit({c3, c3}, false).find("gap_factors: operand 0 has type c128[3]; expected f32 or f64") !=
        std::string::npos);
  CHECK(emit({v3, v4}, true).find("gap_factors with diagonal = true: operand 0's axis 0 vs operand 1's axis 0") !=
        std::string::npos);
  CHECK(emit({v3, v4}, false) == "<no error>");
  CHECK(LinalgPayload(LinalgKind::gap_factors, false, 1e-12, 0, true).to_text() ==
        "diagonal = true, eps = 1e-12, op = gap_factors");
  CHECK(registry()->get(linalg::kLinalgFamily).parse_json(R"({"op":"gap_factors","diagonal":false,"eps":0.5})")
            ->to_text() == "diagonal = false, eps = 0.5, op = gap_factors");
}
