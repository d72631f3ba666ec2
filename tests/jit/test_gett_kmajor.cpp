// The k-major direct tiles (MicroKernel.h: kmajor_a): small problems whose A rows are not contiguous but whose
// inner k axis is (a row-major i,k; the grid gradients' reverse steps such as denr,dnbq->ebrq). Seeded random layouts
// against the definitional oracle, bitwise against the packed path (the tiles sum k in the same order), at 1 and 2
// threads, as shape-specialised kernels, and with the AVX2 variants (compiled for haswell) where this CPU runs them.
#include "ProblemGen.h"

#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <string>

using namespace einstage;
using namespace einstage::testing;

namespace {

using Axis = ContractionProblem::Axis;

// Strides for `axes` laid out contiguously in this order (column-major), the first one unit.
void contiguous(std::vector<std::pair<Axis*, int64_t Axis::*>> axes, int64_t& elements) {
  int64_t stride = 1;
  for (auto& [axis, member] : axes) {
    axis->*member = stride;
    stride *= axis->extent;
  }
  elements = stride;
}

// A problem with m = (m1, m2), n = (n1, n2), k = (k1, k2): A stored [k1, (m1, k2, m2 in a random order)] (k-major),
// B [k1, (n1, k2, n2 shuffled)], C [m1, (n1, m2, n2 shuffled)] (rows contiguous in C).
OwnedProblem kmajor_problem(SplitMix64& rng, DType dtype, int64_t lanes, bool accumulate) {
  OwnedProblem op;
  op.p.dtype = dtype;
  op.p.accumulate = accumulate;
  const int64_t m1s[] = {lanes, 2 * lanes, 3, 13};
  const int64_t n1s[] = {8, 9, 16, 21};
  op.p.m = {Axis{m1s[rng.below(4)]}, Axis{1 + rng.below(3)}};
  op.p.n = {Axis{n1s[rng.below(4)]}, Axis{1 + rng.below(2)}};
  // Inner k a multiple of the vector width (the tiles' case) or, one time in four, not (another path).
  op.p.k = {Axis{rng.below(4) == 0 ? lanes + 3 : lanes * (1 + rng.below(2))}, Axis{1 + rng.below(3)}};
  auto shuffled = [&](std::vector<std::pair<Axis*, int64_t Axis::*>> v) {
    for (size_t i = v.size(); i > 2; --i) std::swap(v[i - 1], v[1 + static_cast<size_t>(rng.below(int64_t(i) - 1))]);
    return v;
  };
  ContractionProblem& p = op.p;
  contiguous(shuffled({{&p.k[0], &Axis::stride_a}, {&p.m[0], &Axis::stride_a}, {&p.k[1], &Axis::stride_a},
                       {&p.m[1], &Axis::stride_a}}),
             op.a.elements);
  contiguous(shuffled({{&p.k[0], &Axis::stride_b}, {&p.n[0], &Axis::stride_b}, {&p.k[1], &Axis::stride_b},
                       {&p.n[1], &Axis::stride_b}}),
             op.b.elements);
  contiguous(shuffled({{&p.m[0], &Axis::stride_c}, {&p.n[0], &Axis::stride_c}, {&p.m[1], &Axis::stride_c},
                       {&p.n[1], &Axis::stride_c}}),
             op.c.elements);
  dispatch_dtype(dtype, [&](auto zero) { allocate_and_fill<decltype(zero)>(op, rng); });
  return op;
}

// The grid gradient's step denr,dnbq->ebrq at bond `d`: m = (e, r), n = (b, q), k = (d, n); A = denr, B = dnbq,
// C = ebrq, all column-major.
OwnedProblem grid_step(DType dtype, int64_t d, uint64_t seed) {
  OwnedProblem op;
  op.p.dtype = dtype;
  const int64_t d2 = d * d, d3 = d2 * d;
  op.p.m = {Axis{d, d, 0, 1}, Axis{d, d3, 0, d}};
  op.p.n = {Axis{d, 0, d2, d2}, Axis{d, 0, d3, d3}};
  op.p.k = {Axis{d, 1, 1, 0}, Axis{d, d2, d, 0}};
  op.a.elements = op.b.elements = op.c.elements = d3 * d;
  SplitMix64 rng(seed);
  dispatch_dtype(dtype, [&](auto zero) { allocate_and_fill<decltype(zero)>(op, rng); });
  return op;
}

// Runs `op` (filled, unbound) on `cache`'s JIT against the oracle, at 2 threads, on the packed path and as a
// shape-specialised kernel when direct_schedule takes it: all the same bits. Returns whether a k-major tile ran.
template <typename T>
bool check_paths(const OwnedProblem& base, KernelCache& cache, ThreadPool& two) {
  OwnedProblem op = base, threaded = base, packed = base, special = base;
  for (OwnedProblem* x : {&op, &threaded, &packed, &special}) x->bind();
  contract_jit(op.p, nullptr, &cache);
  check_against_oracle<T>(op);
  contract_jit(threaded.p, &two, &cache);
  CHECK(op.c.bytes == threaded.c.bytes);
  const GettBlocking blocking = default_blocking(dtype_v<T>, cache.host().has_avx512);
  contract_jit(packed.p, nullptr, &cache, &blocking);
  CHECK(op.c.bytes == packed.c.bytes);
  DirectSchedule schedule;
  if (!direct_schedule(op.p, cache.host().has_avx512, schedule) || !schedule.kernel.tile.kmajor_a) return false;
  void* fn = cache.compiled_function(schedule.kernel.symbol(), schedule.kernel.describe(),
                                     [&](Jit& jit) { return compile_specialised_kernel(jit, schedule.kernel); });
  REQUIRE(fn != nullptr);
  const size_t es = sizeof(T);
  for (size_t e = 0; e < schedule.batch_a.size(); ++e)
    call_jit(reinterpret_cast<SpecialisedKernelFn>(fn), static_cast<const char*>(special.p.a) + schedule.batch_a[e] * es,
             static_cast<const char*>(special.p.b) + schedule.batch_b[e] * es,
             static_cast<char*>(special.p.c) + schedule.batch_c[e] * es);
  CHECK(op.c.bytes == special.c.bytes);
  return true;
}

template <typename T>
void random_kmajor(KernelCache& cache, uint64_t seed, int count) {
  const int64_t lanes = (cache.host().has_avx512 ? 64 : 32) / int64_t(sizeof(T));
  ThreadPool two(2);
  SplitMix64 rng(seed);
  MESSAGE("seed " << seed << ", " << name(dtype_v<T>) << ", " << lanes << " lanes");
  int kmajor = 0;
  for (int i = 0; i < count; ++i) {
    const OwnedProblem op = kmajor_problem(rng, dtype_v<T>, lanes, i % 3 == 2);
    INFO("seed " << seed << " case " << i);
    kmajor += check_paths<T>(op, cache, two);
  }
  CHECK(kmajor >= count / 4);  // the tiles do run (the rest took another path with the same bits)
}

}  // namespace

