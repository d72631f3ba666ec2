// The JIT's outer-product mode (runtime/jit/GettOuter.h): C[i, j] = A[i] B[j] with no contracted axis, C overwritten
// and at least a quarter of L2, written by columns with ordinary stores or, when the problem's stream_c is set, with
// streaming ones. Against the definitional loop (each element fma(A[i], B[j], 0), the direct kernels' value for
// k = 1, so a product of -0 is +0) bit for bit, against the packed path (direct = false) bit for bit, and the same
// bits streamed or not, at 1 and 2 threads and through a GettPlan; rows not a multiple of the vector width, C's
// columns apart by more than the rows and C not 64-byte aligned (heads and tails of ordinary stores). Products that
// accumulate, contract an axis or are small stay on the other paths.
#include "ProblemGen.h"

#include "ir/Scratch.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Blocking.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace einstage;
using namespace einstage::testing;

namespace {

// i,j->ij over its own buffers: A's rows start `shift` elements into its buffer and C's columns are `ld` apart,
// C starting `shift` elements into its buffer (so neither is 64-byte aligned when shift is not a multiple of the
// vector width). Values are seeded, with some exact zeros of either sign (fma(-0, x, +0) is +0, -0 * x is -0).
template <typename T>
struct OuterCase {
  int64_t m = 0, n = 0, ld = 0, shift = 0;
  std::vector<T> a, b, c;
  ContractionProblem p;

  OuterCase(int64_t rows, int64_t cols, int64_t ld_c, int64_t shift_elements, uint64_t seed)
      : m(rows), n(cols), ld(ld_c), shift(shift_elements) {
    SplitMix64 rng(seed);
    a.resize(size_t(m + shift));
    b.resize(size_t(n));
    c.assign(size_t(shift + ld * n), T(7));  // poison: every element of C is written
    for (T& x : a) x = T(rng.uniform());
    for (T& x : b) x = T(rng.uniform());
    for (int64_t i = shift; i < m + shift; i += 29) a[size_t(i)] = (i % 2) ? T(-0.0) : T(0.0);
    for (int64_t j = 0; j < n; j += 31) b[size_t(j)] = (j % 2) ? T(-0.0) : T(0.0);
    p.dtype = dtype_v<T>;
    p.m = {{m, 1, 0, 1}};
    p.n = {{n, 0, 1, ld}};
    p.a = a.data() + shift;
    p.b = b.data();
    p.c = c.data() + shift;
  }
  // C's bytes from a fresh poisoned buffer after `run`.
  template <typename Run> std::vector<T> after(Run run) {
    std::fill(c.begin(), c.end(), T(7));
    run(p);
    return c;
  }
  std::vector<T> definitional() const {
    std::vector<T> want(size_t(shift + ld * n), T(7));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) want[size_t(shift + i + j * ld)] = std::fma(a[size_t(shift + i)], b[size_t(j)], T(0));
    return want;
  }
};

template <typename T> bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// Enough columns of m rows for C to reach a quarter of this host's L2 (the mode's threshold), plus a few.
int64_t columns_for_mode(int64_t m, size_t elt) {
  const int64_t bytes = host_cache_info().l2 / 4;
  return (bytes + m * int64_t(elt) - 1) / (m * int64_t(elt)) + 3;
}

}  // namespace

TEST_CASE_TEMPLATE("jit gett: large outer products, streamed or not, give the definitional fma(a, b, 0) bits", T,
                   float, double) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;  // no outer mode on this CPU
  ThreadPool two(2);
  for (auto [m, extra_ld, shift] : {std::tuple{256, 0, 0}, std::tuple{257, 0, 1}, std::tuple{299, 5, 3},
                                    std::tuple{64, 1, 2}, std::tuple{1000, 0, 0}}) {
    const int64_t n = columns_for_mode(m, sizeof(T));
    const uint64_t seed = uint64_t(m * 131 + extra_ld * 7 + shift);
    INFO("m " << m << " n " << n << " ld " << m + extra_ld << " shift " << shift << " seed " << seed);
    OuterCase<T> o(m, n, m + extra_ld, shift, seed);
    REQUIRE(runs_as_streamed_outer(o.p));
    DirectSchedule schedule;
    CHECK_FALSE(direct_schedule(o.p, memory_cache().host().has_avx512, schedule));  // not specialised
    const std::vector<T> want = o.definitional();
    CHECK(same_bits(o.after([](const ContractionProblem& p) { contract_jit(p, nullptr, &memory_cache()); }), want));
    // The packed path (no outer mode) sums the one k step the same way: fma from a zero accumulator.
    CHECK(same_bits(o.after([](const ContractionProblem& p) {
                      contract_jit(p, nullptr, &memory_cache(), nullptr, nullptr, /*direct=*/false);
                    }),
                    want));
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two})
      for (bool stream : {false, true}) {
        INFO((pool ? "2 threads" : "1 thread") << (stream ? ", streamed" : ", ordinary stores"));
        auto hinted = [stream](ContractionProblem p) {
          p.stream_c = stream;
          return p;
        };
        CHECK(same_bits(o.after([&](const ContractionProblem& p) { contract_jit(hinted(p), pool, &memory_cache()); }),
                        want));
        GettPlan plan(o.p, memory_cache(), ScratchAllocator::process_default(), true);
        CHECK(same_bits(o.after([&](const ContractionProblem& p) { plan.run(hinted(p), pool); }), want));
      }
  }
}

TEST_CASE("jit gett: products outside the outer mode stay on the other paths; stream_c is no part of the geometry") {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
  const int64_t m = 256, n = columns_for_mode(m, sizeof(double));
  OuterCase<double> o(m, n, m, 0, 11);
  REQUIRE(runs_as_streamed_outer(o.p));
  ContractionProblem accumulate = o.p;
  accumulate.accumulate = true;
  CHECK_FALSE(runs_as_streamed_outer(accumulate));
  ContractionProblem small = o.p;
  small.n[0].extent = 8;  // C far below a quarter of L2
  CHECK_FALSE(runs_as_streamed_outer(small));
  OwnedProblem contracted = matmul_problem(m, n, 2, 1, DType::f64, false, 12);
  CHECK_FALSE(runs_as_streamed_outer(contracted.p));
  OwnedProblem complex = matmul_problem(m, n, 1, 1, DType::c128, false, 13);
  CHECK_FALSE(runs_as_streamed_outer(complex.p));
  // Accumulating into a streamed C adds to what the streamed call wrote (the ordinary path's c + fma(a, b, 0)).
  ContractionProblem streamed = o.p;
  streamed.stream_c = true;
  contract_jit(streamed, nullptr, &memory_cache());
  contract_jit(accumulate, nullptr, &memory_cache());
  std::vector<double> twice = o.definitional();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) twice[size_t(i + j * m)] += twice[size_t(i + j * m)];
  CHECK(same_bits(o.c, twice));
  // The hint does not change the geometry: a plan made without it serves a problem with it, and the other way round.
  CHECK(same_geometry(o.p, streamed));
  GettPlan plan(o.p, memory_cache(), ScratchAllocator::process_default(), true);
  CHECK(plan.matches(streamed, true));
}
