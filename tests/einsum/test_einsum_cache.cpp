// The one-shot plan cache: a hit needs every part of the key to match (subscripts as written, operand dtypes and
// shapes, broadcast permission, plan spec, and which API: string, integer labels or grouped), least recently used
// entries go first, a cached plan gives the same result as a fresh one, and every context has a cache of its own.
#include "support/Random.h"

#include "extensions/einsum/exec/Einsum.h"
#include "runtime/Context.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

Tensor matrix(test::SplitMix64& rng, DType dtype, int64_t rows, int64_t cols) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (double& x : v) x = rng.symmetric();
  Tensor t = Tensor::from_col_major<double>({rows, cols}, v);
  return dtype == DType::f64 ? t : t.astype(dtype);
}

// C = A B by the definitional loop, in f64.
std::vector<double> matmul(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.astype(DType::f64), b64 = b.astype(DType::f64);
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t l = 0; l < k; ++l) c[i + m * j] += a64.at<double>({i, l}) * b64.at<double>({l, j});
  return c;
}

void check_matmul(const Tensor& got, const Tensor& a, const Tensor& b) {
  const std::vector<double> expect = matmul(a, b);
  const std::vector<double> values = got.astype(DType::f64).to_col_major<double>();
  REQUIRE(values.size() == expect.size());
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == doctest::Approx(expect[i]).epsilon(1e-5));
}

es::EinsumOptions on(ExecutionContext& context) {
  es::EinsumOptions options;
  options.context = &context;
  return options;
}

}  // namespace

TEST_CASE("one-shot cache: every part of the key tells plans apart") {
  es::clear_einsum_cache();
  test::SplitMix64 rng{77};
  const Tensor a = matrix(rng, DType::f64, 3, 4), b = matrix(rng, DType::f64, 4, 5);
  const Tensor b32 = matrix(rng, DType::f32, 4, 5), b6 = matrix(rng, DType::f64, 4, 6);
  uint64_t misses = 0, hits = 0;
  auto expect_stats = [&](uint64_t new_misses, uint64_t new_hits) {
    misses += new_misses;
    hits += new_hits;
    const es::EinsumCacheStats s = es::einsum_cache_stats();
    CHECK(s.misses == misses);
    CHECK(s.hits == hits);
  };

  check_matmul(es::einsum("ij,jk->ik", {a, b}), a, b);
  expect_stats(1, 0);
  check_matmul(es::einsum("ij,jk->ik", {a, b}), a, b);
  expect_stats(0, 1);
  // Another dtype, another shape, another spelling of the same einsum: new plans.
  const Tensor mixed = es::einsum("ij,jk->ik", {a, b32});
  CHECK(mixed.dtype() == DType::f64);
  check_matmul(mixed, a, b32);
  expect_stats(1, 0);
  check_matmul(es::einsum("ij,jk->ik", {a, b6}), a, b6);
  expect_stats(1, 0);
  check_matmul(es::einsum("ab,bc->ac", {a, b}), a, b);
  expect_stats(1, 0);
  // Options that change the plan are part of the key.
  es::EinsumOptions broadcast;
  broadcast.allow_broadcast = true;
  check_matmul(es::einsum("ij,jk->ik", {a, b}, broadcast), a, b);
  expect_stats(1, 0);
  es::EinsumOptions greedy;
  greedy.plan = es::PlanSpec::greedy_plan();
  check_matmul(es::einsum("ij,jk->ik", {a, b}, greedy), a, b);
  expect_stats(1, 0);
  check_matmul(es::einsum("ij,jk->ik", {a, b}, greedy), a, b);
  expect_stats(0, 1);
  // The thread count does not change the plan: the same entry.
  es::EinsumOptions two_threads;
  two_threads.threads = 2;
  check_matmul(es::einsum("ij,jk->ik", {a, b}, two_threads), a, b);
  expect_stats(0, 1);
  // cached_plan() shares the one-shot entries.
  const std::vector<es::TensorMeta> metas = {es::TensorMeta::of(a), es::TensorMeta::of(b)};
  const es::EinsumPlan plan = es::cached_plan("ij,jk->ik", metas);
  expect_stats(0, 1);
  check_matmul(plan.execute(std::vector<Tensor>{a, b}), a, b);
  // The integer-label and grouped APIs have entries of their own, even for the same text.
  const es::Subscripts labels = es::make_subscripts({{0, 1}, {1, 2}}, {0, 2});
  const std::vector<Tensor> ops{a, b};
  check_matmul(es::einsum(labels, ops), a, b);
  expect_stats(1, 0);
  check_matmul(es::einsum(labels, ops), a, b);
  expect_stats(0, 1);
  check_matmul(es::einsum_grouped("ij,jk->ik", ops), a, b);
  expect_stats(1, 0);
  check_matmul(es::einsum_grouped("ij,jk->ik", ops), a, b);
  expect_stats(0, 1);
  CHECK(es::einsum_cache_stats().entries == 8);
}

