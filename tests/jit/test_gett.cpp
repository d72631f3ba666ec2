// JIT GETT against the definitional oracle and the portable kernel on seeded random problems of every JIT dtype.
#include "ProblemGen.h"

#include "ir/Error.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/GettLoops.h"
#include "runtime/jit/Jit.h"
#include "runtime/jit/KernelCache.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

using namespace einstage;
using namespace einstage::testing;

namespace {

std::string describe(const ContractionProblem& p) {
  std::string s = std::string(name(p.dtype)) + (p.accumulate ? " accumulate" : " overwrite");
  const std::vector<ContractionProblem::Axis>* groups[] = {&p.m, &p.n, &p.k, &p.batch};
  for (int g = 0; g < 4; ++g) {
    s += std::string(" ") + kGroupNames[g] + "[";
    for (const auto& ax : *groups[g])
      s += fmt::format("{}:a{},b{},c{} ", ax.extent, ax.stride_a, ax.stride_b, ax.stride_c);
    s += "]";
  }
  return s;
}

// Runs the filled, unbound problem `op` on the JIT against the oracle, then copies of it on 2 threads and (when
// `packed`) on the packed GEMM path with the default blocking: both must give the same bits.
template <typename T>
void check_jit_paths(OwnedProblem op, ThreadPool& two, bool packed) {
  OwnedProblem threaded = op, reference = op;
  op.bind();
  threaded.bind();
  reference.bind();
  INFO(describe(op.p));
  contract_jit(op.p, nullptr, &memory_cache());
  check_against_oracle<T>(op);
  contract_jit(threaded.p, &two, &memory_cache());
  CHECK(op.c.bytes == threaded.c.bytes);
  if (packed) {
    const GettBlocking blocking = default_blocking(dtype_v<T>, memory_cache().host().has_avx512);
    contract_jit(reference.p, nullptr, &memory_cache(), &blocking);
    CHECK(op.c.bytes == reference.c.bytes);
  }
}

template <typename T>
void random_cases(DType dtype, uint64_t first_seed, int count, const GettBlocking* blocking, bool lane = false) {
  for (uint64_t seed = first_seed; seed < first_seed + uint64_t(count); ++seed) {
    OwnedProblem op = random_problem(seed, dtype, true, lane);
    INFO("seed " << seed << ": " << describe(op.p));
    contract_jit(op.p, nullptr, &memory_cache(), blocking);
    check_against_oracle<T>(op);
    // The portable reference must agree too (within the same tolerance: both are checked against the oracle).
    OwnedProblem portable = random_problem(seed, dtype, true, lane);
    contract_portable(portable.p, nullptr);
    check_against_oracle<T>(portable);
  }
}

// Tiny blocks so that small problems still cross MC, KC and NC block boundaries.
const GettBlocking kTiny{48, 8, 16};

}  // namespace

TEST_CASE_TEMPLATE("jit gett: random problems match the oracle", T, float, double, c64, c128) {
  DType dtype = dtype_v<T>;
  SUBCASE("default blocking") { random_cases<T>(dtype, 1000, 60, nullptr); }
  SUBCASE("tiny blocking") { random_cases<T>(dtype, 5000, 60, &kTiny); }
  // A batch axis with unit stride everywhere: lane kernels for real dtypes, the 1m GEMM path for complex.
  SUBCASE("unit-stride batch axis") { random_cases<T>(dtype, 9000, 40, nullptr, true); }
  SUBCASE("unit-stride batch axis, tiny blocking") { random_cases<T>(dtype, 9500, 40, &kTiny, true); }
}

TEST_CASE_TEMPLATE("jit gett: GEMM shapes crossing the default cache blocks", T, double, float, c128) {
  // Column-major ij,jk->ik with m, n, k beyond one MC / NC / KC block and odd edges.
  for (auto [m, n, k] : {std::tuple{500, 37, 530}, std::tuple{97, 4100, 3}, std::tuple{1, 1, 1000}, std::tuple{13, 9, 1}}) {
    uint64_t seed = uint64_t(m * 1000003 + n * 1009 + k);
    OwnedProblem op = matmul_problem(m, n, k, 1, dtype_v<T>, (m % 2) == 1, seed);
    INFO("seed " << seed << " m " << m << " n " << n << " k " << k);
    contract_jit(op.p, nullptr, &memory_cache());
    check_against_oracle<T>(op);
  }
}