TEST_CASE_TEMPLATE("jit gett: k-major A runs on k-major direct tiles with the packed path's bits", T, float, double) {
  random_kmajor<T>(memory_cache(), 20261203, 60);
}

TEST_CASE("jit gett: the grid gradient's k-major step takes a k-major direct tile") {
  ThreadPool two(2);
  for (bool accumulate : {false, true}) {
    OwnedProblem op = grid_step(DType::f64, 8, 77);
    op.p.accumulate = accumulate;
    CHECK(check_paths<double>(op, memory_cache(), two));
    DirectSchedule schedule;
    REQUIRE(direct_schedule(op.p, memory_cache().host().has_avx512, schedule));
    CHECK(schedule.kernel.tile.kmajor_a);
    CHECK(schedule.kernel.k_geometry[5] == 8);  // e's stride in denr: the distance between a tile's rows
    CHECK(schedule.kernel.tile.symbol().rfind("ein_dkt_", 0) == 0);
  }
}

TEST_CASE("jit gett: AVX2 k-major direct tiles (compiled for haswell) agree with the oracle where this CPU runs them") {
  KernelCache cache("", JitTarget{"haswell"});
  REQUIRE_FALSE(cache.host().has_avx512);
  // Compiling needs nothing of this CPU; running needs AVX2 and FMA, which every machine running the suite has.
  for (DType real : {DType::f32, DType::f64})
    for (const MicroKernelChoice& c : direct_kernel_candidates(real, false))
      if (c.spec.kmajor_a) CHECK(reinterpret_cast<void*>(cache.direct_kernel(c.spec)) != nullptr);
  random_kmajor<double>(cache, 20261204, 30);
  random_kmajor<float>(cache, 20261205, 30);
}
