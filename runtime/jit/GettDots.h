// Matrix-vector products whose matrix is contiguous along the contracted axis: i,ij->j on a column-major matrix (each
// output the dot product of the vector with one contiguous column), and ji,j->i, its mirror with the vector as B;
// and products of a few such vectors (up to kMaxDotVectors rows of A or columns of B, k at least 128) with a matrix
// contiguous along k, where both operands are k-major (C = Uᵀ X with a skinny X): the GEMM paths would pack the large
// operand by a transpose for a few uses of each element. The direct and packed kernels vectorise along the output
// rows, so with one row (or one column, transposed) they pad every vector to MR and run at an eighth of their rate;
// here each output is a dot product along k instead: four columns per pass for one vector, blocks of vectors by four
// columns for several, one vector accumulator per output, then one horizontal sum per output. Every output is summed
// in one order (lane l = p mod W of its accumulator takes one fma per position p < k, in increasing p; then the lanes
// are summed by halves: `block` below is the definition), whatever block, thread or address it runs at, so the bits
// depend only on the values, k and W (8 f64 / 16 f32 lanes under AVX-512, 4 / 8 under AVX2). When the columns share
// their offset from a vector boundary (Dots::alike: e.g. columns a multiple of 64 bytes apart), their loads start at
// that boundary, so none crosses a cache line wherever the operands sit (NumPy's arrays usually sit 16 bytes past
// one: 256^2 f64 ran 4.1 us instead of 2.8); the lanes are rotated back before the sum. Since 2026-12-06 (issue 39)
// the multiply-adds are fmas, not a multiply and an add (the project builds with -ffp-contract=off): other bits than
// before (docs/performance.md has the measurements). From kMinThreadedMacs multiply-adds on (one vector:
// kMinThreadedMatVecMacs, Gett.h), the matrix columns are split between the pool's threads in runs of eight (each
// thread reads its own columns once; a 256 x 256 product is about 10 us read from L3, which a gradient walk's six
// reverse matrix-vector steps spent on one core while the other waited). Real dtypes only; complex stays on the 1m
// path. Included through GettSetup.h by runtime/jit/Gett*.cpp only.
#pragma once

#include "runtime/jit/GettAxpy.h"
#include "runtime/jit/GettLoops.h"

#include "runtime/ThreadPool.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace einstage::gett_detail {

