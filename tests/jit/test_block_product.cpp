// runtime/kernels/BlockProduct.h: matrix products split by their operands' exact zeros, on seeded random
// block-diagonal-up-to-permutation operands (2 to 4 blocks, zero rows, columns and contracted indices, zeros inside
// blocks, column- and row-major layouts), against a plain triple loop (the oracle), bitwise against the dense JIT
// product when K fits one KC block, bitwise the same at 1 and 2 threads; and the problems it must leave dense.
#include "support/Random.h"

#include "ir/Scratch.h"
#include "runtime/Context.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/KernelCache.h"
#include "runtime/kernels/BlockProduct.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <vector>

using namespace einstage;

namespace {

using Rng = einstage::test::SplitMix64;

template <typename T> T random_value(Rng& r) {
  if constexpr (std::is_same_v<T, std::complex<double>>) return {r.symmetric(), r.symmetric()};
  else return static_cast<T>(r.symmetric());
}
template <typename T> constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else return DType::c128;
}

// A product C[M, N] = A[M, K] B[K, N] whose rows, contracted indices and columns each belong to one of `blocks`
// classes (or to none: a zero row, column or contracted index); entries are nonzero only inside a class, and then
// zero with probability 1/8. Each operand (and C) is column- or row-major at random.
template <typename T> struct BlockCase {
  int64_t M, N, K;
  std::vector<T> a, b, c;
  ContractionProblem p;

  BlockCase(Rng& r, int blocks, int64_t M_, int64_t N_, int64_t K_) : M(M_), N(N_), K(K_) {
    auto classes = [&](int64_t n) {
      std::vector<int> c(static_cast<size_t>(n));
      for (int& x : c) x = r.chance(0.05) ? -1 : static_cast<int>(r.below(blocks));
      return c;
    };
    const std::vector<int> rows = classes(M), ks = classes(K), cols = classes(N);
    a.assign(static_cast<size_t>(M * K), T(0));
    b.assign(static_cast<size_t>(K * N), T(0));
    c.assign(static_cast<size_t>(M * N), T(0));
    const bool a_col = r.chance(0.5), b_col = r.chance(0.5), c_col = r.chance(0.5);
    const int64_t sam = a_col ? 1 : K, sak = a_col ? M : 1, sbk = b_col ? 1 : N, sbn = b_col ? K : 1;
    const int64_t scm = c_col ? 1 : N, scn = c_col ? M : 1;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        if (rows[size_t(i)] >= 0 && rows[size_t(i)] == ks[size_t(k)] && !r.chance(0.125))
          a[size_t(i * sam + k * sak)] = random_value<T>(r);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        if (ks[size_t(k)] >= 0 && ks[size_t(k)] == cols[size_t(j)] && !r.chance(0.125))
          b[size_t(k * sbk + j * sbn)] = random_value<T>(r);
    p.dtype = dtype_of<T>();
    p.m = {{M, sam, 0, scm}};
    p.n = {{N, 0, sbn, scn}};
    p.k = {{K, sak, sbk, 0}};
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
  }

  // The oracle: C by a triple loop in double precision, and the scale sum |a| |b| of each entry.
  void expect_close_to_oracle() const {
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        std::complex<double> sum = 0;
        double scale = 0;
        for (int64_t k = 0; k < K; ++k) {
          const std::complex<double> x(a[size_t(i * p.m[0].stride_a + k * p.k[0].stride_a)]);
          const std::complex<double> y(b[size_t(k * p.k[0].stride_b + j * p.n[0].stride_b)]);
          sum += x * y;
          scale += std::abs(x) * std::abs(y);
        }
        const std::complex<double> got(c[size_t(i * p.m[0].stride_c + j * p.n[0].stride_c)]);
        if (std::abs(got - sum) > tol * (scale + 1e-300)) {
          FAIL_CHECK("C[" << i << ", " << j << "] = " << got << ", expected " << sum);
          return;
        }
      }
  }
};

template <typename T> bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// The JIT product of p itself: explicit blocking (the default sizes) makes contract_jit run the GETT unsplit.
void contract_unsplit(const ContractionProblem& p, ThreadPool* pool) {
  const DType real = p.dtype == DType::f32 || p.dtype == DType::c64 ? DType::f32 : DType::f64;
  const GettBlocking blocking = default_blocking(real, default_context().kernels().host().has_avx512);
  contract_jit(p, pool, &default_context().kernels(), &blocking);
}

// Runs p block by block with the JIT (on `pool`), or densely; returns whether it split.
bool run_blocks(const ContractionProblem& p, ThreadPool* pool) {
  return kernels::block_product(p, [&](const ContractionProblem& q) { contract_jit(q, pool, &default_context().kernels()); });
}

