// Matrix-vector products whose matrix is contiguous along the contracted axis: i,ij->j on a column-major matrix (each
// output the dot product of the vector with one contiguous column), and ji,j->i, its mirror with the vector as B;
// and products of a few such vectors (up to kMaxDotVectors rows of A or columns of B, k at least 128) with a matrix
// contiguous along k, where both operands are k-major (C = Uᵀ X with a skinny X): the GEMM paths would pack the large
// operand by a transpose for a few uses of each element. The direct and packed kernels vectorise along the output
// rows, so with one row (or one column, transposed) they pad every vector to MR and run at an eighth of their rate;
// here each output is a dot product along k instead: eight columns per pass for one vector, blocks of vectors by four
// columns for several, one vector accumulator per output, then one horizontal sum per output. Every output is summed
// in the same order (lanes of the vector accumulator over k in steps of W, the lanes added first to last, then the
// tail of k in order), whatever block it runs in, so the bits do not depend on the number of vectors or columns or
// on threads. From kMinThreadedMacs multiply-adds on (one vector: kMinThreadedMatVecMacs, Gett.h), the matrix columns
// are split between the pool's threads in
// runs of eight (each thread reads its own columns once; a 256 x 256 product is about 10 us read from L3, which a
// gradient walk's six reverse matrix-vector steps spent on one core while the other waited). Real dtypes only;
// complex stays on the 1m path. Included through GettSetup.h by runtime/jit/Gett*.cpp only.
#pragma once

#include "runtime/jit/GettLoops.h"

#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace einstage::gett_detail {

// H vectors (k runs at v + vecs[h]) against G matrix columns (k runs at m + cols[g]); output (h, g) at
// c[vec_out[h] + out[g]]; W lanes per vector. Each output has its own accumulator and the same operations in the same
// order whatever G and H are (lanes over k in steps of W, the lanes added first to last, then the tail of k in
// order), so its bits do not depend on the blocking.
template <typename R, int W, int G, int H>
[[gnu::always_inline]] inline void dot_block(const R* v, const int64_t* vecs, const int64_t* vec_out, const R* m,
                                             const int64_t* cols, const int64_t* out, R* c, int64_t k,
                                             bool accumulate) {
  using V [[gnu::vector_size(W * sizeof(R))]] = R;
  V acc[H][G];
  for (int h = 0; h < H; ++h)
    for (int g = 0; g < G; ++g) acc[h][g] = V{};
  const int64_t kv = k / W * W;
  for (int64_t p = 0; p < kv; p += W) {
    V x[H];
    for (int h = 0; h < H; ++h) __builtin_memcpy(&x[h], v + vecs[h] + p, sizeof(V));
    for (int g = 0; g < G; ++g) {
      V y;
      __builtin_memcpy(&y, m + cols[g] + p, sizeof(V));
      for (int h = 0; h < H; ++h) acc[h][g] += x[h] * y;
    }
  }
  for (int h = 0; h < H; ++h)
    for (int g = 0; g < G; ++g) {
      R s = acc[h][g][0];
      for (int l = 1; l < W; ++l) s += acc[h][g][l];
      const R* vec = v + vecs[h];
      const R* col = m + cols[g];
      for (int64_t p = kv; p < k; ++p) s += vec[p] * col[p];
      R& dst = c[vec_out[h] + out[g]];
      if (accumulate) dst += s;
      else dst = s;
    }
}

