// The packed GEMM's copy loops (runtime/jit/GettLoops.h: pack_a_sliver, pack_a_block, pack_b_sliver). An operand
// whose contiguous axis is a contracted one (a k-major A, a row-major i,k; a B with contiguous k) is packed by
// reading W vectors along k from W rows (or columns), transposing the W x W block in registers and storing W vectors
// across the rows, where the element loop read and wrote one element per instruction and wrote each to another cache
// line (pack_transposed: AVX-512 or AVX2 bodies chosen at run time, a scalar loop on other CPUs). Runs contiguous in
// the source are copied at the micro-tile's fixed width (pack_runs), and a column-major A block column by column
// across its slivers (pack_columns), so an A read from memory once streams through the prefetchers. A packing change
// never changes bits: the packed buffers hold the same elements at the same places. The packers ask for the lines of
// the runs they read next (prefetch_run), and unit_k_axis finds the unit-stride k axis of an A that is neither
// m- nor k-contiguous as a whole, which GettLoops.h's pack_a_whole transposes. The lane kernels' slivers (a batch
// axis of unit stride in A, B and C: column-major bij,bjk->bik) are vectors along that axis, one vector move each
// (pack_lanes, AVX-512 or AVX2 at run time). Real dtypes. Internal to
// runtime/jit/Gett*.cpp (through GettLoops.h); tests/jit/test_gett_pack.cpp includes it to run every body the CPU has.
#pragma once

#include "runtime/kernels/HostIsa.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace einstage::gett_detail {

// Which transposing body runs here: 2 AVX-512, 1 AVX2, 0 neither (scalar).
inline int pack_isa() {
  const kernels::HostIsa& isa = kernels::host_isa();
  return isa.avx512f ? 2 : isa.avx2 ? 1 : 0;
}

// Element j of one butterfly stage of a W x W transpose: pairs of rows H apart exchange blocks of H elements; the
// low half (Hi false) takes x's even blocks and y's even blocks interleaved, the high half their odd blocks. After
// the stages H = 1, 2, 4, ... row j holds column j.
template <int W, int H, bool Hi>
constexpr int butterfly_index(int j) {
  const int base = (j / (2 * H)) * 2 * H + j % H + (Hi ? H : 0);
  return (j / H) % 2 == 0 ? base : W + base;
}
// One stage on the pair (x, y), in place (vectors pass by reference: a vector argument or result of a function
// without the vector ISA's target would change the calling convention).
template <typename V, int W, int H, size_t... J>
[[gnu::always_inline]] inline void butterfly_pair(V& x, V& y, std::index_sequence<J...>) {
  const V lo = __builtin_shufflevector(x, y, butterfly_index<W, H, false>(int(J))...);
  const V hi = __builtin_shufflevector(x, y, butterfly_index<W, H, true>(int(J))...);
  x = lo;
  y = hi;
}
template <typename V, int W, int H = 1>
[[gnu::always_inline]] inline void transpose_square(V (&v)[W]) {
  if constexpr (H < W) {
    for (int i = 0; i < W; ++i)
      if ((i / H) % 2 == 0) butterfly_pair<V, W, H>(v[i], v[i + H], std::make_index_sequence<W>{});
    transpose_square<V, W, 2 * H>(v);
  }
}

// dst[p * ld + i] = src[i][p] for i < count, p < kc: blocks of W rows by W k steps through registers, the rest by
// elements.
template <typename R, int W>
[[gnu::always_inline]] inline void pack_transposed_body(R* dst, int64_t ld, const R* const* src, int64_t count,
                                                        int64_t kc) {
  int64_t i = 0;
  if constexpr (W > 1) {
    using V [[gnu::vector_size(W * sizeof(R))]] = R;
    for (; i + W <= count; i += W) {
      int64_t p = 0;
      for (; p + W <= kc; p += W) {
        V v[W];
        for (int r = 0; r < W; ++r) std::memcpy(&v[r], src[i + r] + p, sizeof(V));
        transpose_square<V, W>(v);
        for (int q = 0; q < W; ++q) std::memcpy(dst + (p + q) * ld + i, &v[q], sizeof(V));
      }
      for (; p < kc; ++p)
        for (int r = 0; r < W; ++r) dst[p * ld + i + r] = src[i + r][p];
    }
  }
  for (; i < count; ++i) {
    const R* s = src[i];
    for (int64_t p = 0; p < kc; ++p) dst[p * ld + i] = s[p];
  }
}

