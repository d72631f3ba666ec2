// Two execution contexts in one process never see each other's configuration, caches or failures (issue 38): each
// context made from its own explicit environment has its own settings (no extra process, no setenv), a JIT failure or
// a JIT switched off on one context leaves the other on its JIT, and replacing the default context moves every
// context-less call (the direct einsum API, dispatch_stats(), default_pool()) onto the new one and back. Results are
// checked against the definitional loop (and, between two contexts on the same kernel, bit for bit) while the
// counters show which kernel, which plan cache or grouped-expansion cache and which allocator each call used.
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Config.h"
#include "runtime/Context.h"
#include "runtime/Runtime.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Dispatch.h"
#include "runtime/jit/JitState.h"
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

using namespace einstage;
namespace es = einstage::einsum;

namespace {

Tensor random_tensor(test::SplitMix64& rng, Shape shape) {
  std::vector<double> v(static_cast<size_t>(element_count(shape)));
  for (double& x : v) x = rng.symmetric();
  return Tensor::from_col_major<double>(std::move(shape), v);
}

bool same_bits(const Tensor& x, const Tensor& y) {
  const Tensor a = x.contiguous(), b = y.contiguous();
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The definitional product of a (m x k) and b (k x n), column-major, to 1e-12 of the sum of |terms|.
bool matches_loop(const Tensor& c, const Tensor& a, const Tensor& b) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const std::vector<double> av = a.to_col_major<double>(), bv = b.to_col_major<double>(), cv = c.to_col_major<double>();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0, scale = 0;
      for (int64_t l = 0; l < k; ++l) {
        sum += av[size_t(i + l * m)] * bv[size_t(l + j * k)];
        scale += std::abs(av[size_t(i + l * m)] * bv[size_t(l + j * k)]);
      }
      if (std::abs(cv[size_t(i + j * m)] - sum) > 1e-12 * scale) return false;
    }
  return true;
}

// A context from an explicit environment (never the process's): kernels kept in memory.
std::shared_ptr<ExecutionContext> context_of(Environment env) {
  return std::make_shared<ExecutionContext>(Config::from(env, ConfigOptions{.kernel_cache_dir = ""}));
}

es::EinsumOptions on(ExecutionContext& context) {
  es::EinsumOptions options;
  options.context = &context;
  return options;
}

struct Operands {
  Tensor a, b;
};
Operands operands() {
  test::SplitMix64 rng(38);
  return {random_tensor(rng, {24, 17}), random_tensor(rng, {17, 9})};
}

}  // namespace

TEST_CASE("context isolation: two contexts from explicit environments keep their own settings and kernels") {
  auto jit = context_of({{"EINSTAGE_NUM_THREADS", "3"}});
  auto portable = context_of({{"EINSTAGE_NUM_THREADS", "1"}, {"EINSTAGE_JIT", "0"}});
  CHECK(jit->threads() == 3);
  CHECK(jit->pool().size() == 3);
  CHECK(portable->threads() == 1);
  CHECK(jit->config().jit);
  CHECK(!portable->config().jit);
  REQUIRE(jit_enabled(*jit));  // ctest runs this suite with the JIT on
  CHECK(!jit_enabled(*portable));

  const Operands x = operands();
  const Tensor on_jit = es::einsum("ij,jk->ik", {x.a, x.b}, on(*jit));
  const Tensor on_portable = es::einsum("ij,jk->ik", {x.a, x.b}, on(*portable));
  CHECK(matches_loop(on_jit, x.a, x.b));
  CHECK(matches_loop(on_portable, x.a, x.b));
  const DispatchStats j = dispatch_stats(*jit), p = dispatch_stats(*portable);
  CHECK(j.jit_calls == 1);
  CHECK(j.portable_calls == 0);
  CHECK(p.jit_calls == 0);
  CHECK(p.portable_calls == 1);
  // Each context's plan cache holds its own plan.
  CHECK(es::einsum_cache_stats(*jit).misses == 1);
  CHECK(es::einsum_cache_stats(*portable).misses == 1);
}

