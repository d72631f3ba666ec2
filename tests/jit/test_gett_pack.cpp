// The packed GEMM's packers (runtime/jit/GettLoops.h, GettPack.h) copy elements and never change bits: the same
// logical operands stored in other layouts -- A with m contiguous, with k contiguous (transposed in registers), with
// neither (gathered), B with k or n contiguous or neither -- give the same bytes as the column-major product (itself
// checked against the loop oracle), at 1 and 2 threads; and the lane kernels' path (a batch axis of unit stride
// everywhere) gives the definitional loop's bits at 1, 2 and 3 threads.
#include "ProblemGen.h"

#include "runtime/ThreadPool.h"
#include "runtime/jit/Gett.h"
#include "runtime/jit/GettPack.h"
#include "runtime/kernels/HostIsa.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace einstage;
using namespace einstage::testing;

namespace {

using Axis = ContractionProblem::Axis;

// One operand's layout: its axes' strides (the order of `extents`) and its element count; element (i0, i1, ...) of
// the logical tensor sits at sum i_d * stride_d.
struct Layout {
  std::vector<int64_t> strides;
  int64_t elements = 0;
};

// Column-major strides over `extents` taken in the order `order` (order[0] fastest), every stride times `spread`
// (spread 2: a view of every other element, contiguous along no axis).
Layout layout_of(const std::vector<int64_t>& extents, const std::vector<int>& order, int64_t spread = 1) {
  Layout l;
  l.strides.assign(extents.size(), 0);
  int64_t stride = spread;
  for (size_t i = 0; i < order.size(); ++i) {
    l.strides[size_t(order[i])] = stride;
    stride *= extents[size_t(order[i])];
  }
  l.elements = stride;
  return l;
}

// Calls fn(index vector) over every index of `extents` (first fastest).
void for_each_index(const std::vector<int64_t>& extents, const std::function<void(const std::vector<int64_t>&)>& fn) {
  std::vector<int64_t> idx(extents.size(), 0);
  for (;;) {
    fn(idx);
    size_t d = 0;
    for (; d < extents.size(); ++d) {
      if (++idx[d] < extents[d]) break;
      idx[d] = 0;
    }
    if (d == extents.size()) return;
  }
}

int64_t offset(const Layout& l, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * l.strides[d];
  return o;
}

// The problem C[m, n] (+)= sum over k of A[m, k...] B[k..., n] with A's axes (m, k0, k1, ...) and B's (k0, k1, ..., n)
// in the given layouts, C column-major; the logical values come from seeded streams, so every layout holds the same
// tensors. k's order is fixed by B's strides (Gett.h), so layouts of A never change it.
template <typename T>
OwnedProblem problem(int64_t M, int64_t N, const std::vector<int64_t>& K, const Layout& a, const Layout& b,
                     bool accumulate, uint64_t seed) {
  OwnedProblem op;
  op.p.dtype = dtype_v<T>;
  op.p.accumulate = accumulate;
  op.p.m = {{M, a.strides[0], 0, 1}};
  op.p.n = {{N, 0, b.strides[K.size()], M}};
  for (size_t d = 0; d < K.size(); ++d) op.p.k.push_back({K[d], a.strides[d + 1], b.strides[d], 0});
  op.a.elements = a.elements, op.b.elements = b.elements, op.c.elements = M * N;
  for (Storage* s : {&op.a, &op.b, &op.c}) s->bytes.assign(size_t(s->elements) * sizeof(T), 0);
  std::vector<int64_t> a_ext{M}, b_ext = K;
  a_ext.insert(a_ext.end(), K.begin(), K.end());
  b_ext.push_back(N);
  SplitMix64 ra(seed), rb(seed + 1), rc(seed + 2);
  T* pa = reinterpret_cast<T*>(op.a.bytes.data());
  T* pb = reinterpret_cast<T*>(op.b.bytes.data());
  T* pc = reinterpret_cast<T*>(op.c.bytes.data());
  for_each_index(a_ext, [&](const std::vector<int64_t>& i) { pa[offset(a, i)] = random_value<T>(ra); });
  for_each_index(b_ext, [&](const std::vector<int64_t>& i) { pb[offset(b, i)] = random_value<T>(rb); });
  for (int64_t i = 0; i < M * N; ++i) pc[i] = random_value<T>(rc);
  op.c_initial = op.c.bytes;
  op.bind();
  return op;
}

}  // namespace