// The vector operations of the dot products besides GettAxpy.h's vfma, one overload per vector type with its ISA
// as target: an unaligned load; the mask of lanes lo to hi - 1 (vmask), a load of those lanes (the others zero,
// nothing outside them read) and an fma on them (the others keep the accumulator); the lanes rotated down by s (lane
// l takes lane l + s mod W); and the sum of the lanes by halves (lane l plus lane l + W/2, down to one lane).
[[gnu::target("avx512f")]] inline __m512d vload(__m512d, const double* p) { return _mm512_loadu_pd(p); }
[[gnu::target("avx512f")]] inline __m512 vload(__m512, const float* p) { return _mm512_loadu_ps(p); }
[[gnu::target("avx2")]] inline __m256d vload(__m256d, const double* p) { return _mm256_loadu_pd(p); }
[[gnu::target("avx2")]] inline __m256 vload(__m256, const float* p) { return _mm256_loadu_ps(p); }
inline unsigned lane_bits(int64_t lo, int64_t hi) { return ((1u << hi) - 1) & ~((1u << lo) - 1); }
[[gnu::target("avx512f")]] inline __mmask8 vmask(__m512d, int64_t lo, int64_t hi) {
  return __mmask8(lane_bits(lo, hi));
}
[[gnu::target("avx512f")]] inline __mmask16 vmask(__m512, int64_t lo, int64_t hi) {
  return __mmask16(lane_bits(lo, hi));
}
[[gnu::target("avx2")]] inline __m256i vmask(__m256d, int64_t lo, int64_t hi) {
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  return _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_set1_epi64x(hi), lane),
                          _mm256_cmpgt_epi64(lane, _mm256_set1_epi64x(lo - 1)));
}
[[gnu::target("avx2")]] inline __m256i vmask(__m256, int64_t lo, int64_t hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(hi)), lane),
                          _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(int(lo) - 1)));
}
[[gnu::target("avx512f")]] inline __m512d vload_masked(const double* p, __mmask8 k) {
  return _mm512_maskz_loadu_pd(k, p);
}
[[gnu::target("avx512f")]] inline __m512 vload_masked(const float* p, __mmask16 k) {
  return _mm512_maskz_loadu_ps(k, p);
}
[[gnu::target("avx2")]] inline __m256d vload_masked(const double* p, __m256i k) { return _mm256_maskload_pd(p, k); }
[[gnu::target("avx2")]] inline __m256 vload_masked(const float* p, __m256i k) { return _mm256_maskload_ps(p, k); }
[[gnu::target("avx512f")]] inline __m512d vfma_masked(__m512d a, __m512d b, __m512d c, __mmask8 k) {
  return _mm512_mask3_fmadd_pd(a, b, c, k);
}
[[gnu::target("avx512f")]] inline __m512 vfma_masked(__m512 a, __m512 b, __m512 c, __mmask16 k) {
  return _mm512_mask3_fmadd_ps(a, b, c, k);
}
[[gnu::target("avx2,fma")]] inline __m256d vfma_masked(__m256d a, __m256d b, __m256d c, __m256i k) {
  return _mm256_blendv_pd(c, vfma(a, b, c), _mm256_castsi256_pd(k));
}
[[gnu::target("avx2,fma")]] inline __m256 vfma_masked(__m256 a, __m256 b, __m256 c, __m256i k) {
  return _mm256_blendv_ps(c, vfma(a, b, c), _mm256_castsi256_ps(k));
}
[[gnu::target("avx512f")]] inline __m512d vrotate(__m512d v, int64_t s) {
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i from = _mm512_and_epi64(_mm512_add_epi64(lane, _mm512_set1_epi64(s)), _mm512_set1_epi64(7));
  return _mm512_maskz_permutexvar_pd(0xff, from, v);  // masked: GCC 12 warns on the plain one, as on vsum's extracts
}
[[gnu::target("avx512f")]] inline __m512 vrotate(__m512 v, int64_t s) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i from = _mm512_and_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(int(s))), _mm512_set1_epi32(15));
  return _mm512_maskz_permutexvar_ps(0xffff, from, v);
}
[[gnu::target("avx2")]] inline __m256 vrotate(__m256 v, int64_t s) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_permutevar8x32_ps(v, _mm256_and_si256(_mm256_add_epi32(lane, _mm256_set1_epi32(int(s))),
                                                      _mm256_set1_epi32(7)));
}
[[gnu::target("avx2")]] inline __m256d vrotate(__m256d v, int64_t s) {
  // Lane l of four doubles is 32-bit lanes 2l and 2l + 1: rotate those by 2s.
  return _mm256_castps_pd(vrotate(_mm256_castpd_ps(v), 2 * s));
}
[[gnu::target("avx2")]] inline double vsum(__m256d v) {
  const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
}
[[gnu::target("avx2")]] inline float vsum(__m256 v) {
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}
[[gnu::target("avx512f")]] inline double vsum(__m512d v) {
  // The masked extracts: GCC 12's plain ones start from an undefined vector and warn (-Wmaybe-uninitialized).
  return vsum(_mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xf, v, 0), _mm512_maskz_extractf64x4_pd(0xf, v, 1)));
}
[[gnu::target("avx512f")]] inline float vsum(__m512 v) {
  const __m512d d = _mm512_castps_pd(v);
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, d, 0));
  return vsum(_mm256_add_ps(lo, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, d, 1))));
}