// Every vector against every column: one vector eight columns per pass; several vectors (up to kMaxDotVectors) in
// blocks of HB against four columns per pass, so the columns of a pass stay in L1 while every vector block reads
// them, and the matrix is read from memory once.
template <typename R, int W, int HB>
[[gnu::always_inline]] inline void dot_all(const R* v, const int64_t* vecs, const int64_t* vec_out, int64_t nvec,
                                           const R* m, const int64_t* cols, const int64_t* out, int64_t count,
                                           R* c, int64_t k, bool accumulate) {
  if (nvec == 1) {
    int64_t j = 0;
    for (; j + 8 <= count; j += 8) dot_block<R, W, 8, 1>(v, vecs, vec_out, m, cols + j, out + j, c, k, accumulate);
    for (; j < count; ++j) dot_block<R, W, 1, 1>(v, vecs, vec_out, m, cols + j, out + j, c, k, accumulate);
    return;
  }
  auto vectors = [&](auto columns, int64_t j) {
    constexpr int G = decltype(columns)::value;
    int64_t h = 0;
    for (; h + HB <= nvec; h += HB)
      dot_block<R, W, G, HB>(v, vecs + h, vec_out + h, m, cols + j, out + j, c, k, accumulate);
    for (; h < nvec; ++h) dot_block<R, W, G, 1>(v, vecs + h, vec_out + h, m, cols + j, out + j, c, k, accumulate);
  };
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) vectors(std::integral_constant<int, 4>{}, j);
  for (; j < count; ++j) vectors(std::integral_constant<int, 1>{}, j);
}

template <typename R>
[[gnu::target("avx512f")]] void dot_all_avx512(const R* v, const int64_t* vecs, const int64_t* vec_out, int64_t nvec,
                                               const R* m, const int64_t* cols, const int64_t* out, int64_t count,
                                               R* c, int64_t k, bool accumulate) {
  dot_all<R, 64 / int(sizeof(R)), 4>(v, vecs, vec_out, nvec, m, cols, out, count, c, k, accumulate);
}

template <typename R>
[[gnu::target("avx2,fma")]] void dot_all_avx2(const R* v, const int64_t* vecs, const int64_t* vec_out, int64_t nvec,
                                              const R* m, const int64_t* cols, const int64_t* out, int64_t count,
                                              R* c, int64_t k, bool accumulate) {
  dot_all<R, 32 / int(sizeof(R)), 2>(v, vecs, vec_out, nvec, m, cols, out, count, c, k, accumulate);
}

// Most vectors a dots problem has (GettMode::dots): up to this many, the vectors and four matrix columns stay in L1.
inline constexpr int64_t kMaxDotVectors = 16;

// The set-up of one such product: which operand holds the vectors, and per vector the offset of its k run and of
// its outputs in C, per matrix column the offset of its k run and of its outputs in C.
template <typename R>
struct Dots {
  bool vector_is_a = true;
  bool accumulate = false;
  int isa = 0;  // 2: AVX-512, 1: AVX2 + FMA, 0: neither (the caller does not set Dots up)
  int64_t k = 0;
  std::vector<int64_t> vecs, vec_out, cols, out;

  // Columns per work item of the threaded split: the one-vector pass's block, so a split adds no tail columns.
  static constexpr int64_t kSplitColumns = 8;

  void run(const void* a, const void* b, void* c_data, ThreadPool* pool) const {
    const R* v = static_cast<const R*>(vector_is_a ? a : b);
    const R* m = static_cast<const R*>(vector_is_a ? b : a);
    R* c = static_cast<R*>(c_data);
    const int64_t nvec = static_cast<int64_t>(vecs.size()), count = static_cast<int64_t>(cols.size());
    auto columns = [&](int64_t j0, int64_t j1) {
      if (isa == 2) dot_all_avx512<R>(v, vecs.data(), vec_out.data(), nvec, m, cols.data() + j0, out.data() + j0, j1 - j0, c, k, accumulate);
      else dot_all_avx2<R>(v, vecs.data(), vec_out.data(), nvec, m, cols.data() + j0, out.data() + j0, j1 - j0, c, k, accumulate);
    };
    const double macs = double(nvec) * double(count) * double(k);
    if (pool == nullptr || pool->size() <= 1 || macs < (nvec == 1 ? kMinThreadedMatVecMacs : kMinThreadedMacs)) {
      columns(0, count);
      return;
    }
    // Every output has its own accumulator and order (dot_block), so a split by columns keeps the bits.
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
}

}  // namespace einstage::gett_detail
