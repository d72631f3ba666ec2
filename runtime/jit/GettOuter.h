// Large outer products, C[i, j] = A[i] B[j] with no contracted axis (k = 1), C overwritten (not accumulated), A's and
// C's rows contiguous and C at least L2 / kStreamDivisor bytes, written column by column; with streaming (non-temporal)
// stores when the problem's stream_c is set (runtime/kernels/Contraction.h). The gradient of a matrix chain writes one
// such product per matrix (its cotangent: six 256 x 256 f64 products, 3 MiB, for chain7) and rereads every matrix for
// the cotangents in between: ordinary stores first read each line of C for ownership and then leave C in L2, evicting
// the matrices the walk reads next, while streaming stores write C's lines whole, past the caches. Only the caller
// knows that C is not read again soon (a second term accumulated into C would come back from memory), hence the
// problem's flag. Each element is fma(A[i], B[j], 0), the direct kernels' value for k = 1 (MicroKernel.cpp: an
// accumulator from zero, one fma per k step), so the bits are theirs, streamed or not; columns are split between the
// pool's threads (elements are independent: any split gives the same bits). Real dtypes on a CPU with AVX2 and FMA
// (GettModes.cpp: dots_isa); complex stays on the 1m path. Included through GettSetup.h by Gett*.cpp only.
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

// An outer product runs in this mode when C has at least L2 / kStreamDivisor bytes: 512 KiB on a 2 MiB L2 (one
// 256 x 256 f64 cotangent); smaller ones stay on the direct kernels (and L2), where streaming would gain little.
inline constexpr int64_t kStreamDivisor = 4;

// The rows before c's first 64-byte boundary (all of them when c is not even element-aligned: no vector store).
template <typename R>
inline int64_t unaligned_head(const R* c, int64_t rows) {
  const auto address = reinterpret_cast<uintptr_t>(c);
  if (address % sizeof(R) != 0) return rows;
  return std::min<int64_t>(rows, int64_t((64 - address % 64) % 64 / sizeof(R)));
}

// The vector middle of one column, per ISA (written twice: GCC has no width-generic streaming store, and a target
// can be given to a function but not passed down to a shared template body that calls intrinsics): col[r] = fma(a[r], bj, 0) for rows r, r + W, ... while a whole vector
// fits, with streaming stores when `stream` (then `col + r` is 64-byte aligned); returns the first row not written.
template <typename R>
[[gnu::target("avx512f")]] int64_t outer_middle_avx512(const R* a, R bj, R* col, int64_t r, int64_t rows,
                                                       bool stream) {
  constexpr int64_t W = 64 / int64_t(sizeof(R));
  if constexpr (std::is_same_v<R, double>) {
    const __m512d y = _mm512_set1_pd(bj), zero = _mm512_setzero_pd();
    if (stream)
      for (; r + W <= rows; r += W) _mm512_stream_pd(col + r, _mm512_fmadd_pd(_mm512_loadu_pd(a + r), y, zero));
    for (; r + W <= rows; r += W) _mm512_storeu_pd(col + r, _mm512_fmadd_pd(_mm512_loadu_pd(a + r), y, zero));
  } else {
    const __m512 y = _mm512_set1_ps(bj), zero = _mm512_setzero_ps();
    if (stream)
      for (; r + W <= rows; r += W) _mm512_stream_ps(col + r, _mm512_fmadd_ps(_mm512_loadu_ps(a + r), y, zero));
    for (; r + W <= rows; r += W) _mm512_storeu_ps(col + r, _mm512_fmadd_ps(_mm512_loadu_ps(a + r), y, zero));
  }
  return r;
}

template <typename R>
[[gnu::target("avx2,fma")]] int64_t outer_middle_avx2(const R* a, R bj, R* col, int64_t r, int64_t rows, bool stream) {
  constexpr int64_t W = 32 / int64_t(sizeof(R));
  if constexpr (std::is_same_v<R, double>) {
    const __m256d y = _mm256_set1_pd(bj), zero = _mm256_setzero_pd();
    if (stream)
      for (; r + W <= rows; r += W) _mm256_stream_pd(col + r, _mm256_fmadd_pd(_mm256_loadu_pd(a + r), y, zero));
    for (; r + W <= rows; r += W) _mm256_storeu_pd(col + r, _mm256_fmadd_pd(_mm256_loadu_pd(a + r), y, zero));
  } else {
    const __m256 y = _mm256_set1_ps(bj), zero = _mm256_setzero_ps();
    if (stream)
      for (; r + W <= rows; r += W) _mm256_stream_ps(col + r, _mm256_fmadd_ps(_mm256_loadu_ps(a + r), y, zero));
    for (; r + W <= rows; r += W) _mm256_storeu_ps(col + r, _mm256_fmadd_ps(_mm256_loadu_ps(a + r), y, zero));
  }
  return r;
}