// The kernels of one ISA (GCC inlines an intrinsic only into a function with its target, so the bodies are written
// once here and compiled for each target; GettAxpy.h does the same).
//
// block: H vectors (k runs at v + vecs[h]) against G matrix columns (k runs at m + cols[g]); output (h, g) at
// c[vec_out[h] + out[g]]. Each output has its own accumulator of W lanes from zero: lane l sums vector x column over
// the positions p < k with p = l (mod W), in increasing p, one fma each; then the lanes are summed by halves (vsum)
// and the sum stored or added to C. The same operations in the same order whatever G, H and s, so the bits of an
// output depend on neither the blocking nor where the data sits. The loads start at position -s, any 0 <= s < W: with
// s the columns' offset from a W-lane boundary (Dots::run), every column load is aligned (a load across two cache
// lines costs two), the first and last vectors masked; vector lane j then holds the positions p = j - s (mod W), and
// the accumulator is rotated by s before the sum. A masked-off lane is neither read nor changed.
//
// all: one vector against every column (one), four columns per pass (four fma chains, each fed by its own load: the
// loop is bound by the matrix's stream from L2 or L3, and eight columns per pass measured no faster), then the last
// columns one by one; a function of its own, so the loop keeps its pointers in registers (inlined into `all`, GCC
// reloaded one from a vector register every k step). Several vectors (up to kMaxDotVectors) in blocks of HB against
// four columns per pass, so the columns of a pass stay in L1 while every vector block reads them, and the matrix is
// read from memory once.
#define EINSTAGE_DOT_KERNELS(NAME, TARGET)                                                                          \
  struct NAME {                                                                                                      \
    template <int G, int H, typename R, typename Vec, typename Mask>                                                 \
    [[gnu::target(TARGET), gnu::always_inline]] static inline void masked(const R* const* x, const R* const* y,     \
                                                                          Vec (&acc)[H][G], int64_t q, Mask mask) {  \
      Vec xv[H];                                                                                                     \
      for (int h = 0; h < H; ++h) xv[h] = vload_masked(x[h] + q, mask);                                              \
      for (int g = 0; g < G; ++g) {                                                                                  \
        const Vec yv = vload_masked(y[g] + q, mask);                                                                 \
        for (int h = 0; h < H; ++h) acc[h][g] = vfma_masked(xv[h], yv, acc[h][g], mask);                             \
      }                                                                                                              \
    }                                                                                                                \
    template <typename R, int W, int G, int H>                                                                       \
    [[gnu::target(TARGET), gnu::always_inline]] static inline void block(                                           \
        const R* v, const int64_t* vecs, const int64_t* vec_out, const R* m, const int64_t* cols, const int64_t* out, \
        R* c, int64_t k, int64_t s, bool accumulate) {                                                               \
      using Vec = typename VecOf<R, W>::type;                                                                        \
      const R* x[H];                                                                                                 \
      const R* y[G];                                                                                                 \
      for (int h = 0; h < H; ++h) x[h] = v + vecs[h];                                                                \
      for (int g = 0; g < G; ++g) y[g] = m + cols[g];                                                                \
      Vec acc[H][G];                                                                                                 \
      for (int h = 0; h < H; ++h)                                                                                    \
        for (int g = 0; g < G; ++g) acc[h][g] = Vec{};                                                               \
      int64_t p = 0;                                                                                                 \
      if (s > 0) masked<G, H>(x, y, acc, -s, vmask(Vec{}, s, std::min<int64_t>(W, k + s))), p = W - s;              \
      for (const int64_t whole = p + (k - p) / W * W; p < whole; p += W) {                                           \
        Vec xv[H];                                                                                                   \
        for (int h = 0; h < H; ++h) xv[h] = vload(Vec{}, x[h] + p);                                                  \
        for (int g = 0; g < G; ++g) {                                                                                \
          const Vec yv = vload(Vec{}, y[g] + p);                                                                     \
          for (int h = 0; h < H; ++h) acc[h][g] = vfma(xv[h], yv, acc[h][g]);                                        \
        }                                                                                                            \
      }                                                                                                              \
      if (p < k) masked<G, H>(x, y, acc, p, vmask(Vec{}, 0, k - p));                                                  \
      for (int h = 0; h < H; ++h)                                                                                    \
        for (int g = 0; g < G; ++g) {                                                                                \
          const R sum = vsum(s > 0 ? vrotate(acc[h][g], s) : acc[h][g]);                                             \
          R& dst = c[vec_out[h] + out[g]];                                                                           \
          dst = accumulate ? dst + sum : sum;                                                                        \
        }                                                                                                            \
    }                                                                                                                \
    template <typename R, int W, int HB, int G>                                                                      \
    [[gnu::target(TARGET), gnu::always_inline]] static inline void vectors(                                         \
        const R* v, const int64_t* vecs, const int64_t* vec_out, int64_t nvec, const R* m, const int64_t* cols,       \
        const int64_t* out, R* c, int64_t k, int64_t s, bool accumulate) {                                           \
      int64_t h = 0;                                                                                                 \
      for (; h + HB <= nvec; h += HB)                                                                                \
        block<R, W, G, HB>(v, vecs + h, vec_out + h, m, cols, out, c, k, s, accumulate);                             \
      for (; h < nvec; ++h) block<R, W, G, 1>(v, vecs + h, vec_out + h, m, cols, out, c, k, s, accumulate);         \
    }                                                                                                                \
    template <typename R, int W>                                                                                     \
    [[gnu::target(TARGET), gnu::noinline]] static void one(const R* v, const int64_t* vecs, const int64_t* vec_out,  \
                                                           const R* m, const int64_t* cols, const int64_t* out,       \
                                                           int64_t count, R* c, int64_t k, int64_t s, bool accumulate, \
                                                           int64_t col_step, int64_t out_step) {                     \
      int64_t j = 0;                                                                                                 \
      if (col_step != 0 && count >= 4) {                                                                             \
        const int64_t c0 = cols[0], o0 = out[0];                                                                     \
        for (; j + 4 <= count; j += 4) {                                                                             \
          const int64_t cs[4] = {c0 + j * col_step, c0 + (j + 1) * col_step, c0 + (j + 2) * col_step,               \
                                 c0 + (j + 3) * col_step};                                                           \
          const int64_t os[4] = {o0 + j * out_step, o0 + (j + 1) * out_step, o0 + (j + 2) * out_step,               \
                                 o0 + (j + 3) * out_step};                                                           \
          block<R, W, 4, 1>(v, vecs, vec_out, m, cs, os, c, k, s, accumulate);                                       \
        }                                                                                                            \
      }                                                                                                              \
      for (; j + 4 <= count; j += 4) block<R, W, 4, 1>(v, vecs, vec_out, m, cols + j, out + j, c, k, s, accumulate); \
      for (; j < count; ++j) block<R, W, 1, 1>(v, vecs, vec_out, m, cols + j, out + j, c, k, s, accumulate);         \
    }                                                                                                                \
    template <typename R, int W, int HB>                                                                             \
    [[gnu::target(TARGET)]] static void all(const R* v, const int64_t* vecs, const int64_t* vec_out, int64_t nvec,  \
                                            const R* m, const int64_t* cols, const int64_t* out, int64_t count, R* c, \
                                            int64_t k, int64_t s, bool accumulate, int64_t col_step = 0,             \
                                            int64_t out_step = 0) {                                                  \
      if (nvec == 1)                                                                                                 \
        return one<R, W>(v, vecs, vec_out, m, cols, out, count, c, k, s, accumulate, col_step, out_step);            \
      int64_t j = 0;                                                                                                 \
      for (; j + 4 <= count; j += 4)                                                                                 \
        vectors<R, W, HB, 4>(v, vecs, vec_out, nvec, m, cols + j, out + j, c, k, s, accumulate);                     \
      for (; j < count; ++j) vectors<R, W, HB, 1>(v, vecs, vec_out, nvec, m, cols + j, out + j, c, k, s, accumulate); \
    }                                                                                                                \
  };