TEST_CASE("jit gett: bitwise identical at 1 and 2 threads") {
  ThreadPool one(1), two(2);
  for (DType dtype : {DType::f64, DType::f32, DType::c64, DType::c128}) {
    for (uint64_t seed = 77; seed < 97; ++seed) {
      bool lane = seed % 2 == 0;
      OwnedProblem serial = random_problem(seed, dtype, false, lane);
      OwnedProblem single = random_problem(seed, dtype, false, lane);
      OwnedProblem dual = random_problem(seed, dtype, false, lane);
      INFO("seed " << seed << ": " << describe(serial.p));
      contract_jit(serial.p, nullptr, &memory_cache(), &kTiny);
      contract_jit(single.p, &one, &memory_cache(), &kTiny);
      contract_jit(dual.p, &two, &memory_cache(), &kTiny);
      CHECK(serial.c.bytes == single.c.bytes);
      CHECK(serial.c.bytes == dual.c.bytes);
    }
  }
  // A matrix-vector step large enough to be split between threads (one column sliver: the split is over row tiles),
  // with A column-major and (transposed path) row-major.
  for (int64_t n : {1, 3, -1}) {
    const bool k_major = n < 0;
    n = std::abs(n);
    SplitMix64 rng(999 + uint64_t(n));
    OwnedProblem base;
    base.p.dtype = DType::f64;
    const int64_t m = 517, k = 300;
    base.p.m = {{m, k_major ? k : 1, 0, 1}};
    base.p.k = {{k, k_major ? 1 : m, 1, 0}};
    base.p.n = {{n, 0, k, m}};
    base.a.elements = m * k;
    base.b.elements = k * n;
    base.c.elements = m * n;
    allocate_and_fill<double>(base, rng, /*fill_c=*/false);
    OwnedProblem x = base, y = base;
    x.bind();
    y.bind();
    contract_jit(x.p, nullptr, &memory_cache());
    contract_jit(y.p, &two, &memory_cache());
    CHECK(x.c.bytes == y.c.bytes);
    check_against_oracle<double>(y);
  }
  // A problem large enough to take the threaded paths (work above the serial threshold), batched and not; with the
  // default blocking its 130 rows are one MC block, too few tiles for row chunks: the block's packing and its column
  // slivers are split between the threads (Gett::rows_block).
  for (const GettBlocking* blocking : {&kTiny, static_cast<const GettBlocking*>(nullptr)}) {
    for (int batch : {1, 3}) {
      SplitMix64 rng(4242 + uint64_t(batch));
      OwnedProblem base;
      base.p.dtype = DType::f64;
      int64_t m = 130, n = 70, k = 90;
      base.p.m = {{m, 1, 0, 1}};
      base.p.k = {{k, m, 1, 0}};
      base.p.n = {{n, 0, k, m}};
      base.p.batch = {{batch, m * k, k * n, m * n}};
      base.a.elements = m * k * batch;
      base.b.elements = k * n * batch;
      base.c.elements = m * n * batch;
      allocate_and_fill<double>(base, rng, /*fill_c=*/false);
      OwnedProblem x = base, y = base;
      x.bind();
      y.bind();
      contract_jit(x.p, nullptr, &memory_cache(), blocking);
      contract_jit(y.p, &two, &memory_cache(), blocking);
      CHECK(x.c.bytes == y.c.bytes);
      check_against_oracle<double>(y);
    }
  }
}

TEST_CASE("jit gett: zero extents") {
  SUBCASE("k = 0 overwrites C with zeros, accumulate leaves it") {
    for (bool accumulate : {false, true}) {
      std::vector<double> a(1), b(1), c(6, 5.0);
      ContractionProblem p;
      p.m = {{3, 1, 0, 1}};
      p.n = {{2, 0, 1, 3}};
      p.k = {{0, 3, 1, 0}};
      p.a = a.data();
      p.b = b.data();
      p.c = c.data();
      p.accumulate = accumulate;
      contract_jit(p, nullptr, &memory_cache());
      for (double v : c) CHECK(v == (accumulate ? 5.0 : 0.0));
    }
  }
  SUBCASE("m = 0 or batch = 0 writes nothing") {
    std::vector<float> a(4, 1), b(4, 1), c(4, 7);
    ContractionProblem p;
    p.dtype = DType::f32;
    p.m = {{0, 1, 0, 1}};
    p.n = {{2, 0, 2, 2}};
    p.k = {{2, 1, 1, 0}};
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
    contract_jit(p, nullptr, &memory_cache());
    for (float v : c) CHECK(v == 7);
  }
}

TEST_CASE("jit gett: an operand beyond 64 bits is refused before any table is built") {
  double a = 1, b = 1, c = 0;
  ContractionProblem p;
  p.a = &a, p.b = &b, p.c = &c;
  p.m = {{int64_t(1) << 40, 0, 0, 0}};
  p.k = {{int64_t(1) << 30, 0, 0, 0}};
  CHECK_THROWS_WITH_AS(contract_jit(p, nullptr, &memory_cache()),
                       "contract: operand A (m, k, batch axes) [1099511627776,1073741824] has more elements than fit "
                       "in 64 bits",
                       Error);
}

TEST_CASE("jit gett: i64 is refused with a message naming the fallback") {
  int64_t a = 1, b = 1, c = 0;
  ContractionProblem p;
  p.dtype = DType::i64;
  p.a = &a, p.b = &b, p.c = &c;
  CHECK_THROWS_WITH_AS(contract_jit(p, nullptr, &memory_cache()),
                       doctest::Contains("the JIT has no i64 kernel"), Error);
}

// Small real problems run on direct (no-pack) kernels; the packed path runs when explicit block sizes are passed.
// With k inside one KC block both sum every element over k in the same order with the same FMAs, so their bits must
// agree exactly; the random problems cover strided, permuted and multi-axis groups, odd and zero extents. Matrix-vector
// products contiguous along k run as dot products in another order (GettDots.h) and are skipped here.
TEST_CASE_TEMPLATE("jit gett: direct small-problem path equals the packed path bitwise", T, float, double) {
  DType dtype = dtype_v<T>;
  const GettBlocking packed = default_blocking(dtype, memory_cache().host().has_avx512);
  ThreadPool two(2);
  int compared = 0;
  for (uint64_t seed = 20000; seed < 20080; ++seed) {
    OwnedProblem direct = random_problem(seed, dtype, true, false);
    int64_t k_total = 1;
    for (const auto& ax : direct.p.k) k_total *= ax.extent;
    if (k_total > packed.kc || runs_as_dots(direct.p)) continue;  // dot products: test_gett_dots.cpp
    OwnedProblem reference = random_problem(seed, dtype, true, false);
    OwnedProblem threaded = random_problem(seed, dtype, true, false);
    INFO("seed " << seed << ": " << describe(direct.p));
    contract_jit(direct.p, nullptr, &memory_cache());
    contract_jit(threaded.p, &two, &memory_cache());
    contract_jit(reference.p, nullptr, &memory_cache(), &packed);
    check_against_oracle<T>(direct);
    CHECK(direct.c.bytes == reference.c.bytes);
    CHECK(direct.c.bytes == threaded.c.bytes);
    ++compared;
  }
  CHECK(compared > 40);
}

