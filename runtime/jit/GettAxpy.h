// Matrix-vector products whose matrix is contiguous along its rows, not along the contracted axis: ij,j->i on a
// column-major matrix (C = A x with one column, A's and C's rows contiguous), C built as a sum of A's columns scaled
// by x. The direct kernels run it with their narrow tile (4 vectors of rows by one column): per k step four loads
// from one column, then the next column 256 rows further on, so each pass over k moves 256 bytes per column and the
// matrix streams from L2 at about 90-140 GB/s on a Zen 5, behind OpenBLAS's 130 GB/s and far from the 210 GB/s that
// 16 vectors per pass reach (a 1 KiB run per column, 16 independent accumulator chains). Here blocks of up to 16
// vectors of rows (8 under AVX2) run over all of k, from the columns' first 64-byte boundary (EINSTAGE_AXPY_ROWS).
// Every row has its own accumulator from zero, one fma per k step in the fused k order (the k tables), then is
// stored or added to C: the direct kernels' order (MicroKernel.cpp: k_steps, store), so the bits are theirs, and
// they do not depend on the blocking or on threads. Row blocks are split between the pool's threads from
// kMinThreadedMatVecMacs multiply-adds on (Gett.h; ranges of kSplitRows rows). Real dtypes on a CPU with AVX2 and FMA (GettModes.cpp: dots_isa); complex stays on
// the 1m path. Included through GettSetup.h by runtime/jit/Gett*.cpp only.
#pragma once

#include "runtime/ThreadPool.h"
#include "runtime/jit/GettLoops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace einstage::gett_detail {

// The project compiles with -ffp-contract=off, so a vector `m * y + acc` would round twice: the multiply-adds are
// explicit fmas, one overload per vector type, each with its ISA as target.
[[gnu::target("avx512f")]] inline __m512d vfma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
[[gnu::target("avx512f")]] inline __m512 vfma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
[[gnu::target("avx2,fma")]] inline __m256d vfma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
[[gnu::target("avx2,fma")]] inline __m256 vfma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
// Broadcasts (the first argument picks the vector type; GCC makes eight masked broadcasts of a lane-by-lane splat).
[[gnu::target("avx512f")]] inline __m512d vsplat(__m512d, double v) { return _mm512_set1_pd(v); }
[[gnu::target("avx512f")]] inline __m512 vsplat(__m512, float v) { return _mm512_set1_ps(v); }
[[gnu::target("avx2,fma")]] inline __m256d vsplat(__m256d, double v) { return _mm256_set1_pd(v); }
[[gnu::target("avx2,fma")]] inline __m256 vsplat(__m256, float v) { return _mm256_set1_ps(v); }

// The intrinsic vector type of W lanes of R.
template <typename R, int W> struct VecOf;
template <> struct VecOf<double, 8> { using type = __m512d; };
template <> struct VecOf<float, 16> { using type = __m512; };
template <> struct VecOf<double, 4> { using type = __m256d; };
template <> struct VecOf<float, 8> { using type = __m256; };