EINSTAGE_DOT_KERNELS(DotsAvx512, "avx512f")
EINSTAGE_DOT_KERNELS(DotsAvx2, "avx2,fma")
#undef EINSTAGE_DOT_KERNELS

// Most vectors a dots problem has (GettMode::dots): up to this many, the vectors and four matrix columns stay in L1.
inline constexpr int64_t kMaxDotVectors = 16;

// The set-up of one such product: which operand holds the vectors, and per vector the offset of its k run and of
// its outputs in C, per matrix column the offset of its k run and of its outputs in C.
template <typename R>
struct Dots {
  bool vector_is_a = true;
  bool accumulate = false;
  int isa = 0;  // 2: AVX-512, 1: AVX2 + FMA, 0: neither (the caller does not set Dots up)
  bool alike = false;  // every column starts at the same offset from a vector of the ISA's W lanes
  // When the columns and their outputs are equally spaced (cols[j] = cols[0] + j * col_step, out[j] likewise: a
  // matrix's columns, the usual case), their steps: the one-vector loop then computes each pass's four columns
  // instead of reading them from the tables (a 256^2 product ran 8-15% faster so); 0 otherwise.
  int64_t col_step = 0, out_step = 0;
  int64_t k = 0;
  std::vector<int64_t> vecs, vec_out, cols, out;

  // Columns per work item of the threaded split: a multiple of the one-vector pass's four, so a split adds no tail
  // columns.
  static constexpr int64_t kSplitColumns = 8;