// Runs three copies of make()'s problem: on the JIT's own choice (which swaps it to C^T = B^T A^T), on 2 threads,
// and on the packed path with the default blocking (which never swaps): the first against the oracle, all three with
// the same bits.
template <typename T, typename Make>
void check_swapped_bits(const Make& make, ThreadPool& two) {
  const GettBlocking packed = default_blocking(dtype_v<T>, memory_cache().host().has_avx512);
  OwnedProblem swapped = make(), threaded = make(), reference = make();
  contract_jit(swapped.p, nullptr, &memory_cache());
  contract_jit(threaded.p, &two, &memory_cache());
  contract_jit(reference.p, nullptr, &memory_cache(), &packed);
  check_against_oracle<T>(swapped);
  CHECK(swapped.c.bytes == reference.c.bytes);
  CHECK(swapped.c.bytes == threaded.c.bytes);
}

// A k-major A (row-major i,k) and a k-major B with fewer columns than A has rows run as C^T = B^T A^T (Gett.cpp), in
// the original k order: the same bits as the unswapped packed path (a blocking argument keeps it unswapped), at one
// and two threads, across KC blocks and edge tiles.
TEST_CASE_TEMPLATE("jit gett: k-major A and B swapped to C^T = B^T A^T give the unswapped bits", T, float, double) {
  const DType dtype = dtype_v<T>;
  ThreadPool two(2);
  for (auto [m, n, k] : {std::tuple{300, 21, 600}, std::tuple{97, 40, 300}, std::tuple{64, 9, 5}}) {
    INFO("m " << m << " n " << n << " k " << k);
    auto make = [&] {
      OwnedProblem op = matmul_problem(m, n, k, 1, dtype, false, uint64_t(m * 31 + n * 7 + k));
      op.p.m[0].stride_a = k;  // A[i, p] at i * k + p
      op.p.k[0].stride_a = 1;
      return op;
    };
    check_swapped_bits<T>(make, two);
  }
}

// C stored transposed (its contiguous axis is B's n axis: j,i->ij, ij,jk->ki) runs as C^T = B^T A^T when k fits one
// KC block (Gett.cpp): against the oracle, with the unswapped packed path's bits (a blocking argument keeps it
// unswapped) and the same bits at two threads; k beyond one KC block stays unswapped and must agree as well.
TEST_CASE_TEMPLATE("jit gett: C stored transposed is swapped to C^T = B^T A^T with the unswapped bits", T, float,
                   double) {
  const DType dtype = dtype_v<T>;
  const GettBlocking packed = default_blocking(dtype, memory_cache().host().has_avx512);
  ThreadPool two(2);
  for (auto [m, n, k] : {std::tuple{256, 256, 1}, std::tuple{97, 40, 1}, std::tuple{9, 300, 1}, std::tuple{64, 33, 7},
                         std::tuple{120, 70, 64}, std::tuple{40, 97, int(packed.kc)},
                         std::tuple{33, 20, int(packed.kc) + 5}}) {
    for (bool accumulate : {false, true}) {
      INFO("m " << m << " n " << n << " k " << k << " accumulate " << accumulate);
      auto make = [&] {
        OwnedProblem op = matmul_problem(m, n, k, 1, dtype, accumulate, uint64_t(m * 131 + n * 17 + k));
        op.p.m[0].stride_c = n;  // C[i, j] at i * n + j
        op.p.n[0].stride_c = 1;
        return op;
      };
      check_swapped_bits<T>(make, two);
    }
  }
}

// The shapes the direct path was made for, against the oracle: 16x16 and 64^3 matmuls, an 8^6 four-index
// contraction whose rows are contiguous only in runs of 8 (acbd,ecfd->abef), and batched 64x64 entries; beta 0 and 1.
TEST_CASE("jit gett: direct path on its target shapes") {
  struct Case {
    std::vector<ContractionProblem::Axis> m, n, k, batch;
    int64_t a, b, c;
  };
  const std::vector<Case> cases = {
      {{{16, 1, 0, 1}}, {{16, 0, 16, 16}}, {{16, 16, 1, 0}}, {}, 256, 256, 256},
      {{{64, 1, 0, 1}}, {{64, 0, 64, 64}}, {{64, 64, 1, 0}}, {}, 4096, 4096, 4096},
      {{{13, 1, 0, 1}}, {{17, 0, 5, 13}}, {{5, 13, 1, 0}}, {}, 65, 85, 221},
      // acbd,ecfd->abef, column-major 8^4 operands: m = a, b; n = e, f; k = c, d.
      {{{8, 1, 0, 1}, {8, 64, 0, 8}}, {{8, 0, 1, 64}, {8, 0, 64, 512}}, {{8, 8, 8, 0}, {8, 512, 512, 0}}, {}, 4096,
       4096, 4096},
      // ijb,jkb->ikb with b = 3.
      {{{64, 1, 0, 1}}, {{64, 0, 64, 64}}, {{64, 64, 1, 0}}, {{3, 4096, 4096, 4096}}, 3 * 4096, 3 * 4096, 3 * 4096},
      // Matrix times 1..7 vectors with A beyond the small-problem limit (narrow direct tiles, odd m edge), and
      // B's columns strided.
      {{{301, 1, 0, 1}}, {{1, 0, 200, 301}}, {{200, 301, 1, 0}}, {}, 301 * 200, 200, 301},
      {{{301, 1, 0, 1}}, {{2, 0, 203, 301}}, {{200, 301, 1, 0}}, {}, 301 * 200, 2 * 203, 2 * 301},
      {{{301, 1, 0, 1}}, {{3, 0, 200, 301}}, {{200, 301, 1, 0}}, {}, 301 * 200, 3 * 200, 3 * 301},
      {{{301, 1, 0, 1}}, {{4, 0, 1, 301}}, {{200, 301, 4, 0}}, {}, 301 * 200, 4 * 200, 4 * 301},
      {{{301, 1, 0, 1}}, {{7, 0, 200, 301}}, {{200, 301, 1, 0}}, {}, 301 * 200, 7 * 200, 7 * 301},
      // k-major matrix times 1 or 3 vectors (ji,j->i): rows not contiguous in A, run transposed (C^T = B^T A^T).
      {{{301, 200, 0, 1}}, {{1, 0, 200, 301}}, {{200, 1, 1, 0}}, {}, 301 * 200, 200, 301},
      {{{301, 200, 0, 1}}, {{3, 0, 1, 301}}, {{200, 1, 3, 0}}, {}, 301 * 200, 3 * 200, 3 * 301},
      // 5 rows times a 300-column matrix (fewer than 8 rows: direct at any size).
      {{{5, 1, 0, 1}}, {{300, 0, 200, 5}}, {{200, 5, 1, 0}}, {}, 5 * 200, 300 * 200, 5 * 300},
  };
  for_each_filled<double>(cases, 31337, [](OwnedProblem& op, const Case&) {
    op.bind();
    INFO(describe(op.p));
    contract_jit(op.p, nullptr, &memory_cache());
    check_against_oracle<double>(op);
  });
}