template <typename R>
[[gnu::target("avx512f")]] void pack_transposed_avx512(R* dst, int64_t ld, const R* const* src, int64_t count,
                                                       int64_t kc) {
  pack_transposed_body<R, 64 / int(sizeof(R))>(dst, ld, src, count, kc);
}
template <typename R>
[[gnu::target("avx2")]] void pack_transposed_avx2(R* dst, int64_t ld, const R* const* src, int64_t count,
                                                  int64_t kc) {
  pack_transposed_body<R, 32 / int(sizeof(R))>(dst, ld, src, count, kc);
}

// dst[p * ld + i] = src[i][p] for i < count, p < kc, on the body `isa` (pack_isa()) names.
template <typename R>
void pack_transposed(int isa, R* dst, int64_t ld, const R* const* src, int64_t count, int64_t kc) {
  if (isa == 2) pack_transposed_avx512<R>(dst, ld, src, count, kc);
  else if (isa == 1) pack_transposed_avx2<R>(dst, ld, src, count, kc);
  else pack_transposed_body<R, 1>(dst, ld, src, count, kc);
}

// Asks for the cache lines of `length` elements from `run` on (prefetcht0), ahead of a packer's reads: an operand read
// from memory once (the einsum-benchmark instances' inputs) arrives as fast as the lines are requested, and the
// packers read it in runs too short or too far apart for the hardware prefetchers to run ahead of (a column of A, a
// sliver's rows along k, a unit-stride k run per row). Never a change of bits.
template <typename R>
[[gnu::always_inline]] inline void prefetch_run(const R* run, int64_t length) {
  for (int64_t i = 0; i < length; i += 64 / int64_t(sizeof(R))) __builtin_prefetch(run + i);
  __builtin_prefetch(run + length - 1);
}

// A's k offsets as p = lo + step * (q + run * hi) (lo < step, q < run) with ka[p] = ka[lo + step * run * hi] + q: a
// contracted axis of unit stride in A, `run` long, `step` k steps apart in k's summation order (the order of B's
// strides), with the other k axes around it. Sets step and run and returns true if there is one, checked on every
// entry; false when k is not such a product, or when A's k offsets are all one run (step 1, run K: the transposing
// packer reads them per KC block already).
inline bool unit_k_axis(const std::vector<int64_t>& ka, int64_t& step, int64_t& run) {
  const int64_t K = int64_t(ka.size());
  int64_t s = 1;
  while (s < K && ka[size_t(s)] != ka[0] + 1) ++s;
  if (s >= K) return false;
  int64_t e = 1;
  while ((e + 1) * s <= K && ka[size_t(e * s)] == ka[0] + e) ++e;
  if (K % (s * e) != 0 || (s == 1 && e == K)) return false;
  for (int64_t p = 0; p < K; ++p)
    if (ka[size_t(p)] != ka[size_t(p % s + s * e * (p / (s * e)))] + (p / s) % e) return false;
  step = s, run = e;
  return true;
}