TEST_CASE("one-shot cache: the least recently used plan is evicted first") {
  es::clear_einsum_cache();
  es::set_einsum_cache_capacity(2);
  test::SplitMix64 rng{78};
  const Tensor a = matrix(rng, DType::f64, 2, 3), b = matrix(rng, DType::f64, 3, 2);
  es::einsum("ij,jk->ik", {a, b});  // A
  es::einsum("ij,ji->", {a, b});    // B
  es::einsum("ij,jk->ik", {a, b});  // A again: B is now the oldest
  es::einsum("ij,jk->ki", {a, b});  // C evicts B
  CHECK(es::einsum_cache_stats().entries == 2);
  const uint64_t misses = es::einsum_cache_stats().misses;
  es::einsum("ij,jk->ik", {a, b});  // A: hit
  es::einsum("ij,jk->ki", {a, b});  // C: hit
  CHECK(es::einsum_cache_stats().misses == misses);
  es::einsum("ij,ji->", {a, b});  // B: a miss again
  CHECK(es::einsum_cache_stats().misses == misses + 1);
  CHECK(es::einsum_cache_stats().entries == 2);
  es::set_einsum_cache_capacity(0);  // no caching at all
  CHECK(es::einsum_cache_stats().entries == 0);
  es::einsum("ij,jk->ik", {a, b});
  CHECK(es::einsum_cache_stats().entries == 0);
  es::set_einsum_cache_capacity(256);
}

TEST_CASE("one-shot cache: each context has its own; the same inputs give the same plan and bits in every one") {
  es::clear_einsum_cache();
  test::SplitMix64 rng{79};
  const Tensor a = matrix(rng, DType::f64, 6, 7), b = matrix(rng, DType::f64, 7, 5), c = matrix(rng, DType::f64, 5, 4);
  ExecutionContext one(ConfigOptions{.threads = 1}), two(ConfigOptions{.threads = 2});
  const Tensor on_default = es::einsum("ij,jk,kl->il", {a, b, c});
  const Tensor on_one = es::einsum("ij,jk,kl->il", {a, b, c}, on(one));
  const Tensor on_two = es::einsum("ij,jk,kl->il", {a, b, c}, on(two));
  es::einsum("ij,jk,kl->il", {a, b, c}, on(two));
  CHECK(es::einsum_cache_stats().misses == 1);
  CHECK(es::einsum_cache_stats().hits == 0);
  CHECK(es::einsum_cache_stats(one).misses == 1);
  CHECK(es::einsum_cache_stats(one).entries == 1);
  CHECK(es::einsum_cache_stats(two).misses == 1);
  CHECK(es::einsum_cache_stats(two).hits == 1);
  const std::vector<es::TensorMeta> metas = {es::TensorMeta::of(a), es::TensorMeta::of(b), es::TensorMeta::of(c)};
  CHECK(es::cached_plan("ij,jk,kl->il", metas, on(one)).to_string() ==
        es::cached_plan("ij,jk,kl->il", metas).to_string());
  CHECK(std::memcmp(on_one.raw_data(), on_default.raw_data(), 24 * sizeof(double)) == 0);
  CHECK(std::memcmp(on_two.raw_data(), on_default.raw_data(), 24 * sizeof(double)) == 0);
  es::clear_einsum_cache(one);
  CHECK(es::einsum_cache_stats(one).entries == 0);
  CHECK(es::einsum_cache_stats(two).entries == 1);
  es::set_einsum_cache_capacity(0, two);
  CHECK(es::einsum_cache_stats(two).entries == 0);
  CHECK(es::einsum_cache_stats().entries == 1);
}