// Only batch axes (ij,ij->ij, or with a transposed or strided C): the elementwise loop, against the oracle.
TEST_CASE_TEMPLATE("jit gett: elementwise problems (no m, n or k axis)", T, float, double, c128) {
  SplitMix64 rng(777);
  for (bool accumulate : {false, true}) {
    for (int layout = 0; layout < 4; ++layout) {
      OwnedProblem op;
      op.p.dtype = dtype_v<T>;
      const int64_t r = 7, s = 5;
      // A column-major r x s; B row-major; C column-major, transposed, or with a gap of 2 between rows; layout 3:
      // all three column-major (the contiguous loop).
      const int64_t c_rs[4][2] = {{1, r}, {s, 1}, {2, 2 * r}, {1, r}};
      const int64_t b_rs[2] = {layout == 3 ? 1 : s, layout == 3 ? r : 1};
      op.p.batch = {{r, 1, b_rs[0], c_rs[layout][0]}, {s, r, b_rs[1], c_rs[layout][1]}, {1, 0, 0, 0}};
      op.p.m = {{1, 0, 0, 0}};
      op.p.accumulate = accumulate;
      op.a.elements = op.b.elements = r * s;
      op.c.elements = layout == 2 ? 2 * r * s : r * s;
      allocate_and_fill<T>(op, rng);
      op.bind();
      INFO(describe(op.p));
      contract_jit(op.p, nullptr, &memory_cache());
      check_against_oracle<T>(op);
    }
  }
}

// A specialised kernel inlines one call per tile: only small steps get one. A 16x16 matmul does; a 1024 x 1024 outer
// product (direct path, k = 1, ~5,000 tiles) does not, though it runs direct.
TEST_CASE("jit gett: direct_schedule only for steps with few tiles") {
  ContractionProblem small;
  small.m = {{16, 1, 0, 1}};
  small.n = {{16, 0, 16, 16}};
  small.k = {{16, 16, 1, 0}};
  DirectSchedule schedule;
  REQUIRE(direct_schedule(small, true, schedule));
  CHECK(int64_t(schedule.kernel.tiles.size()) <= kMaxSpecialisedTiles);
  ContractionProblem outer;
  outer.m = {{1024, 1, 0, 1}};
  outer.n = {{1024, 0, 1, 1024}};
  CHECK_FALSE(direct_schedule(outer, true, schedule));
  outer.m[0].extent = outer.n[0].extent = 64;  // 64 x 64: 24 tiles of 24x8 (or 16x14), specialised
  outer.n[0].stride_c = 64;
  CHECK(direct_schedule(outer, true, schedule));
}