// Columns [j0, j1): c[r] = fma(a[r], b, 0) for every row r; the 64-byte aligned middle of each column by `Middle`
// (one of the two above, streamed when `stream`), its unaligned head and its tail with ordinary stores (the same
// value either way). Inlined into the per-ISA entry points below, which give it their target.
template <typename R, int64_t (*Middle)(const R*, R, R*, int64_t, int64_t, bool)>
[[gnu::always_inline]] inline void outer_columns(const R* a, const R* b, R* c, int64_t rows, const int64_t* b_off,
                                                 const int64_t* c_off, int64_t j0, int64_t j1, bool stream) {
  for (int64_t j = j0; j < j1; ++j) {
    const R bj = b[b_off[j]];
    R* col = c + c_off[j];
    int64_t r = 0;
    if (stream)  // from a 64-byte boundary, so whole lines are streamed (a 64-byte boundary is a 32-byte one too)
      for (const int64_t head = unaligned_head(col, rows); r < head; ++r) col[r] = std::fma(a[r], bj, R(0));
    r = Middle(a, bj, col, r, rows, stream);
    for (; r < rows; ++r) col[r] = std::fma(a[r], bj, R(0));
  }
  if (stream) _mm_sfence();  // streaming stores are weakly ordered: complete them before the chunk reports done
}

template <typename R>
[[gnu::target("avx512f")]] void outer_columns_avx512(const R* a, const R* b, R* c, int64_t rows, const int64_t* b_off,
                                                     const int64_t* c_off, int64_t j0, int64_t j1, bool stream) {
  outer_columns<R, outer_middle_avx512<R>>(a, b, c, rows, b_off, c_off, j0, j1, stream);
}

template <typename R>
[[gnu::target("avx2,fma")]] void outer_columns_avx2(const R* a, const R* b, R* c, int64_t rows, const int64_t* b_off,
                                                    const int64_t* c_off, int64_t j0, int64_t j1, bool stream) {
  outer_columns<R, outer_middle_avx2<R>>(a, b, c, rows, b_off, c_off, j0, j1, stream);
}

// The set-up of one outer product: A's row 0 and, per column j, B's element and C's row 0.
template <typename R>
struct Outer {
  int isa = 0;  // 2: AVX-512, 1: AVX2 + FMA
  int64_t rows = 0;
  int64_t a0 = 0;
  std::vector<int64_t> b_off, c_off;

  // `stream`: streaming stores (the problem's stream_c); ordinary ones otherwise.
  void run(const void* a_data, const void* b_data, void* c_data, ThreadPool* pool, bool stream) const {
    const R* a = static_cast<const R*>(a_data) + a0;
    const R* b = static_cast<const R*>(b_data);
    R* c = static_cast<R*>(c_data);
    const int64_t cols = static_cast<int64_t>(c_off.size());
    auto columns = [&](int64_t j0, int64_t j1) {
      if (isa == 2) outer_columns_avx512<R>(a, b, c, rows, b_off.data(), c_off.data(), j0, j1, stream);
      else outer_columns_avx2<R>(a, b, c, rows, b_off.data(), c_off.data(), j0, j1, stream);
    };
    parallel_for(pool, cols, columns);
  }
  size_t table_bytes() const { return (b_off.capacity() + c_off.capacity()) * sizeof(int64_t); }
};

// Sets `o` up for an outer-product problem `g` (Gett.cpp: outer_shaped) on the ISA level `isa` (Gett.cpp: dots_isa).
template <typename R>
void set_up_outer(Outer<R>& o, const Gett<R>& g, int isa) {
  o.isa = isa;
  o.rows = g.m.size;
  o.a0 = g.m.a[0] + g.k.a[0] + g.batch.a[0];
  o.b_off.resize(size_t(g.n.size));
  o.c_off.resize(size_t(g.n.size));
  for (int64_t j = 0; j < g.n.size; ++j)
    o.b_off[j] = g.n.b[j] + g.k.b[0] + g.batch.b[0], o.c_off[j] = g.n.c[j] + g.m.c[0] + g.batch.c[0];
}

}  // namespace einstage::gett_detail