// dst[p * ld + i] = base[offsets[p] + i] for i < count, p < kc: runs contiguous in the source (a column-major A's
// rows, a row-major B's columns). A full micro-tile's run (count 8, 14, 16, 24 or 32) is a copy of a fixed size, which
// compiles to straight vector moves; a loop of run-time length costs its set-up per k step, as much as the copy for
// runs this short.
template <typename R, int W>
[[gnu::always_inline]] inline void pack_runs_body(R* dst, int64_t ld, const R* base, const int64_t* offsets,
                                                  int64_t count, int64_t kc) {
  for (int64_t p = 0; p < kc; ++p) {
    const R* s = base + offsets[p];
    R* d = dst + p * ld;
    if constexpr (W > 0) std::memcpy(d, s, sizeof(R) * W);
    else
      for (int64_t i = 0; i < count; ++i) d[i] = s[i];
  }
}
template <typename R>
void pack_runs(R* dst, int64_t ld, const R* base, const int64_t* offsets, int64_t count, int64_t kc) {
  switch (count) {
    case 8: return pack_runs_body<R, 8>(dst, ld, base, offsets, count, kc);
    case 14: return pack_runs_body<R, 14>(dst, ld, base, offsets, count, kc);
    case 16: return pack_runs_body<R, 16>(dst, ld, base, offsets, count, kc);
    case 24: return pack_runs_body<R, 24>(dst, ld, base, offsets, count, kc);
    case 32: return pack_runs_body<R, 32>(dst, ld, base, offsets, count, kc);
    default: return pack_runs_body<R, 0>(dst, ld, base, offsets, count, kc);
  }
}

// How many k steps ahead pack_columns asks for a column (prefetch_run): the einsum-benchmark matrix chain's
// 400 x 400 column-major inputs, read once, packed 25% faster (distances 2 and 4 alike; GEMM 256-2048 unchanged).
inline constexpr int64_t kColumnsAhead = 4;

// A block of slivers from runs contiguous in the source, column by column: for each k step p, the rows
// [0, rows) at base + offsets[p] go to sliver t = row / width at dst + t * sliver + p * width, the last sliver possibly
// partial (its padding is the caller's). One k step's rows are one contiguous read across every sliver (a column-major
// A: whole columns, one after the other when the block spans all rows), where a sliver at a time read each column in
// pieces of one micro-tile and came back for the next piece: on an A read from memory once (an einsum-benchmark
// matrix chain's inputs) the hardware prefetchers follow the first pattern and not the second.
template <typename R, int W>
[[gnu::always_inline]] inline void pack_columns_body(R* dst, int64_t sliver, int64_t width, const R* base,
                                                     const int64_t* offsets, int64_t rows, int64_t kc) {
  const int64_t w = W > 0 ? W : width;
  const int64_t full = rows / w, rem = rows - full * w;
  for (int64_t p = 0; p < kc; ++p) {
    if (p + kColumnsAhead < kc) prefetch_run(base + offsets[p + kColumnsAhead], rows);
    const R* s = base + offsets[p];
    R* d = dst + p * w;
    for (int64_t t = 0; t < full; ++t, s += w, d += sliver) {
      if constexpr (W > 0) std::memcpy(d, s, sizeof(R) * W);
      else
        for (int64_t i = 0; i < w; ++i) d[i] = s[i];
    }
    for (int64_t i = 0; i < rem; ++i) d[i] = s[i];
  }
}
template <typename R>
void pack_columns(R* dst, int64_t sliver, int64_t width, const R* base, const int64_t* offsets, int64_t rows,
                  int64_t kc) {
  switch (width) {
    case 8: return pack_columns_body<R, 8>(dst, sliver, width, base, offsets, rows, kc);
    case 16: return pack_columns_body<R, 16>(dst, sliver, width, base, offsets, rows, kc);
    case 24: return pack_columns_body<R, 24>(dst, sliver, width, base, offsets, rows, kc);
    case 32: return pack_columns_body<R, 32>(dst, sliver, width, base, offsets, rows, kc);
    default: return pack_columns_body<R, 0>(dst, sliver, width, base, offsets, rows, kc);
  }
}