// Rows contiguous in A only in runs of one vector (8 f64 / 16 f32), a fixed distance apart, with C contiguous: the
// split-row direct tiles. Against the oracle, against the packed path bitwise (K within one KC block), and at 2
// threads. Includes a partial last run (m = 8 x 5 rows of 24-row tiles) and A runs of 8 with C runs of 8 too.
TEST_CASE_TEMPLATE("jit gett: split-row direct tiles (runs of one vector in A)", T, float, double) {
  const int64_t L = sizeof(T) == 8 ? 8 : 16;  // one vector of rows
  struct Case {
    std::vector<ContractionProblem::Axis> m, n, k;
    int64_t a, b, c;
  };
  // acbd,ecfd->abef with a = L, b = 5, c = 3, d = 2, e = 7, f = 2 (column-major operands).
  const int64_t a = L, bb = 5, c = 3, d = 2, e = 7, f = 2;
  const std::vector<Case> cases = {
      {{{a, 1, 0, 1}, {bb, a * c, 0, a}},
       {{e, 0, 1, a * bb}, {f, 0, e * c, a * bb * e}},
       {{c, a, e, 0}, {d, a * c * bb, e * c * f, 0}},
       a * c * bb * d, e * c * f * d, a * bb * e * f},
      // aebf,dfce->abcd with every extent L except b = 3, e = 2 (m = a, b; n = c, d; k = e, f).
      {{{L, 1, 0, 1}, {3, L * 2, 0, L}},
       {{L, 0, L * L, L * 3}, {L, 0, 1, L * 3 * L}},
       {{2, L, L * L * L, 0}, {L, L * 2 * 3, L, 0}},
       L * 2 * 3 * L, L * L * L * 2, L * 3 * L * L},
  };
  ThreadPool two(2);
  for_each_filled<T>(cases, 4711, [&](OwnedProblem& op, const Case&) { check_jit_paths<T>(op, two, /*packed=*/true); });
  // The split tile is what runs (not the packed fallback): direct_schedule accepts the problem with a split tile.
  ContractionProblem p;
  p.dtype = dtype_v<T>;
  p.m = cases[0].m, p.n = cases[0].n, p.k = cases[0].k;
  DirectSchedule schedule;
  REQUIRE(direct_schedule(p, true, schedule));
  CHECK(schedule.kernel.tile.split_rows);
  CHECK(schedule.kernel.k_geometry[5] == L * c);
  // aebf,dfce->abcd: C's column order (c, d) puts neighbouring columns L^2 apart in B, whose d is contiguous: the
  // direct path orders its columns by B instead (d, c), so a tile's broadcasts at one k step share a cache line.
  p.m = cases[1].m, p.n = cases[1].n, p.k = cases[1].k;
  REQUIRE(direct_schedule(p, true, schedule));
  const SpecialisedTile& first = schedule.kernel.tiles.front();
  for (int64_t j = 0; j < first.n_rem; ++j) CHECK(first.b_coff[size_t(j)] == j);
  for (int64_t j = 0; j < first.n_rem; ++j) CHECK(schedule.kernel.col_off[size_t(j)] == j * L * 3 * L);
}

// Rows contiguous in C only in runs of one vector (C laid out [i0 j0 i1 j1], as the grid gradients' cotangent steps
// write it), with A contiguous or split into runs itself: the split-C direct tiles. Against the oracle, against the
// packed path bitwise (K within one KC block), at 2 threads and as a shape-specialised kernel, overwriting and
// accumulating; m = 5 runs, so 24-row tiles end in a partial tile, and 12 columns end in a partial column sliver.
TEST_CASE_TEMPLATE("jit gett: split-C direct tiles (runs of one vector in C)", T, float, double) {
  const int64_t L = sizeof(T) == 8 ? 8 : 16;  // one vector of rows
  struct Case {
    std::vector<ContractionProblem::Axis> m, n, k;
    int64_t a, b, c, c_distance;
  };
  // C[i0, j0, i1, j1] with i0 = L, j0 = 3, i1 = 5, j1 = 4: row vectors 3L apart in C.
  const int64_t i1 = 5, j0 = 3, j1 = 4, k0 = 6, k1 = 2;
  const std::vector<ContractionProblem::Axis> n = {{j0, 0, 1, L}, {j1, 0, j0 * k0, L * j0 * i1}};
  const std::vector<ContractionProblem::Axis> kb = {{k0, 0, j0, 0}, {k1, 0, j0 * k0 * j1, 0}};
  auto with_a = [&](std::vector<ContractionProblem::Axis> k, int64_t a1, int64_t a_k0, int64_t a_k1) {
    k[0].stride_a = a_k0, k[1].stride_a = a_k1;
    return Case{{{L, 1, 0, 1}, {i1, a1, 0, L * j0}}, n, k, L * i1 * k0 * k1, j0 * k0 * j1 * k1, L * j0 * i1 * j1,
                L * j0};
  };
  const std::vector<Case> cases = {
      with_a(kb, L, L * i1, L * i1 * k0),       // A contiguous: [i0 i1 k0 k1]
      with_a(kb, L * k0, L, L * k0 * i1),       // A in runs too: [i0 k0 i1 k1]
  };
  ThreadPool two(2);
  for_each_filled<T>(cases, 2026, [&](OwnedProblem& op, const Case&) {
    check_jit_paths<T>(op, two, /*packed=*/true);
    // The step's shape-specialised kernel (what a hot einsum step runs) gives the direct path's bits too.
    OwnedProblem generic = op, special = op;
    generic.bind();
    special.bind();
    contract_jit(generic.p, nullptr, &memory_cache());
    DirectSchedule schedule;
    REQUIRE(direct_schedule(special.p, memory_cache().host().has_avx512, schedule));
    REQUIRE(schedule.batch_a.size() == 1);
    void* fn = memory_cache().compiled_function(schedule.kernel.symbol(), schedule.kernel.describe(), [&](Jit& jit) {
      return compile_specialised_kernel(jit, schedule.kernel);
    });
    // Through call_jit, as every call into generated code: called directly, clang's UBSan function check read the
    // 8 bytes before the kernel, which sat at the start of a JIT page after an unmapped one (the ASan build's SEGV).
    call_jit(reinterpret_cast<SpecialisedKernelFn>(fn), special.p.a, special.p.b, special.p.c);
    CHECK(generic.c.bytes == special.c.bytes);
    // The kernel reads and writes inside its operands only: each tensor against an inaccessible page on either side.
    const size_t es = sizeof(T);
    for (bool after : {true, false}) {
      GuardedBytes a(op.a.bytes, after), b(op.b.bytes, after), c(op.c_initial, after);
      call_jit(reinterpret_cast<SpecialisedKernelFn>(fn), a.data() + op.a.origin * es, b.data() + op.b.origin * es,
               c.data() + op.c.origin * es);
      CHECK(std::memcmp(c.data(), special.c.bytes.data(), special.c.bytes.size()) == 0);
    }
  });
  for (const Case& cs : cases) {
    // A split-C tile is what runs, not one-vector tiles or the packed fallback.
    ContractionProblem p;
    p.dtype = dtype_v<T>;
    p.m = cs.m, p.n = cs.n, p.k = cs.k;
    DirectSchedule schedule;
    REQUIRE(direct_schedule(p, true, schedule));
    CHECK(schedule.kernel.tile.split_c);
    CHECK(schedule.kernel.tile.mr > L);
    CHECK(schedule.kernel.k_geometry[6] == cs.c_distance);
  }
}