// Whether block_product_in_place splits p (its runner is called; it writes nothing here).
bool splits_in_place(const ContractionProblem& p) {
  bool called = false;
  const bool split = kernels::block_product_in_place(
      p, [&](std::span<const kernels::BlockTables>, const std::function<void()>&) { called = true; });
  CHECK(split == called);
  return split;
}

template <typename T> void random_block_cases(uint64_t first_seed, int count, int64_t lo, int64_t hi) {
  ThreadPool two(2);
  for (uint64_t seed = first_seed; seed < first_seed + uint64_t(count); ++seed) {
    Rng r(seed);
    const int blocks = 2 + static_cast<int>(r.below(3));
    const int64_t M = lo + r.below(hi - lo + 1), N = lo + r.below(hi - lo + 1), K = lo + r.below(hi - lo + 1);
    INFO("seed " << seed << ": " << blocks << " classes, M " << M << " N " << N << " K " << K);
    BlockCase<T> x(r, blocks, M, N, K);
    MESSAGE("block product random seed " << seed);
    // contract_jit splits it in place (block_product_in_place: packed GEMMs through the blocks' offset tables).
    REQUIRE(splits_in_place(x.p));
    contract_jit(x.p, nullptr, &default_context().kernels());
    x.expect_close_to_oracle();
    const std::vector<T> in_place = x.c;
    std::fill(x.c.begin(), x.c.end(), T(7));
    contract_jit(x.p, &two, &default_context().kernels());
    CHECK(same_bits(in_place, x.c));
    // block_product on gathered copies (the dot_general kernel's way).
    std::fill(x.c.begin(), x.c.end(), T(7));
    REQUIRE(run_blocks(x.p, nullptr));
    x.expect_close_to_oracle();
    const std::vector<T> one = x.c;
    std::fill(x.c.begin(), x.c.end(), T(7));
    REQUIRE(run_blocks(x.p, &two));
    CHECK(same_bits(one, x.c));  // the same bits at 1 and 2 threads
    // Within one KC block (256 reals: 128 complex k under the 1m method) the dense JIT product sums the same
    // nonzero terms in the same order.
    if (K <= (std::is_same_v<T, std::complex<double>> ? 128 : 256)) {
      contract_unsplit(x.p, nullptr);
      for (size_t e = 0; e < one.size(); ++e)
        if (!(one[e] == x.c[e]) || !(in_place[e] == x.c[e])) FAIL_CHECK("entry " << e << " differs from the dense product");
    }
  }
}

}  // namespace

TEST_CASE("block product: block-diagonal operands up to permutations, f64, against the oracle and the dense product") {
  random_block_cases<double>(1, 12, 130, 300);
}

TEST_CASE("block product: f32 and c128") {
  random_block_cases<float>(101, 4, 130, 200);
  random_block_cases<std::complex<double>>(201, 4, 130, 200);
}

TEST_CASE("block product: problems that stay dense, with C untouched") {
  Rng r(7);
  auto untouched = [](const ContractionProblem& p) {
    auto* c = static_cast<double*>(p.c);
    const int64_t size = p.m[0].extent * p.n[0].extent;
    std::fill(c, c + size, 7.0);
    const bool split = run_blocks(p, nullptr) || splits_in_place(p);
    for (int64_t e = 0; e < size; ++e)
      if (c[e] != 7.0) return false;
    return !split;
  };
  BlockCase<double> x(r, 2, 200, 200, 200);
  REQUIRE(run_blocks(x.p, nullptr));

  SUBCASE("a dense operand") {
    for (double& v : x.a) v = v == 0 ? 0.5 : v;
    CHECK(untouched(x.p));
  }
  SUBCASE("one class") {
    BlockCase<double> one(r, 1, 200, 200, 200);
    CHECK(untouched(one.p));
  }
  SUBCASE("an infinity or a nan inside a block (0 * inf must stay nan)") {
    for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
      std::vector<double> b = x.b;
      for (double& v : b)
        if (v != 0) {
          v = bad;
          break;
        }
      ContractionProblem p = x.p;
      p.b = b.data();
      CHECK(untouched(p));
    }
  }
  SUBCASE("an infinity in A in a block whose rows of B are all zero (C's rows there are nan)") {
    // Three classes; the component of row 0 in A alone (its rows and contracted indices) is given zero rows of B,
    // so it has no columns and no product, but 0 * inf must still make C's entries in its rows nan.
    BlockCase<double> y(r, 3, 200, 200, 200);
    const ContractionProblem::Axis m = y.p.m[0], k = y.p.k[0], n = y.p.n[0];
    auto at_a = [&](int64_t i, int64_t s) -> double& { return y.a[size_t(i * m.stride_a + s * k.stride_a)]; };
    int64_t i0 = 0;
    while (i0 < 200 && [&] { for (int64_t s = 0; s < 200; ++s) if (at_a(i0, s) != 0) return false; return true; }())
      ++i0;
    REQUIRE(i0 < 200);
    std::vector<char> rows(200, 0), ks(200, 0);
    rows[size_t(i0)] = 1;
    for (bool grew = true; grew;) {
      grew = false;
      for (int64_t i = 0; i < 200; ++i)
        for (int64_t s = 0; s < 200; ++s)
          if (at_a(i, s) != 0 && rows[size_t(i)] != ks[size_t(s)]) rows[size_t(i)] = ks[size_t(s)] = 1, grew = true;
    }
    for (int64_t s = 0; s < 200; ++s)
      if (ks[size_t(s)])
        for (int64_t j = 0; j < 200; ++j) y.b[size_t(s * k.stride_b + j * n.stride_b)] = 0;
    REQUIRE((run_blocks(y.p, nullptr) && splits_in_place(y.p)));  // the other two classes still split it
    for (int64_t s = 0; s < 200; ++s)
      if (at_a(i0, s) != 0) {
        at_a(i0, s) = std::numeric_limits<double>::infinity();
        break;
      }
    CHECK(untouched(y.p));
  }
  SUBCASE("fewer multiply-adds than kMinBlockProductMacs") {
    BlockCase<double> small(r, 2, 100, 100, 100);
    CHECK(untouched(small.p));
  }
  SUBCASE("accumulate, a batch axis") {
    ContractionProblem p = x.p;
    p.accumulate = true;
    CHECK(untouched(p));
    p = x.p;
    p.batch = {{2, 0, 0, 0}};
    CHECK(untouched(p));
  }
}