// The lane kernels' packer (GettLoops.h: lane_gemm): `rows` vectors of `lanes` consecutive elements per k step p, row
// r's from base + koff[p] + roff[r], copied to dst + (p * width + r) * lanes; rows [rows, width) are zero (a sliver's
// padding). Each vector is one cache line (AVX-512) or half of one (AVX2) a whole row or k step away from the next,
// so the copies are bound by how many the core keeps in flight, not by the bytes: one vector move per copy instead
// of four 16-byte ones (with the row loop unrolled at the lane kernels' widths) packed the batched bij,bjk->bik at
// 64^3 per entry in 0.095 ms instead of 0.17 (docs/performance.md, 2026-12-06). Copies only: never a change of bits.
template <typename R, int L, int W>
[[gnu::always_inline]] inline void pack_lanes_body(R* dst, const R* base, const int64_t* koff, const int64_t* roff,
                                                   int64_t width, int64_t rows, int64_t lanes, int64_t kc) {
  const int64_t w = W > 0 ? W : width, n = W > 0 && rows == W ? W : rows;
  for (int64_t p = 0; p < kc; ++p) {
    const R* s = base + koff[p];
    R* d = dst + p * w * lanes;
    for (int64_t r = 0; r < n; ++r) {
      if constexpr (L > 0) {
        using V [[gnu::vector_size(L * sizeof(R))]] = R;
        V v;
        std::memcpy(&v, s + roff[r], sizeof(V));
        std::memcpy(d + r * L, &v, sizeof(V));
      } else {
        std::memcpy(d + r * lanes, s + roff[r], sizeof(R) * size_t(lanes));
      }
    }
    if (n < w) std::memset(d + n * lanes, 0, sizeof(R) * size_t((w - n) * lanes));
  }
}
template <typename R, int L>
[[gnu::always_inline]] inline void pack_lanes_widths(R* dst, const R* base, const int64_t* koff, const int64_t* roff,
                                                     int64_t width, int64_t rows, int64_t lanes, int64_t kc) {
  switch (width) {  // the lane kernels' tiles (MicroKernel.cpp: default_lane_kernel): 4 x 6, 3 x 4 with AVX2
    case 3: return pack_lanes_body<R, L, 3>(dst, base, koff, roff, width, rows, lanes, kc);
    case 4: return pack_lanes_body<R, L, 4>(dst, base, koff, roff, width, rows, lanes, kc);
    case 6: return pack_lanes_body<R, L, 6>(dst, base, koff, roff, width, rows, lanes, kc);
    default: return pack_lanes_body<R, L, 0>(dst, base, koff, roff, width, rows, lanes, kc);
  }
}
template <typename R>
[[gnu::target("avx512f")]] void pack_lanes_avx512(R* dst, const R* base, const int64_t* koff, const int64_t* roff,
                                                  int64_t width, int64_t rows, int64_t lanes, int64_t kc) {
  pack_lanes_widths<R, 64 / int(sizeof(R))>(dst, base, koff, roff, width, rows, lanes, kc);
}
template <typename R>
[[gnu::target("avx2")]] void pack_lanes_avx2(R* dst, const R* base, const int64_t* koff, const int64_t* roff,
                                             int64_t width, int64_t rows, int64_t lanes, int64_t kc) {
  pack_lanes_widths<R, 32 / int(sizeof(R))>(dst, base, koff, roff, width, rows, lanes, kc);
}
// The body `isa` (pack_isa()) names when its vector is `lanes` elements wide, else a memcpy per vector.
template <typename R>
void pack_lanes(int isa, R* dst, const R* base, const int64_t* koff, const int64_t* roff, int64_t width,
                int64_t rows, int64_t lanes, int64_t kc) {
  if (isa == 2 && lanes * int64_t(sizeof(R)) == 64) pack_lanes_avx512<R>(dst, base, koff, roff, width, rows, lanes, kc);
  else if (isa >= 1 && lanes * int64_t(sizeof(R)) == 32) pack_lanes_avx2<R>(dst, base, koff, roff, width, rows, lanes, kc);
  else pack_lanes_widths<R, 0>(dst, base, koff, roff, width, rows, lanes, kc);
}

}  // namespace einstage::gett_detail