// No contracted axis and a small or skinny GEMM per batch entry (gm_queen5_5_3's 3 x 3 outer products over millions
// of batch entries, 1 x N broadcasts): the elementwise loop with m / n axes broadcast. Against the oracle, and for
// real dtypes bitwise against the packed GEMM path (k = 1: fma(a, b, 0) is a * b), at 1 and 2 threads.
TEST_CASE_TEMPLATE("jit gett: broadcast products without k run as elementwise loops", T, float, double, c128) {
  struct Case {
    std::vector<ContractionProblem::Axis> m, n, batch;
    int64_t a, b, c;
  };
  const std::vector<Case> cases = {
      // 3 x 3 outer products over 40 batch entries, A's m axis strided, C dense.
      {{{3, 40, 0, 1}}, {{3, 0, 1, 3}}, {{40, 1, 3, 9}}, 120, 120, 360},
      // 1 x 1000 (m absent): a scaled copy of B per batch entry; and the transposed roles (n absent).
      {{}, {{1000, 0, 1, 1}}, {{3, 1, 1000, 1000}}, 3, 3000, 3000},
      {{{1000, 1, 0, 1}}, {}, {{3, 1000, 1, 1000}}, 3000, 3, 3000},
      // 5 x 700: fewer than 8 rows, C transposed (n fastest), a k axis of extent 1 listed.
      {{{5, 1, 0, 700}}, {{700, 0, 1, 1}}, {}, 5, 700, 3500},
  };
  SplitMix64 rng(2024);
  ThreadPool two(2);
  for (const Case& cs : cases) {
    for (bool accumulate : {false, true}) {
      std::vector<ContractionProblem::Axis> k;
      if (cs.c == 3500) k = {{1, 1, 1, 0}};
      OwnedProblem op = filled_problem<T>(cs.m, cs.n, k, cs.batch, accumulate, cs.a, cs.b, cs.c, rng);
      check_jit_paths<T>(op, two, /*packed=*/std::is_floating_point_v<T>);  // k = 1: fma(a, b, 0) is a * b
      DirectSchedule schedule;
      CHECK_FALSE(direct_schedule(op.p, true, schedule));  // no specialised kernel: it would be a GEMM per entry
    }
  }
}

TEST_CASE("jit gett: row split between threads gives each thread its minimum and the same bits") {
  // The rule: never more chunks than threads, never a chunk under kMinRowTilesPerThread whole tiles, and no thread
  // left idle that could have had its minimum.
  for (int64_t tile_rows : {8, 16, 24})
    for (int threads : {1, 2, 3, 4})
      for (int64_t M = 0; M < 40 * tile_rows; M += 7) {
        INFO("M " << M << ", tile rows " << tile_rows << ", threads " << threads);
        const int chunks = gemm_row_chunks(M, tile_rows, threads);
        const int64_t tiles = (M + tile_rows - 1) / tile_rows;
        CHECK(chunks >= 1);
        CHECK(chunks <= threads);
        if (chunks > 1) CHECK(tiles / chunks >= kMinRowTilesPerThread);  // the smallest chunk of c*n/C cuts
        if (chunks < threads) CHECK(tiles < (chunks + 1) * kMinRowTilesPerThread);
      }
  CHECK(gemm_row_chunks(128 * 128, 24, 2) == 2);  // kac,bk->abc at a=b=c=128: M = a*c
  CHECK(gemm_row_chunks(3 * 24, 24, 2) == 1);

  // kac,bk->abc: m = (c, a), n = b, k; many MC blocks and (tiny blocking) several KC and NC blocks, on 2 and 3
  // threads against 1 thread and the oracle.
  ThreadPool two(2), three(3);
  for (const GettBlocking* blocking : {static_cast<const GettBlocking*>(nullptr), &kTiny}) {
    SplitMix64 rng(1414);
    OwnedProblem base;
    base.p.dtype = DType::f64;
    const int64_t kk = 20, a = 37, b = 21, c = 40;
    base.p.m = {{c, 1, 0, 1}, {a, c, 0, b * c}};
    base.p.n = {{b, 0, kk, c}};
    base.p.k = {{kk, a * c, 1, 0}};
    base.a.elements = kk * a * c;
    base.b.elements = b * kk;
    base.c.elements = a * b * c;
    allocate_and_fill<double>(base, rng, /*fill_c=*/false);
    OwnedProblem x = base, y = base;
    x.bind();
    y.bind();
    INFO(describe(x.p));
    contract_jit(x.p, nullptr, &memory_cache(), blocking);
    contract_jit(y.p, &two, &memory_cache(), blocking);
    CHECK(x.c.bytes == y.c.bytes);
    check_against_oracle<double>(y);
    OwnedProblem z = base;
    z.bind();
    contract_jit(z.p, &three, &memory_cache(), blocking);
    CHECK(x.c.bytes == z.c.bytes);
  }
}