// One k axis: every layout of A and B sums k in the same order, so all nine pairings give the column-major bits.
// Sizes cover partial micro-tiles in rows and columns, several KC blocks and the tile candidates' widths.
TEST_CASE_TEMPLATE("jit gett pack: A and B in any layout give the column-major product's bits", T, float, double) {
  const GettBlocking blocking = default_blocking(dtype_v<T>, memory_cache().host().has_avx512);  // the packed path
  ThreadPool two(2);
  const uint64_t seed = 9100;
  INFO("seed " << seed);
  for (auto [M, N, K] : {std::tuple{19, 19, 300}, std::tuple{61, 21, 7}, std::tuple{130, 8, 600},
                         std::tuple{33, 70, int(blocking.kc) + 9}, std::tuple{24, 14, 40}, std::tuple{5, 3, 17}}) {
    const std::vector<int64_t> ext{M, K}, bext{K, N};
    const Layout a_layouts[] = {layout_of(ext, {0, 1}), layout_of(ext, {1, 0}), layout_of(ext, {0, 1}, 2)};
    const Layout b_layouts[] = {layout_of(bext, {0, 1}), layout_of(bext, {1, 0}), layout_of(bext, {1, 0}, 2)};
    for (bool accumulate : {false, true}) {
      OwnedProblem reference = problem<T>(M, N, {K}, a_layouts[0], b_layouts[0], accumulate, seed);
      contract_jit(reference.p, nullptr, &memory_cache(), &blocking);
      check_against_oracle<T>(reference);
      for (int ai = 0; ai < 3; ++ai)
        for (int bi = 0; bi < 3; ++bi) {
          INFO("M " << M << " N " << N << " K " << K << " accumulate " << accumulate << " A layout " << ai
                    << " B layout " << bi);
          // A: 0 copies rows, 1 (k-major) transposes in registers, 2 gathers; B: 0 transposes, 1 copies, 2 gathers.
          for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
            OwnedProblem x = problem<T>(M, N, {K}, a_layouts[ai], b_layouts[bi], accumulate, seed);
            contract_jit(x.p, pool, &memory_cache(), &blocking);
            CHECK(x.c.bytes == reference.c.bytes);
          }
        }
    }
  }
}

// Two k axes, the einsum-benchmark MPS step's A[k0, m, k1] against B[n, k1, k0]: k's order runs k1 first (B's
// strides), A's contiguous axis is k0, so each k step's rows are K0 elements apart in A and the packer gathers them.
// The same logical A stored m-major ([m, k0, k1]) or k-major in k's order ([k1, k0, m], k1 fastest: the transposing
// packer) gives the same bits.
TEST_CASE_TEMPLATE("jit gett pack: an A whose contiguous axis is a later k axis is gathered with the same bits", T,
                   float, double) {
  const GettBlocking blocking = default_blocking(dtype_v<T>, memory_cache().host().has_avx512);
  ThreadPool two(2);
  const uint64_t seed = 9200;
  INFO("seed " << seed);
  for (auto [M, N, K0, K1] : {std::tuple{19, 19, 19, 100}, std::tuple{11, 8, 5, 120}, std::tuple{40, 9, 19, 3}}) {
    const std::vector<int64_t> ext{M, K0, K1}, bext{K0, K1, N};
    // B [n, k1, k0]: k1 has the smaller stride, so k runs k1 first.
    const Layout b = layout_of(bext, {2, 1, 0});
    const Layout a_m_major = layout_of(ext, {0, 1, 2}), a_mps = layout_of(ext, {1, 0, 2}),
                 a_k_major = layout_of(ext, {2, 1, 0});
    for (bool accumulate : {false, true}) {
      INFO("M " << M << " N " << N << " K0 " << K0 << " K1 " << K1 << " accumulate " << accumulate);
      OwnedProblem reference = problem<T>(M, N, {K0, K1}, a_m_major, b, accumulate, seed);
      contract_jit(reference.p, nullptr, &memory_cache(), &blocking);
      check_against_oracle<T>(reference);
      for (const Layout* a : {&a_mps, &a_k_major})
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
          OwnedProblem x = problem<T>(M, N, {K0, K1}, *a, b, accumulate, seed);
          contract_jit(x.p, pool, &memory_cache(), &blocking);
          CHECK(x.c.bytes == reference.c.bytes);
        }
    }
  }
}