namespace {

// A tensor-network step with a Z2 charge, like the Ising TRG's plaquette: C[m1,m2,n1,n2] = A[m1,m2,k1,k2]
// B[k1,k2,n1,n2] with every tensor's axes in a random order (so that rows, columns and contracted indices are
// fused from strided axes), and an entry nonzero only when the parities of its indices sum to an even number (then
// zero with probability 1/16): two blocks, whose rows interleave in every fused index.
struct ChargeCase {
  std::array<int64_t, 6> extent{};  // m1 m2 k1 k2 n1 n2
  std::vector<double> a, b, c;
  ContractionProblem p;
  std::array<int64_t, 6> sa{}, sb{}, sc{};  // strides (0: not in that tensor)

  // `a_order`, `b_order`: the axes of A and B from the fastest (random when empty).
  explicit ChargeCase(Rng& r, std::vector<int> a_order = {}, std::vector<int> b_order = {}) {
    for (int64_t& e : extent) e = 12 + r.below(3);
    // Column-major strides of a tensor over axes `ids`, in a random order unless `fixed` gives one.
    auto layout = [&](std::array<int, 4> ids, const std::vector<int>& fixed, std::array<int64_t, 6>& stride) {
      for (int i = 3; i > 0; --i) std::swap(ids[size_t(i)], ids[size_t(r.below(i + 1))]);
      if (!fixed.empty()) std::copy(fixed.begin(), fixed.end(), ids.begin());
      int64_t s = 1;
      for (int id : ids) stride[size_t(id)] = s, s *= extent[size_t(id)];
      return s;
    };
    a.assign(size_t(layout({0, 1, 2, 3}, a_order, sa)), 0.0);
    b.assign(size_t(layout({2, 3, 4, 5}, b_order, sb)), 0.0);
    c.assign(size_t(layout({0, 1, 4, 5}, {}, sc)), 7.0);
    fill(r, a, sa, {0, 1, 2, 3});
    fill(r, b, sb, {2, 3, 4, 5});
    p.dtype = DType::f64;
    p.m = {{extent[0], sa[0], 0, sc[0]}, {extent[1], sa[1], 0, sc[1]}};
    p.k = {{extent[2], sa[2], sb[2], 0}, {extent[3], sa[3], sb[3], 0}};
    p.n = {{extent[4], 0, sb[4], sc[4]}, {extent[5], 0, sb[5], sc[5]}};
    p.a = a.data();
    p.b = b.data();
    p.c = c.data();
  }
  void fill(Rng& r, std::vector<double>& x, const std::array<int64_t, 6>& stride, std::array<int, 4> ids) {
    const int64_t e0 = extent[size_t(ids[0])], e1 = extent[size_t(ids[1])], e2 = extent[size_t(ids[2])],
                  e3 = extent[size_t(ids[3])];
    for (int64_t i0 = 0; i0 < e0; ++i0)
      for (int64_t i1 = 0; i1 < e1; ++i1)
        for (int64_t i2 = 0; i2 < e2; ++i2)
          for (int64_t i3 = 0; i3 < e3; ++i3)
            if ((i0 + i1 + i2 + i3) % 2 == 0 && !r.chance(1.0 / 16))
              x[size_t(i0 * stride[size_t(ids[0])] + i1 * stride[size_t(ids[1])] + i2 * stride[size_t(ids[2])] +
                       i3 * stride[size_t(ids[3])])] = r.symmetric();
  }
  // The definitional loops: every C entry against the sum over k1, k2 in long double, to the scale sum |a| |b|.
  void expect_close_to_oracle() const {
    for (int64_t m1 = 0; m1 < extent[0]; ++m1)
      for (int64_t m2 = 0; m2 < extent[1]; ++m2)
        for (int64_t n1 = 0; n1 < extent[4]; ++n1)
          for (int64_t n2 = 0; n2 < extent[5]; ++n2) {
            long double sum = 0, scale = 0;
            for (int64_t k1 = 0; k1 < extent[2]; ++k1)
              for (int64_t k2 = 0; k2 < extent[3]; ++k2) {
                const double x = a[size_t(m1 * sa[0] + m2 * sa[1] + k1 * sa[2] + k2 * sa[3])];
                const double y = b[size_t(k1 * sb[2] + k2 * sb[3] + n1 * sb[4] + n2 * sb[5])];
                sum += (long double)x * y;
                scale += std::abs((long double)x * y);
              }
            const double got = c[size_t(m1 * sc[0] + m2 * sc[1] + n1 * sc[4] + n2 * sc[5])];
            if (std::abs((long double)got - sum) > 1e-13L * (scale + 1e-300L)) {
              FAIL_CHECK("C[" << m1 << "," << m2 << "," << n1 << "," << n2 << "] = " << got << ", expected "
                              << double(sum));
              return;
            }
          }
  }
};

}  // namespace