// aebf,dfce->abcd (every extent 12) on the packed path: B is not contiguous along k and its contiguous axis d is C's
// second n axis, so the columns are ordered by B (GettSetup.cpp), and A's 24-row tiles cross its runs of 12 rows
// (GettLoops.h: pack_a_sliver, rows_in_runs). The same contraction with A contiguous along m and B's columns in C's
// order (the same k order: B's strides order f before e in both) packs neither way; both must give the same bits, at
// 1, 2 and 3 threads, and match the oracle.
TEST_CASE("jit gett: columns ordered by B and A rows packed in runs give the bits of plain layouts") {
  const int64_t E = 12, E2 = E * E, E3 = E2 * E, E4 = E3 * E;
  const uint64_t seed = 3939;
  INFO("seed " << seed);
  SplitMix64 rng(seed);
  OwnedProblem perm;  // A[a,e,b,f], B[d,f,c,e], C[a,b,c,d]
  perm.p.dtype = DType::f64;
  perm.p.m = {{E, 1, 0, 1}, {E, E2, 0, E}};       // a, b
  perm.p.n = {{E, 0, E2, E2}, {E, 0, 1, E3}};     // c, d
  perm.p.k = {{E, E, E3, 0}, {E, E3, E, 0}};      // e, f
  perm.a.elements = perm.b.elements = perm.c.elements = E4;
  allocate_and_fill<double>(perm, rng, /*fill_c=*/false);
  OwnedProblem plain = perm;  // A[a,b,e,f], B[c,d,f,e]
  plain.p.m = {{E, 1, 0, 1}, {E, E, 0, E}};
  plain.p.n = {{E, 0, 1, E2}, {E, 0, E, E3}};
  plain.p.k = {{E, E2, E3, 0}, {E, E3, E2, 0}};
  const double* a = reinterpret_cast<const double*>(perm.a.bytes.data());
  const double* b = reinterpret_cast<const double*>(perm.b.bytes.data());
  double* a2 = reinterpret_cast<double*>(plain.a.bytes.data());
  double* b2 = reinterpret_cast<double*>(plain.b.bytes.data());
  for (int64_t i = 0; i < E; ++i)
    for (int64_t j = 0; j < E; ++j)
      for (int64_t p = 0; p < E; ++p)
        for (int64_t q = 0; q < E; ++q) {
          a2[i + j * E + p * E2 + q * E3] = a[i + p * E + j * E2 + q * E3];  // (a, b, e, f) = (i, j, p, q)
          b2[i + j * E + q * E2 + p * E3] = b[j + q * E + i * E2 + p * E3];  // (c, d, f, e) = (i, j, q, p)
        }
  ThreadPool two(2), three(3);
  for (const GettBlocking* blocking : {static_cast<const GettBlocking*>(nullptr), &kTiny}) {
    OwnedProblem x = perm, y = plain, x2 = perm, x3 = perm;
    for (OwnedProblem* o : {&x, &y, &x2, &x3}) o->bind();
    contract_jit(x.p, nullptr, &memory_cache(), blocking);
    contract_jit(y.p, nullptr, &memory_cache(), blocking);
    contract_jit(x2.p, &two, &memory_cache(), blocking);
    contract_jit(x3.p, &three, &memory_cache(), blocking);
    CHECK(x.c.bytes == y.c.bytes);
    CHECK(x.c.bytes == x2.c.bytes);
    CHECK(x.c.bytes == x3.c.bytes);
    check_against_oracle<double>(x);
  }
}

// The packed GEMM's row chunks share a KC step's row tiles through gett_detail::RowClaims: a chunk takes equal blocks
// from the front of its own range, then half of the fullest other range's rest from its back. Whatever order the
// threads ask in (seeded random interleavings here; the seed is printed), every tile goes to exactly one claim, a
// chunk's own claims run up its range in blocks of at most MC tiles, and no claim is empty or larger than a block.
TEST_CASE("jit gett: row claims give every row tile to exactly one claim, whatever the threads' order") {
  using gett_detail::RowClaims;
  const uint64_t seed = 3939;
  INFO("seed " << seed);
  SplitMix64 rng(seed);
  for (int64_t tiles : {0, 1, 5, 8, 43, 86, 201})
    for (int chunks : {1, 2, 3, 4})
      for (int64_t block : {1, 3, 10}) {
        RowClaims claims(tiles, chunks, block);
        for (int round = 0; round < 20; ++round) {
          INFO("tiles " << tiles << ", chunks " << chunks << ", block " << block << ", round " << round);
          claims.reset();
          std::vector<int> owner(size_t(tiles), -1);
          std::vector<int64_t> own_next(static_cast<size_t>(chunks));
          for (int ch = 0; ch < chunks; ++ch) own_next[size_t(ch)] = ch * tiles / chunks;
          std::vector<int> active;
          for (int ch = 0; ch < chunks; ++ch) active.push_back(ch);
          // Round 0: each chunk runs to its end before the next starts (one thread ran them all: chunk 0 takes all).
          while (!active.empty()) {
            const size_t pick = round == 0 ? 0 : size_t(rng.next() % active.size());
            const int ch = active[pick];
            int64_t t0 = -1, t1 = -1;
            if (!claims.next(ch, t0, t1)) {
              active.erase(active.begin() + int64_t(pick));
              continue;
            }
            REQUIRE(0 <= t0);
            REQUIRE(t0 < t1);
            REQUIRE(t1 <= tiles);
            CHECK(t1 - t0 <= block);
            const int64_t lo = ch * tiles / chunks, hi = (ch + 1) * tiles / chunks;
            if (t0 >= lo && t0 < hi) {  // from its own range: always the front, up in order
              CHECK(t0 == own_next[size_t(ch)]);
              own_next[size_t(ch)] = t1;
            }
            for (int64_t t = t0; t < t1; ++t) {
              CHECK(owner[size_t(t)] == -1);
              owner[size_t(t)] = ch;
            }
          }
          for (int64_t t = 0; t < tiles; ++t) CHECK(owner[size_t(t)] != -1);
          if (round == 0 && tiles > 0) CHECK(std::count(owner.begin(), owner.end(), 0) == tiles);
        }
      }
}