TEST_CASE("context isolation: a JIT failure is the failing context's only") {
  auto failing = context_of({});
  auto healthy = context_of({});
  auto off = context_of({{"EINSTAGE_JIT", "0"}});  // the portable kernel's bits
  auto other = context_of({{"EINSTAGE_NUM_THREADS", "2"}});  // the JIT's bits (the same at every thread count)
  REQUIRE(jit_enabled(*failing));
  failing->jit().fail("test: this context's JIT cannot generate code");  // as contract_on records a runtime error
  CHECK(!jit_enabled(*failing));
  CHECK(jit_enabled(*healthy));
  CHECK(jit_enabled());  // nor the default context

  const Operands x = operands();
  const Tensor after_failure = es::einsum("ij,jk->ik", {x.a, x.b}, on(*failing));
  const Tensor healthy_out = es::einsum("ij,jk->ik", {x.a, x.b}, on(*healthy));
  CHECK(same_bits(after_failure, es::einsum("ij,jk->ik", {x.a, x.b}, on(*off))));
  CHECK(same_bits(healthy_out, es::einsum("ij,jk->ik", {x.a, x.b}, on(*other))));
  CHECK(matches_loop(after_failure, x.a, x.b));
  CHECK(dispatch_stats(*failing).portable_calls == 1);
  CHECK(dispatch_stats(*failing).jit_calls == 0);
  CHECK(dispatch_stats(*healthy).jit_calls == 1);
  CHECK(dispatch_stats(*healthy).portable_calls == 0);
}

TEST_CASE("context isolation: the default context can be replaced and restored") {
  ExecutionContext& builtin = default_context();
  auto own = context_of({{"EINSTAGE_NUM_THREADS", "2"}, {"EINSTAGE_JIT", "0"}});
  const es::EinsumCacheStats builtin_before = es::einsum_cache_stats(builtin);
  const DispatchStats builtin_calls = dispatch_stats(builtin);

  std::shared_ptr<ExecutionContext> previous = set_default_context(own);
  CHECK(previous.get() == &builtin);
  CHECK(&default_context() == own.get());
  CHECK(default_context().threads() == 2);
  CHECK(&default_pool() == &own->pool());
  CHECK(!jit_enabled());

  const Operands x = operands();
  const Tensor context_less = es::einsum("ij,jk->ik", {x.a, x.b});  // no context given: the installed default
  CHECK(dispatch_stats().portable_calls == 1);
  CHECK(dispatch_stats(*own).portable_calls == 1);
  CHECK(es::einsum_cache_stats().misses == 1);

  // A Runtime made at the default thread count shares the installed default and keeps it alive after it is replaced.
  Runtime runtime;
  CHECK(&runtime.context() == own.get());

  std::shared_ptr<ExecutionContext> replaced = set_default_context(nullptr);
  CHECK(replaced == own);
  CHECK(own.use_count() == 3);  // own, replaced and the Runtime's handle
  CHECK(&default_context() == &builtin);
  // The built-in default saw none of it: neither the plan nor the contraction.
  CHECK(es::einsum_cache_stats(builtin).misses == builtin_before.misses);
  CHECK(dispatch_stats(builtin).portable_calls == builtin_calls.portable_calls);
  CHECK(dispatch_stats(builtin).jit_calls == builtin_calls.jit_calls);
  CHECK(matches_loop(context_less, x.a, x.b));
}

TEST_CASE("context isolation: each context expands grouped subscripts in its own cache") {
  auto first = context_of({});
  auto second = context_of({{"EINSTAGE_JIT", "0"}});
  ExecutionContext& builtin = default_context();
  const es::GroupedCacheStats builtin_before = es::grouped_cache(builtin)->stats();
  const Operands x = operands();
  const std::vector<es::TensorMeta> metas{es::TensorMeta::of(x.a), es::TensorMeta::of(x.b)};
  const std::vector<Tensor> ops{x.a, x.b};
  // "Wa,ab->Wb" with rank-2 operands: W is one axis, so this is the matrix product.
  const es::EinsumPlan p1 = es::EinsumPlan::prepare_grouped("Wa,ab->Wb", metas, {}, on(*first));
  const es::EinsumPlan p2 = es::EinsumPlan::prepare_grouped("Wa,ab->Wb", metas, {}, on(*first));
  es::GroupedCacheStats f = es::grouped_cache(*first)->stats();
  CHECK(f.misses == 1);
  CHECK(f.hits == 1);
  CHECK(f.entries == 1);
  CHECK(es::grouped_cache(*second)->stats().entries == 0);  // a context made later starts empty

  const es::EinsumPlan q = es::EinsumPlan::prepare_grouped(" Wa , ab -> Wb ", metas, {}, on(*second));
  es::GroupedCacheStats s = es::grouped_cache(*second)->stats();
  CHECK(s.misses == 1);
  CHECK(s.hits == 0);
  CHECK(s.entries == 1);
  f = es::grouped_cache(*first)->stats();
  CHECK(f.misses == 1);  // the second context's miss did not reach the first one's cache
  CHECK(f.hits == 1);

  es::grouped_cache(*first)->clear();
  CHECK(es::grouped_cache(*first)->stats().entries == 0);
  CHECK(es::grouped_cache(*second)->stats().entries == 1);  // clearing one context's cache leaves the other's
  CHECK(es::grouped_cache(*second)->stats().misses == 1);

  const es::GroupedCacheStats builtin_after = es::grouped_cache(builtin)->stats();
  CHECK(builtin_after.misses == builtin_before.misses);  // nor did the default context see any of it
  CHECK(builtin_after.hits == builtin_before.hits);

  CHECK(matches_loop(p1.execute(ops, *first), x.a, x.b));
  CHECK(matches_loop(q.execute(ops, *second), x.a, x.b));
  CHECK(same_bits(p1.execute(ops, *first), p2.execute(ops, *first)));

  // Context-less calls expand in the installed default's cache.
  std::shared_ptr<ExecutionContext> previous = set_default_context(second);
  CHECK(previous.get() == &builtin);
  const Tensor context_less = es::einsum_grouped(" Wa , ab -> Wb ", ops);
  CHECK(es::grouped_cache(*second)->stats().hits == 1);
  set_default_context(nullptr);
  CHECK(&default_context() == &builtin);
  CHECK(es::grouped_cache(builtin)->stats().misses == builtin_before.misses);
  CHECK(matches_loop(context_less, x.a, x.b));
}