namespace {

// x split by block_product: against the oracle, bitwise against the unsplit GETT, and contract_jit and a GettPlan
// (which split it themselves) with the same bits at 1 and 2 threads.
void check_charge_case(ChargeCase& x, ThreadPool& two) {
  KernelCache& cache = default_context().kernels();
  REQUIRE(run_blocks(x.p, nullptr));
  x.expect_close_to_oracle();
  const std::vector<double> split = x.c;
  // The unsplit GETT sums the same nonzero terms in the same k order (K < 256: one KC block).
  std::fill(x.c.begin(), x.c.end(), 7.0);
  contract_unsplit(x.p, nullptr);
  for (size_t e = 0; e < split.size(); ++e)
    if (!(split[e] == x.c[e])) FAIL_CHECK("entry " << e << " differs from the unsplit product");
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
    std::fill(x.c.begin(), x.c.end(), 7.0);
    contract_jit(x.p, pool, &default_context().kernels());
    CHECK(same_bits(split, x.c));
    std::fill(x.c.begin(), x.c.end(), 7.0);
    GettPlan plan(x.p, cache, ScratchAllocator::process_default(), true);
    plan.run(x.p, pool);
    CHECK(same_bits(split, x.c));
  }
}

}  // namespace

TEST_CASE("block product: multi-axis Z2 steps split, against the oracle, with the unsplit GETT's bits") {
  ThreadPool two(2);
  for (uint64_t seed = 301; seed < 309; ++seed) {
    Rng r(seed);
    ChargeCase x(r);
    INFO("seed " << seed << ": extents " << x.extent[0] << " " << x.extent[1] << " " << x.extent[2] << " "
                 << x.extent[3] << " " << x.extent[4] << " " << x.extent[5]);
    MESSAGE("block product multi-axis seed " << seed);
    check_charge_case(x, two);
  }
}

TEST_CASE("block product: a Z2 step whose A has neither rows nor contracted indices contiguous (gathered test)") {
  // A[k2, m1, k1, m2] and B[k1, k2, n1, n2] (fastest first): k is fused by B's strides (k1 first, A stride e3 e0),
  // the rows by A's (m1 first, A stride e3), so no 8 entries of A's lines are contiguous in either orientation.
  ThreadPool two(2);
  for (uint64_t seed = 311; seed < 315; ++seed) {
    Rng r(seed);
    ChargeCase x(r, {3, 0, 2, 1}, {2, 3, 4, 5});
    INFO("seed " << seed << ": extents " << x.extent[0] << " " << x.extent[1] << " " << x.extent[2] << " "
                 << x.extent[3] << " " << x.extent[4] << " " << x.extent[5]);
    MESSAGE("block product strided-A seed " << seed);
    check_charge_case(x, two);
  }
}