  void run(const void* a, const void* b, void* c_data, ThreadPool* pool) const {
    const R* v = static_cast<const R*>(vector_is_a ? a : b);
    const R* m = static_cast<const R*>(vector_is_a ? b : a);
    R* c = static_cast<R*>(c_data);
    const int64_t nvec = static_cast<int64_t>(vecs.size()), count = static_cast<int64_t>(cols.size());
    // The columns' offset from a vector boundary (block: their loads start there), in elements; 0 (unaligned loads)
    // when they differ or an element is not aligned to its size. One per call, from the first column.
    const int64_t lanes = (isa == 2 ? 64 : 32) / int64_t(sizeof(R));
    const uintptr_t first = count == 0 ? 0 : reinterpret_cast<uintptr_t>(m + cols[0]);
    const int64_t s = alike && first % sizeof(R) == 0 ? int64_t(first / sizeof(R)) % lanes : 0;
    auto columns = [&](int64_t j0, int64_t j1) {
      const int64_t *vs = vecs.data(), *vo = vec_out.data(), *cs = cols.data() + j0, *os = out.data() + j0;
      const int64_t n = j1 - j0;
      if (isa == 2)
        DotsAvx512::all<R, 64 / int(sizeof(R)), 4>(v, vs, vo, nvec, m, cs, os, n, c, k, s, accumulate, col_step,
                                                   out_step);
      else
        DotsAvx2::all<R, 32 / int(sizeof(R)), 2>(v, vs, vo, nvec, m, cs, os, n, c, k, s, accumulate, col_step,
                                                 out_step);
    };
    const double macs = double(nvec) * double(count) * double(k);
    if (pool == nullptr || pool->size() <= 1 || macs < (nvec == 1 ? kMinThreadedMatVecMacs : kMinThreadedMacs)) {
      columns(0, count);
      return;
    }
    // Every output has its own accumulator and order (block), so a split by columns keeps the bits.
    const int64_t groups = (count + kSplitColumns - 1) / kSplitColumns;
    parallel_for(pool, groups, [&](int64_t g0, int64_t g1) {
      columns(g0 * kSplitColumns, std::min(count, g1 * kSplitColumns));
    });
  }
  size_t table_bytes() const {
    return (vecs.capacity() + vec_out.capacity() + cols.capacity() + out.capacity()) * sizeof(int64_t);
  }
};

// Sets `d` up for a dots_shaped problem `g`: the vectors are the operand with fewer free positions (A's rows when m is
// at most n), the other's free positions the matrix columns; `isa` as Gett.cpp's dots_isa().
template <typename R>
void set_up_dots(Dots<R>& d, const Gett<R>& g, int isa) {
  const bool vec_a = g.m.size <= g.n.size;
  d.isa = isa;
  d.vector_is_a = vec_a;
  d.accumulate = g.accumulate;
  d.k = g.k.size;
  const Fused& vecs = vec_a ? g.m : g.n;
  const Fused& outs = vec_a ? g.n : g.m;  // the matrix's free axes: one output each per vector
  const int64_t vec_k = vec_a ? g.k.a[0] + g.batch.a[0] : g.k.b[0] + g.batch.b[0];
  const int64_t mat_k = vec_a ? g.k.b[0] + g.batch.b[0] : g.k.a[0] + g.batch.a[0];
  const std::vector<int64_t>& vec_free = vec_a ? vecs.a : vecs.b;
  const std::vector<int64_t>& mat_free = vec_a ? outs.b : outs.a;
  d.vecs.resize(size_t(vecs.size));
  d.vec_out.resize(size_t(vecs.size));
  for (int64_t h = 0; h < vecs.size; ++h) d.vecs[h] = vec_free[h] + vec_k, d.vec_out[h] = vecs.c[h] + g.batch.c[0];
  d.cols.resize(size_t(outs.size));
  d.out.resize(size_t(outs.size));
  for (int64_t j = 0; j < outs.size; ++j) d.cols[j] = mat_free[j] + mat_k, d.out[j] = outs.c[j];
  const int64_t lanes = (isa == 2 ? 64 : 32) / int64_t(sizeof(R));
  d.alike = std::all_of(d.cols.begin(), d.cols.end(), [&](int64_t o) { return (o - d.cols[0]) % lanes == 0; });
  d.col_step = d.out_step = 0;
  if (outs.size >= 2) {
    const int64_t cs = d.cols[1] - d.cols[0], os = d.out[1] - d.out[0];
    bool stepped = cs != 0;
    for (int64_t j = 2; j < outs.size && stepped; ++j)
      stepped = d.cols[j] - d.cols[j - 1] == cs && d.out[j] - d.out[j - 1] == os;
    if (stepped) d.col_step = cs, d.out_step = os;
  }
}

}  // namespace einstage::gett_detail