TEST_CASE("context isolation: a prepared plan counts its own geometry versions, on any context") {
  // A prepared plan belongs to no context: one plan runs on two contexts while its operand's strides alternate, so
  // each step's in-place problem changes geometry on every call. The version that tells the step's kernel handle a
  // geometry is new is the step's own count (no process-wide counter); a stale version would run the previous
  // layout's kernel on these strides and miss the loop.
  auto first = context_of({});
  auto second = context_of({{"EINSTAGE_NUM_THREADS", "2"}});
  test::SplitMix64 rng(3801);
  const Tensor a = random_tensor(rng, {24, 17});
  const Tensor b_view = random_tensor(rng, {9, 17}).transpose();  // 17 x 9, row-major strides
  const Tensor b_dense = b_view.contiguous();
  const std::vector<es::TensorMeta> metas{es::TensorMeta::of(a), es::TensorMeta::of(b_dense)};
  const es::EinsumPlan plan = es::EinsumPlan::prepare("ij,jk->ik", metas);
  const std::vector<Tensor> dense{a, b_dense}, strided{a, b_view};
  const Tensor dense_once = plan.execute(dense, *first), strided_once = plan.execute(strided, *first);
  CHECK(matches_loop(dense_once, a, b_dense));
  CHECK(matches_loop(strided_once, a, b_dense));
  for (int round = 0; round < 3; ++round)
    for (ExecutionContext* context : {first.get(), second.get()}) {
      CHECK(same_bits(plan.execute(dense, *context), dense_once));
      CHECK(same_bits(plan.execute(strided, *context), strided_once));
    }
  CHECK(dispatch_stats(*first).jit_calls == 2 + 6);
  CHECK(dispatch_stats(*second).jit_calls == 6);
}

TEST_CASE("context isolation: tensors made without an allocator come from the default context's") {
  ExecutionContext& builtin = default_context();
  CHECK(&ScratchAllocator::process_default() == &builtin.scratch());
  CHECK(&ScratchAllocator::process_default() == &ScratchAllocator::builtin_default());
  auto own = context_of({{"EINSTAGE_TENSOR_CACHE_MB", "64"}});
  constexpr int64_t kElements = int64_t(1) << 20;  // 8 MiB of f64: a large block, kept when it comes back

  std::shared_ptr<ExecutionContext> previous = set_default_context(own);
  CHECK(previous.get() == &builtin);
  CHECK(&ScratchAllocator::process_default() == &own->scratch());  // one default allocator: the installed context's
  const ScratchStats builtin_before = builtin.scratch().stats();
  const ScratchStats own_before = own->scratch().stats();
  { const Tensor t = Tensor::empty(DType::f64, {kElements}); }  // freed at once: back to the allocator it came from
  CHECK(own->scratch().stats().fresh + own->scratch().stats().reuses == own_before.fresh + own_before.reuses + 1);
  CHECK(own->scratch().stats().kept_blocks == own_before.kept_blocks + 1);
  const Tensor again = Tensor::empty(DType::f64, {kElements});
  CHECK(own->scratch().stats().reuses == own_before.reuses + 1);  // the kept block, from the same allocator

  set_default_context(nullptr);
  CHECK(&ScratchAllocator::process_default() == &builtin.scratch());
  const ScratchStats builtin_after = builtin.scratch().stats();
  CHECK(builtin_after.fresh == builtin_before.fresh);  // the built-in pool saw none of it
  CHECK(builtin_after.reuses == builtin_before.reuses);
  CHECK(again.nbytes() == size_t(kElements) * 8);
}