// More k axes around A's unit-stride one (GettLoops.h: pack_a_whole packs such an A whole, through that axis): the
// unit axis first of two in k's order, the middle of three, the MPS layout with several row slivers, and an A too tall
// for one MC block (packed per KC block as before). Each against the same logical A stored m-major, at 1 and 2
// threads, overwriting and accumulating.
TEST_CASE_TEMPLATE("jit gett pack: an A packed whole through its unit-stride k axis keeps the bits", T, float, double) {
  const GettBlocking blocking = default_blocking(dtype_v<T>, memory_cache().host().has_avx512);
  ThreadPool two(2);
  const uint64_t seed = 9250;
  INFO("seed " << seed);
  struct Case {
    int64_t M, N;
    std::vector<int64_t> K;
    std::vector<int> a_order, b_order;  // layout_of orders over A's (m, k...) and B's (k..., n) axes
  };
  const int64_t tall = blocking.mc + 37;
  const Case cases[] = {
      {19, 19, {19, 40}, {1, 0, 2}, {2, 0, 1}},          // A [k0, m, k1], B [n, k0, k1]: the unit axis first of two
      {21, 10, {6, 5, 7}, {2, 0, 1, 3}, {3, 0, 1, 2}},   // A [k1, m, k0, k2], k in order k0, k1, k2: the middle one
      {50, 19, {19, 30}, {1, 0, 2}, {2, 1, 0}},          // the MPS layout, three row slivers
      {tall, 9, {5, 60}, {1, 0, 2}, {2, 1, 0}},          // over one MC block: per KC block
      {7, 33, {3, 200}, {1, 0, 2}, {2, 1, 0}},           // a short unit axis, several KC blocks
  };
  for (const Case& c : cases) {
    std::vector<int64_t> ext{c.M}, bext = c.K;
    ext.insert(ext.end(), c.K.begin(), c.K.end());
    bext.push_back(c.N);
    std::vector<int> m_major(ext.size());
    for (size_t d = 0; d < m_major.size(); ++d) m_major[d] = int(d);
    const Layout b = layout_of(bext, c.b_order), a_whole = layout_of(ext, c.a_order), a_rows = layout_of(ext, m_major);
    for (bool accumulate : {false, true}) {
      INFO("M " << c.M << " N " << c.N << " k axes " << c.K.size() << " K0 " << c.K[0] << " accumulate "
                << accumulate);
      OwnedProblem reference = problem<T>(c.M, c.N, c.K, a_rows, b, accumulate, seed);
      contract_jit(reference.p, nullptr, &memory_cache(), &blocking);
      check_against_oracle<T>(reference);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
        OwnedProblem x = problem<T>(c.M, c.N, c.K, a_whole, b, accumulate, seed);
        contract_jit(x.p, pool, &memory_cache(), &blocking);
        CHECK(x.c.bytes == reference.c.bytes);
      }
    }
  }
}