// Bond-2 steps of a tensor network (every axis of extent 2, several k axes in any order, so no direct kernel reads
// them) run as scalar loops over the offset tables (Gett::gemm_tiny) instead of packed: the same bits as the packed
// path (explicit blocking), on one and two threads, overwriting and accumulating, against the oracle; on 300 seeded
// problems, most of which take that path.
// The chunks of a KC step share their A blocks' column slivers through gett_detail::BlockShare once RowClaims has no
// row tiles left. Chunks step through claim, publish, take and help in seeded random interleavings (the seed is
// printed; round 0 runs each chunk to its end before the next starts, as one thread running them all does, where a
// helper must not wait for a chunk that has not started): every (row tile, column sliver) of the step is computed
// exactly once, taken from the block that holds its row.
TEST_CASE("jit gett: shared blocks give every tile of a KC step to exactly one thread, whatever the order") {
  using gett_detail::BlockShare;
  using gett_detail::RowClaims;
  const uint64_t seed = 4040;
  INFO("seed " << seed);
  SplitMix64 rng(seed);
  BlockShare share;
  for (int64_t tiles : {0, 1, 7, 43})
    for (int chunks : {1, 2, 3})
      for (int64_t slivers : {1, 2, 5, 16}) {
        RowClaims claims(tiles, chunks, 4);
        for (int round = 0; round < 20; ++round) {
          INFO("tiles " << tiles << ", chunks " << chunks << ", slivers " << slivers << ", round " << round);
          claims.reset();
          share.reset(chunks, slivers);
          std::vector<int> count(size_t(tiles * slivers), 0);
          std::vector<int> state(size_t(chunks), 0);  // 0 not started, 1 claims, 2 takes its own, 3 helps, 4 done
          std::vector<std::pair<int64_t, int64_t>> block(static_cast<size_t>(chunks));
          auto cover = [&](int64_t s0, int64_t s1, int64_t r0, int64_t r1, std::pair<int64_t, int64_t> rows) {
            REQUIRE(0 <= s0);
            REQUIRE(s0 < s1);
            REQUIRE(s1 <= slivers);
            CHECK(s1 - s0 <= BlockShare::kGrain);
            CHECK(r0 == rows.first);
            CHECK(r1 == rows.second);
            for (int64_t t = r0; t < r1; ++t)
              for (int64_t s = s0; s < s1; ++s) ++count[size_t(t * slivers + s)];
          };
          for (;;) {
            std::vector<int> live;
            for (int ch = 0; ch < chunks; ++ch)
              if (state[size_t(ch)] != 4) live.push_back(ch);
            if (live.empty()) break;
            const int ch = round == 0 ? live[0] : live[size_t(rng.next() % live.size())];
            int& st = state[size_t(ch)];
            int64_t t0 = 0, t1 = 0, s0 = 0, s1 = 0, r0 = 0, r1 = 0;
            int owner = -1;
            if (st == 0) {
              share.running(ch, true), st = 1;
            } else if (st == 1) {
              if (claims.next(ch, t0, t1)) {
                block[size_t(ch)] = {t0, t1};
                share.publish(ch, t0, t1), st = 2;
              } else {
                share.running(ch, false), st = 3;
              }
            } else if (st == 2) {
              if (share.take(ch, s0, s1, r0, r1)) cover(s0, s1, r0, r1, block[size_t(ch)]);
              else st = 1;
            } else {
              const BlockShare::Help h = share.try_help(ch, owner, s0, s1, r0, r1);
              if (h == BlockShare::kTook) {
                REQUIRE(owner != ch);
                cover(s0, s1, r0, r1, block[size_t(owner)]);
              }
              if (h == BlockShare::kDone) st = 4;
            }
          }
          for (int64_t q = 0; q < tiles * slivers; ++q) CHECK(count[size_t(q)] == 1);
        }
      }
}

TEST_CASE_TEMPLATE("jit gett: tiny problems run as scalar loops with the packed path's bits", T, float, double) {
  const DType dtype = dtype_v<T>;
  const GettBlocking packed = default_blocking(dtype, memory_cache().host().has_avx512);
  ThreadPool two(2);
  int tiny = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    auto make = [&] {
      SplitMix64 rng(seed);
      OwnedProblem op;
      ContractionProblem& p = op.p;
      p.dtype = dtype;
      using Ax = ContractionProblem::Axis;
      for (auto [group, lo, hi] : {std::tuple{&p.m, 1, 4}, std::tuple{&p.n, 1, 4}, std::tuple{&p.k, 2, 4},
                                   std::tuple{&p.batch, 0, 1}}) {
        const int count = lo + static_cast<int>(rng.below(hi - lo + 1));
        for (int i = 0; i < count; ++i) group->push_back(Ax{2, 0, 0, 0});
      }
      p.accumulate = rng.below(2) == 0;
      lay_out_operands(rng, op, false, false);
      fill<T>(rng, op.a);
      fill<T>(rng, op.b);
      fill<T>(rng, op.c);
      if (!p.accumulate) poison_output<T>(op);
      op.c_initial = op.c.bytes;
      op.bind();
      return op;
    };
    OwnedProblem op = make(), threaded = make(), reference = make();
    INFO("seed " << seed << ": " << describe(op.p));
    if (runs_tiny(op.p, memory_cache())) ++tiny;
    contract_jit(op.p, nullptr, &memory_cache());
    contract_jit(threaded.p, &two, &memory_cache());
    contract_jit(reference.p, nullptr, &memory_cache(), &packed);
    check_against_oracle<T>(op);
    CHECK(op.c.bytes == reference.c.bytes);
    CHECK(op.c.bytes == threaded.c.bytes);
  }
  CHECK(tiny > 150);
}