// The body of axpy_rows_avx512 / axpy_rows_avx2 (macros: GCC inlines an intrinsic only into a function with its
// target, and a shared template body has none). Per row an accumulator from zero, acc = fma(A's element, x[k], acc)
// over k in table order, then stored or added to C, whichever vector or lane computes the row.
//
// One block: N vectors of W rows from row r, plus (E) two more vectors: at r0 (of which only the first h rows are
// kept, when hh) and ending at r1 (only the last t rows kept, when tt); one that is not kept reads the block's first
// vector again (an L1 hit) rather than branch in the k loop.
#define EINSTAGE_AXPY_BLOCK(N, E)                                                                                    \
  {                                                                                                                  \
    Vec acc[N], ah = Vec{}, at = Vec{};                                                                              \
    for (int v = 0; v < (N); ++v) acc[v] = Vec{};                                                                    \
    const int64_t ho = hh ? r0 : r, to = tt ? r1 - W : r;                                                            \
    for (int64_t p = 0; p < k; ++p) {                                                                                \
      const R* col = a + ka[p];                                                                                      \
      const Vec y = vsplat(Vec{}, x[kb[p]]);                                                                         \
      Vec m;                                                                                                         \
      if (E) __builtin_memcpy(&m, col + ho, sizeof(Vec)), ah = vfma(m, y, ah);                                       \
      for (int v = 0; v < (N); ++v) {                                                                                \
        __builtin_memcpy(&m, col + r + v * W, sizeof(Vec));                                                          \
        acc[v] = vfma(m, y, acc[v]);                                                                                 \
      }                                                                                                              \
      if (E) __builtin_memcpy(&m, col + to, sizeof(Vec)), at = vfma(m, y, at);                                       \
    }                                                                                                                \
    for (int v = 0; v < (N); ++v) {                                                                                  \
      Vec out = acc[v];                                                                                              \
      if (accumulate) {                                                                                              \
        Vec old;                                                                                                     \
        __builtin_memcpy(&old, c + r + v * W, sizeof(Vec));                                                          \
        out = old + out;                                                                                             \
      }                                                                                                              \
      __builtin_memcpy(c + r + v * W, &out, sizeof(Vec));                                                            \
    }                                                                                                                \
    R lanes[W];                                                                                                      \
    if (E && hh) {                                                                                                   \
      __builtin_memcpy(lanes, &ah, sizeof(Vec));                                                                     \
      for (int64_t l = 0; l < h; ++l) c[r0 + l] = accumulate ? c[r0 + l] + lanes[l] : lanes[l];                      \
    }                                                                                                                \
    if (E && tt) {                                                                                                   \
      __builtin_memcpy(lanes, &at, sizeof(Vec));                                                                     \
      for (int64_t l = W - t; l < W; ++l) c[r1 - W + l] = accumulate ? c[r1 - W + l] + lanes[l] : lanes[l];          \
    }                                                                                                                \
  }
#define EINSTAGE_AXPY_CASE(N)                                                                                        \
  case N:                                                                                                            \
    if (hh || tt) EINSTAGE_AXPY_BLOCK(N, 1) else EINSTAGE_AXPY_BLOCK(N, 0)                                           \
    break;
// Rows [r0, r1). When every k step's column has the same alignment (`aligned`) and there are at least two vectors
// of rows, the vectors start at the first 64-byte boundary (a vector across two cache lines costs two line reads: a
// 256 x 256 f64 matrix from std::vector, 16 bytes past a boundary, ran 3.9 us instead of 2.9 us); the h rows before
// it ride along in the first block and the t rows after the last whole vector in the last one. Otherwise the blocks
// start at r0 and the last rows below one vector run as scalars. The S whole vectors run in ceil(S / 16) blocks of
// nearly equal size (31 vectors as 16 + 15, not 16 + 4 + 4 + 4 + 1 + 1 + 1: a pass of few vectors is bound by the
// fma latency).
#define EINSTAGE_AXPY_ROWS(V)                                                                                        \
  using Vec = typename VecOf<R, W>::type;                                                                            \
  int64_t h = 0, t = 0, r = r0, end = r1;                                                                            \
  const bool peel = aligned && r1 - r0 >= 2 * W && reinterpret_cast<uintptr_t>(a) % sizeof(R) == 0;                  \
  if (peel) {                                                                                                        \
    const uintptr_t address = reinterpret_cast<uintptr_t>(a + ka[0] + r0);                                           \
    h = int64_t((64 - address % 64) % 64 / sizeof(R)) % W;                                                           \
    r = r0 + h;                                                                                                      \
    t = (r1 - r) % W;                                                                                                \
    end = r1 - t;                                                                                                    \
  } else {                                                                                                           \
    end = r0 + (r1 - r0) / W * W;                                                                                    \
  }                                                                                                                  \
  const int64_t slots = (end - r) / W, blocks = (slots + (V) - 1) / (V);                                             \
  for (int64_t i = 0; i < blocks; ++i) {                                                                             \
    const int64_t n = slots / blocks + (i < slots % blocks ? 1 : 0);                                                 \
    const bool hh = i == 0 && h > 0, tt = i == blocks - 1 && t > 0;                                                  \
    switch (n) {                                                                                                     \
      EINSTAGE_AXPY_CASE(1) EINSTAGE_AXPY_CASE(2) EINSTAGE_AXPY_CASE(3) EINSTAGE_AXPY_CASE(4)                        \
      EINSTAGE_AXPY_CASE(5) EINSTAGE_AXPY_CASE(6) EINSTAGE_AXPY_CASE(7) EINSTAGE_AXPY_CASE(8)                        \
      EINSTAGE_AXPY_CASE(9) EINSTAGE_AXPY_CASE(10) EINSTAGE_AXPY_CASE(11) EINSTAGE_AXPY_CASE(12)                     \
      EINSTAGE_AXPY_CASE(13) EINSTAGE_AXPY_CASE(14) EINSTAGE_AXPY_CASE(15) EINSTAGE_AXPY_CASE(16)                    \
      default: break;                                                                                                \
    }                                                                                                                \
    r += n * W;                                                                                                      \
  }                                                                                                                  \
  for (r = end; !peel && r < r1; ++r) {                                                                              \
    R s = 0;                                                                                                         \
    for (int64_t p = 0; p < k; ++p) s = std::fma(a[r + ka[p]], x[kb[p]], s);                                         \
    c[r] = accumulate ? c[r] + s : s;                                                                                \
  }