// unit_k_axis (GettPack.h) on k offset tables: where A's unit-stride axis sits in k's order, and tables that are no
// such product.
TEST_CASE("jit gett pack: unit_k_axis finds A's unit-stride k axis in k's order") {
  // k axes in summation order with their A strides; the table is their odometer (first fastest).
  auto table = [](const std::vector<std::pair<int64_t, int64_t>>& axes) {
    std::vector<int64_t> t{0};
    for (auto [extent, stride] : axes) {
      std::vector<int64_t> next;
      for (int64_t i = 0; i < extent; ++i)
        for (int64_t o : t) next.push_back(o + i * stride);
      t = next;
    }
    return t;
  };
  int64_t step = -1, run = -1;
  CHECK(gett_detail::unit_k_axis(table({{100, 361}, {19, 1}}), step, run));  // the MPS step: k1 first, k0 unit
  CHECK(step == 100);
  CHECK(run == 19);
  CHECK(gett_detail::unit_k_axis(table({{19, 1}, {40, 361}}), step, run));  // unit axis first
  CHECK(step == 1);
  CHECK(run == 19);
  CHECK(gett_detail::unit_k_axis(table({{6, 50}, {5, 1}, {7, 1000}}), step, run));  // the middle of three
  CHECK(step == 6);
  CHECK(run == 5);
  CHECK(gett_detail::unit_k_axis(table({{4, 10}, {5, 1}, {3, 5}}), step, run));  // two axes continuing each other
  CHECK(step == 4);
  CHECK(run == 15);
  step = run = -1;
  CHECK_FALSE(gett_detail::unit_k_axis(table({{30, 1}}), step, run));          // all one run: a_k_unit's case
  CHECK_FALSE(gett_detail::unit_k_axis(table({{8, 3}, {9, 40}}), step, run));  // no unit stride
  std::vector<int64_t> broken = table({{10, 50}, {4, 1}});
  broken[37] += 1;  // one entry off the product
  CHECK_FALSE(gett_detail::unit_k_axis(broken, step, run));
  CHECK(step == -1);
  CHECK(run == -1);
}

// Every body of the transposing and lane packers this CPU runs (GettPack.h: AVX-512, AVX2, scalar), and the
// fixed-width and column-wise copies, against the element-by-element definition: counts and depths around the vector
// widths.
TEST_CASE_TEMPLATE("jit gett pack: every packer body this CPU runs copies exactly", T, float, double) {
  const uint64_t seed = 9300;
  INFO("seed " << seed);
  SplitMix64 rng(seed);
  const kernels::HostIsa& isa = kernels::host_isa();
  std::vector<T> source(64 * 80);
  for (T& x : source) x = random_value<T>(rng);
  const T poison = T(-7.5);
  for (int body : {0, 1, 2}) {
    if ((body == 2 && !isa.avx512f) || (body == 1 && !isa.avx2)) continue;
    for (int64_t count : {1, 3, 4, 8, 13, 16, 19, 24, 32}) {
      for (int64_t kc : {1, 5, 8, 17, 64}) {
        INFO("body " << body << " count " << count << " kc " << kc);
        const int64_t ld = count + 3;
        std::vector<const T*> rows;
        for (int64_t i = 0; i < count; ++i) rows.push_back(source.data() + i * 80 + i % 3);
        std::vector<T> got(size_t(kc * ld), poison);
        gett_detail::pack_transposed<T>(body, got.data(), ld, rows.data(), count, kc);
        bool same = true;
        for (int64_t p = 0; p < kc; ++p)
          for (int64_t j = 0; j < ld; ++j) {
            const T want = j < count ? rows[size_t(j)][p] : poison;
            same = same && got[size_t(p * ld + j)] == want;
          }
        CHECK(same);
      }
    }
    // The lane kernels' packer (pack_lanes) at the AVX-512 and AVX2 widths and one the memcpy body takes: vector
    // (p, r) of `lanes` elements from koff[p] + roff[r], rows [rows, width) zero, nothing past kc * width vectors.
    for (int64_t lanes : {int64_t(32 / sizeof(T)), int64_t(64 / sizeof(T)), int64_t(3)}) {
      for (int64_t width : {3, 4, 5, 6}) {
        for (int64_t rows = 1; rows <= width; ++rows) {
          for (int64_t kc : {1, 7, 64}) {
            INFO("body " << body << " lanes " << lanes << " width " << width << " rows " << rows << " kc " << kc);
            std::vector<int64_t> koff, roff;
            for (int64_t p = 0; p < kc; ++p) koff.push_back(p * 131 % 97 + p % 5);
            for (int64_t r = 0; r < rows; ++r) roff.push_back(r * 1000 + r % 3);
            const int64_t size = kc * width * lanes;
            std::vector<T> got(size_t(size + lanes), poison);
            gett_detail::pack_lanes<T>(body, got.data(), source.data(), koff.data(), roff.data(), width, rows, lanes,
                                       kc);
            bool same = true;
            for (int64_t p = 0; p < kc; ++p)
              for (int64_t r = 0; r < width; ++r)
                for (int64_t l = 0; l < lanes; ++l) {
                  const T want = r < rows ? source[size_t(koff[size_t(p)] + roff[size_t(r)] + l)] : T(0);
                  same = same && got[size_t((p * width + r) * lanes + l)] == want;
                }
            for (int64_t i = size; i < size + lanes; ++i) same = same && got[size_t(i)] == poison;
            CHECK(same);
          }
        }
      }
    }
  }
  // Runs: rows 0..count of column p at offsets[p]; columns: the same runs cut into slivers of `width`.
  for (int64_t count : {3, 8, 14, 16, 24, 32, 40, 53}) {
    const int64_t kc = 9;
    std::vector<int64_t> offsets;
    for (int64_t p = 0; p < kc; ++p) offsets.push_back(p * 70 + p % 2);
    INFO("count " << count);
    if (count <= 32) {
      std::vector<T> got(size_t(kc * count), poison);
      gett_detail::pack_runs<T>(got.data(), count, source.data(), offsets.data(), count, kc);
      bool same = true;
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < count; ++i) same = same && got[size_t(p * count + i)] == source[size_t(offsets[p] + i)];
      CHECK(same);
    }
    for (int64_t width : {8, 12, 24}) {
      const int64_t slivers = (count + width - 1) / width;
      std::vector<T> got(size_t(slivers * width * kc), poison);
      gett_detail::pack_columns<T>(got.data(), width * kc, width, source.data(), offsets.data(), count, kc);
      bool same = true;
      for (int64_t r = 0; r < slivers * width; ++r)
        for (int64_t p = 0; p < kc; ++p) {
          const T want = r < count ? source[size_t(offsets[p] + r)] : poison;  // padding is the caller's
          same = same && got[size_t((r / width) * width * kc + p * width + r % width)] == want;
        }
      CHECK_MESSAGE(same, "width " << width);
    }
  }
}

// The lane path end to end (column-major bij,bjk->bik with a second batch axis: lane blocks packed by pack_lanes,
// full and partial, taken by whichever thread claims them next): the same bytes at 1, 2 and 3 threads, and those of
// the definitional loop that sums each output over k in order by fused multiply-adds from zero, as the lane kernel
// does within its one KC block (k = 21).
TEST_CASE_TEMPLATE("jit gett pack: the lane path gives the definitional loop's bits at 1, 2 and 3 threads", T, float,
                   double) {
  const uint64_t seed = 9500;
  INFO("seed " << seed);
  SplitMix64 rng(seed);
  const int64_t L = 2 * (64 / int64_t(sizeof(T))) + 3, I = 13, J = 21, K = 9, E = 2;  // lanes, rows, k, columns, batch
  OwnedProblem base;
  base.p.dtype = dtype_v<T>;
  base.p.batch = {{L, 1, 1, 1}, {E, L * I * J, L * J * K, L * I * K}};  // A[b,i,j,e], B[b,j,k,e], C[b,i,k,e]
  base.p.m = {{I, L, 0, L}};
  base.p.k = {{J, L * I, L, 0}};
  base.p.n = {{K, 0, L * J, L * I}};
  base.a.elements = L * I * J * E;
  base.b.elements = L * J * K * E;
  base.c.elements = L * I * K * E;
  allocate_and_fill<T>(base, rng, /*fill_c=*/false);
  std::vector<T> want(size_t(base.c.elements));
  const T* a = reinterpret_cast<const T*>(base.a.bytes.data());
  const T* b = reinterpret_cast<const T*>(base.b.bytes.data());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t l = 0; l < L; ++l) {
          T acc = 0;
          for (int64_t j = 0; j < J; ++j)
            acc = std::fma(a[l + L * i + L * I * j + L * I * J * e], b[l + L * j + L * J * k + L * J * K * e], acc);
          want[size_t(l + L * i + L * I * k + L * I * K * e)] = acc;
        }
  ThreadPool two(2), three(3);
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two, &three}) {
    INFO("threads " << (pool ? pool->size() : 1));
    OwnedProblem x = base;
    x.bind();
    contract_jit(x.p, pool, &memory_cache());
    CHECK(std::memcmp(x.c.bytes.data(), want.data(), x.c.bytes.size()) == 0);
  }
}