template <typename R>
[[gnu::target("avx512f")]] void axpy_rows_avx512(const R* a, const R* x, R* c, const int64_t* ka, const int64_t* kb,
                                                 int64_t k, int64_t r0, int64_t r1, bool aligned, bool accumulate) {
  constexpr int W = 64 / int(sizeof(R));
  EINSTAGE_AXPY_ROWS(16)
}

template <typename R>
[[gnu::target("avx2,fma")]] void axpy_rows_avx2(const R* a, const R* x, R* c, const int64_t* ka, const int64_t* kb,
                                                int64_t k, int64_t r0, int64_t r1, bool aligned, bool accumulate) {
  constexpr int W = 32 / int(sizeof(R));
  EINSTAGE_AXPY_ROWS(8)
}

#undef EINSTAGE_AXPY_ROWS
#undef EINSTAGE_AXPY_BLOCK
#undef EINSTAGE_AXPY_CASE

// The set-up of one such product: A's and C's first row, the vector's first element, the k tables (A's and the
// vector's offsets per k step, in the fused order).
template <typename R>
struct Axpy {
  int isa = 0;  // 2: AVX-512, 1: AVX2 + FMA
  bool accumulate = false;
  bool aligned = false;  // every k step's column starts at the same offset within a 64-byte line
  int64_t rows = 0, a0 = 0, x0 = 0, c0 = 0;
  std::vector<int64_t> ka, kb;

  // Rows per work item of the threaded split: one AVX-512 f64 block (16 vectors of 8).
  static constexpr int64_t kSplitRows = 128;

  void run(const void* a_data, const void* b_data, void* c_data, ThreadPool* pool) const {
    const R* a = static_cast<const R*>(a_data) + a0;
    const R* x = static_cast<const R*>(b_data) + x0;
    R* c = static_cast<R*>(c_data) + c0;
    const int64_t k = static_cast<int64_t>(ka.size());
    auto span = [&](int64_t r0, int64_t r1) {
      if (isa == 2) axpy_rows_avx512<R>(a, x, c, ka.data(), kb.data(), k, r0, r1, aligned, accumulate);
      else axpy_rows_avx2<R>(a, x, c, ka.data(), kb.data(), k, r0, r1, aligned, accumulate);
    };
    if (pool == nullptr || pool->size() <= 1 || double(rows) * double(k) < kMinThreadedMatVecMacs || rows < 2 * kSplitRows) {
      span(0, rows);
      return;
    }
    // Every row has its own accumulator and order (axpy_block), so a split by rows keeps the bits.
    const int64_t groups = (rows + kSplitRows - 1) / kSplitRows;
    parallel_for(pool, groups, [&](int64_t g0, int64_t g1) { span(g0 * kSplitRows, std::min(rows, g1 * kSplitRows)); });
  }
  size_t table_bytes() const { return (ka.capacity() + kb.capacity()) * sizeof(int64_t); }
};

// Sets `d` up for an axpy_shaped problem `g` (Gett.cpp) on the ISA level `isa` (Gett.cpp: dots_isa).
template <typename R>
void set_up_axpy(Axpy<R>& d, const Gett<R>& g, int isa) {
  d.isa = isa;
  d.accumulate = g.accumulate;
  d.rows = g.m.size;
  d.a0 = g.m.a[0] + g.batch.a[0];
  d.x0 = g.n.b[0] + g.batch.b[0];
  d.c0 = g.m.c[0] + g.n.c[0] + g.batch.c[0];
  d.ka.assign(g.k.a.begin(), g.k.a.end());
  d.kb.assign(g.k.b.begin(), g.k.b.end());
  constexpr int64_t line = 64 / int64_t(sizeof(R));
  d.aligned = std::all_of(d.ka.begin(), d.ka.end(), [&](int64_t o) { return ((o - d.ka[0]) % line + line) % line == 0; });
}

}  // namespace einstage::gett_detail
